"""``POST /v1/check``: a caller's own draft judged by the gate, over HTTP, against the simulator.

Every model role is a model of ``foureyes simulate`` (real HTTP); the store is the test's
SQLite file. The simulator's request log shows what the Supervisor was shown, and that
no Counselor was ever asked.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

import pytest

from foureyes.config import Config, GateConfig, RiskConfig, RolesConfig, ServerConfig, StoreConfig
from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode
from foureyes.gate import PART_SEPARATOR, ReplyMode, fallback_text
from foureyes.risk.resources import render_resources
from foureyes.server import create_app
from foureyes.store import Store
from tests.helpers.answers import APPROVE, REJECT, answer, by_message
from tests.helpers.server import app_client
from tests.helpers.simulator import RunningSimulator
from tests.server._support import ADMIN_KEY, CLIENT_KEY, KEYS_ENV, bearer

CALM = "Can you book me a session with a counsellor on Thursday?"
CRISIS = "I want to die, I have the pills ready."
TEXT = "I have asked for a Thursday session for you."
ARGS = {"day": "thursday", "slots": [10, 11], "note": "first visit"}
# As a model might write them: another key order, other whitespace.
WRITTEN = '{ "slots" : [10,11],\n "note":"first visit", "day": "thursday" }'
SCENARIO = {
    "models": {
        "counselor-sim": [{"content": "A Counselor draft nobody asked for."}],
        "supervisor-sim": [
            {"match": "refuse this draft", "content": REJECT},
            {"content": APPROVE},
        ],
        "l1-sim": by_message(answer("critical", 0.97)),
        "l2-sim": [{"content": answer("critical", 0.95)}],
    }
}


def sim_config(simulator: RunningSimulator, **sections: Any) -> Config:
    routes = {
        role: simulator.route(f"{role}-sim", timeout_s=5)
        for role in ("counselor", "supervisor", "l1", "l2")
    }
    return Config(
        store=StoreConfig(url=os.environ["FOUREYES_STORE__URL"]),
        routes=routes,
        roles=RolesConfig(
            counselor="counselor", supervisor="supervisor", risk_l1="l1", risk_l2="l2"
        ),
        gate=GateConfig(**sections.get("gate", {})),
        risk=RiskConfig(**sections.get("risk", {})),
        server=ServerConfig(**sections.get("server", {})),
    )


def tool_call(name: str = "book_session", arguments: str = WRITTEN, id: str = "call_1") -> Any:
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def check(
    message: str = CALM, *, content: Any = TEXT, calls: Any = None, **extra: Any
) -> dict[str, Any]:
    draft = {"content": content, "tool_calls": [tool_call()] if calls is None else calls}
    return {"messages": [{"role": "user", "content": message}], "draft": draft} | extra


def documented_digest(text: str, calls: list[dict[str, Any]]) -> str:
    """The bytes docs/architecture.md defines, computed here independently."""
    listed = [{"arguments": c["arguments"], "id": c["id"], "name": c["name"]} for c in calls]
    body = json.dumps(listed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode() + b"\xff" + body.encode()).hexdigest()


def sent_to(simulator: RunningSimulator, model: str) -> list[str]:
    """The last message of each request ``model`` received."""
    return [
        r["messages"][-1]["content"] for r in simulator.requests() if r["model"] == f"{model}-sim"
    ]


async def runs() -> list[Any]:
    store_config = StoreConfig(url=os.environ["FOUREYES_STORE__URL"])
    store = await Store.open(store_config, Config().privacy, {})
    try:
        return list(await store.traces.list_runs())
    finally:
        await store.close()


async def test_an_approved_draft_is_released_with_its_tool_calls_bound_to_one_digest(
    simulator: RunningSimulator,
) -> None:
    simulator.load(SCENARIO)
    async with app_client(create_app(sim_config(simulator), {})) as client:
        response = await client.post("/v1/check", json=check())
        assert response.status_code == 200, response.text
        body = response.json()
        trace = (await client.get(f"/v1/traces/{body['trace_id']}")).json()

    digest = documented_digest(TEXT, [{"id": "call_1", "name": "book_session", "arguments": ARGS}])
    canonical = json.dumps(ARGS, sort_keys=True, separators=(",", ":"))
    assert (body["decision"], body["reason"]) == ("released", "approved")
    assert body["content"] == TEXT
    assert body["tool_calls"] == [tool_call(arguments=canonical)]
    assert body["candidate_sha256"] == digest
    assert body["delivered_sha256"] == hashlib.sha256(TEXT.encode()).hexdigest()
    # L1 read the calm message too (l1_policy "every") and found it low.
    assert body["risk"]["tier"] == "L1" and body["policy"] == "normal"
    headers = response.headers
    assert (headers["x-foureyes-decision"], headers["x-foureyes-reason"]) == (
        "released",
        "approved",
    )
    assert headers["x-foureyes-delivered-sha256"] == body["delivered_sha256"]
    # Nothing was drafted: the caller's draft was the candidate.
    assert sent_to(simulator, "counselor") == []
    assert trace["run"]["kind"] == "draft_check"
    assert trace["summary"]["delivery"]["candidate_sha256"] == digest


async def test_the_supervisor_sees_the_draft_and_its_tool_calls_as_data(
    simulator: RunningSimulator,
) -> None:
    simulator.load(SCENARIO)
    async with app_client(create_app(sim_config(simulator), {})) as client:
        body = (await client.post("/v1/check", json=check())).json()

    [prompt] = sent_to(simulator, "supervisor")
    assert prompt.startswith(f"candidate_sha256: {body['candidate_sha256']}\n")
    blocks = dict(
        (m.group(1), m.group(2))
        for m in re.finditer(r"<<<DATA (\w+)[^>]*>>>\n(.*?)\n<<<END DATA>>>", prompt, re.DOTALL)
    )
    assert blocks["candidate"] == TEXT
    assert json.loads(blocks["tool_call"]) == {
        "arguments": ARGS,
        "id": "call_1",
        "name": "book_session",
    }
    # Outside the data blocks, the prompt holds none of the caller's words.
    outside = re.sub(r"<<<DATA .*?<<<END DATA>>>", "", prompt, flags=re.DOTALL)
    assert "book_session" not in outside and "first visit" not in outside


async def test_a_rejected_draft_falls_back_without_its_tool_calls(
    simulator: RunningSimulator,
) -> None:
    simulator.load(SCENARIO)
    async with app_client(create_app(sim_config(simulator), {})) as client:
        response = await client.post("/v1/check", json=check(content="refuse this draft"))

    body = response.json()
    assert (body["decision"], body["reason"]) == ("fallback", "rejected")
    assert body["content"] == fallback_text(ReasonCode.REJECTED, Locale.EN, mode=ReplyMode.GUARD)
    assert body["tool_calls"] is None and body["candidate_sha256"] is None
    assert response.headers["x-foureyes-reason"] == "rejected"


@pytest.mark.parametrize(
    "gate",
    [{"tools_deny": ["book_session"]}, {"tools_allow": ["cancel_session"]}],
    ids=["denied", "outside-the-allow-list"],
)
async def test_a_tool_the_gate_does_not_allow_falls_back_before_any_review(
    simulator: RunningSimulator, gate: dict[str, Any]
) -> None:
    simulator.load(SCENARIO)
    async with app_client(create_app(sim_config(simulator, gate=gate), {})) as client:
        body = (await client.post("/v1/check", json=check())).json()

    assert (body["decision"], body["reason"]) == ("fallback", "tool_not_allowed")
    assert body["tool_calls"] is None
    assert sent_to(simulator, "supervisor") == []


async def test_a_confirmed_crisis_never_delivers_the_callers_draft(
    simulator: RunningSimulator,
) -> None:
    simulator.load(SCENARIO)
    async with app_client(create_app(sim_config(simulator), {})) as client:
        body = (await client.post("/v1/check", json=check(CRISIS, user="u-crisis"))).json()

    assert (body["decision"], body["reason"]) == ("fallback", "generation_prohibited")
    assert body["risk"] == {"status": "ok", "level": "critical", "confirmed": True, "tier": "L2"}
    assert TEXT not in body["content"] and body["tool_calls"] is None
    assert sent_to(simulator, "supervisor") == [] and sent_to(simulator, "counselor") == []


async def test_sources_reach_the_supervisor_from_check_and_chat_completions(
    simulator: RunningSimulator,
) -> None:
    simulator.load(SCENARIO)
    sources = [{"id": "kb-7", "text": "Sessions run on Thursdays from 10:00.", "origin": "kb"}]
    chat = {
        "model": "foureyes-support",
        "messages": [{"role": "user", "content": CALM}],
        "foureyes": {"sources": [{"id": "kb-8", "text": "Fridays are closed."}]},
    }
    async with app_client(create_app(sim_config(simulator), {})) as client:
        checked = await client.post("/v1/check", json=check(foureyes={"sources": sources}))
        completed = await client.post("/v1/chat/completions", json=chat)

    assert checked.status_code == completed.status_code == 200
    first, second = sent_to(simulator, "supervisor")
    assert '<<<DATA source id="kb-7" origin="kb">>>\nSessions run on Thursdays from 10:00.' in first
    assert '<<<DATA source id="kb-8" origin="request">>>\nFridays are closed.' in second
    assert completed.headers["x-foureyes-decision"] == completed.json()["foureyes"]["decision"]


BAD: list[tuple[str, dict[str, Any], str | None]] = [
    ("missing-draft", {"messages": [{"role": "user", "content": CALM}]}, "draft"),
    ("empty-draft", check(content=None, calls=[]), "draft"),
    ("blank-draft", check(content="", calls=[]), "draft"),
    ("malformed-call", check(calls=[{"id": "c1", "type": "function"}]), None),
    ("non-json-arguments", check(calls=[tool_call(arguments="{day: thursday")]), None),
    ("nan-arguments", check(calls=[tool_call(arguments='{"n": NaN}')]), None),
    (
        "repeated-id",
        check(calls=[tool_call(), tool_call(name="cancel_session")]),
        "draft.tool_calls.1",
    ),
    (
        "too-many-sources",
        check(foureyes={"sources": [{"id": f"s{i}", "text": "x"} for i in range(21)]}),
        None,
    ),
    ("oversize-source", check(foureyes={"sources": [{"id": "s", "text": "x" * 20_001}]}), None),
    ("quoted-source-id", check(foureyes={"sources": [{"id": 'a"b', "text": "x"}]}), None),
]


@pytest.mark.parametrize(("body", "param"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
async def test_bad_input_is_a_422_and_nothing_is_recorded(
    simulator: RunningSimulator, body: dict[str, Any], param: str | None
) -> None:
    simulator.load(SCENARIO)
    async with app_client(create_app(sim_config(simulator), {})) as client:
        response = await client.post("/v1/check", json=body)

    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_request")
    if param is not None:
        assert error["param"].startswith(param)
    assert await runs() == []
    assert simulator.requests() == []


async def test_check_takes_the_same_key_and_rate_limit_as_chat_completions(
    simulator: RunningSimulator,
) -> None:
    simulator.load(SCENARIO)
    server = {"api_keys_env": "CLIENT_KEYS", "admin_keys_env": "ADMIN_KEYS", "burst": 1}
    cfg = sim_config(simulator, server=server | {"rate_per_minute": 1})
    async with app_client(create_app(cfg, KEYS_ENV)) as client:
        unkeyed = await client.post("/v1/check", json=check())
        first = await client.post("/v1/check", json=check(), headers=bearer(CLIENT_KEY))
        second = await client.post("/v1/check", json=check(), headers=bearer(CLIENT_KEY))

    assert (unkeyed.status_code, unkeyed.json()["error"]["code"]) == (401, "missing_api_key")
    assert first.status_code == 200
    assert (second.status_code, second.json()["error"]["code"]) == (429, "rate_limit_exceeded")
    assert "retry-after" in second.headers


async def test_the_end_user_names_the_conversation_its_limits_count_under_the_key(
    simulator: RunningSimulator,
) -> None:
    simulator.load(SCENARIO)
    server = {"api_keys_env": "CLIENT_KEYS", "admin_keys_env": "ADMIN_KEYS"}
    cfg = sim_config(simulator, server=server, risk={"l1_daily_limit": 1})
    message = check(CRISIS, user="end-user-1")
    async with app_client(create_app(cfg, KEYS_ENV)) as client:
        first = (await client.post("/v1/check", json=message, headers=bearer(CLIENT_KEY))).json()
        again = (await client.post("/v1/check", json=message, headers=bearer(CLIENT_KEY))).json()
        other = (await client.post("/v1/check", json=message, headers=bearer(ADMIN_KEY))).json()

    # The user's one L1 assessment of the day is spent under this key, not under another's.
    assert first["risk"]["status"] == "ok" and first["risk"]["tier"] == "L2"
    assert again["risk"]["status"] == "unknown"
    assert other["risk"]["status"] == "ok" and other["risk"]["tier"] == "L2"
    assert [r.conversation_id for r in await runs()].count("end-user-1") == 3


async def test_a_restricted_policy_holds_back_tool_calls_unless_configured_to_let_one_run(
    simulator: RunningSimulator,
) -> None:
    # Escalated, not confirmed: the reply is restricted. By default no tool may run then;
    # gate.tools_when_restricted names those that may (the text gets the resources).
    unconfirmed = {
        "models": SCENARIO["models"] | {"l2-sim": [{"content": answer("critical", 0.6)}]}
    }
    simulator.load(unconfirmed)
    allowed = sim_config(simulator, gate={"tools_when_restricted": ["Book-Session"]})
    async with app_client(create_app(sim_config(simulator), {})) as client:
        held = (await client.post("/v1/check", json=check(CRISIS))).json()
        text_only = (await client.post("/v1/check", json=check(CRISIS, calls=[]))).json()
    async with app_client(create_app(allowed, {})) as client:
        body = (await client.post("/v1/check", json=check(CRISIS))).json()

    assert (held["decision"], held["reason"], held["policy"]) == (
        "fallback",
        "tool_not_allowed",
        "restricted",
    )
    assert not held["tool_calls"] and render_resources(Locale.EN, None) in held["content"]
    assert (text_only["decision"], text_only["policy"]) == ("released", "restricted")
    assert (body["decision"], body["policy"]) == ("released", "restricted")
    assert body["content"] == TEXT + PART_SEPARATOR + render_resources(Locale.EN, None)
    assert body["delivered_sha256"] == hashlib.sha256(body["content"].encode()).hexdigest()
    assert body["tool_calls"] == [
        tool_call(arguments=json.dumps(ARGS, sort_keys=True, separators=(",", ":")))
    ]


RESULT = "Booked: Thursday 10:00. RESULT-MARKER."


def second_turn(arguments: str = WRITTEN) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": CALM},
        {"role": "assistant", "content": None, "tool_calls": [tool_call(arguments=arguments)]},
        {"role": "tool", "tool_call_id": "call_1", "content": RESULT},
        {"role": "user", "content": "Thanks, what should I bring?"},
    ]


async def test_a_check_takes_tool_turns_and_the_supervisor_sees_them_as_data(
    simulator: RunningSimulator,
) -> None:
    simulator.load(SCENARIO)
    async with app_client(create_app(sim_config(simulator), {})) as client:
        body = {"messages": second_turn(), "draft": {"content": TEXT}}
        response = await client.post("/v1/check", json=body)
        bad = await client.post("/v1/check", json=body | {"messages": second_turn("{day")})

    assert response.status_code == 200, response.text
    [prompt] = sent_to(simulator, "supervisor")
    turns = re.findall(
        r'<<<DATA (earlier_\w+)(?: role="(\w+)")?>>>\n(.*?)\n<<<END DATA>>>', prompt, re.DOTALL
    )
    assert [(label, role) for label, role, _ in turns] == [
        ("earlier_turn", "user"),
        ("earlier_turn", "assistant"),
        ("earlier_tool_call", ""),
        ("earlier_turn", "tool"),
    ]
    assert json.loads(turns[2][2]) == {"arguments": ARGS, "id": "call_1", "name": "book_session"}
    assert turns[3][2] == RESULT
    outside = re.sub(r"<<<DATA .*?<<<END DATA>>>", "", prompt, flags=re.DOTALL)
    assert "RESULT-MARKER" not in outside
    # An earlier call is held to the same strict JSON as a draft's.
    assert bad.status_code == 422
    assert bad.json()["error"]["param"] == "messages.1.tool_calls.0"


async def test_a_draft_of_text_alone_may_be_sent_as_a_string_as_guard_check_takes_it(
    simulator: RunningSimulator,
) -> None:
    simulator.load(SCENARIO)
    async with app_client(create_app(sim_config(simulator), {})) as client:
        as_object = await client.post("/v1/check", json=check(calls=[]))
        as_string = await client.post("/v1/check", json=check(content=None) | {"draft": TEXT})
        empty = await client.post("/v1/check", json=check(content=None) | {"draft": ""})
    assert as_string.status_code == 200, as_string.text
    for key in ("decision", "reason", "candidate_sha256", "delivered_sha256", "content"):
        assert as_string.json()[key] == as_object.json()[key], key
    assert empty.status_code == 422
