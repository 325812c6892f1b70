"""Segment release end to end, the Counselor streaming from ``foureyes simulate``.

Each segment is reviewed as it closes, and only approved segments reach the sink, each
after its record.
"""

from __future__ import annotations

from typing import Any

from foureyes.core.digest import sha256_hex
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.core.trace import EventKind
from foureyes.gate import GateOutcome, GateRunner, Outcome, ReplyRequest, fallback_text
from foureyes.gate.segments import cut_segments
from foureyes.store import Store
from tests.gate.test_e2e_simulator import (
    MESSAGE,
    REJECT,
    scenario,
    sim_runner,
    supervisor_requests,
    supervisor_says,
)
from tests.helpers.simulator import RunningSimulator

__all__ = ["sim_runner"]

# Three sentences, each longer than the simulator's 16-character deltas.
DRAFT = (
    "Thank you for telling me about today. "
    "That sounds heavy to carry alone. "
    "What feels hardest right now?"
)
SEGMENTS = cut_segments(DRAFT, max_chars=400)
APPROVE = {"content": supervisor_says()}


async def stream(
    runner: GateRunner, store: Store, policy: GenerationPolicy = GenerationPolicy.NORMAL
) -> tuple[GateOutcome, list[str], list[int]]:
    """The outcome, the segments the sink got, and how many records were durable at each."""
    trace_id = await store.traces.start_run("gate_reply", input_text=MESSAGE)
    sent: list[str] = []
    durable: list[int] = []

    async def sink(segment: str) -> None:
        record = await store.traces.get(trace_id)
        assert record is not None
        durable.append(
            sum(1 for e in record.events if e.kind is EventKind.VERDICT and e.stage == "segment")
        )
        sent.append(segment)

    pending = runner.begin(ReplyRequest(message=MESSAGE), trace_id=trace_id, speculate=False)
    outcome = await pending.finish(policy, on_segment=sink)
    return outcome, sent, durable


async def test_an_all_approved_reply_goes_out_segment_by_segment_and_equals_the_draft(
    simulator: RunningSimulator, sim_runner: Any, store: Store
) -> None:
    simulator.load(scenario([{"content": DRAFT}], [APPROVE]))
    runner = sim_runner(release="segments", max_calls=6)

    outcome, sent, durable = await stream(runner, store)

    assert len(SEGMENTS) == 3 and sent == SEGMENTS
    # The draft was streamed from the model, not completed whole.
    [draft] = [r for r in simulator.requests() if r["model"] == "counselor-sim"]
    assert draft["stream"] is True
    assert "".join(sent) == outcome.text == DRAFT
    assert outcome.decision is Outcome.RELEASED and outcome.delivered_sha256 == sha256_hex(DRAFT)
    # Each segment's record was in the store before the segment reached the sink.
    assert durable == [1, 2, 3]
    # Each review named the digest of the text released so far plus its segment.
    reviewed = [
        r["messages"][-1]["content"].splitlines()[0] for r in supervisor_requests(simulator)
    ]
    assert reviewed == [
        f"candidate_sha256: {sha256_hex(''.join(SEGMENTS[: i + 1]))}" for i in range(3)
    ]
    assert [step.sha256 for step in outcome.segments] == [
        sha256_hex("".join(SEGMENTS[: i + 1])) for i in range(3)
    ]


async def test_a_rejected_second_segment_ends_with_the_fallback_after_the_first(
    simulator: RunningSimulator, sim_runner: Any, store: Store
) -> None:
    simulator.load(scenario([{"content": DRAFT}], [{"times": 1, **APPROVE}, {"content": REJECT}]))

    outcome, sent, _ = await stream(sim_runner(release="segments"), store)

    assert sent == SEGMENTS[:1]
    assert outcome.decision is Outcome.FALLBACK and outcome.reason is ReasonCode.REJECTED
    assert outcome.text == SEGMENTS[0] + "\n\n" + fallback_text(ReasonCode.REJECTED, outcome.locale)
    assert SEGMENTS[1] not in outcome.text and SEGMENTS[2] not in outcome.text
    record = await store.traces.get(outcome.trace_id)
    assert record is not None
    [decision] = [e.data for e in record.events if e.kind is EventKind.DECISION]
    assert decision["segments"]["stopped"] == "rejected"
    assert [s["sha256"] for s in decision["segments"]["released"]] == [sha256_hex(SEGMENTS[0])]
    assert decision["delivered_sha256"] == sha256_hex(outcome.text)


async def test_a_review_timing_out_mid_way_stops_the_stream(
    simulator: RunningSimulator, sim_runner: Any, store: Store
) -> None:
    simulator.load(scenario([{"content": DRAFT}], [{"times": 2, **APPROVE}, {"fault": "hang"}]))
    # Long enough for the two approvals on a loaded machine, short enough for the hang.
    runner = sim_runner(release="segments", verdict_retries=0, route_timeout_s=3)

    outcome, sent, _ = await stream(runner, store)

    assert sent == SEGMENTS[:2]
    assert outcome.reason is ReasonCode.REVIEW_TIMEOUT
    assert outcome.text == "".join(SEGMENTS[:2]) + "\n\n" + fallback_text(
        ReasonCode.REVIEW_TIMEOUT, outcome.locale
    )


async def test_a_cut_off_draft_releases_nothing_after_the_cut(
    simulator: RunningSimulator, sim_runner: Any, store: Store
) -> None:
    # The simulator cuts the content to its first half and ends the stream unfinished.
    simulator.load(scenario([{"content": DRAFT, "fault": "truncated"}], [APPROVE]))

    outcome, sent, _ = await stream(sim_runner(release="segments"), store)

    assert outcome.reason is ReasonCode.DRAFT_FAILED
    half = DRAFT[: len(DRAFT) // 2]
    # Only whole segments of the half that arrived could have been reviewed and sent.
    assert "".join(sent) in {"", SEGMENTS[0]} and half.startswith("".join(sent))
    assert outcome.text.endswith(fallback_text(ReasonCode.DRAFT_FAILED, outcome.locale))
    assert SEGMENTS[1] not in outcome.text


async def test_a_restricted_policy_is_released_whole(
    simulator: RunningSimulator, sim_runner: Any, store: Store
) -> None:
    simulator.load(scenario([{"content": DRAFT}], [APPROVE]))

    outcome, sent, _ = await stream(
        sim_runner(release="segments"), store, GenerationPolicy.RESTRICTED
    )

    assert sent == [] and outcome.segments == ()
    assert outcome.text.startswith(DRAFT) and len(supervisor_requests(simulator)) == 1


async def test_a_prohibited_policy_streams_no_model_text(
    simulator: RunningSimulator, sim_runner: Any, store: Store
) -> None:
    simulator.load(scenario([{"content": DRAFT}], [APPROVE]))

    outcome, sent, _ = await stream(
        sim_runner(release="segments"), store, GenerationPolicy.PROHIBITED
    )

    assert sent == [] and outcome.reason is ReasonCode.GENERATION_PROHIBITED
    assert simulator.requests() == []


async def test_the_last_review_the_budget_allows_judges_the_rest(
    simulator: RunningSimulator, sim_runner: Any, store: Store
) -> None:
    simulator.load(scenario([{"content": DRAFT}], [APPROVE]))

    # One draft call and two reviews: the second review covers segments 2 and 3 together.
    outcome, sent, _ = await stream(sim_runner(release="segments", max_calls=3), store)

    assert sent == [SEGMENTS[0], SEGMENTS[1] + SEGMENTS[2]] and outcome.text == DRAFT
    assert len(supervisor_requests(simulator)) == 2
