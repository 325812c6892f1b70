"""The ``openai`` route kind: any OpenAI-compatible endpoint, with or without the official SDK.

DeepSeek, GLM, Qwen, vLLM, Ollama, llama.cpp server and the simulator all speak the chat
completions API, so one provider serves them. The SDK is imported on the first call, not
when foureyes is imported.

Retries are not the SDK's business here (``max_retries=0``): the caller owns the retry
policy, budgets and deadlines. Every SDK failure is translated into the foureyes error tree
by :func:`translate_errors`, the one boundary where foreign exceptions are mapped.

By default (``transport = "lean"``) the SDK is not used at all: the same request body is
posted by our own small HTTP/1.1 client (:mod:`foureyes.llm._http`, one connection pool
per route; through aiohttp when the environment names a proxy for the route), a stream's
server-sent events are read by :class:`_EventReader`, the response goes through the same
validation, and the transport's failures and HTTP error statuses become the same typed
errors (also in :func:`translate_errors`). The SDK's request building and its HTTP layers
cost about 0.4 ms of CPU per call on the gateway's hot path, aiohttp's own 0.1–0.2 ms
more than that client (benchmarks/README.md); ``transport = "aiohttp"`` or ``"httpx"``
keeps the SDK. The default is the departure from docs/design.md 6 that
docs/architecture.md records.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import pydantic

from foureyes import __version__
from foureyes.config import RouteConfig, mask_url
from foureyes.core import strict_json
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
from foureyes.llm._http import (
    AiohttpOrigin,
    HttpOrigin,
    Origin,
    ResponseTooLarge,
    TransportError,
)
from foureyes.llm.provider import (
    ChatRequest,
    ChatResult,
    Provider,
    TextDelta,
    ToolCall,
    Usage,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "NO_KEY",
    "OpenAIProvider",
    "build_openai_provider",
    "sdk_error_table",
    "translate_errors",
]

NO_KEY = "foureyes-no-key"
"""Key sent to endpoints configured without ``api_key_env`` (local servers that ignore it).

Passing it also stops the SDK from falling back to ``OPENAI_API_KEY`` behind our back.
"""

_Translate: TypeAlias = Callable[[Any, str, float], RouteError]


def _retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The server's retry hint: ``retry-after-ms``, else ``Retry-After`` (seconds or a date)."""
    with contextlib.suppress(ValueError):
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
    value = headers.get("retry-after")
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    return None


def _code(exc: Any) -> str:
    # The error body's code ("invalid_api_key", "model_not_found") only: server messages
    # can quote the key that was sent, so they never reach our messages.
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) else ""


def _root_os_error(exc: BaseException) -> OSError | None:
    """The first non-timeout ``OSError`` (refused, unreachable, DNS) in ``exc``'s chain."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and not isinstance(current, TimeoutError):
            return current
        current = current.__cause__ or current.__context__
    return None


def _timeout(exc: Any, route: str, timeout_s: float) -> RouteError:
    # The SDK's aiohttp transport reports every failed connect, a refusal included, as a
    # connect *timeout*; the root cause tells the two apart.
    refused = _root_os_error(exc)
    if refused is not None:
        return RouteConnectionError(
            route, f"could not reach the endpoint ({type(refused).__name__})"
        )
    return RouteTimeout(route, timeout_s)


def _connection(exc: Any, route: str, timeout_s: float) -> RouteError:
    cause = exc.__cause__ or exc
    return RouteConnectionError(route, f"could not reach the endpoint ({type(cause).__name__})")


def _http_error(route: str, status: int, headers: Mapping[str, str], code: str) -> RouteError:
    """The typed error of an HTTP error status; ``code`` is the error body's code only."""
    if status == 429:
        return RouteRateLimited(route, _retry_after_s(headers), code or "rate limited")
    return RouteHTTPError(route, status, code)


def _status(exc: Any, route: str, timeout_s: float) -> RouteError:
    return _http_error(route, exc.status_code, exc.response.headers, _code(exc))


def _rate_limited(exc: Any, route: str, timeout_s: float) -> RouteError:
    return _http_error(route, 429, exc.response.headers, _code(exc))


def _bad_response(exc: Any, route: str, timeout_s: float) -> RouteError:
    if isinstance(exc, pydantic.ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        return RouteBadResponse(route, f"not a chat completion: {where}: {first['msg']}")
    return RouteBadResponse(route, type(exc).__name__)


@functools.cache
def sdk_error_table() -> dict[type[BaseException], _Translate]:
    """Every exception class a call may raise, each with its translation into our tree.

    Every ``OpenAIError`` subclass the SDK exports is listed by name, so a test can fail
    when a new SDK version adds one nobody has decided about. Lookup walks the exception's
    MRO, so an unlisted subclass still maps through its nearest listed parent.
    """
    import aiohttp
    import openai
    from openai import _exceptions as sdk

    return {
        # Our own bound on the whole call (asyncio.timeout), for slow-drip responses.
        TimeoutError: _timeout,
        # The lean transport: its client's failures (refused, reset, TLS, a malformed or
        # cut-off response), or aiohttp's behind a proxy; a body too large to read whole.
        TransportError: _connection,
        aiohttp.ClientError: _connection,
        ResponseTooLarge: _bad_response,
        # A 200 body that is not JSON or not a chat completion (validated by _Completion).
        pydantic.ValidationError: _bad_response,
        # A stream chunk that is not JSON, as the SDK's stream reader raises it.
        json.JSONDecodeError: _bad_response,
        openai.APITimeoutError: _timeout,
        openai.APIConnectionError: _connection,
        sdk.SubjectTokenProviderError: _connection,
        openai.WebSocketConnectionClosedError: _connection,
        openai.WebSocketQueueFullError: _connection,
        openai.RateLimitError: _rate_limited,
        openai.APIStatusError: _status,
        openai.BadRequestError: _status,
        openai.AuthenticationError: _status,
        openai.OAuthError: _status,
        openai.PermissionDeniedError: _status,
        openai.NotFoundError: _status,
        openai.ConflictError: _status,
        openai.UnprocessableEntityError: _status,
        openai.InternalServerError: _status,
        openai.APIResponseValidationError: _bad_response,
        openai.LengthFinishReasonError: _bad_response,
        openai.ContentFilterFinishReasonError: _bad_response,
        # Raised bare for an error event inside a stream: the endpoint answered, unusably.
        openai.APIError: _bad_response,
        openai.OpenAIError: _bad_response,
    }


@contextlib.contextmanager
def translate_errors(route: str, timeout_s: float) -> Iterator[None]:
    """Translate SDK (and bounding-timeout) exceptions raised inside into foureyes errors.

    The foureyes error is raised ``from`` the original, so logs keep the whole story;
    its message holds no server-provided text except an error code, never the key.

    Raises:
        RouteTimeout: the SDK timed out, or the ``asyncio.timeout`` around the call fired.
        RouteConnectionError: the endpoint could not be reached.
        RouteRateLimited: HTTP 429, with ``retry_after_s`` from the response headers.
        RouteHTTPError: any other HTTP error status.
        RouteBadResponse: a body that is not a usable chat completion.
    """
    table = sdk_error_table()
    try:
        yield
    except tuple(table) as exc:
        translate = next(table[cls] for cls in type(exc).__mro__ if cls in table)
        raise translate(exc, route, timeout_s) from exc


@functools.cache
def _http_response_type() -> Any:
    """The HTTP response class the SDK returns unparsed when asked for it as ``cast_to``."""
    from openai import _base_client

    response_types = getattr(_base_client, "http_response_types", None)
    if response_types is None:  # openai 1.x and 2.x, on httpx
        import httpx

        return httpx.Response
    return response_types()[0]  # openai 3.x, on httpx2


def _env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTP(S)_PROXY``, ``NO_PROXY``), if any."""
    parts = urlsplit(url)
    if proxy_bypass(parts.hostname or ""):
        return None
    return getproxies().get(parts.scheme)


def _status_error(route: str, status: int, headers: Mapping[str, str], body: bytes) -> RouteError:
    """The typed error of an HTTP error status (the lean transport), as the SDK's would map.

    Only the error body's ``code`` is kept: server messages can quote the key sent.
    """
    code = ""
    with contextlib.suppress(ValueError, UnicodeDecodeError):
        document = json.loads(body)
        error = document.get("error") if isinstance(document, dict) else None
        value = error.get("code") if isinstance(error, dict) else None
        code = value if isinstance(value, str) else ""
    return _http_error(route, status, headers, code)


class _Wire(pydantic.BaseModel):
    # Endpoints add fields of their own (DeepSeek: prompt_cache_hit_tokens, ...).
    model_config = pydantic.ConfigDict(extra="ignore", frozen=True)


class _Function(_Wire):
    name: str
    arguments: str


class _ToolCall(_Wire):
    id: str
    function: _Function


class _Message(_Wire):
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(_Wire):
    message: _Message
    finish_reason: str | None = None


class _CompletionDetails(_Wire):
    reasoning_tokens: int | None = pydantic.Field(default=None, ge=0)


class _PromptDetails(_Wire):
    cached_tokens: int | None = pydantic.Field(default=None, ge=0)


class _Usage(_Wire):
    prompt_tokens: int = pydantic.Field(default=0, ge=0)
    completion_tokens: int = pydantic.Field(default=0, ge=0)
    completion_tokens_details: _CompletionDetails | None = None
    prompt_tokens_details: _PromptDetails | None = None
    prompt_cache_hit_tokens: int | None = pydantic.Field(default=None, ge=0)
    """DeepSeek's count of prompt tokens served from its context cache."""

    def value(self) -> Usage:
        """The usage as foureyes keeps it; a detail the endpoint left out is unknown."""
        details = self.prompt_tokens_details
        cached = details.cached_tokens if details is not None else None
        if cached is None:
            cached = self.prompt_cache_hit_tokens
        reasoning = self.completion_tokens_details
        return Usage(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            reasoning_tokens=reasoning.reasoning_tokens if reasoning is not None else None,
            cached_tokens=cached,
        )


class _Completion(_Wire):
    model: str | None = None
    choices: list[_Choice] = pydantic.Field(min_length=1)
    usage: _Usage | None = None


class _FunctionPiece(_Wire):
    name: str | None = None
    arguments: str | None = None


class _ToolCallPiece(_Wire):
    index: int = pydantic.Field(ge=0)
    id: str | None = None
    function: _FunctionPiece | None = None


class _Delta(_Wire):
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[_ToolCallPiece] | None = None


class _ChunkChoice(_Wire):
    delta: _Delta = _Delta()
    finish_reason: str | None = None


class _Chunk(_Wire):
    """One ``chat.completion.chunk`` of a stream (the usage chunk has no choices)."""

    model: str | None = None
    choices: list[_ChunkChoice] = []
    usage: _Usage | None = None
    error: object = None
    """An error event inside the stream (the SDK raises ``APIError`` for it)."""


class _StreamJoin:
    """The chunks of one streamed completion joined into its :class:`ChatResult`.

    Both transports feed it, so a stream reads the same whichever client carried it: text
    and reasoning deltas concatenated, tool calls assembled by ``index``, the last finish
    reason, and the usage chunk with its reasoning and cache-read details.
    """

    def __init__(self, route: str, model: str, on_text: TextDelta) -> None:
        self._route = route
        self._model = model
        self._on_text = on_text
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, list[str]] = {}
        self._finish: str | None = None
        self._usage = Usage()
        self._started = time.monotonic()

    def add(self, chunk: _Chunk) -> None:
        """Take one chunk; an error event raises ``RouteBadResponse``."""
        if chunk.error is not None:
            # Only that there was one: the server's message may quote what was sent.
            raise RouteBadResponse(self._route, "an error event in the stream")
        self._model = chunk.model or self._model
        if chunk.usage is not None:
            self._usage = chunk.usage.value()
        for choice in chunk.choices[:1]:
            delta = choice.delta
            if delta.reasoning_content:
                self._reasoning.append(delta.reasoning_content)
            if delta.content:
                self._text.append(delta.content)
                self._on_text(delta.content)
            for piece in delta.tool_calls or ():
                call = self._calls.setdefault(piece.index, ["", "", ""])
                function = piece.function
                call[0] += piece.id or ""
                call[1] += (function.name if function else None) or ""
                call[2] += (function.arguments if function else None) or ""
            self._finish = choice.finish_reason or self._finish

    def result(self) -> ChatResult:
        """The whole completion; a stream cut off before its finish reason has none."""
        calls = sorted(self._calls.items())
        return ChatResult(
            text="".join(self._text),
            reasoning_content="".join(self._reasoning) if self._reasoning else None,
            tool_calls=tuple(ToolCall(id=c[0], name=c[1], arguments=c[2]) for _, c in calls),
            finish_reason=self._finish,
            usage=self._usage,
            latency_s=time.monotonic() - self._started,
            route=self._route,
            model=self._model,
        )


_MAX_EVENT_BYTES = 8 * 1024 * 1024
"""The most the lean stream reader buffers for one server-sent event before giving up."""


class _EventReader:
    """The ``data`` of each server-sent event in a byte stream, as the chat API sends them.

    Lines end in LF or CRLF (split anywhere between reads); a blank line ends an event;
    its ``data:`` lines are joined by LF; comments and other fields are ignored.
    """

    def __init__(self, route: str) -> None:
        self._route = route
        self._buffer = bytearray()
        self._data: list[bytes] = []
        self._held = 0

    def feed(self, data: bytes) -> list[bytes]:
        """The events ``data`` completes, in order.

        Raises:
            RouteBadResponse: one event grew past ``_MAX_EVENT_BYTES`` without ending.
        """
        self._buffer += data
        events: list[bytes] = []
        start = 0
        while (end := self._buffer.find(b"\n", start)) >= 0:
            line = bytes(self._buffer[start:end]).removesuffix(b"\r")
            start = end + 1
            if not line:
                if self._data:
                    events.append(b"\n".join(self._data))
                self._data, self._held = [], 0
            elif line.startswith(b"data:"):
                self._data.append(line[5:].removeprefix(b" "))
                self._held += len(line)
        del self._buffer[:start]
        if self._held + len(self._buffer) > _MAX_EVENT_BYTES:
            raise RouteBadResponse(self._route, "a stream event over 8 MiB")
        return events


class OpenAIProvider:
    """A :class:`~foureyes.llm.provider.Provider` for one OpenAI-compatible route.

    One instance (and one connection pool) per route, shared by all callers. The SDK client
    is built on the first call, inside the running event loop (the aiohttp transport binds
    its session to it), and the provider is bound to that loop from then on.
    """

    def __init__(self, route: str, config: RouteConfig, *, api_key: str) -> None:
        """Serve route ``route`` as ``config`` describes, authenticating with ``api_key``.

        Raises:
            ConfigError: ``config`` has no ``base_url``, or not an http(s) one with a host.
        """
        if not config.base_url:
            raise ConfigError([f"routes.{route}.base_url is required for kind 'openai'"])
        parts = urlsplit(config.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problem = f"routes.{route}.base_url must be an http:// or https:// URL with a host"
            raise ConfigError([f"{problem}, got {mask_url(config.base_url)!r}"])
        self.route = route
        """The route name."""
        self.config = config
        """The route's configuration."""
        self._base_url = config.base_url
        self._api_key = api_key
        self._client: AsyncOpenAI | None = None
        self._origin: Origin | None = None
        self._completions_url = self._base_url.rstrip("/") + "/chat/completions"
        self._lean_headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"foureyes/{__version__}",
        }
        self._closed = False

    def __repr__(self) -> str:
        url = mask_url(self._base_url)
        return (
            f"OpenAIProvider(route={self.route!r}, base_url={url!r}, model={self.config.model!r})"
        )

    def _sdk(self) -> AsyncOpenAI:
        self._check_open()
        if self._client is None:
            import openai

            http_client = (
                openai.DefaultAioHttpClient()
                if self.config.transport == "aiohttp"
                else openai.DefaultAsyncHttpxClient()
            )
            self._client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self._base_url,
                max_retries=0,
                http_client=http_client,
            )
        return self._client

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.config.model,
            "messages": [message.to_wire() for message in request.messages],
            # max_tokens, not max_completion_tokens: the name every compatible server knows.
            "max_tokens": request.max_tokens or self.config.max_tokens,
            "temperature": (
                request.temperature if request.temperature is not None else self.config.temperature
            ),
        }
        if request.seed is not None:
            params["seed"] = request.seed
        if request.response_format == "json_object":
            params["response_format"] = {"type": "json_object"}
        elif request.response_format is not None:
            schema = request.response_format
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": schema.name,
                    "schema": schema.schema_,
                    "strict": schema.strict,
                },
            }
        if request.tools:
            params["tools"] = [dict(tool) for tool in request.tools]
        if request.tool_choice is not None:
            params["tool_choice"] = (
                request.tool_choice
                if isinstance(request.tool_choice, str)
                else dict(request.tool_choice)
            )
        return params

    async def complete(self, request: ChatRequest, *, timeout_s: float) -> ChatResult:
        """Complete ``request`` in one call, within ``timeout_s`` seconds all told.

        Raises:
            UsageError: the provider was closed.
            RouteTimeout: no complete answer in time (including a body that drips slowly).
            RouteConnectionError: the endpoint was unreachable.
            RouteHTTPError: an HTTP error status (``RouteRateLimited`` for 429).
            RouteBadResponse: a body that is not JSON, has no choices or has wrong types.
        """
        if self.config.transport == "lean":
            return await self._complete_lean(request, timeout_s)
        client = self._sdk()
        started = time.monotonic()
        with translate_errors(self.route, timeout_s):
            async with asyncio.timeout(timeout_s):
                # The SDK's own POST (its client, headers, auth and status errors), with the
                # body we built: ``create()`` would spend about 0.4 ms per call re-shaping
                # parameters that are already wire-ready. The raw body is validated by our
                # own schema below: the SDK's parsing is lenient by design and would let a
                # malformed completion through.
                raw = await client.post(
                    "/chat/completions",
                    body=self._params(request),
                    cast_to=_http_response_type(),
                    options={"timeout": timeout_s},
                )
            completion = _Completion.model_validate_json(raw.content)
        return self._result(completion, time.monotonic() - started)

    async def complete_streaming(
        self, request: ChatRequest, *, timeout_s: float, on_text: TextDelta
    ) -> ChatResult:
        """Complete ``request`` with ``stream: true``, passing each text delta to ``on_text``.

        Through the route's transport: the lean client reads the server-sent events
        itself, the SDK's client through its stream reader; both join the chunks the same
        way (:class:`_StreamJoin`), and ``timeout_s`` bounds the whole stream, not each
        chunk.

        Raises:
            The errors of :meth:`complete`; an error event or a chunk that is not JSON
            inside the stream is a ``RouteBadResponse``.
        """
        params = self._params(request) | {
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        joined = _StreamJoin(self.route, self.config.model, on_text)
        if self.config.transport == "lean":
            await self._stream_lean(params, joined, timeout_s)
            return joined.result()
        client = self._sdk()
        with translate_errors(self.route, timeout_s):
            async with asyncio.timeout(timeout_s):
                stream = await client.chat.completions.create(**params, timeout=timeout_s)
                async for chunk in stream:
                    joined.add(_Chunk.model_validate(chunk, from_attributes=True))
        return joined.result()

    async def _stream_lean(
        self, params: dict[str, Any], joined: _StreamJoin, timeout_s: float
    ) -> None:
        origin = self._lean_origin()
        headers = self._lean_headers | {"Accept": "text/event-stream"}
        reader = _EventReader(self.route)
        body = strict_json.dumps(params, ensure_ascii=False).encode()
        with translate_errors(self.route, timeout_s):
            async with asyncio.timeout(timeout_s), origin.stream(body, headers) as response:
                if response.status >= 400:
                    content = await response.read()
                    raise _status_error(self.route, response.status, response.headers, content)
                async for data in response.chunks():
                    for event in reader.feed(data):
                        if event.startswith(b"[DONE]"):
                            return
                        joined.add(_Chunk.model_validate_json(event))

    async def _complete_lean(self, request: ChatRequest, timeout_s: float) -> ChatResult:
        origin = self._lean_origin()
        body = strict_json.dumps(self._params(request), ensure_ascii=False).encode()
        started = time.monotonic()
        with translate_errors(self.route, timeout_s):
            async with asyncio.timeout(timeout_s):
                response = await origin.post(body, self._lean_headers)
            if response.status >= 400:
                raise _status_error(self.route, response.status, response.headers, response.body)
            completion = _Completion.model_validate_json(response.body)
        return self._result(completion, time.monotonic() - started)

    def _lean_origin(self) -> Origin:
        self._check_open()
        if self._origin is None:
            # HTTP(S)_PROXY and NO_PROXY apply, as they do to the SDK's client, read once
            # here; a route behind a proxy is posted through aiohttp, which speaks to it.
            proxy = _env_proxy(self._completions_url)
            self._origin = (
                HttpOrigin(self._completions_url)
                if proxy is None
                else AiohttpOrigin(self._completions_url, proxy)
            )
        return self._origin

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"the provider of route {self.route!r} is closed")

    def _result(self, completion: _Completion, latency_s: float) -> ChatResult:
        choice = completion.choices[0]
        usage = completion.usage or _Usage()
        return ChatResult(
            text=choice.message.content or "",
            reasoning_content=choice.message.reasoning_content,
            tool_calls=tuple(
                ToolCall(id=call.id, name=call.function.name, arguments=call.function.arguments)
                for call in choice.message.tool_calls or ()
            ),
            finish_reason=choice.finish_reason,
            usage=usage.value(),
            latency_s=latency_s,
            route=self.route,
            model=completion.model or self.config.model,
        )

    async def aclose(self) -> None:
        """Close the connection pool; calls afterwards raise ``UsageError``."""
        self._closed = True
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()
        if self._origin is not None:
            origin, self._origin = self._origin, None
            await origin.aclose()


def build_openai_provider(name: str, route: RouteConfig, environ: Mapping[str, str]) -> Provider:
    """Build the provider of an ``openai`` route, its key read from ``route.api_key_env``.

    Raises:
        ConfigError: the route names a key variable that ``environ`` lacks.
    """
    if route.api_key_env is None:
        return OpenAIProvider(name, route, api_key=NO_KEY)
    key = environ.get(route.api_key_env)
    if not key:
        raise ConfigError([f"environment variable {route.api_key_env} is not set"])
    return OpenAIProvider(name, route, api_key=key)
