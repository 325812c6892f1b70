"""The ``openai`` route kind against real HTTP: the simulator, plus a raw socket server."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai import _exceptions as sdk_exceptions
from openai.types.chat import ChatCompletion

from foureyes.config import RouteConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.errors import (
    ConfigError,
    RouteBadResponse,
    RouteConnectionError,
    RouteError,
    RouteHTTPError,
    RouteRateLimited,
    RouteTimeout,
    UsageError,
)
from foureyes.llm import _http
from foureyes.llm.openai_compat import (
    NO_KEY,
    OpenAIProvider,
    _EventReader,
    build_openai_provider,
    sdk_error_table,
    translate_errors,
)
from foureyes.llm.provider import ChatMessage, ChatRequest, JsonSchemaFormat, Usage
from foureyes.llm.routes import build_provider
from tests.helpers.postgres import free_port
from tests.helpers.simulator import SCENARIOS, RunningSimulator

KEY = "sim-test-key"  # the api_key of tests/fixtures/scenarios/faults.toml
TRANSPORTS = ["aiohttp", "httpx", "lean"]

MakeProvider = Callable[..., OpenAIProvider]


def _ask(text: str, **fields: Any) -> ChatRequest:
    return ChatRequest(messages=(ChatMessage.user(text),), **fields)


@pytest.fixture(params=TRANSPORTS)
async def make_provider(request: pytest.FixtureRequest) -> AsyncIterator[MakeProvider]:
    """Builds providers on the parametrized transport and closes them after the test."""
    made: list[OpenAIProvider] = []

    def make(config: RouteConfig, api_key: str = KEY) -> OpenAIProvider:
        config = config.model_copy(update={"transport": request.param})
        provider = OpenAIProvider("sim", config, api_key=api_key)
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.aclose()


@pytest.fixture
def faulty(simulator: RunningSimulator) -> RouteConfig:
    """A route to model ``faulty`` of faults.toml (one rule per fault, picked by text)."""
    simulator.load(SCENARIOS / "faults.toml")
    return simulator.route("faulty", timeout_s=2)


# --- replies ------------------------------------------------------------------------------


async def test_a_plain_reply(simulator: RunningSimulator, make_provider: MakeProvider) -> None:
    simulator.load({"models": {"m": [{"content": "Hello.", "finish_reason": "stop"}]}})
    provider = make_provider(simulator.route("m"))
    before = time.monotonic()
    result = await provider.complete(_ask("hi"), timeout_s=2)
    around = time.monotonic() - before
    assert (result.text, result.finish_reason, result.route, result.model) == (
        "Hello.",
        "stop",
        "sim",
        "m",
    )
    assert result.reasoning_content is None and result.tool_calls == ()
    # in seconds, of this call: within the time measured around it, however long that was
    assert 0 < result.latency_s <= around and not result.offline


async def test_reasoning_tool_calls_and_usage_come_through(
    simulator: RunningSimulator, make_provider: MakeProvider
) -> None:
    simulator.load(
        {
            "models": {
                "m": [
                    {
                        "reasoning_content": "I should look it up.",
                        "tool_calls": [
                            {"id": "call_1", "name": "lookup", "arguments": '{"q": "x"}'}
                        ],
                        "usage": {"prompt_tokens": 120, "completion_tokens": 30},
                    }
                ]
            }
        }
    )
    result = await make_provider(simulator.route("m")).complete(_ask("hi"), timeout_s=2)
    assert result.text == "" and result.reasoning_content == "I should look it up."
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("call_1", "lookup", '{"q": "x"}')
    ]
    assert result.finish_reason == "tool_calls"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (120, 30)
    assert result.as_assistant_message().reasoning_content == "I should look it up."


async def test_reasoning_and_cache_read_tokens_come_from_each_providers_usage_fields(
    simulator: RunningSimulator, make_provider: MakeProvider
) -> None:
    base = {"prompt_tokens": 200, "completion_tokens": 50}
    simulator.load(
        {
            "models": {
                "openai": [
                    {
                        "content": "a",
                        "usage": base | {"reasoning_tokens": 40, "cached_tokens": 128},
                    }
                ],
                "deepseek": [
                    {
                        "content": "b",
                        "usage": base | {"reasoning_tokens": 12, "prompt_cache_hit_tokens": 64},
                    }
                ],
                "plain": [{"content": "c", "usage": base}],
            }
        }
    )
    usage = {}
    for model in ("openai", "deepseek", "plain"):
        result = await make_provider(simulator.route(model)).complete(_ask("hi"), timeout_s=2)
        usage[model] = (result.usage.reasoning_tokens, result.usage.cached_tokens)
    # A count the endpoint did not report is unknown, not zero.
    assert usage == {"openai": (40, 128), "deepseek": (12, 64), "plain": (None, None)}
    known = Usage(prompt_tokens=1, completion_tokens=2, reasoning_tokens=3, cached_tokens=4)
    assert (known + known).reasoning_tokens == 6 and (known + known).cached_tokens == 8
    assert (known + Usage()).reasoning_tokens is None and (known + Usage()).prompt_tokens == 1


async def test_the_request_reaches_the_model_as_asked(
    simulator: RunningSimulator, make_provider: MakeProvider
) -> None:
    simulator.load({"models": {"m": [{"content": "{}"}]}})
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    tool = {"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}}
    provider = make_provider(simulator.route("m", max_tokens=300, temperature=0.7))
    messages = (ChatMessage.system("Answer in JSON."), ChatMessage.user("Is it ok?"))
    await provider.complete(
        ChatRequest(
            messages=messages,
            max_tokens=50,
            response_format=JsonSchemaFormat(name="verdict", schema=schema, strict=True),
            tools=(tool,),
            subject={"candidate": "never sent"},
        ),
        timeout_s=2,
    )
    await provider.complete(
        ChatRequest(messages=messages, response_format="json_object"), timeout_s=2
    )
    first, second = simulator.requests()
    assert first["model"] == "m"
    assert first["messages"] == [m.to_wire() for m in messages]
    assert first["options"]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": schema, "strict": True},
    }
    assert first["options"]["tools"] == [tool]
    assert (first["options"]["max_tokens"], first["options"]["temperature"]) == (50, 0.7)
    assert "never sent" not in json.dumps(first)
    assert second["options"]["response_format"] == {"type": "json_object"}
    assert (second["options"]["max_tokens"], "tools" in second["options"]) == (300, False)


async def test_one_provider_serves_concurrent_calls(
    simulator: RunningSimulator, make_provider: MakeProvider
) -> None:
    simulator.load({"models": {"m": [{"content": "ok"}]}})
    provider = make_provider(simulator.route("m"))
    results = await asyncio.gather(*(provider.complete(_ask("x"), timeout_s=5) for _ in range(64)))
    assert {r.text for r in results} == {"ok"}
    assert len(simulator.requests()) == 64


# --- faults -------------------------------------------------------------------------------


async def test_a_delay_within_the_timeout_is_just_slow(
    faulty: RouteConfig, make_provider: MakeProvider
) -> None:
    result = await make_provider(faulty).complete(_ask("slow"), timeout_s=2)
    assert result.text == "slow but fine" and result.latency_s >= 0.2


GUARD_S = 30.0
"""Only so a timeout that is not enforced fails the test instead of hanging it."""


@pytest.mark.parametrize(("text", "rule"), [("too slow", "too-slow"), ("hang", "hang")])
async def test_past_the_timeout_is_a_route_timeout(
    simulator: RunningSimulator,
    faulty: RouteConfig,
    make_provider: MakeProvider,
    text: str,
    rule: str,
) -> None:
    # "too slow" answers after 5 s and "hang" never: waiting for the server would return
    # the answer or trip the guard (a TimeoutError, not a RouteTimeout), never raise this
    with pytest.raises(RouteTimeout) as caught:
        call = make_provider(faulty).complete(_ask(text), timeout_s=0.3)
        await asyncio.wait_for(call, GUARD_S)
    assert caught.value.timeout_s == 0.3 and caught.value.route == "sim"
    (logged,) = simulator.requests()  # the server held it, once: no retry, no early failure
    assert logged["rule_name"] == rule and logged["error"] is None


async def test_429_is_rate_limited_with_retry_after(
    faulty: RouteConfig, make_provider: MakeProvider
) -> None:
    provider = make_provider(faulty)
    with pytest.raises(RouteRateLimited) as caught:
        await provider.complete(_ask("busy"), timeout_s=2)
    assert (caught.value.status_code, caught.value.retry_after_s) == (429, 7.0)
    assert caught.value.detail == "HTTP 429: rate_limit_exceeded"
    if provider.config.transport == "lean":  # made from the status itself
        assert caught.value.__cause__ is None
    else:
        assert isinstance(caught.value.__cause__, openai.RateLimitError)


async def test_500_is_an_http_error(faulty: RouteConfig, make_provider: MakeProvider) -> None:
    with pytest.raises(RouteHTTPError) as caught:
        await make_provider(faulty).complete(_ask("boom"), timeout_s=2)
    assert caught.value.status_code == 500 and caught.value.is_server_error


async def test_401_never_shows_the_key(
    simulator: RunningSimulator, faulty: RouteConfig, make_provider: MakeProvider
) -> None:
    secret = "sk-this-must-never-appear-0123456789"
    provider = make_provider(faulty, api_key=secret)
    with pytest.raises(RouteHTTPError) as wrong_key:
        await provider.complete(_ask("hello"), timeout_s=2)
    with pytest.raises(RouteHTTPError) as revoked:
        await make_provider(faulty).complete(_ask("revoked"), timeout_s=2)
    for caught in (wrong_key, revoked):
        assert caught.value.status_code == 401
        assert secret not in f"{caught.value} {caught.value!r} {caught.value.args}"
    assert secret not in repr(provider)
    assert secret not in simulator.log_path.read_text(encoding="utf-8")


async def test_a_body_that_is_not_json_is_a_bad_response(
    faulty: RouteConfig, make_provider: MakeProvider
) -> None:
    with pytest.raises(RouteBadResponse, match="Invalid JSON"):
        await make_provider(faulty).complete(_ask("garbage"), timeout_s=2)


async def test_truncated_comes_back_with_finish_reason_length(
    faulty: RouteConfig, make_provider: MakeProvider
) -> None:
    result = await make_provider(faulty).complete(_ask("cut"), timeout_s=2)
    assert result.finish_reason == "length"
    assert result.text == "This reply is long enough to be cut in half by the simulator."[:30]


async def test_wrong_digest_changes_the_echoed_digest(
    faulty: RouteConfig, make_provider: MakeProvider
) -> None:
    digest = sha256_hex("the candidate reply")
    provider = make_provider(faulty)
    echoed = await provider.complete(_ask(f"digest {digest}"), timeout_s=2)
    wrong = await provider.complete(_ask(f"wrong digest {digest}"), timeout_s=2)
    assert json.loads(echoed.text)["candidate_sha256"] == digest
    changed = json.loads(wrong.text)["candidate_sha256"]
    assert changed != digest and len(changed) == 64


async def test_unknown_model_and_unmatched_request_are_http_errors(
    simulator: RunningSimulator, make_provider: MakeProvider
) -> None:
    simulator.load({"models": {"m": [{"match": "^only this$", "content": "ok"}]}})
    with pytest.raises(RouteHTTPError) as unknown:
        await make_provider(simulator.route("ghost")).complete(_ask("x"), timeout_s=2)
    with pytest.raises(RouteHTTPError) as unmatched:
        await make_provider(simulator.route("m")).complete(_ask("x"), timeout_s=2)
    assert unknown.value.status_code == 404
    assert unknown.value.detail.endswith("model_not_found")
    assert unmatched.value.status_code == 400
    assert unmatched.value.detail.endswith("no_matching_rule")


async def test_a_closed_port_is_a_connection_error(make_provider: MakeProvider) -> None:
    route = RouteConfig(kind="openai", base_url=f"http://127.0.0.1:{free_port()}/v1", model="m")
    with pytest.raises(RouteConnectionError):
        await make_provider(route).complete(_ask("x"), timeout_s=2)


# --- bodies the simulator never sends: a raw HTTP server on loopback ----------------------

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    """Serves each connection with a given handler; yields a function returning the base URL."""
    servers: list[asyncio.Server] = []

    async def start(handler: Handler) -> str:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.lower().split(b"\r\n")
                if line.startswith(b"content-length:")
            )
            await reader.readexactly(length)
            try:
                await handler(reader, writer)
            except ConnectionError:
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


DRIPS = 100
"""Bytes the slow drip sends, one per 0.05 s: ten times the call's 0.5 s timeout."""


def _respond(body: bytes, content_type: bytes = b"application/json") -> Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: " + content_type + b"\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body
        )
        await writer.drain()

    return handler


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (b'{"id": "x", "choices": []}', b"application/json", "choices"),
        (b'{"id": "x"}', b"application/json", "choices"),
        (b"[1, 2]", b"application/json", "body"),
        (b'{"choices": [{"message": {"content": 5}}]}', b"application/json", "content"),
        (b'{"choices": [{"message": null}]}', b"application/json", "message"),
        (b"<html>Bad gateway</html>", b"text/html", "Invalid JSON"),
        # A lone surrogate is no text: json.loads would take the escape, the check does not.
        (
            b'{"choices": [{"message": {"role": "assistant", "content": "hi \\ud800"},'
            b' "finish_reason": "stop"}]}',
            b"application/json",
            "Invalid JSON",
        ),
    ],
)
async def test_bodies_that_are_not_completions_are_bad_responses(
    raw_server: Callable[[Handler], Awaitable[str]],
    make_provider: MakeProvider,
    body: bytes,
    content_type: bytes,
    expected: str,
) -> None:
    url = await raw_server(_respond(body, content_type))
    provider = make_provider(RouteConfig(kind="openai", base_url=url, model="m"))
    with pytest.raises(RouteBadResponse, match=expected):
        await provider.complete(_ask("x"), timeout_s=2)


async def test_a_slow_drip_cannot_outlast_the_timeout(
    raw_server: Callable[[Handler], Awaitable[str]], make_provider: MakeProvider
) -> None:
    dripped = 0
    client_left = asyncio.Event()

    async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal dripped
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
        writer.write(b"content-length: 100000\r\n\r\n{")
        try:
            for _ in range(DRIPS):  # each byte well inside the SDK's per-read timeout
                await writer.drain()
                if reader.at_eof():  # the request was read; EOF is the client closing
                    break
                await asyncio.sleep(0.05)
                writer.write(b" ")
                dripped += 1
        except ConnectionError:
            pass
        finally:
            client_left.set()

    url = await raw_server(drip)
    provider = make_provider(RouteConfig(kind="openai", base_url=url, model="m"))
    with pytest.raises(RouteTimeout) as caught:
        await asyncio.wait_for(provider.complete(_ask("x"), timeout_s=0.5), GUARD_S)
    assert caught.value.timeout_s == 0.5
    await asyncio.wait_for(client_left.wait(), GUARD_S)
    # the drips are paced by the same event loop's clock as the 0.5 s bound (about ten fit
    # in it); a client bounded only per read would take all of them (5 s)
    assert dripped < DRIPS // 2


# --- the error boundary -------------------------------------------------------------------

EXPECTED: dict[str, type[RouteError]] = {
    "APIConnectionError": RouteConnectionError,
    "APIError": RouteBadResponse,
    "APIResponseValidationError": RouteBadResponse,
    "APIStatusError": RouteHTTPError,
    "APITimeoutError": RouteTimeout,
    "AuthenticationError": RouteHTTPError,
    "BadRequestError": RouteHTTPError,
    "ConflictError": RouteHTTPError,
    "ContentFilterFinishReasonError": RouteBadResponse,
    "InternalServerError": RouteHTTPError,
    "LengthFinishReasonError": RouteBadResponse,
    "NotFoundError": RouteHTTPError,
    "OAuthError": RouteHTTPError,
    "OpenAIError": RouteBadResponse,
    "PermissionDeniedError": RouteHTTPError,
    "RateLimitError": RouteRateLimited,
    "SubjectTokenProviderError": RouteConnectionError,
    "UnprocessableEntityError": RouteHTTPError,
    "WebSocketConnectionClosedError": RouteConnectionError,
    "WebSocketQueueFullError": RouteConnectionError,
}
"""What each exception the SDK exports must become; a new SDK class fails until added."""


def _exported_sdk_errors() -> Iterator[type[openai.OpenAIError]]:
    public = [getattr(openai, n) for n in dir(openai) if not n.startswith("_")]
    public += [getattr(sdk_exceptions, n) for n in sdk_exceptions.__all__]
    found = {v for v in public if isinstance(v, type) and issubclass(v, openai.OpenAIError)}
    yield from sorted(found, key=lambda cls: cls.__name__)


def _instance(cls: type[openai.OpenAIError]) -> openai.OpenAIError:
    """An instance built the way the SDK builds one (each family has its own signature)."""
    request = httpx2.Request("POST", "https://example.invalid/v1/chat/completions")
    status = {"RateLimitError": 429, "InternalServerError": 503, "APIStatusError": 418}.get(
        cls.__name__, getattr(cls, "status_code", 400)
    )
    response = httpx2.Response(status, request=request, headers={"retry-after": "3"})
    if issubclass(cls, openai.OAuthError):
        return cls(response=response, body=None)
    if issubclass(cls, openai.APIStatusError):
        return cls("failed", response=response, body={"code": "some_code"})
    if issubclass(cls, openai.APIResponseValidationError):
        return cls(response=response, body=None)
    if issubclass(cls, openai.APITimeoutError):
        return cls(request=request)
    if issubclass(cls, openai.APIConnectionError):
        return cls(request=request)
    if issubclass(cls, openai.APIError):
        return cls("failed", request, body=None)
    if issubclass(cls, openai.LengthFinishReasonError):
        return cls(completion=ChatCompletion.construct(usage=None))
    if issubclass(cls, openai.ContentFilterFinishReasonError):
        return cls()
    if issubclass(cls, openai.WebSocketConnectionClosedError):
        return cls("closed", unsent_messages=[])
    return cls("failed")


def test_every_exported_sdk_exception_is_mapped() -> None:
    exported = list(_exported_sdk_errors())
    assert len(exported) >= 15
    unmapped = [cls.__name__ for cls in exported if cls not in sdk_error_table()]
    undecided = [cls.__name__ for cls in exported if cls.__name__ not in EXPECTED]
    assert not unmapped, f"add to sdk_error_table(): {unmapped}"
    assert not undecided, f"decide what these become and add them to EXPECTED: {undecided}"


@pytest.mark.parametrize("cls", list(_exported_sdk_errors()), ids=lambda c: c.__name__)
def test_each_sdk_exception_translates_from_its_original(cls: type[openai.OpenAIError]) -> None:
    original = _instance(cls)
    with pytest.raises(RouteError) as caught, translate_errors("r", 1.5):
        raise original
    assert type(caught.value) is EXPECTED[cls.__name__]
    assert caught.value.__cause__ is original and caught.value.route == "r"
    if isinstance(caught.value, RouteRateLimited):
        assert caught.value.retry_after_s == 3.0


def test_an_unlisted_sdk_subclass_maps_through_its_parent() -> None:
    class PaymentRequiredError(openai.APIStatusError):
        pass

    request = httpx2.Request("POST", "https://example.invalid/")
    original = PaymentRequiredError(
        "pay", response=httpx2.Response(402, request=request), body=None
    )
    with pytest.raises(RouteHTTPError) as caught, translate_errors("r", 1):
        raise original
    assert caught.value.status_code == 402


@pytest.mark.parametrize(
    ("original", "expected"),
    [
        (_http.TransportError("could not connect"), RouteConnectionError),
        (_http.ResponseTooLarge("a response body over 64 bytes"), RouteBadResponse),
    ],
    ids=["transport", "too-large"],
)
def test_the_lean_clients_failures_translate(
    original: Exception, expected: type[RouteError]
) -> None:
    with pytest.raises(RouteError) as caught, translate_errors("r", 1):
        raise original
    assert type(caught.value) is expected and caught.value.__cause__ is original


@pytest.mark.parametrize("url", ["localhost:8000/v1", "ftp://models.example/v1", "http:///v1"])
def test_a_base_url_that_is_not_http_with_a_host_is_refused(url: str) -> None:
    route = RouteConfig(kind="openai", base_url=url, model="m")
    with pytest.raises(ConfigError, match="http:// or https://"):
        OpenAIProvider("r", route, api_key="k")


def test_other_exceptions_pass_through_untouched() -> None:
    with pytest.raises(KeyError), translate_errors("r", 1):
        raise KeyError("a bug stays a bug")


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_is_read_from_headers(headers: dict[str, str], expected: float | None) -> None:
    request = httpx2.Request("POST", "https://example.invalid/")
    original = openai.RateLimitError(
        "slow down", response=httpx2.Response(429, request=request, headers=headers), body=None
    )
    with pytest.raises(RouteRateLimited) as caught, translate_errors("r", 1):
        raise original
    assert caught.value.retry_after_s == expected


# --- the route kind -----------------------------------------------------------------------


async def test_the_kind_is_registered_and_reads_the_key_from_the_environment() -> None:
    route = RouteConfig(kind="openai", base_url="http://127.0.0.1:9/v1", model="m", api_key_env="K")
    provider = build_provider("flash", route, {"K": "sk-from-env"})
    try:
        assert isinstance(provider, OpenAIProvider) and provider.route == "flash"
        assert "sk-from-env" not in repr(provider)
    finally:
        await provider.aclose()
    with pytest.raises(ConfigError, match="K is not set"):
        build_openai_provider("flash", route, {})


async def test_a_keyless_route_sends_the_placeholder_key(simulator: RunningSimulator) -> None:
    simulator.load({"api_key": NO_KEY, "models": {"m": [{"content": "ok"}]}})
    provider = build_openai_provider("local", simulator.route("m"), {})
    try:
        assert (await provider.complete(_ask("x"), timeout_s=2)).text == "ok"
    finally:
        await provider.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_closed_provider_refuses_calls(transport: str) -> None:
    route = RouteConfig(
        kind="openai", base_url="http://127.0.0.1:9/v1", model="m", transport=transport
    )
    provider = OpenAIProvider("r", route, api_key="k")
    await provider.aclose()
    await provider.aclose()
    with pytest.raises(UsageError, match="closed"):
        await provider.complete(_ask("x"), timeout_s=1)


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (503, b'{"error": {"code": "overloaded", "message": "key sk-123 is busy"}}', "overloaded"),
        (500, b"<html>Internal Server Error</html>", ""),
        (400, b'{"error": "plain string"}', ""),
        (404, b'{"error": {"code": 42}}', ""),
        (429, b"\xff\xfe not utf-8", "rate limited"),
    ],
)
async def test_the_lean_transport_types_error_statuses_from_any_body(
    status: int, body: bytes, error: str
) -> None:
    headers = "Retry-After: 3\r\n" if status == 429 else ""
    raw = (
        f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{headers}"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(raw)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    route = RouteConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", transport="lean")
    provider = OpenAIProvider("raw", route, api_key=KEY)
    try:
        with pytest.raises(RouteHTTPError) as caught:
            await provider.complete(_ask("hi"), timeout_s=2)
    finally:
        await provider.aclose()
        server.close()
    assert caught.value.status_code == status
    assert caught.value.detail == f"HTTP {status}" + (f": {error}" if error else "")
    assert "sk-123" not in str(caught.value) and KEY not in str(caught.value)
    if status == 429:
        assert isinstance(caught.value, RouteRateLimited) and caught.value.retry_after_s == 3.0


def test_importing_foureyes_does_not_import_the_sdk() -> None:
    code = (
        "import sys, foureyes, foureyes.llm.routes, foureyes.llm.openai_compat\n"
        "from foureyes.llm.routes import known_kinds\n"
        "assert 'openai' in known_kinds()\n"
        "assert 'openai' not in sys.modules, 'openai was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_the_lean_transport_goes_through_the_environments_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    completion = json.dumps(
        {"model": "m", "choices": [{"message": {"content": "via proxy"}, "finish_reason": "stop"}]}
    ).encode()
    seen: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head.split(b"\r\n", 1)[0])
        length = int(
            next(
                line.split(b":", 1)[1]
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
        )
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(completion)}\r\nConnection: close\r\n\r\n".encode()
            + completion
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(proxy, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    # No such host: only the proxy can answer.
    route = RouteConfig(base_url="http://upstream.invalid/v1", model="m", transport="lean")
    provider = OpenAIProvider("proxied", route, api_key=KEY)
    try:
        result = await provider.complete(_ask("hi"), timeout_s=5)
    finally:
        await provider.aclose()
        server.close()
    assert result.text == "via proxy"
    assert seen == [b"POST http://upstream.invalid/v1/chat/completions HTTP/1.1"]

    # A host NO_PROXY names is reached directly (here: refused, so a connection error).
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    direct = OpenAIProvider(
        "direct", route.model_copy(update={"base_url": "http://127.0.0.1:9/v1"}), api_key=KEY
    )
    try:
        with pytest.raises(RouteConnectionError):
            await direct.complete(_ask("hi"), timeout_s=5)
    finally:
        await direct.aclose()
    assert len(seen) == 1


# --- streaming: the same route through each transport's stream reader ---------------------

FULL_REPLY = {
    "reasoning_content": "I should look it up before I answer.",
    "content": "Here is what I found, in more than one piece of text.",
    "tool_calls": [
        {"id": "call_1", "name": "lookup", "arguments": '{"q": "a longer query string"}'},
        {"id": "call_2", "name": "note", "arguments": "{}"},
    ],
    "finish_reason": "tool_calls",
    "usage": {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "reasoning_tokens": 9,
        "prompt_cache_hit_tokens": 64,
    },
}


async def _stream(
    provider: OpenAIProvider, text: str, timeout_s: float = 2
) -> tuple[Any, list[str]]:
    pieces: list[str] = []
    result = await provider.complete_streaming(
        _ask(text), timeout_s=timeout_s, on_text=pieces.append
    )
    return result, pieces


async def test_a_stream_joins_to_what_one_call_returns(
    simulator: RunningSimulator, make_provider: MakeProvider
) -> None:
    simulator.load({"models": {"m": [{"times": 2, **FULL_REPLY}]}})
    provider = make_provider(simulator.route("m"))
    whole = await provider.complete(_ask("hi"), timeout_s=2)
    streamed, pieces = await _stream(provider, "hi")

    assert len(pieces) > 1 and "".join(pieces) == streamed.text == whole.text
    fields = ("text", "reasoning_content", "tool_calls", "finish_reason", "usage", "model")
    assert {f: getattr(streamed, f) for f in fields} == {f: getattr(whole, f) for f in fields}
    assert streamed.usage.cached_tokens == 64 and streamed.usage.reasoning_tokens == 9
    assert [c.name for c in streamed.tool_calls] == ["lookup", "note"]
    [_, stream_request] = simulator.requests()
    assert stream_request["stream"] is True


async def test_a_cut_off_stream_has_no_finish_reason(
    faulty: RouteConfig, make_provider: MakeProvider
) -> None:
    result, pieces = await _stream(make_provider(faulty), "cut")
    assert result.finish_reason is None
    assert (
        "".join(pieces)
        == result.text
        == "This reply is long enough to be cut in half by the simulator."[:30]
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("busy", RouteRateLimited),
        ("boom", RouteHTTPError),
        ("revoked", RouteHTTPError),
        ("garbage", RouteBadResponse),
        ("hang", RouteTimeout),
    ],
)
async def test_stream_faults_are_the_same_typed_errors(
    faulty: RouteConfig, make_provider: MakeProvider, text: str, error: type[RouteError]
) -> None:
    pieces: list[str] = []
    with pytest.raises(error) as caught:
        call = make_provider(faulty).complete_streaming(
            _ask(text), timeout_s=0.5 if text == "hang" else 5, on_text=pieces.append
        )
        await asyncio.wait_for(call, GUARD_S)
    assert caught.value.route == "sim"
    if text == "busy":
        assert isinstance(caught.value, RouteRateLimited) and caught.value.retry_after_s == 7.0
    assert "".join(pieces) == ""  # the role chunk carries no text; nothing else came


def _sse_body(*events: str) -> bytes:
    return "".join(f"data: {event}\n\n" for event in events).encode()


def _chunk(**delta: Any) -> str:
    return json.dumps({"model": "m", "choices": [{"index": 0, "delta": delta}]})


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # An error event mid-stream (its message is not repeated: it may quote the request).
        (_sse_body(_chunk(content="Hel"), '{"error": {"message": "sk-123 overloaded"}}'), "error"),
        (_sse_body(_chunk(content="Hel"), '{"choices": [{"delta": {"content": 5}}]}'), "content"),
    ],
)
async def test_stream_bodies_that_are_not_chunks_are_bad_responses(
    raw_server: Callable[[Handler], Awaitable[str]],
    make_provider: MakeProvider,
    body: bytes,
    expected: str,
) -> None:
    url = await raw_server(_respond(body, b"text/event-stream"))
    provider = make_provider(RouteConfig(kind="openai", base_url=url, model="m"))
    pieces: list[str] = []
    with pytest.raises(RouteBadResponse) as caught:
        await provider.complete_streaming(_ask("x"), timeout_s=2, on_text=pieces.append)
    assert expected in str(caught.value).lower() and "sk-123" not in str(caught.value)
    assert pieces == ["Hel"]  # what came before the bad event was passed on, nothing after


async def test_the_lean_reader_takes_crlf_comments_and_multiline_data(
    raw_server: Callable[[Handler], Awaitable[str]],
) -> None:
    body = (
        b": keep-alive comment\r\n\r\n"
        b"event: message\r\ndata: " + _chunk(content="one ").encode() + b"\r\n\r\n"
        b'data: {"model": "m",\ndata:  "choices": [{"delta": {"content": "two"}, '
        b'"finish_reason": "stop"}]}\n\n'
        b"data: [DONE]\n\n"
        b"data: " + _chunk(content=" never read").encode() + b"\n\n"
    )
    url = await raw_server(_respond(body, b"text/event-stream"))
    provider = OpenAIProvider(
        "raw", RouteConfig(base_url=url, model="m", transport="lean"), api_key=KEY
    )
    try:
        result, pieces = await _stream(provider, "x")
    finally:
        await provider.aclose()
    assert pieces == ["one ", "two"] and result.finish_reason == "stop"


@given(
    events=st.lists(
        # Text a server can send: no line breaks, no lone surrogates (not encodable).
        st.lists(
            st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n")),
            min_size=1,
            max_size=3,
        ),
        max_size=6,
    ),
    crlf=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_events_read_the_same_however_the_bytes_are_split(
    events: list[list[str]], crlf: bool, cuts: list[int]
) -> None:
    end = b"\r\n" if crlf else b"\n"
    wire = b"".join(
        b"".join(b"data: " + line.encode() + end for line in lines) + b": comment" + end + end
        for lines in events
    )
    reader = _EventReader("r")
    bounds = [0, *sorted(c for c in cuts if c < len(wire)), len(wire)]
    read = [e for a, b in itertools.pairwise(bounds) for e in reader.feed(wire[a:b])]
    assert read == ["\n".join(lines).encode() for lines in events]
