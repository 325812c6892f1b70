"""The ``deliberate`` tool: its arguments, its result text, and reviews over the real simulator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.core.trace import EventKind
from foureyes.llm.prompting import DATA_RULE
from foureyes.review import (
    DELIBERATE_TOOL,
    DeliberateCall,
    DeliberateResult,
    DeliberateRole,
    DeliberateStatus,
    Mask,
    PublicationPolicy,
    RequestMode,
    Session,
    Window,
    deliberate_tool,
    parse_deliberate_arguments,
    run_deliberate,
)
from foureyes.review.packet import review_instruction
from foureyes.review.publication import CheckpointSkip
from foureyes.review.reviewer import (
    TASK_VIEW_PERSONA,
    TASK_VIEW_PERSONA_WITH_TOOLS,
    task_view_instruction,
)
from foureyes.review.session import (
    AssistantMessage,
    EndReason,
    MessageSource,
    ReasoningBlock,
    StepEnd,
    StepStart,
    TextBlock,
    ToolCallBlock,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from tests.helpers.simulator import RunningSimulator
from tests.review._runner_support import open_caller, opened_store, packet, scenario, sim_config
from tests.review.test_reviewer import REASONING, reviewer_for, tool_turn

UPDATE = packet("the fixture was never read")
LATER = "Now I am sure: the fixture is wrong, I will edit it."


def calling(arguments: str, *, earlier: bool = True) -> Session:
    """A session whose last step calls ``deliberate`` (and ``read``) and is still in flight."""
    events: list[Any] = [*tool_turn()] if earlier else [*tool_turn()[:2]]
    events += [
        StepStart(step_id="s2", turn_id="t1"),
        AssistantMessage(
            blocks=(
                ReasoningBlock(text=LATER),
                ToolCallBlock(call_id="r1", name="read", arguments='{"path": "fixture.json"}'),
                ToolCallBlock(call_id="d1", name=DELIBERATE_TOOL, arguments=arguments),
            )
        ),
        ToolResult(call_id="r1", content="FIXTURE-BYTES"),
    ]
    return Session(events=tuple(events), system=("You are a coding agent.",))


TASK = "Fix the failing test in utils.py."  # tool_turn's user message
FOLLOW_UP = "Also keep the public API unchanged."
PLUGIN_NOTE = "PLUGIN-NOTE: an earlier review said to check the fixture"
SECOND_REASONING = "SECOND-REASONING: the parser drops the last field."
SECOND_TEXT = "SECOND-TEXT: reading the source now."
# What only the primary's trajectory holds: its reasoning, messages, actions and outcomes.
TRAJECTORY = (
    REASONING,
    "Let me run the tests.",
    "pytest -x",
    "1 failed: test_parse",
    SECOND_REASONING,
    SECOND_TEXT,
    "SOURCE-PATH",
    "UTILS-SOURCE",
)


def audited(arguments: str) -> Session:
    """Two turns, two complete steps, a published note, then the in-flight ``deliberate``."""
    events: list[Any] = [
        *tool_turn("t0", "s0", "c0"),
        TurnEnd(turn_id="t0", reason=EndReason.COMPLETED),
        TurnStart(turn_id="t1"),
        UserMessage(content=FOLLOW_UP),
        StepStart(step_id="s1", turn_id="t1"),
        AssistantMessage(
            blocks=(
                ReasoningBlock(text=SECOND_REASONING),
                TextBlock(text=SECOND_TEXT),
                ToolCallBlock(call_id="c1", name="read", arguments='{"path": "SOURCE-PATH"}'),
            )
        ),
        ToolResult(call_id="c1", content="UTILS-SOURCE"),
        StepEnd(step_id="s1"),
        UserMessage(content=PLUGIN_NOTE, source=MessageSource.PLUGIN),
        StepStart(step_id="s2", turn_id="t1"),
        AssistantMessage(
            blocks=(
                ReasoningBlock(text=LATER),
                ToolCallBlock(call_id="r1", name="read", arguments='{"path": "fixture.json"}'),
                ToolCallBlock(call_id="d1", name=DELIBERATE_TOOL, arguments=arguments),
            )
        ),
        ToolResult(call_id="r1", content="FIXTURE-BYTES"),
    ]
    return Session(
        events=tuple(events), system=("You are a coding agent.",), tools=(deliberate_tool(),)
    )


def text_of(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


class _ReadOnly:
    """Read-only tools over the agent's current state, noting what they were asked."""

    specs = ({"type": "function", "function": {"name": "read", "parameters": {}}},)

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def call(self, name: str, arguments: str) -> str:
        self.calls.append(name)
        return "STATE-NOW"


def head(result: DeliberateResult) -> dict[str, Any]:
    first = result.text.split("\n", 1)[0]
    decoded: dict[str, Any] = json.loads(first)
    assert decoded == result.head()
    return decoded


# --- arguments (pure) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("{not json", "not_json"),
        ('{"role": "masked-review", "recentSteps": NaN}', "not_json"),
        ('["masked-review"]', "not_object"),
        ('{"role": "masked-review", "window": "recent:1"}', "unknown_key"),
        ('{"recentSteps": 2}', "missing_role"),
        ('{"role": "critic"}', "unknown_role"),
        ('{"role": null}', "unknown_role"),
        ('{"role": "masked-review", "recentSteps": 0}', "bad_window"),
        ('{"role": "masked-review", "recentSteps": -2}', "bad_window"),
        ('{"role": "masked-review", "recentSteps": true}', "bad_window"),
        ('{"role": "masked-review", "recentSteps": 1.5}', "bad_window"),
        ('{"role": "masked-review", "recentSteps": "recent:0"}', "bad_window"),
        ('{"role": "masked-review", "recentSteps": "lately"}', "bad_window"),
        # The roles that cover the whole session ignore a valid window, not a malformed one.
        ('{"role": "trajectory-audit", "recentSteps": 0}', "bad_window"),
        ('{"role": "independent-alternative", "recentSteps": "lately"}', "bad_window"),
    ],
)
def test_bad_arguments_are_a_refused_result_with_a_reason(arguments: str, reason: str) -> None:
    result = parse_deliberate_arguments(arguments)
    assert isinstance(result, DeliberateResult)
    assert result.status is DeliberateStatus.REFUSED and result.reason == reason
    assert result.error and result.review is None and result.packet is None
    assert head(result)["deliberate"] == "refused" and result.text.count("\n") == 0


@pytest.mark.parametrize(
    ("arguments", "window", "mask", "mode", "task_only"),
    [
        (
            '{"role": "masked-review"}',
            "recent:3",
            Mask.REASONING_ONLY,
            RequestMode.CACHE_ALIGNED,
            False,
        ),
        (
            '{"role": "masked-review", "recentSteps": "all-turns"}',
            "all-turns",
            Mask.REASONING_ONLY,
            RequestMode.CACHE_ALIGNED,
            False,
        ),
        (
            '{"role": "masked-review", "recentSteps": " since-last-mutation "}',
            "since-last-mutation",
            Mask.REASONING_ONLY,
            RequestMode.CACHE_ALIGNED,
            False,
        ),
        # The full unmasked fork: the whole session, whatever recentSteps says.
        (
            '{"role": "trajectory-audit", "recentSteps": 1}',
            "all-turns",
            Mask.NONE,
            RequestMode.CACHE_ALIGNED,
            False,
        ),
        ('{"role": "trajectory-audit"}', "all-turns", Mask.NONE, RequestMode.CACHE_ALIGNED, False),
        # The fresh view: the task view of the whole session, under the reviewer's persona.
        (
            '{"role": "independent-alternative", "recentSteps": " since-last-mutation "}',
            "all-turns",
            Mask.ACTION_ONLY,
            RequestMode.REVIEWER_PERSONA,
            True,
        ),
    ],
)
def test_each_role_is_a_fixed_view_and_only_masked_review_takes_the_window(
    arguments: str, window: str, mask: Mask, mode: RequestMode, task_only: bool
) -> None:
    call = parse_deliberate_arguments(arguments)
    assert isinstance(call, DeliberateCall)
    assert str(call.window) == window and call.window == Window.parse(window)
    assert (call.mask, call.mode, call.task_only) == (mask, mode, task_only)


def test_the_tool_schema_names_every_role_and_only_the_parsed_keys() -> None:
    spec = deliberate_tool()
    assert spec["type"] == "function" and spec["function"]["name"] == DELIBERATE_TOOL
    parameters = spec["function"]["parameters"]
    assert parameters["properties"]["role"]["enum"] == [r.value for r in DeliberateRole]
    assert set(parameters["properties"]) == {"role", "recentSteps"}
    assert parameters["required"] == ["role"] and parameters["additionalProperties"] is False
    spec["function"]["name"] = "changed"
    assert deliberate_tool()["function"]["name"] == DELIBERATE_TOOL  # a fresh copy each time


def test_the_tool_schema_describes_each_roles_view_as_it_is() -> None:
    function = deliberate_tool()["function"]
    roles = function["parameters"]["properties"]["role"]["description"]
    masked, audit, alternative = roles.split("; ")
    assert masked.startswith("masked-review:") and "not your reasoning" in masked
    assert audit.startswith("trajectory-audit:") and "whole session" in audit
    assert "your reasoning" in audit and "not your reasoning" not in audit
    assert (
        alternative.startswith("independent-alternative:") and "its own instructions" in alternative
    )
    assert "only the user's messages, none of your steps" in alternative
    assert "own approach and answer" in alternative
    window = function["parameters"]["properties"]["recentSteps"]["description"]
    assert window.startswith("For masked-review:") and "ignore it" in window
    # The summary no longer says every role hides the reasoning.
    assert "your whole session with your reasoning" in function["description"]
    assert "only the user's task" in function["description"]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=8,
)
_ARGUMENTS = st.one_of(
    st.text(max_size=40),
    _JSON.map(json.dumps),
    st.fixed_dictionaries(
        {"role": st.sampled_from([*DeliberateRole, "x", 3])},
        optional={"recentSteps": st.one_of(st.integers(-3, 80), st.text(max_size=12))},
    ).map(json.dumps),
)


@settings(max_examples=300, deadline=None)
@given(_ARGUMENTS)
def test_any_arguments_parse_to_a_call_or_a_refusal_never_an_exception(arguments: str) -> None:
    result = parse_deliberate_arguments(arguments)
    if isinstance(result, DeliberateCall):
        raw = json.loads(arguments)
        assert raw["role"] in {r.value for r in DeliberateRole}
        assert result.window.kind != "recent" or (result.window.k or 0) >= 1
    else:
        assert result.status is DeliberateStatus.REFUSED and result.error
        json.loads(result.text)


# --- over the simulator -------------------------------------------------------------------


async def test_a_call_reviews_the_steps_before_it_and_returns_the_packet_as_the_tool_result(
    simulator: RunningSimulator, tmp_path: Path
) -> None:
    simulator.load(scenario({"content": UPDATE}))
    session = calling('{"role": "masked-review", "recentSteps": 2}')
    async with opened_store(tmp_path) as store, open_caller(sim_config(simulator), store) as c:
        reviewer = reviewer_for(c)  # updates-only: the agent's own call is answered anyway
        result = await run_deliberate(reviewer, session, session.events[-2].blocks[2].arguments)
        record = await store.traces.get(result.review.trace_id if result.review else "")
    assert result.status is DeliberateStatus.PACKET and not result.error
    assert head(result) == {
        "deliberate": "packet",
        "reason": "accepted",
        "role": "masked-review",
        "window": "recent:2",
        "masked_steps": 1,  # the calling step is in flight: only s1 is complete
    }
    assert result.packet is not None and result.packet.render() in result.text
    assert f'sha256="{result.packet.sha256}"' in result.text
    (sent,) = simulator.requests()
    wire = json.dumps(sent["messages"])
    assert REASONING not in wire and "1 failed: test_parse" in wire
    # Neither the pending call nor the rest of its step reached the reviewer.
    assert LATER not in wire and "FIXTURE-BYTES" not in wire and '"d1"' not in wire
    assert record is not None and record.run.meta["trigger"] == "manual"
    decision = [e for e in record.events if e.kind is EventKind.DECISION][0]
    assert decision.data["published"] is True


async def test_masked_review_sends_exactly_the_reviewers_masked_review_of_its_window(
    simulator: RunningSimulator,
) -> None:
    simulator.load(scenario({"content": UPDATE}))
    session = audited('{"role": "masked-review", "recentSteps": 1}')
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = reviewer_for(caller)
        result = await run_deliberate(reviewer, session, session.events[-2].blocks[2].arguments)
        await reviewer.review(session, window=Window.recent(1), mask=Mask.REASONING_ONLY)
    assert head(result)["window"] == "recent:1" and head(result)["masked_steps"] == 1
    asked, direct = simulator.requests()
    assert (asked["messages"], asked["options"]) == (direct["messages"], direct["options"])
    assert asked["messages"][0] == {"role": "system", "content": "You are a coding agent."}
    # The window's reasoning is masked; the steps before it stay in the native prefix.
    window = json.dumps(asked["messages"][-2:])
    assert SECOND_TEXT in window and "UTILS-SOURCE" in window and SECOND_REASONING not in window
    assert REASONING in json.dumps(asked["messages"][:-2])


async def test_trajectory_audit_sends_the_whole_unmasked_trajectory_under_the_primarys_prompt(
    simulator: RunningSimulator,
) -> None:
    simulator.load(scenario({"content": UPDATE}))
    session = audited('{"role": "trajectory-audit", "recentSteps": 1}')
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = reviewer_for(caller)
        result = await run_deliberate(
            reviewer, session, session.events[-2].blocks[2].arguments, session_id="agent-1"
        )
        checkpoint = await reviewer.checkpoint(session, session_id="agent-1")
    assert result.status is DeliberateStatus.PACKET
    assert head(result) == {
        "deliberate": "packet",
        "reason": "accepted",
        "role": "trajectory-audit",
        "window": "all-turns",  # recentSteps 1 is not this role's to choose
        "masked_steps": 2,
    }
    assert result.review is not None and result.review.meta.mask is Mask.NONE
    audit, _ = simulator.requests()
    body = json.dumps(audit)
    system, snapshot, instruction = audit["messages"]
    # A fork of the primary's context: its system prompt and tools, then everything it saw.
    assert system == {"role": "system", "content": "You are a coding agent."}
    assert audit["options"]["tools"] == [deliberate_tool()]
    for seen in (TASK, FOLLOW_UP, PLUGIN_NOTE, *TRAJECTORY):
        assert seen in text_of(snapshot), seen
    assert text_of(snapshot).count("<<<DATA reasoning") == 2
    assert text_of(instruction) == review_instruction(max_chars=10_000, mask=Mask.NONE)
    # Neither the pending call nor the rest of its step reached the reviewer.
    assert LATER not in body and "FIXTURE-BYTES" not in body and '"d1"' not in body
    # An unmasked audit is not the turn's masked review: the checkpoint still runs.
    assert checkpoint.decision.run and checkpoint.review is not None


async def test_independent_alternative_sees_the_users_task_and_none_of_the_trajectory(
    simulator: RunningSimulator,
) -> None:
    simulator.load(scenario({"content": UPDATE}))
    session = audited('{"role": "independent-alternative", "recentSteps": 2}')
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = reviewer_for(caller)
        result = await run_deliberate(
            reviewer, session, session.events[-2].blocks[2].arguments, session_id="agent-1"
        )
        checkpoint = await reviewer.checkpoint(session, session_id="agent-1")
    assert result.status is DeliberateStatus.PACKET
    assert head(result) == {
        "deliberate": "packet",
        "reason": "accepted",
        "role": "independent-alternative",
        "window": "all-turns",
        "masked_steps": 2,  # both complete steps, hidden whole
    }
    assert result.review is not None and result.review.meta.task_only
    assert result.review.request is not None
    assert result.review.request.mode is RequestMode.REVIEWER_PERSONA
    alternative, _ = simulator.requests()
    body = json.dumps(alternative)
    system, snapshot, instruction = alternative["messages"]
    assert system == {"role": "system", "content": f"{TASK_VIEW_PERSONA}\n\n{DATA_RULE}"}
    assert "tools" not in alternative["options"]  # none of the primary's, none of its own
    # The task as the user stated it, turn by turn ...
    assert TASK in text_of(snapshot) and FOLLOW_UP in text_of(snapshot)
    assert text_of(snapshot).index(TASK) < text_of(snapshot).index(FOLLOW_UP)
    # ... and nothing of the primary's: no reasoning, message, action or outcome.
    for hidden in (*TRAJECTORY, LATER, "FIXTURE-BYTES", PLUGIN_NOTE, "You are a coding agent."):
        assert hidden not in body, hidden
    for label in ("reasoning", "assistant_text", "tool_call", "tool_result", "Action batch"):
        assert label not in text_of(snapshot), label
    assert '"d1"' not in body and DELIBERATE_TOOL not in body
    # It is asked for its own approach and answer, and told nothing it does not see.
    assert text_of(instruction) == task_view_instruction(max_chars=10_000)
    assert "Work out independently how you would approach the task" in text_of(instruction)
    assert "You see its goal" not in body and "Judge whether the observable" not in body
    # The fresh view reviews no step: the checkpoint still runs for the turn.
    assert checkpoint.decision.run and checkpoint.review is not None


async def test_independent_alternative_reads_the_current_state_through_the_hosts_tools(
    simulator: RunningSimulator,
) -> None:
    simulator.load(
        scenario(
            {"times": 1, "tool_calls": [{"name": "read", "arguments": "{}"}]},
            {"match": "^STATE-NOW$", "content": UPDATE},
            {"content": UPDATE},
        )
    )
    session = audited('{"role": "independent-alternative"}')
    arguments = session.events[-2].blocks[2].arguments
    tools, unused = _ReadOnly(), _ReadOnly()
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = reviewer_for(caller)
        result = await run_deliberate(reviewer, session, arguments, tools=tools)
        audit = await run_deliberate(
            reviewer, session, '{"role": "trajectory-audit"}', tools=unused
        )
    assert result.status is DeliberateStatus.PACKET and tools.calls == ["read"]
    first, second, audited_sent = simulator.requests()
    assert first["messages"][0]["content"].startswith(TASK_VIEW_PERSONA_WITH_TOOLS)
    assert first["options"]["tools"] == list(_ReadOnly.specs)
    assert text_of(first["messages"][-1]) == task_view_instruction(max_chars=10_000, tools=True)
    assert second["messages"][-1] == {
        "role": "tool",
        "content": "STATE-NOW",
        "tool_call_id": second["messages"][-2]["tool_calls"][0]["id"],
    }
    for hidden in TRAJECTORY:
        assert hidden not in json.dumps(second), hidden
    # A cache-aligned role carries the primary's tools and is never given the host's.
    assert audit.status is DeliberateStatus.PACKET and unused.calls == []
    assert audited_sent["options"]["tools"] == [deliberate_tool()]


async def test_independent_alternative_before_any_step_still_has_the_task(
    simulator: RunningSimulator,
) -> None:
    simulator.load(scenario({"content": UPDATE}))
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = reviewer_for(caller)
        fresh = await run_deliberate(
            reviewer, calling("", earlier=False), '{"role": "independent-alternative"}'
        )
        audit = await run_deliberate(
            reviewer, calling("", earlier=False), '{"role": "trajectory-audit"}'
        )
    assert (fresh.status, head(fresh)["masked_steps"]) == (DeliberateStatus.PACKET, 0)
    assert (audit.status, audit.reason) == (DeliberateStatus.SKIPPED, "no_steps")
    (sent,) = simulator.requests()
    assert TASK in text_of(sent["messages"][1]) and LATER not in json.dumps(sent)


async def test_skips_and_runs_without_a_packet_are_short_results_with_their_reason(
    simulator: RunningSimulator,
) -> None:
    simulator.load(scenario({"content": "not a packet", "times": 1}, {"fault": "http_500"}))
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = reviewer_for(caller)
        arguments = '{"role": "masked-review", "recentSteps": "since-last-mutation"}'
        skipped = await run_deliberate(reviewer, calling("", earlier=False), arguments)
        empty = await run_deliberate(reviewer, calling("", earlier=False), "{}")
        nothing = await run_deliberate(reviewer, calling("", earlier=False), '{"role": "x"}')
        malformed = await run_deliberate(reviewer, calling(""), '{"role": "masked-review"}')
        failed = await run_deliberate(reviewer, calling(""), '{"role": "masked-review"}')
    # Only the calling step has tool calls, and it is in flight: no mutation to review from.
    assert (skipped.status, skipped.reason) == (DeliberateStatus.SKIPPED, "no_mutation")
    assert (empty.status, empty.reason) == (DeliberateStatus.REFUSED, "missing_role")
    assert (nothing.status, nothing.reason) == (DeliberateStatus.REFUSED, "unknown_role")
    assert (malformed.status, malformed.reason) == (DeliberateStatus.NO_PACKET, "review_malformed")
    assert (failed.status, failed.reason) == (DeliberateStatus.NO_PACKET, "review_failed")
    assert len(simulator.requests()) == 2  # the skip and the refusals called nothing
    for result in (skipped, malformed, failed):
        assert not result.error and result.packet is None and "\n" not in result.text
        assert head(result)["reason"] == result.reason
    assert head(skipped)["masked_steps"] == 0
    assert "not a packet" not in malformed.text


async def test_observe_only_withholds_the_packet_and_a_masked_call_latches_the_checkpoint(
    simulator: RunningSimulator,
) -> None:
    simulator.load(scenario({"content": UPDATE}))
    async with open_caller(sim_config(simulator)) as caller:
        observing = reviewer_for(caller, policy=PublicationPolicy.OBSERVE_ONLY)
        withheld = await run_deliberate(
            observing, calling(""), '{"role": "masked-review"}', session_id="agent-1"
        )
        checkpoint = await observing.checkpoint(calling(""), session_id="agent-1")
    assert (withheld.status, withheld.reason) == (DeliberateStatus.WITHHELD, "observe_only")
    assert withheld.packet is None and "the fixture was never read" not in withheld.text
    assert withheld.review is not None and withheld.review.accepted
    assert checkpoint.decision.skip is CheckpointSkip.MANUAL_REVIEW_RAN
    assert len(simulator.requests()) == 1
