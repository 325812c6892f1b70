from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from foureyes.core.errors import ContractError
from foureyes.review.importers import (
    SessionFormat,
    detect_format,
    load_session,
    native,
    parse_session,
)
from foureyes.review.session import (
    AssistantMessage,
    EndReason,
    FormatProblem,
    MessageSource,
    ReasoningBlock,
    Session,
    SessionFormatError,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolResult,
    UserMessage,
)
from tests.helpers.data import require_data
from tests.review._session_support import (
    CASSETTES,
    REAL_NAMES,
    TRAJECTORY_FILES,
    canary_sessions,
    cassette_chat,
    real_session,
)


def _read(name: str) -> Any:
    return json.loads(require_data(TRAJECTORY_FILES[name][0]).read_text(encoding="utf-8"))


def _of(session: Session, kind: type) -> list[Any]:
    return [e for e in session.events if isinstance(e, kind)]


def _blocks(session: Session, kind: type) -> list[Any]:
    return [b for m in _of(session, AssistantMessage) for b in m.blocks if isinstance(b, kind)]


# --- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", TRAJECTORY_FILES)
def test_every_real_file_is_detected(name: str) -> None:
    path, expected = TRAJECTORY_FILES[name]
    require_data(path)
    assert detect_format(json.loads(path.read_text(encoding="utf-8"))) is expected
    assert load_session(path) == load_session(path, expected) == load_session(path, expected.value)


def test_a_named_format_overrides_detection_and_fails_typed_when_wrong() -> None:
    path = require_data(TRAJECTORY_FILES["swe-agent-new"][0])
    with pytest.raises(SessionFormatError) as caught:
        load_session(path, SessionFormat.OPENHANDS)
    assert caught.value.schema == "openhands" and caught.value.problem is FormatProblem.WRONG_SHAPE
    with pytest.raises(SessionFormatError) as caught:
        load_session(path, "langchain")
    assert caught.value.problem is FormatProblem.UNKNOWN_FORMAT


# --- SWE-agent ---------------------------------------------------------------------------


def test_swe_agent_new_format_keeps_call_ids_thoughts_and_observations() -> None:
    data = _read("swe-agent-new")
    session = real_session("swe-agent-new")
    (turn,) = session.turns()
    assert turn.reason is EndReason.COMPLETED and len(turn.steps) == 11
    assert all(s.completed for s in turn.steps) and session.in_flight() is None
    assert session.system == (data["history"][0]["content"],)
    assistants = [h for h in data["history"] if h["role"] == "assistant"]
    calls = _blocks(session, ToolCallBlock)
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [
        (t["id"], t["function"]["name"], t["function"]["arguments"])
        for h in assistants
        for t in h["tool_calls"]
    ]
    assert [r.text for r in _blocks(session, ReasoningBlock)] == [h["thought"] for h in assistants]
    observations = [h for h in data["history"] if h["role"] == "tool"]
    assert [(r.call_id, r.content) for r in _of(session, ToolResult)] == [
        (h["tool_call_ids"][0], h["content"]) for h in observations
    ]


def test_swe_agent_old_format_parses_actions_and_takes_the_last_observation_from_trajectory() -> (
    None
):
    data = _read("swe-agent-old")
    session = real_session("swe-agent-old")
    (turn,) = session.turns()
    assert turn.reason is EndReason.COMPLETED and len(turn.steps) == 12
    assert not _blocks(session, ToolCallBlock)
    actions = _of(session, ToolCall)
    assert [a.arguments for a in actions] == [t["action"] for t in data["trajectory"]]
    assert [a.call_id for a in actions] == [f"action-{n}" for n in range(1, 13)]
    assert actions[0].name == "create" and actions[-1].name == "submit"
    results = _of(session, ToolResult)
    assert [r.call_id for r in results] == [a.call_id for a in actions]
    # history has no observation for the final submit; the trajectory does.
    assert results[-1].content == data["trajectory"][-1]["observation"]
    assert "diff --git" in results[-1].content
    demo, task = _of(session, UserMessage)
    assert demo.source is MessageSource.PLUGIN and task.source is MessageSource.USER


def test_swe_agent_without_history_reads_the_trajectory() -> None:
    data = _read("swe-agent-old")
    data.pop("history")
    session = parse_session(json.dumps(data))
    assert len(session.steps()) == 12 and session.system == ()
    assert [r.content for r in _of(session, ToolResult)] == [
        t["observation"] for t in data["trajectory"]
    ]


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ("submitted", EndReason.COMPLETED),
        ("submitted (exit_cost)", EndReason.MAX_TOKENS),
        ("exit_context", EndReason.MAX_TOKENS),
        ("exit_forfeit", EndReason.ABORTED),
        ("exit_format", EndReason.ERROR),
        ("exit_something_new", EndReason.ERROR),  # unknown: never taken for completed
    ],
)
def test_swe_agent_exit_status_ends_the_turn(status: str, reason: EndReason) -> None:
    data = _read("swe-agent-new")
    data["info"]["exit_status"] = status
    assert parse_session(json.dumps(data)).turns()[0].reason is reason


def test_swe_agent_without_exit_status_leaves_the_turn_open() -> None:
    data = _read("swe-agent-new")
    del data["info"]["exit_status"]
    session = parse_session(json.dumps(data))
    assert session.turns()[0].open
    assert all(s.completed for s in session.steps())


# --- OpenHands ---------------------------------------------------------------------------


def test_openhands_basic_keeps_raw_arguments_and_joins_observations_by_cause() -> None:
    data = _read("openhands-basic")
    session = real_session("openhands-basic")
    (turn,) = session.turns()
    assert turn.reason is EndReason.COMPLETED and len(turn.steps) == 2
    edit, finish = _blocks(session, ToolCallBlock)
    model_call = data[1]["tool_call_metadata"]["model_response"]["choices"][0]["message"]
    assert edit.call_id == "toolu_017nBp7UfiGqyrA7j77HgtFP" and edit.name == "str_replace_editor"
    assert edit.arguments == model_call["tool_calls"][0]["function"]["arguments"]
    assert finish.name == "finish"
    (result,) = _of(session, ToolResult)
    assert result.call_id == edit.call_id and result.content == data[2]["content"]
    assert [r.text for r in _blocks(session, ReasoningBlock)] == [
        data[1]["args"]["thought"],
        data[3]["args"]["thought"],
    ]


def test_openhands_interactions_make_one_turn_per_user_message() -> None:
    session = real_session("openhands-interactions")
    turns = session.turns()
    assert [t.reason for t in turns] == [EndReason.COMPLETED] * 3
    assert [m.content for m in _of(session, UserMessage)] == [
        "what's 1+1?",
        "No, I mean by Goldbach's conjecture!",
        "Finish please",
    ]
    assert [t.text for t in _blocks(session, TextBlock)][0] == "1 + 1 equals 2."


def _oh_action(
    id: int, action: str, response: str | None, call: str | None, **args: Any
) -> dict[str, Any]:
    event: dict[str, Any] = {"id": id, "source": "agent", "action": action, "args": args}
    if call is not None:
        message = {"tool_calls": [{"id": call, "function": {"name": action, "arguments": "{}"}}]}
        event["tool_call_metadata"] = {
            "function_name": action,
            "tool_call_id": call,
            "model_response": {"id": response, "choices": [{"message": message}]},
        }
    return event


IMG = "https://x/i.png"


def test_openhands_parallel_calls_unparsed_actions_errors_and_state_changes() -> None:
    state = {"agent_state": "error"}
    go = {"content": "go", "image_urls": [IMG]}
    events = [
        {"id": 0, "source": "agent", "action": "system", "args": {"content": "SYS", "tools": [{}]}},
        {"id": 1, "source": "user", "action": "message", "args": go},
        _oh_action(2, "run", "r1", "a", command="ls", thought="two at once"),
        _oh_action(3, "read", "r1", "b", path="x"),
        {"id": 4, "source": "agent", "observation": "error", "cause": 3, "content": "no such file"},
        {"id": 5, "source": "agent", "observation": "run", "cause": 2, "content": "x.py"},
        {"id": 6, "source": "agent", "action": "run", "args": {"command": "pwd", "thought": ""}},
        {"id": 7, "source": "agent", "observation": "run", "cause": 6, "content": "/w"},
        {"id": 8, "source": "agent", "observation": "agent_state_changed", "extras": state},
    ]  # fmt: skip
    session = parse_session(json.dumps(events))
    assert session.system == ("SYS",) and session.tools == ({},)
    (turn,) = session.turns()
    assert turn.reason is EndReason.ERROR
    first, second = turn.steps
    assert [b.call_id for b in _blocks(session, ToolCallBlock)] == ["a", "b"]
    (unparsed,) = _of(session, ToolCall)
    assert unparsed.call_id == "oh-6" and json.loads(unparsed.arguments) == {"command": "pwd"}
    results = {r.call_id: r for r in _of(session, ToolResult)}
    assert results["b"].error and not results["a"].error and results["oh-6"].content == "/w"
    assert _of(session, UserMessage)[0].images[0].ref == IMG
    assert session.step_at(session.events.index(results["a"])) == first
    assert session.step_at(session.events.index(unparsed)) == second


# --- OpenAI chat (DeepSeek) ----------------------------------------------------------------


def test_deepseek_chat_keeps_reasoning_parallel_calls_and_tools() -> None:
    chat = cassette_chat("deepseek-tools")
    session = real_session("deepseek-tools")
    assert session.system == tuple(m["content"] for m in chat["messages"][:2])
    assert session.tools == tuple(chat["tools"])
    (turn,) = session.turns()
    assert turn.reason is EndReason.COMPLETED and len(turn.steps) == 4
    reasoning = [r.text for r in _blocks(session, ReasoningBlock)]
    assert reasoning == [
        m["reasoning_content"] for m in chat["messages"] if m["role"] == "assistant"
    ]
    assert "" in reasoning  # an empty reasoning_content is kept, as the API sent it
    parallel = session.steps()[2]
    step_calls = [
        b.call_id
        for i in range(parallel.start, (parallel.end or 0) + 1)
        if isinstance(e := session.events[i], AssistantMessage)
        for b in e.blocks
        if isinstance(b, ToolCallBlock)
    ]
    assert step_calls == ["call_00_6edlnw3Z1MgeMfey687g8451", "call_01_km02sac7sHxNDPATKLZy7705"]


# --- VCR cassettes ---------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASSETTES))
def test_a_vcr_cassette_is_imported_as_its_last_chat_call(name: str) -> None:
    path = require_data(f"trajectories/cassettes/{CASSETTES[name]}")

    session = load_session(path)  # detected as a cassette

    assert session == parse_session(json.dumps(cassette_chat(name)))
    assert load_session(path, SessionFormat.VCR) == session
    assert load_session(path, "vcr") == session


@pytest.mark.parametrize("name", ["deepseek-thinking", "deepseek-stream"])
def test_a_deepseek_cassette_keeps_its_reasoning_content_as_reasoning(name: str) -> None:
    session = load_session(require_data(f"trajectories/cassettes/{CASSETTES[name]}"))

    (reasoning,) = _blocks(session, ReasoningBlock)
    (answer,) = _blocks(session, TextBlock)
    assert len(reasoning.text) > 200 and reasoning.text != answer.text
    assert reasoning.text == cassette_chat(name)["messages"][-1]["reasoning_content"]
    (turn,) = session.turns()
    assert turn.reason is EndReason.COMPLETED


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("interactions: 5\n", FormatProblem.WRONG_SHAPE),
        ("interactions:\n- request:\n    uri: https://x/v1/models\n", FormatProblem.WRONG_SHAPE),
        (
            "interactions:\n- request:\n    uri: https://x/v1/chat/completions\n  response: {}\n",
            FormatProblem.WRONG_SHAPE,
        ),
        ("interactions:\n- request:\n    uri: 'never closed\n", FormatProblem.NOT_JSON),
    ],
)
def test_a_broken_cassette_is_a_format_error(text: str, problem: FormatProblem) -> None:
    with pytest.raises(SessionFormatError) as refused:
        parse_session(text)
    assert refused.value.schema == "vcr" and refused.value.problem is problem


def test_openai_chat_with_two_user_turns() -> None:
    session = real_session("openai-tools")
    assert [len(t.steps) for t in session.turns()] == [2, 2]
    assert session.open_turns() == ()


def test_chat_ending_in_an_unanswered_call_is_in_flight_and_answered_one_is_not() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    waiting = parse_session(json.dumps(messages))
    assert waiting.in_flight() is not None and waiting.turns()[0].open
    answered = parse_session(
        json.dumps([*messages, {"role": "tool", "tool_call_id": "c1", "content": "ok"}])
    )
    assert answered.in_flight() is None and answered.steps()[0].completed
    assert answered.turns()[0].open  # the agent has not answered yet


def test_chat_content_parts_become_text_and_images() -> None:
    parts = [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    session = parse_session(json.dumps([{"role": "user", "content": parts}]))
    (message,) = _of(session, UserMessage)
    assert message.content == "look" and message.images[0].ref == "data:image/png;base64,AAAA"


def test_an_empty_message_list_is_an_empty_session() -> None:
    assert parse_session("[]").events == ()


# --- native ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", REAL_NAMES)
def test_native_round_trips_every_real_session_exactly(name: str) -> None:
    session = real_session(name)
    text = native.dumps(session)
    assert native.loads(text) == session
    assert native.dumps(native.loads(text)) == text
    assert parse_session(text) == session  # detected by its header


@settings(max_examples=60, deadline=None)
@given(canary_sessions())
def test_native_round_trips_random_sessions(session: Session) -> None:
    text = native.dumps(session)
    assert native.dumps(native.loads(text)) == text
    assert native.loads(text) == session


def test_native_file_on_disk(tmp_path: Path) -> None:
    session = real_session("deepseek-tools")
    path = tmp_path / "s.jsonl"
    path.write_text(native.dumps(session), encoding="utf-8")
    assert load_session(path) == session
    assert load_session(path, "native") == session


# --- malformed input ----------------------------------------------------------------------

HEADER = {"format": "foureyes-session", "system": [], "tools": [], "version": 1}
CHAT, SWE, OH, NATIVE = "openai-chat", "swe-agent", "openhands", "native"
WRONG, NOT_JSON = FormatProblem.WRONG_SHAPE, FormatProblem.NOT_JSON
UNKNOWN, INVALID = FormatProblem.UNKNOWN_FORMAT, FormatProblem.INVALID_EVENT
CALL = {"id": "", "function": {"name": "f", "arguments": "{}"}}


def _lines(*values: Any) -> str:
    return "".join(json.dumps(v) + "\n" for v in values)


MALFORMED: dict[str, tuple[str, str | None, str, FormatProblem]] = {
    "not json": ("{oops", None, "session", NOT_JSON),
    "a number": ("42", None, "session", UNKNOWN),
    "unrecognised object": ('{"foo": 1}', None, "session", UNKNOWN),
    "message without role": (json.dumps([{"content": "y"}]), CHAT, CHAT, WRONG),
    "tool without call id": (json.dumps([{"role": "tool", "content": "y"}]), None, CHAT, WRONG),
    "tool calls not a list": (
        json.dumps([{"role": "assistant", "content": "", "tool_calls": {}}]),
        None,
        CHAT,
        WRONG,
    ),
    "unknown content part": (
        json.dumps([{"role": "user", "content": [{"type": "audio"}]}]),
        None,
        CHAT,
        WRONG,
    ),
    "system after the conversation": (
        json.dumps([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]),
        None,
        CHAT,
        WRONG,
    ),
    "empty call id": (
        json.dumps([{"role": "assistant", "content": None, "tool_calls": [CALL]}]),
        None,
        CHAT,
        WRONG,
    ),
    "messages not a list": ('{"messages": "hi"}', CHAT, CHAT, WRONG),
    "swe-agent history not a list": ('{"trajectory": [], "history": 3}', None, SWE, WRONG),
    "swe-agent without steps": ('{"trajectory": [], "info": {}}', None, SWE, WRONG),
    "swe-agent content not text": (
        json.dumps({"history": [{"role": "user", "content": 1}], "info": {}}),
        None,
        SWE,
        WRONG,
    ),
    "openhands event not an object": (
        json.dumps([{"source": "user", "action": "message"}, 3]),
        None,
        OH,
        WRONG,
    ),
    "openhands args not an object": (
        json.dumps([{"source": "user", "action": "message", "args": []}]),
        None,
        OH,
        WRONG,
    ),
    "native: empty": ("", NATIVE, NATIVE, WRONG),
    "native: wrong version": (_lines(HEADER | {"version": 2}), None, NATIVE, WRONG),
    "native: extra header key": (_lines(HEADER | {"x": 1}), None, NATIVE, WRONG),
    "native: header not json": ("{nope\n", NATIVE, NATIVE, NOT_JSON),
    "native: line not json": (_lines(HEADER) + '{"type": "turn_start",\n', None, NATIVE, NOT_JSON),
    "native: unknown event": (_lines(HEADER, {"type": "thought"}), None, NATIVE, INVALID),
    "native: extra field": (
        _lines(HEADER, {"type": "turn_start", "turn_id": "t", "x": 1}),
        None,
        NATIVE,
        INVALID,
    ),
    "native: broken structure": (
        _lines(HEADER, {"type": "step_end", "step_id": "s"}),
        None,
        "session",
        FormatProblem.BROKEN_STRUCTURE,
    ),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_input_is_a_typed_error(case: str) -> None:
    text, format_name, schema, problem = MALFORMED[case]
    with pytest.raises(SessionFormatError) as caught:
        parse_session(text, format_name)
    assert isinstance(caught.value, ContractError)
    assert (caught.value.schema, caught.value.problem) == (schema, problem)


def test_a_file_that_is_not_utf8_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(b'[{"role": "user", "content": "\xff"}]')
    with pytest.raises(SessionFormatError) as caught:
        load_session(path)
    assert caught.value.problem is FormatProblem.NOT_JSON


def test_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_session(tmp_path / "missing.json")
