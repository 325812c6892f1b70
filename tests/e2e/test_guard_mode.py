"""Guard mode end to end: a team's app with its own prompt and tools behind the gateway.

Real uvicorn on loopback, the official ``openai`` SDK as the team's client, and
``foureyes simulate`` serving every model over HTTP: ``team-sim`` is the team's own model
(the route the ``counselor`` role names), ``supervisor-sim`` the independent reviewer.
The simulator's request log shows what each model was sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from foureyes.config import Config, GateConfig, RolesConfig, ServerConfig, StoreConfig
from foureyes.core.digest import canonical_json, sha256_hex
from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode
from foureyes.gate import ReplyMode, candidate_sha256, fallback_text
from foureyes.gate.candidate import ToolCall
from tests.helpers.answers import APPROVE, REJECT, answer, by_message
from tests.helpers.server import RunningServer
from tests.helpers.simulator import RunningSimulator

Start = Callable[..., RunningServer]

PERSONA = "You are Pip, the front desk of Harbour Clinic. PERSONA-MARKER."
DEVELOPER = "Book sessions with the book_session tool. DEVELOPER-MARKER."
BOOK = "Can you book me a session with a counsellor on Thursday?"
REFUSE = "Could you book me a session on Friday instead? refuse-me"
CRISIS = "I want to die, I have the pills ready."
TEXT = "I have asked for a Thursday session for you."
REFUSED_TEXT = "refuse this draft"
ARGS = {"day": "thursday", "slots": [10, 11], "note": "first visit"}
WRITTEN = '{ "slots" : [10,11],\n "note":"first visit", "day": "thursday" }'
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book_session",
            "description": "Book a counselling session.",
            "parameters": {
                "type": "object",
                "properties": {"day": {"type": "string"}},
                "required": ["day"],
            },
        },
    }
]
CALL = {"id": "call_book_1", "name": "book_session", "arguments": WRITTEN}
SCENARIO = {
    "models": {
        "team-sim": [
            {"match": "Thursday", "content": TEXT, "tool_calls": [CALL]},
            {"match": "refuse-me", "content": REFUSED_TEXT, "tool_calls": [CALL]},
            {"match": "garble-me", "content": TEXT, "tool_calls": [CALL | {"arguments": "{day"}]},
            {"content": "Hello from the front desk."},
        ],
        "supervisor-sim": [
            {"match": REFUSED_TEXT, "content": REJECT},
            {"content": APPROVE},
        ],
        "l1-sim": by_message(answer("critical", 0.97)),
        "l2-sim": [{"content": answer("critical", 0.95)}],
    }
}


def config(
    simulator: RunningSimulator,
    tmp_path: Path,
    mode: str | None = "guard",
    *,
    team: dict[str, Any] | None = None,
    gate: dict[str, Any] | None = None,
) -> Config:
    routes = {
        name: simulator.route(f"{name}-sim", timeout_s=5) for name in ("supervisor", "l1", "l2")
    }
    routes["team"] = simulator.route("team-sim", timeout_s=5, **(team or {}))
    server = ServerConfig() if mode is None else ServerConfig(mode=mode)  # type: ignore[arg-type]
    return Config(
        gate=GateConfig(**(gate or {})),
        store=StoreConfig(url=f"sqlite+aiosqlite:///{tmp_path / 'guard.db'}"),
        routes=routes,
        roles=RolesConfig(counselor="team", supervisor="supervisor", risk_l1="l1", risk_l2="l2"),
        server=server,
    )


def client_of(server: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused-locally", max_retries=0)


def messages(text: str) -> list[dict[str, Any]]:
    """The team app's conversation: its persona, its developer rules, history, the user."""
    return [
        {"role": "system", "content": PERSONA},
        {"role": "developer", "content": DEVELOPER},
        {"role": "user", "content": "Hi there."},
        {"role": "assistant", "content": "Hello, how can I help?"},
        {"role": "user", "content": text},
    ]


def ask(client: openai.OpenAI, text: str, **options: Any) -> Any:
    return client.chat.completions.create(
        model="foureyes-support",
        messages=messages(text),  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
        tool_choice="auto",
        **options,
    )


def sent_to(simulator: RunningSimulator, model: str) -> list[dict[str, Any]]:
    return [r for r in simulator.requests() if r["model"] == f"{model}-sim"]


def data_blocks(prompt: str) -> dict[str, str]:
    found = re.finditer(r"<<<DATA (\w+)[^>]*>>>\n(.*?)\n<<<END DATA>>>", prompt, re.DOTALL)
    return {m.group(1): m.group(2) for m in found}


def delivered_call() -> dict[str, Any]:
    return {
        "id": "call_book_1",
        "type": "function",
        "function": {"name": "book_session", "arguments": canonical_json(ARGS).decode()},
    }


def test_the_teams_request_reaches_its_model_and_a_released_tool_call_is_delivered(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    server = start_server(config(simulator, tmp_path))

    reply = ask(client_of(server), BOOK)

    # The team's own model got the request as the app wrote it: persona, developer
    # rules, history, the user's message, its tools and tool_choice.
    [team] = sent_to(simulator, "team")
    assert team["messages"] == messages(BOOK)
    assert team["options"]["tools"] == TOOLS and team["options"]["tool_choice"] == "auto"
    # The Supervisor saw the draft and its tool call only as data, and never the persona.
    [review] = sent_to(simulator, "supervisor")
    prompt = review["messages"][-1]["content"]
    blocks = data_blocks(prompt)
    assert blocks["candidate"] == TEXT
    assert json.loads(blocks["tool_call"]) == {
        "arguments": ARGS,
        "id": "call_book_1",
        "name": "book_session",
    }
    outside = re.sub(r"<<<DATA .*?<<<END DATA>>>", "", prompt, flags=re.DOTALL)
    assert "book_session" not in outside and "first visit" not in outside
    assert "MARKER" not in json.dumps(review["messages"])
    # The released draft is delivered with its tool call, bound to one digest.
    block = reply.model_extra["foureyes"]
    digest = candidate_sha256(TEXT, [ToolCall.parse("call_book_1", "book_session", WRITTEN)])
    assert (block["decision"], block["reason"]) == ("released", "approved")
    assert block["candidate_sha256"] == digest
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == TEXT
    assert [c.model_dump() for c in choice.message.tool_calls] == [delivered_call()]
    trace = httpx2.get(f"{server.base_url}/traces/{block['trace_id']}", timeout=10).json()
    assert trace["run"]["kind"] == "guard_message"
    [draft] = [e["data"] for e in trace["events"] if e["stage"] == "draft"]
    assert (draft["role"], draft["route"], draft["finish_reason"]) == (
        "counselor",
        "team",
        "tool_calls",
    )
    assert trace["summary"]["delivery"]["candidate_sha256"] == digest


def test_a_rejected_draft_falls_back_without_its_tool_calls(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    server = start_server(config(simulator, tmp_path))

    reply = ask(client_of(server), REFUSE)

    block = reply.model_extra["foureyes"]
    assert (block["decision"], block["reason"]) == ("fallback", "rejected")
    choice = reply.choices[0]
    assert choice.message.content == fallback_text(
        ReasonCode.REJECTED, Locale.EN, mode=ReplyMode.GUARD
    )
    assert choice.message.tool_calls is None and choice.finish_reason == "stop"
    # Not revised: the team's model was asked once, and nothing of its draft went out.
    assert len(sent_to(simulator, "team")) == 1


def test_a_tool_call_that_is_not_json_is_a_failed_draft_and_never_reviewed(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    server = start_server(config(simulator, tmp_path))

    reply = ask(client_of(server), "Could you book me a session on Monday? garble-me")

    block = reply.model_extra["foureyes"]
    assert (block["decision"], block["reason"]) == ("fallback", "draft_failed")
    assert reply.choices[0].message.content == fallback_text(
        ReasonCode.DRAFT_FAILED, Locale.EN, mode=ReplyMode.GUARD
    )
    assert reply.choices[0].message.tool_calls is None
    assert sent_to(simulator, "supervisor") == []


def test_a_denied_tool_falls_back_before_any_review(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    server = start_server(config(simulator, tmp_path, gate={"tools_deny": ["book_session"]}))

    reply = ask(client_of(server), BOOK)

    block = reply.model_extra["foureyes"]
    assert (block["decision"], block["reason"]) == ("fallback", "tool_not_allowed")
    assert reply.choices[0].message.tool_calls is None
    assert sent_to(simulator, "supervisor") == []


def test_the_team_routes_daily_limit_holds_its_model_back(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    server = start_server(config(simulator, tmp_path, team={"daily_calls": 0}))

    reply = ask(client_of(server), BOOK)

    block = reply.model_extra["foureyes"]
    assert (block["decision"], block["reason"]) == ("fallback", "budget_exhausted")
    assert reply.choices[0].message.tool_calls is None
    assert sent_to(simulator, "team") == [] and sent_to(simulator, "supervisor") == []


def test_a_confirmed_crisis_never_reaches_the_teams_model(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    server = start_server(config(simulator, tmp_path))

    reply = ask(client_of(server), CRISIS, user="u-crisis")

    block = reply.model_extra["foureyes"]
    assert (block["decision"], block["reason"]) == ("fallback", "generation_prohibited")
    assert block["risk"]["confirmed"] is True
    assert reply.choices[0].message.tool_calls is None
    assert sent_to(simulator, "team") == [] and sent_to(simulator, "supervisor") == []


def test_a_stream_in_guard_mode_carries_the_released_text_then_its_tool_calls(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    server = start_server(config(simulator, tmp_path))

    chunks = list(ask(client_of(server), BOOK, stream=True))

    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    calls = [call for c in chunks for call in c.choices[0].delta.tool_calls or ()]
    assert content == TEXT
    assert sha256_hex(content) == chunks[-1].model_extra["foureyes"]["delivered_sha256"]
    assert [c.model_dump(exclude={"index"}) for c in calls] == [delivered_call()]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_support_mode_stays_the_default_and_names_what_it_ignored(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    server = start_server(config(simulator, tmp_path, mode=None))

    raw = client_of(server).chat.completions.with_raw_response.create(
        model="foureyes-support",
        messages=messages(BOOK),  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
    )

    reply = raw.parse()
    assert raw.headers["x-foureyes-ignored"] == "system,developer,tools"
    # foureyes' Counselor drafted on the team route: neither persona nor tools went there.
    [team] = sent_to(simulator, "team")
    assert "MARKER" not in json.dumps(team["messages"])
    assert "tools" not in team["options"]
    assert reply.choices[0].message.tool_calls is None
    assert reply.choices[0].finish_reason == "stop"


RESULT = "Booked: Thursday 10:00 with Dr Lee. RESULT-MARKER."
AFTER = "Thanks! Is there anything I should bring on Thursday?"


def second_turn() -> list[dict[str, Any]]:
    """The app's second turn: its first reply's tool call and the tool's result, then the user."""
    first = [{"id": "call_book_1", "type": "function", "function": CALL_FUNCTION}]
    return [
        *messages(BOOK),
        {"role": "assistant", "content": None, "tool_calls": first},
        {"role": "tool", "tool_call_id": "call_book_1", "content": RESULT},
        {"role": "user", "content": AFTER},
    ]


CALL_FUNCTION = {"name": "book_session", "arguments": WRITTEN}


def test_a_second_turn_with_tool_messages_reaches_the_model_and_the_supervisor_sees_them_as_data(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    server = start_server(config(simulator, tmp_path))

    reply = client_of(server).chat.completions.create(
        model="foureyes-support",
        messages=second_turn(),  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
    )

    # The team's model got the tool call and its result as the app sent them.
    [team] = sent_to(simulator, "team")
    sent = team["messages"]
    assert sent[5] == {
        "role": "assistant",
        "content": None,
        "tool_calls": second_turn()[5]["tool_calls"],
    }
    assert sent[6] == {"role": "tool", "tool_call_id": "call_book_1", "content": RESULT}
    # The Supervisor saw them among the earlier turns, as data only.
    [review] = sent_to(simulator, "supervisor")
    prompt = review["messages"][-1]["content"]
    assert json.loads(data_blocks(prompt)["earlier_tool_call"]) == {
        "arguments": ARGS,
        "id": "call_book_1",
        "name": "book_session",
    }
    turns = re.findall(
        r'<<<DATA earlier_turn role="(\w+)">>>\n(.*?)\n<<<END DATA>>>', prompt, re.DOTALL
    )
    assert ("tool", RESULT) in turns
    outside = re.sub(r"<<<DATA .*?<<<END DATA>>>", "", prompt, flags=re.DOTALL)
    assert "RESULT-MARKER" not in outside and "first visit" not in outside
    assert reply.model_extra["foureyes"]["decision"] == "released"


def test_a_tool_message_answering_no_earlier_call_is_refused_naming_the_id(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    server = start_server(config(simulator, tmp_path))
    turn = second_turn()
    turn[6] = turn[6] | {"tool_call_id": "call_nobody_made"}

    for path, body in [
        ("/chat/completions", {"model": "foureyes-support", "messages": turn}),
        ("/check", {"messages": turn, "draft": {"content": TEXT}}),
    ]:
        response = httpx2.post(f"{server.base_url}{path}", json=body, timeout=30)
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["param"] == "messages.6.tool_call_id"
        assert "call_nobody_made" in error["message"]
    assert sent_to(simulator, "team") == [] and sent_to(simulator, "supervisor") == []


def test_support_mode_refuses_tool_messages_with_a_clear_error(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    server = start_server(config(simulator, tmp_path, mode=None))

    with pytest.raises(openai.UnprocessableEntityError) as refused:
        client_of(server).chat.completions.create(
            model="foureyes-support",
            messages=second_turn(),  # type: ignore[arg-type]
        )
    error = refused.value.body
    assert isinstance(error, dict) and error["param"] == "messages.5"
    assert "no tools" in error["message"]
    assert sent_to(simulator, "team") == []
