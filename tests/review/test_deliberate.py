"""The ``deliberate`` tool: its arguments, its result text, and reviews over the real simulator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.core.trace import EventKind
from foureyes.review import (
    DEFAULT_PERSONA,
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
from foureyes.review.publication import CheckpointSkip
from foureyes.review.session import (
    AssistantMessage,
    ReasoningBlock,
    StepStart,
    ToolCallBlock,
    ToolResult,
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
    ],
)
def test_bad_arguments_are_a_refused_result_with_a_reason(arguments: str, reason: str) -> None:
    result = parse_deliberate_arguments(arguments)
    assert isinstance(result, DeliberateResult)
    assert result.status is DeliberateStatus.REFUSED and result.reason == reason
    assert result.error and result.review is None and result.packet is None
    assert head(result)["deliberate"] == "refused" and result.text.count("\n") == 0


@pytest.mark.parametrize(
    ("arguments", "window", "mask", "mode"),
    [
        ('{"role": "masked-review"}', "recent:3", Mask.REASONING_ONLY, RequestMode.CACHE_ALIGNED),
        (
            '{"role": "trajectory-audit", "recentSteps": 1}',
            "recent:1",
            Mask.ACTION_ONLY,
            RequestMode.CACHE_ALIGNED,
        ),
        (
            '{"role": "independent-alternative", "recentSteps": " since-last-mutation "}',
            "since-last-mutation",
            Mask.REASONING_ONLY,
            RequestMode.REVIEWER_PERSONA,
        ),
        (
            '{"role": "masked-review", "recentSteps": "all-turns"}',
            "all-turns",
            Mask.REASONING_ONLY,
            RequestMode.CACHE_ALIGNED,
        ),
    ],
)
def test_each_role_is_a_mask_and_a_mode_and_the_window_parses_like_every_window(
    arguments: str, window: str, mask: Mask, mode: RequestMode
) -> None:
    call = parse_deliberate_arguments(arguments)
    assert isinstance(call, DeliberateCall)
    assert str(call.window) == window and call.window == Window.parse(window)
    assert (call.mask, call.mode) == (mask, mode)


def test_the_tool_schema_names_every_role_and_only_the_parsed_keys() -> None:
    spec = deliberate_tool()
    assert spec["type"] == "function" and spec["function"]["name"] == DELIBERATE_TOOL
    parameters = spec["function"]["parameters"]
    assert parameters["properties"]["role"]["enum"] == [r.value for r in DeliberateRole]
    assert set(parameters["properties"]) == {"role", "recentSteps"}
    assert parameters["required"] == ["role"] and parameters["additionalProperties"] is False
    spec["function"]["name"] = "changed"
    assert deliberate_tool()["function"]["name"] == DELIBERATE_TOOL  # a fresh copy each time


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


async def test_trajectory_audit_hides_visible_text_and_independent_alternative_has_its_own_system(
    simulator: RunningSimulator,
) -> None:
    simulator.load(scenario({"content": UPDATE}))
    async with open_caller(sim_config(simulator)) as caller:
        reviewer = reviewer_for(caller)
        audit = await run_deliberate(reviewer, calling(""), '{"role": "trajectory-audit"}')
        alternative = await run_deliberate(
            reviewer, calling(""), '{"role": "independent-alternative"}'
        )
    assert audit.status is alternative.status is DeliberateStatus.PACKET
    audit_sent, alternative_sent = simulator.requests()
    assert "Let me run the tests." not in json.dumps(audit_sent["messages"][1:])
    assert audit_sent["messages"][0]["content"] == "You are a coding agent."
    assert alternative_sent["messages"][0]["content"].startswith(DEFAULT_PERSONA)
    assert "Let me run the tests." in json.dumps(alternative_sent["messages"])


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
