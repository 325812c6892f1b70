"""LangChain against the real packages: ``ChatFoureyes`` and the guarded chat model.

Every model is ``foureyes simulate`` over HTTP on loopback: the gateway (served for real
by uvicorn) calls it for its Counselor and Supervisor, and the guarded model's inner
``ChatOpenAI`` is the team's own model on it (``team-sim``), checked by a
:class:`~foureyes.Guard` whose Supervisor is ``supervisor-sim``.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableLambda
from langchain_openai import ChatOpenAI

from foureyes import Guard, SyncGuard
from foureyes.config import Config, GateConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.errors import ContractError, UsageError
from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode
from foureyes.gate import ReplyMode, fallback_text
from foureyes.integrations.langchain import ChatFoureyes, guarded
from tests.helpers.answers import APPROVE, REJECT, answer
from tests.helpers.server import RunningServer
from tests.helpers.simulator import RunningSimulator

Start = Callable[..., RunningServer]

RELEASED = "A walk outside and an early night can help. Would you like to talk about it?"
REFUSED = "REFUSED DRAFT: just get over it."
BOOK = "Can you book me a session with a counsellor on Thursday?"
BOOKED = "I have asked for a Thursday session for you."
ARGS = {"day": "thursday"}
CALL = {"id": "call_book_1", "name": "book_session", "arguments": json.dumps(ARGS)}
LOOKUP_RESULT = "Thursday 10:00 is free with Dr Lee. LOOKUP-MARKER"
SCENARIO = {
    "models": {
        "counselor-sim": [
            {"match": "reject-me", "content": REFUSED},
            {"content": RELEASED},
        ],
        "team-sim": [
            {"match": "refuse-me", "content": REFUSED},
            {"match": "Thursday", "content": BOOKED, "tool_calls": [CALL]},
            {"content": "Thursday 10:00 is booked."},
        ],
        "supervisor-sim": [
            {"match": "REFUSED DRAFT", "content": REJECT},
            {"content": APPROVE},
        ],
        "l1-sim": [{"content": answer("low", 0.9)}],
        "l2-sim": [{"content": answer("low", 0.9)}],
    }
}
TOOL = {
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
STYLES = ["invoke", "ainvoke", "stream", "astream"]


def config(simulator: RunningSimulator, tmp_path: Path, **gate: Any) -> Config:
    return simulator.config(
        f"sqlite+aiosqlite:///{tmp_path / 'foureyes.db'}", gate=GateConfig(**gate)
    )


async def call(model: Any, style: str, messages: Any, **kwargs: Any) -> BaseMessage:
    """One reply of ``model`` in ``style``; a stream's chunks summed, as LangChain does."""
    if style == "invoke":
        return model.invoke(messages, **kwargs)  # type: ignore[no-any-return]
    if style == "ainvoke":
        return await model.ainvoke(messages, **kwargs)  # type: ignore[no-any-return]
    chunks = (
        list(model.stream(messages, **kwargs))
        if style == "stream"
        else [chunk async for chunk in model.astream(messages, **kwargs)]
    )
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk
    return whole  # type: ignore[no-any-return]


def sent_to(simulator: RunningSimulator, model: str) -> list[dict[str, Any]]:
    return [r for r in simulator.requests() if r["model"] == f"{model}-sim"]


@pytest.fixture
async def http() -> AsyncIterator[dict[str, Any]]:
    """The HTTP clients of the test's LangChain models, closed at its end."""
    with httpx.Client() as sync_client:
        async with httpx.AsyncClient() as async_client:
            yield {"http_client": sync_client, "http_async_client": async_client}


def gateway_model(server: RunningServer, http: dict[str, Any]) -> ChatFoureyes:
    return ChatFoureyes(base_url=server.base_url, api_key="unused-locally", **http)


def team_model(simulator: RunningSimulator, http: dict[str, Any]) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=simulator.base_url, model="team-sim", api_key="unused", max_retries=0, **http
    )


# ChatFoureyes: the gateway's decision in response_metadata.


@pytest.mark.parametrize("style", STYLES)
async def test_chat_foureyes_reads_a_released_reply_s_decision(
    simulator: RunningSimulator,
    start_server: Start,
    tmp_path: Path,
    style: str,
    http: dict[str, Any],
) -> None:
    simulator.load(SCENARIO)
    server = start_server(config(simulator, tmp_path))

    reply = await call(gateway_model(server, http), style, [HumanMessage("I had a rough day.")])

    block = reply.response_metadata["foureyes"]
    assert (block["decision"], block["reason"]) == ("released", "approved")
    assert reply.content == RELEASED
    assert block["delivered_sha256"] == sha256_hex(RELEASED)
    assert block["candidate_sha256"] is not None and len(block["trace_id"]) == 32


@pytest.mark.parametrize("style", STYLES)
async def test_chat_foureyes_reads_a_fallback_s_decision(
    simulator: RunningSimulator,
    start_server: Start,
    tmp_path: Path,
    style: str,
    http: dict[str, Any],
) -> None:
    simulator.load(SCENARIO)
    server = start_server(config(simulator, tmp_path))

    reply = await call(gateway_model(server, http), style, [HumanMessage("Help. reject-me")])

    block = reply.response_metadata["foureyes"]
    assert (block["decision"], block["reason"]) == ("fallback", "rejected")
    assert reply.content == fallback_text(ReasonCode.REJECTED, Locale.EN)
    assert block["delivered_sha256"] == sha256_hex(str(reply.content))
    assert REFUSED not in json.dumps(reply.response_metadata)


class _DropsFoureyes(httpx.BaseTransport):
    """A proxy that forwards to the gateway and drops the body's ``foureyes`` object."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()

    def close(self) -> None:
        self._inner.close()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._inner.handle_request(request)
        body = json.loads(response.read())
        body.pop("foureyes")
        headers = [(k, v) for k, v in response.headers.items() if k != "content-length"]
        return httpx.Response(response.status_code, headers=headers, json=body)


def test_chat_foureyes_reads_the_decision_headers_when_a_body_lacks_the_object(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    simulator.load(SCENARIO)
    server = start_server(config(simulator, tmp_path))
    with httpx.Client(transport=_DropsFoureyes()) as client:
        model = gateway_model(server, {"http_client": client})
        reply = model.invoke([HumanMessage("Help. reject-me")])

    assert reply.response_metadata["foureyes"] == {
        "decision": "fallback",
        "reason": "rejected",
        "delivered_sha256": sha256_hex(fallback_text(ReasonCode.REJECTED, Locale.EN)),
        "trace_id": reply.response_metadata["headers"]["x-foureyes-trace-id"],
    }


# The guarded model: the team's own ChatOpenAI behind a Guard.


@pytest.mark.parametrize("style", STYLES)
async def test_a_released_tool_call_is_delivered_with_the_decision(
    simulator: RunningSimulator, tmp_path: Path, style: str, http: dict[str, Any]
) -> None:
    simulator.load(SCENARIO)
    with SyncGuard.open(config(simulator, tmp_path)) as guard:
        model = guarded(team_model(simulator, http), guard).bind_tools([TOOL])
        messages = [SystemMessage("You are Pip. PERSONA-MARKER"), HumanMessage(BOOK)]

        reply = await call(model, style, messages, foureyes={"conversation_id": "u-1"})

    assert isinstance(reply, AIMessage)
    block = reply.response_metadata["foureyes"]
    assert (block["decision"], block["reason"]) == ("released", "approved")
    assert reply.content == BOOKED and block["delivered_sha256"] == sha256_hex(BOOKED)
    assert [(c["id"], c["name"], c["args"]) for c in reply.tool_calls] == [
        ("call_book_1", "book_session", ARGS)
    ]
    # The team's model got its own persona and tools; the Supervisor saw the tool call.
    [team] = sent_to(simulator, "team")
    assert team["messages"][0]["content"] == "You are Pip. PERSONA-MARKER"
    assert team["options"]["tools"] == [TOOL]
    [review] = sent_to(simulator, "supervisor")
    assert "book_session" in review["messages"][-1]["content"]
    assert "PERSONA-MARKER" not in json.dumps(review["messages"])


@pytest.mark.parametrize("style", STYLES)
async def test_a_denied_tool_call_is_a_fallback_with_no_tool_call(
    simulator: RunningSimulator, tmp_path: Path, style: str, http: dict[str, Any]
) -> None:
    simulator.load(SCENARIO)
    denying = config(simulator, tmp_path, tools_deny=["book_session"])
    with SyncGuard.open(denying) as guard:
        model = guarded(team_model(simulator, http), guard).bind_tools([TOOL])

        reply = await call(model, style, [HumanMessage(BOOK)])

    assert isinstance(reply, AIMessage)
    block = reply.response_metadata["foureyes"]
    assert (block["decision"], block["reason"]) == ("fallback", "tool_not_allowed")
    assert reply.tool_calls == [] and BOOKED not in str(reply.content)
    assert reply.content == fallback_text(
        ReasonCode.TOOL_NOT_ALLOWED, Locale.EN, mode=ReplyMode.GUARD
    )
    assert sent_to(simulator, "supervisor") == []


async def test_an_async_guard_serves_ainvoke_and_astream_and_refuses_invoke(
    simulator: RunningSimulator, tmp_path: Path, http: dict[str, Any]
) -> None:
    simulator.load(SCENARIO)
    async with Guard.open(config(simulator, tmp_path)) as guard:
        model = guarded(team_model(simulator, http), guard)
        for style in ("ainvoke", "astream"):
            reply = await call(model, style, [HumanMessage("Hello, refuse-me")])
            block = reply.response_metadata["foureyes"]
            assert (block["decision"], block["reason"]) == ("fallback", "rejected")
            assert reply.content == fallback_text(
                ReasonCode.REJECTED, Locale.EN, mode=ReplyMode.GUARD
            )
        asked = len(sent_to(simulator, "team"))
        # A Guard belongs to this running loop: a blocking call is refused, not deadlocked,
        # before the team's model is asked.
        with pytest.raises(UsageError, match="SyncGuard"):
            model.invoke([HumanMessage("Hello")])
        with pytest.raises(UsageError, match="SyncGuard"):
            list(model.stream([HumanMessage("Hello")]))
    assert len(sent_to(simulator, "team")) == asked == 2


async def test_a_sync_guard_serves_blocking_calls_inside_a_running_loop(
    simulator: RunningSimulator, tmp_path: Path, http: dict[str, Any]
) -> None:
    simulator.load(SCENARIO)
    with SyncGuard.open(config(simulator, tmp_path)) as guard:
        model = guarded(team_model(simulator, http), guard)
        replies = [model.invoke([HumanMessage("Hello")]), *model.stream([HumanMessage("Hi")])]

    assert replies[0].content == "Thursday 10:00 is booked."
    assert replies[0].response_metadata["foureyes"]["decision"] == "released"
    assert replies[-1].response_metadata["foureyes"]["decision"] == "released"


async def test_no_unreviewed_token_reaches_stream_events(
    simulator: RunningSimulator, tmp_path: Path, http: dict[str, Any]
) -> None:
    simulator.load(SCENARIO)
    async with Guard.open(config(simulator, tmp_path)) as guard:
        # In a chain, as an app has it: the chain's callbacks are in the context.
        chain = RunnableLambda(lambda text: [HumanMessage(text)]) | guarded(
            team_model(simulator, http), guard
        )

        events = [e async for e in chain.astream_events("refuse-me")]

    assert sent_to(simulator, "team")  # the draft was made and refused
    assert "REFUSED" not in repr(events)
    streamed = "".join(
        str(e["data"]["chunk"].content) for e in events if e["event"] == "on_chat_model_stream"
    )
    assert streamed == fallback_text(ReasonCode.REJECTED, Locale.EN, mode=ReplyMode.GUARD)


async def test_tool_results_of_the_turn_are_the_drafts_sources(
    simulator: RunningSimulator, tmp_path: Path, http: dict[str, Any]
) -> None:
    simulator.load(SCENARIO)
    earlier = [{"type": "text", "text": "Hello."}, {"type": "tool_use", "id": "t0", "name": "x"}]
    turn: list[BaseMessage] = [
        HumanMessage("Hi."),
        AIMessage(earlier),  # an earlier reply with a tool-use block, as Anthropic's are
        ToolMessage("EARLIER-RESULT", tool_call_id="t0", name="x"),
        HumanMessage(BOOK),
        AIMessage("", tool_calls=[{"id": "c1", "name": "lookup", "args": {"day": "thu"}}]),
        ToolMessage(LOOKUP_RESULT, tool_call_id="c1", name="lookup"),
    ]
    async with Guard.open(config(simulator, tmp_path)) as guard:
        reply = await guarded(team_model(simulator, http), guard).ainvoke(turn)

    assert reply.response_metadata["foureyes"]["decision"] == "released"
    [review] = sent_to(simulator, "supervisor")
    prompt = review["messages"][-1]["content"]
    assert LOOKUP_RESULT in prompt and 'origin="tool:lookup"' in prompt
    assert "EARLIER-RESULT" not in json.dumps(review["messages"])


@pytest.mark.parametrize(
    "messages",
    [
        [HumanMessage("Hi"), FunctionMessage("{}", name="f")],
        [HumanMessage([{"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}])],
        [SystemMessage("no user message")],
    ],
    ids=["function-message", "image-content", "no-user-message"],
)
async def test_a_message_guard_cannot_take_is_a_typed_error_before_anything_runs(
    simulator: RunningSimulator, tmp_path: Path, messages: list[BaseMessage], http: dict[str, Any]
) -> None:
    simulator.load(SCENARIO)
    async with Guard.open(config(simulator, tmp_path)) as guard:
        model = guarded(team_model(simulator, http), guard)
        with pytest.raises(ContractError) as raised:
            await model.ainvoke(messages)
        with pytest.raises(ContractError):
            await model.ainvoke([HumanMessage("Hi")], foureyes={"colour": "red"})
        runs = await guard.store.traces.list_runs()

    assert (raised.value.schema, raised.value.reason) == ("check", "invalid_input")
    assert runs == [] and simulator.requests() == []


def test_without_langchain_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_openai", None)
    monkeypatch.delitem(sys.modules, "foureyes.integrations.langchain")

    with pytest.raises(ImportError, match=r"pip install 'foureyes\[langchain\]'"):
        importlib.import_module("foureyes.integrations.langchain")


def test_importing_foureyes_does_not_import_langchain() -> None:
    code = "import sys, foureyes, foureyes.integrations; print('langchain_core' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
