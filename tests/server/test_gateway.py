"""``POST /v1/chat/completions`` in process (ASGI), over the offline routes and a real store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from starlette.routing import Route

from foureyes.config import Config, StoreConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.locale import Locale
from foureyes.risk.resources import render_resources
from foureyes.server import create_app
from foureyes.server._fast_route import FastJsonRoute
from foureyes.store import Store
from tests.helpers.server import app_client
from tests.server._support import ADMIN_KEY, CLIENT_KEY, KEYS_ENV, bearer, config, keyed

CALM = "I had a rough day at work and I can't sleep."
CRISIS = "I want to die."


def chat(content: Any = CALM, **extra: Any) -> dict[str, Any]:
    return {"model": "foureyes-support", "messages": [{"role": "user", "content": content}]} | extra


def events_of(body: str) -> list[Any]:
    data = [line[len("data: ") :] for line in body.split("\n\n") if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(d) for d in data[:-1]]


async def runs(cfg: Config) -> list[Any]:
    store = await Store.open(cfg.store, cfg.privacy, {})
    try:
        return list(await store.traces.list_runs())
    finally:
        await store.close()


async def test_a_reply_is_an_openai_completion_with_the_foureyes_object() -> None:
    async with app_client(create_app(config(), {})) as client:
        response = await client.post("/v1/chat/completions", json=chat(user="u-1"))

        assert response.status_code == 200, response.text
        body = response.json()
        trace_id = body["foureyes"]["trace_id"]
        trace = (await client.get(f"/v1/traces/{trace_id}")).json()
    assert body["object"] == "chat.completion" and body["model"] == "foureyes-support"
    assert body["id"] == f"chatcmpl-{trace_id}"
    [choice] = body["choices"]
    assert choice["message"]["role"] == "assistant" and choice["finish_reason"] == "stop"
    text = choice["message"]["content"]
    assert text.startswith("[Offline automatic reply]")
    assert body["foureyes"] == {
        "decision": "released",
        "reason": "approved",
        "candidate_sha256": sha256_hex(text),
        "delivered_sha256": sha256_hex(text),
        "trace_id": trace_id,
        "policy": "normal",
        "risk": {"status": "ok", "level": "low", "confirmed": False, "tier": "L0"},
    }
    assert response.headers["x-foureyes-trace-id"] == trace_id
    assert set(body["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert trace["run"]["conversation_id"] == "u-1"
    assert trace["summary"]["delivery"]["delivered_sha256"] == sha256_hex(text)


async def test_a_crisis_message_carries_resources_and_its_risk() -> None:
    async with app_client(create_app(config(), {})) as client:
        response = await client.post("/v1/chat/completions", json=chat(CRISIS))

    block = response.json()["foureyes"]
    text = response.json()["choices"][0]["message"]["content"]
    assert block["policy"] == "restricted"
    assert block["risk"] == {"status": "ok", "level": "high", "confirmed": False, "tier": "L2"}
    assert block["candidate_sha256"] != block["delivered_sha256"] == sha256_hex(text)
    # The code-rendered resource block: no region was given, so no country's lines.
    assert "We do not have verified crisis lines for where you are." in text
    assert "findahelpline.com" in text and "988" not in text


async def test_region_and_locale_shape_the_code_rendered_text() -> None:
    options = {"region": "GB", "locale": "zh-Hans"}
    async with app_client(create_app(config(), {})) as client:
        response = await client.post("/v1/chat/completions", json=chat(CRISIS, foureyes=options))

    text = response.json()["choices"][0]["message"]["content"]
    assert text.endswith(render_resources(Locale.ZH_HANS, "GB"))
    assert "116 123" in text and "988" not in text  # the United Kingdom's lines only


@pytest.mark.parametrize(
    ("extra", "conversation"),
    [
        ({"foureyes": {"conversation_id": "conv-7"}, "user": "u-1"}, "conv-7"),
        ({"user": "u-1"}, "u-1"),
        ({}, None),
    ],
    ids=["foureyes-wins", "user", "none"],
)
async def test_the_conversation_is_named_by_foureyes_or_user(
    extra: dict[str, Any], conversation: str | None
) -> None:
    cfg = config()
    async with app_client(create_app(cfg, {})) as client:
        response = await client.post("/v1/chat/completions", json=chat(**extra))
    assert response.status_code == 200
    [run] = await runs(cfg)
    assert run.conversation_id == conversation


async def test_a_stream_carries_the_decided_text_and_the_foureyes_object_in_every_chunk() -> None:
    async with app_client(create_app(config(), {})) as client:
        response = await client.post(
            "/v1/chat/completions",
            json=chat(CRISIS, stream=True, stream_options={"include_usage": True}),
        )

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks = events_of(response.text)
    block = chunks[0]["foureyes"]
    assert all(c["foureyes"] == block for c in chunks)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert sha256_hex(text) == block["delivered_sha256"]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] >= 0
    assert len(chunks) > 4  # the text is split


async def test_another_model_is_not_found_in_the_callers_language() -> None:
    async with app_client(create_app(config(), {})) as client:
        response = await client.post(
            "/v1/chat/completions",
            json=chat() | {"model": "gpt-4o"},
            headers={"accept-language": "zh-CN"},
        )

    assert response.status_code == 404
    error = response.json()["error"]
    assert (error["code"], error["param"], error["type"]) == (
        "model_not_found",
        "model",
        "invalid_request_error",
    )
    assert "gpt-4o" in error["message"] and "模型" in error["message"]


BAD_BODIES: list[tuple[str, dict[str, Any], int, str, str | None]] = [
    ("missing-messages", {"model": "foureyes-support"}, 422, "invalid_request", "messages"),
    ("empty-messages", {"model": "foureyes-support", "messages": []}, 422, "invalid_request", None),
    (
        "unknown-role",
        chat() | {"messages": [{"role": "robot", "content": "hi"}]},
        422,
        "invalid_request",
        "messages.0.role",
    ),
    (
        "tool-message",
        chat() | {"messages": [{"role": "tool", "content": "42", "tool_call_id": "c1"}]},
        422,
        "invalid_request",
        "messages.0",  # support mode: its Counselor has no tools
    ),
    (
        "image-part",
        chat([{"type": "image_url", "image_url": {"url": "https://example.org/x.png"}}]),
        422,
        "invalid_request",
        None,
    ),
    (
        "assistant-last",
        chat() | {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant"}]},
        422,
        "invalid_request",
        "messages",
    ),
    ("blank-message", chat("   "), 422, "invalid_request", "messages"),
    ("two-choices", chat(n=2), 422, "invalid_request", "n"),
    ("long-user", chat(user="u" * 257), 422, "invalid_request", "user"),
    ("strict-foureyes", chat(foureyes={"conversaton_id": "x"}), 422, "invalid_request", None),
    ("bad-region", chat(foureyes={"region": "china"}), 422, "invalid_request", None),
]


@pytest.mark.parametrize(
    ("body", "status", "code", "param"),
    [case[1:] for case in BAD_BODIES],
    ids=[case[0] for case in BAD_BODIES],
)
async def test_a_bad_request_is_a_json_error_and_runs_nothing(
    body: dict[str, Any], status: int, code: str, param: str | None
) -> None:
    cfg = config()
    async with app_client(create_app(cfg, {})) as client:
        response = await client.post("/v1/chat/completions", json=body)

    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    if param is not None:
        assert error["param"] == param
    assert await runs(cfg) == []


@pytest.mark.parametrize(
    ("content", "status", "code"),
    [
        (b'{"model": "foureyes-support", "messages": [', 400, "invalid_json"),
        (b"not json at all", 400, "invalid_json"),
        (b'{"model": "foureyes-support", "messages": [{"role": "user", "content": "\xff"}]}', 400,
         "invalid_encoding"),
        (b'{"model": "foureyes-support", "messages": [], "x": "' + b"a" * (2 << 20) + b'"}', 413,
         "request_too_large"),
    ],
    ids=["truncated-json", "not-json", "not-utf8", "two-megabytes"],
)  # fmt: skip
async def test_a_body_that_cannot_be_read_is_refused(
    content: bytes, status: int, code: str
) -> None:
    cfg = config()
    async with app_client(create_app(cfg, {})) as client:
        response = await client.post(
            "/v1/chat/completions", content=content, headers={"content-type": "application/json"}
        )

    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert await runs(cfg) == []


async def test_system_messages_are_accepted_and_history_is_read() -> None:
    messages = [
        {"role": "system", "content": "You are a pirate."},
        {"role": "user", "content": [{"type": "text", "text": "Earlier."}]},
        {"role": "assistant", "content": "I am listening."},
        {"role": "user", "content": [{"type": "text", "text": CALM}]},
    ]
    cfg = config()
    async with app_client(create_app(cfg, {})) as client:
        response = await client.post("/v1/chat/completions", json=chat() | {"messages": messages})
        trace_id = response.json()["foureyes"]["trace_id"]
        trace = (await client.get(f"/v1/traces/{trace_id}")).json()

    assert response.status_code == 200
    assert trace["run"]["meta"]["earlier_turns"] == 2
    assert trace["summary"]["gate"]["context"]["earlier_turns_shown"] == 2


async def test_the_gateway_needs_a_client_key_and_traces_an_admin_key() -> None:
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        anonymous = await client.post("/v1/chat/completions", json=chat())
        served = await client.post("/v1/chat/completions", json=chat(), headers=bearer(CLIENT_KEY))
        trace_id = served.json()["foureyes"]["trace_id"]
        as_client = await client.get(f"/v1/traces/{trace_id}", headers=bearer(CLIENT_KEY))
        as_admin = await client.get(f"/v1/traces/{trace_id}", headers=bearer(ADMIN_KEY))

    assert anonymous.status_code == 401
    assert served.status_code == 200
    assert as_client.status_code == 403
    assert as_client.json()["error"]["code"] == "insufficient_scope"
    assert as_admin.status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/review"), ("POST", "/v1/facts/select"), ("GET", "/v1/facts/observations")],
)
async def test_the_review_and_facts_endpoints_are_behind_a_client_key(
    method: str, path: str
) -> None:
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        anonymous = await client.request(method, path, json={})
        keyed_call = await client.request(method, path, json={}, headers=bearer(CLIENT_KEY))

    assert anonymous.status_code == 401
    assert keyed_call.status_code == 422  # through the door, then the body is checked


async def test_metrics_count_decisions_risk_and_model_calls() -> None:
    async with app_client(create_app(config(), {})) as client:
        await client.post("/v1/chat/completions", json=chat())
        await client.post("/v1/chat/completions", json=chat(CRISIS))
        text = (await client.get("/metrics")).text

    assert 'foureyes_decisions_total{reason="approved"} 2.0' in text
    assert 'foureyes_risk_triages_total{level="low",tier="L0"} 1.0' in text
    assert 'foureyes_risk_triages_total{level="high",tier="L2"} 1.0' in text
    assert 'foureyes_model_calls_total{outcome="ok",role="counselor",route="offline"} 2.0' in text
    assert 'foureyes_model_calls_total{outcome="ok",role="risk_l2",route="offline"} 1.0' in text
    assert 'foureyes_model_call_duration_seconds_count{role="supervisor",route="offline"}' in text


async def test_budget_gauges_are_read_from_the_ledger_when_scraped(tmp_path: Path) -> None:
    cfg = Config.model_validate(
        config().model_dump()
        | {"routes": {"capped": {"kind": "offline", "daily_calls": 10}}}
        | {"roles": {"counselor": "capped"}}
    )
    async with app_client(create_app(cfg, {})) as client:
        await client.post("/v1/chat/completions", json=chat())
        text = (await client.get("/metrics")).text

    assert 'foureyes_budget_remaining_calls{key="route:capped"} 9.0' in text


@pytest.fixture
def lock_store() -> Any:
    """Take the SQLite store's write lock from another connection, as another process would."""
    held: list[sqlite3.Connection] = []

    def lock(url: str) -> None:
        connection = sqlite3.connect(url.removeprefix("sqlite+aiosqlite:///"), isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        held.append(connection)

    yield lock
    for connection in held:
        connection.execute("ROLLBACK")
        connection.close()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_store_that_cannot_write_answers_503_and_delivers_nothing(
    lock_store: Any, stream: bool
) -> None:
    base = config()
    cfg = base.model_copy(update={"store": StoreConfig(url=base.store.url, timeout_s=0.2)})
    async with app_client(create_app(cfg, {})) as client:
        lock_store(cfg.store.url)
        response = await client.post("/v1/chat/completions", json=chat(stream=stream))

    assert response.status_code == 503
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == "store_unavailable"
    assert "Offline" not in response.text


async def test_the_openapi_document_describes_the_gateway() -> None:
    async with app_client(create_app(config(), {})) as client:
        document = (await client.get("/openapi.json")).json()

    assert {"/v1/chat/completions", "/v1/traces", "/v1/traces/{trace_id}", "/v1/assess"} <= set(
        document["paths"]
    )
    for path in ("/v1/chat/completions", "/v1/check", "/v1/check/stream"):
        assert document["paths"][path]["post"]["tags"] == ["gateway"]
    body = document["paths"]["/v1/chat/completions"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ChatCompletionRequest"
    }


def test_the_gateway_routes_are_the_apps_own_and_matched_first() -> None:
    # Not an included router's, and ahead of every other route a POST could match:
    # FastAPI 0.16x finds an included router's routes through a context it builds per
    # request, about 170 Python calls of every reply before the route is found.
    routes = create_app(config(), {}).router.routes
    served = [route for route in routes if type(route) is not Route]  # FastAPI's docs pages

    assert all(isinstance(route, APIRoute) for route in served[:3])
    assert [route.path for route in served[:3]] == [  # type: ignore[attr-defined]
        "/v1/chat/completions",
        "/v1/check",
        "/v1/check/stream",
    ]
    # The hot route's well-formed requests skip FastAPI's solving (tests/server/test_fast_route.py).
    assert isinstance(served[0], FastJsonRoute)


async def test_an_unknown_path_under_v1_is_a_json_404() -> None:
    async with app_client(create_app(config(), {})) as client:
        response = await client.post("/v1/completions", json={})
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
