from __future__ import annotations

import pytest
from pydantic import ValidationError

from foureyes.core.errors import ContractError, UsageError
from foureyes.review.importers import native
from foureyes.review.session import (
    AssistantMessage,
    EndReason,
    Event,
    FormatProblem,
    MessageSource,
    ReasoningBlock,
    Session,
    SessionFormatError,
    StepEnd,
    StepStart,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from tests.review._session_support import Build


def test_turns_and_steps_are_spans_of_the_log() -> None:
    session = Build().turn().tool_step(1).tool_step(2).end().turn().tool_step(3).session()
    first, second = session.turns()
    assert (first.turn_id, first.ordinal, first.start, first.reason) == (
        "t1",
        1,
        0,
        EndReason.COMPLETED,
    )
    assert not first.open and second.open
    assert [s.step_id for s in first.steps] == ["s1", "s2"]
    assert [s.step_id for s in session.steps()] == ["s1", "s2", "s3"]
    assert all(s.completed for s in session.steps())
    assert session.open_turns() == (second,)
    assert session.in_flight() is None
    # Every event knows its turn and step.
    result_index = next(i for i, e in enumerate(session.events) if isinstance(e, ToolResult))
    assert session.turn_at(result_index) == first
    assert session.step_at(result_index) == first.steps[0]
    assert session.step_at(1) is None  # the user message precedes every step


def test_the_running_step_at_the_end_is_in_flight() -> None:
    session = Build().turn().tool_step(1).tool_step(2, end=False).session()
    in_flight = session.in_flight()
    assert in_flight is not None and in_flight.step_id == "s2" and not in_flight.completed


def test_a_step_left_without_end_is_abandoned_not_in_flight() -> None:
    # "missing step end": a new step starts while the old one never ended.
    session = Build().turn().tool_step(1, end=False).tool_step(2).session()
    s1, s2 = session.steps()
    assert not s1.completed and s2.completed
    assert session.in_flight() is None


def test_a_turn_end_abandons_its_running_step() -> None:
    b = Build().turn().tool_step(1, end=False).end(EndReason.INTERRUPTED)
    session = b.session()
    assert session.in_flight() is None
    assert session.turns()[0].reason is EndReason.INTERRUPTED
    assert not session.steps()[0].completed


def test_two_open_turns_are_recorded_as_they_happened() -> None:
    session = Build().turn().tool_step(1).turn().tool_step(2).session()
    assert [t.turn_id for t in session.open_turns()] == ["t1", "t2"]
    # Loose events belong to the most recently started open turn.
    later = session.append(UserMessage(content="hello?"))
    assert later.turn_at(len(later.events) - 1).turn_id == "t2"


def test_unbalanced_calls_and_results_are_recorded() -> None:
    session = (
        Build()
        .turn()
        .step(ToolCallBlock(call_id="lost", name="bash", arguments="{}"))
        .step(TextBlock(text="ok"), results=(ToolResult(call_id="ghost", content="?"),))
        .session()
    )
    assert len(session.steps()) == 2


def test_append_returns_a_new_session_and_never_rewrites_the_old_one() -> None:
    session = Build().turn().tool_step(1).session()
    before_events, before_digest = session.events, session.digest()
    longer = session.append(UserMessage(content="more"))
    assert session.events is before_events and session.digest() == before_digest
    assert longer.events[:-1] == session.events
    assert longer.digest() != before_digest
    extended = session.extend([UserMessage(content="more")])
    assert extended == longer


def test_events_and_sessions_are_frozen() -> None:
    session = Build().turn().session()
    with pytest.raises(ValidationError):
        session.events[1].content = "changed"  # type: ignore[misc,union-attr]
    with pytest.raises(AttributeError):
        session.events = ()  # type: ignore[misc]


def test_events_are_strictly_typed() -> None:
    with pytest.raises(ValidationError):
        UserMessage(content=1)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        ToolCallBlock(call_id="", name="bash", arguments="{}")
    with pytest.raises(ValidationError):
        TurnEnd(turn_id="t1", reason="done")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        UserMessage(content="x", extra=1)  # type: ignore[call-arg]


BROKEN: dict[str, list[Event]] = {
    "turn id used twice": [TurnStart(turn_id="t"), TurnStart(turn_id="t")],
    "turn end for a turn never started": [TurnEnd(turn_id="t", reason=EndReason.COMPLETED)],
    "turn ended twice": [
        TurnStart(turn_id="t"),
        TurnEnd(turn_id="t", reason=EndReason.COMPLETED),
        TurnEnd(turn_id="t", reason=EndReason.COMPLETED),
    ],
    "step in an ended turn": [
        TurnStart(turn_id="t"),
        TurnEnd(turn_id="t", reason=EndReason.COMPLETED),
        StepStart(step_id="s", turn_id="t"),
    ],
    "step id used twice": [
        TurnStart(turn_id="t"),
        StepStart(step_id="s", turn_id="t"),
        StepEnd(step_id="s"),
        StepStart(step_id="s", turn_id="t"),
    ],
    "step end for a step not running": [
        TurnStart(turn_id="t"),
        StepStart(step_id="s1", turn_id="t"),
        StepStart(step_id="s2", turn_id="t"),
        StepEnd(step_id="s1"),
    ],
    "assistant message outside a step": [
        TurnStart(turn_id="t"),
        AssistantMessage(blocks=(TextBlock(text="hi"),)),
    ],
    "tool call outside a step": [
        TurnStart(turn_id="t"),
        ToolCall(call_id="c", name="bash", arguments="ls"),
    ],
    "user message outside every turn": [UserMessage(content="hello")],
    "tool result outside every turn": [ToolResult(call_id="c", content="x")],
}


@pytest.mark.parametrize("case", BROKEN)
def test_structure_that_has_no_meaning_is_a_typed_error(case: str) -> None:
    with pytest.raises(SessionFormatError) as caught:
        Session(events=tuple(BROKEN[case]))
    error = caught.value
    assert isinstance(error, ContractError)
    assert error.problem is FormatProblem.BROKEN_STRUCTURE
    assert error.reason == "broken_structure" and error.schema == "session"
    assert error.detail.startswith(f"event {len(BROKEN[case]) - 1}:")


def test_something_that_is_not_an_event_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        Session(events=(TurnStart(turn_id="t"), {"type": "user_message", "content": "x"}))  # type: ignore[arg-type]


def test_append_checks_the_new_event() -> None:
    session = Build().turn().session()
    with pytest.raises(SessionFormatError):
        session.append(StepEnd(step_id="nope"))


def test_serialisation_is_canonical_and_names_the_session() -> None:
    session = (
        Build()
        .turn("你好")
        .step(ReasoningBlock(text="想一想"), TextBlock(text="好的"))
        .end()
        .session(system=("sys",), tools=({"type": "function", "function": {"name": "f"}},))
    )
    lines = list(session.lines())
    assert lines[0] == (
        '{"format":"foureyes-session","system":["sys"],'
        '"tools":[{"function":{"name":"f"},"type":"function"}],"version":1}'
    )
    assert lines[2] == '{"content":"你好","images":[],"source":"user","type":"user_message"}'
    assert session.to_jsonl() == "".join(line + "\n" for line in lines)
    assert native.loads(session.to_jsonl()) == session
    assert session.digest() == native.loads(session.to_jsonl()).digest()


def test_equality_covers_events_system_and_tools() -> None:
    b = Build().turn()
    assert b.session() == b.session()
    assert b.session(system=("a",)) != b.session(system=("b",))
    assert b.session(tools=({"a": 1},)) != b.session(tools=({"a": 2},))
    assert b.session() != b.session().append(UserMessage(content="x", source=MessageSource.PLUGIN))
