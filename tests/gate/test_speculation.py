"""A reply begun before its policy is known: the speculative first draft and what becomes of it."""

from __future__ import annotations

import asyncio

import pytest

from foureyes.core.digest import sha256_hex
from foureyes.core.errors import RouteHTTPError, UsageError
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.core.roles import Role
from foureyes.core.trace import EventKind
from foureyes.gate import Outcome, ReplyRequest
from foureyes.store import Store
from tests.gate.conftest import MakeRunner
from tests.helpers.scripted import Reply, ScriptedProvider, approve

DRAFT = "Thank you for telling me. That sounds heavy; what feels hardest right now?"
HELLO = ReplyRequest(message="I had a rough day at work and I can't sleep.", conversation_id="c1")


async def _draft_started(scripted: ScriptedProvider) -> None:
    """Wait until the speculative draft's request has reached the provider."""
    async with asyncio.timeout(10):
        while not scripted.calls(Role.COUNSELOR):
            await asyncio.sleep(0.002)


async def _draft_recorded(store: Store, trace_id: str) -> None:
    """Wait until the speculative draft's call has ended (its model_call event is written)."""
    async with asyncio.timeout(10):
        while True:
            record = await store.traces.get(trace_id)
            assert record is not None
            if any(e.kind is EventKind.MODEL_CALL for e in record.events):
                return
            await asyncio.sleep(0.005)


async def test_the_first_draft_starts_at_begin_and_is_used_at_finish(
    make_runner: MakeRunner, scripted: ScriptedProvider, store: Store
) -> None:
    scripted.enqueue(Role.COUNSELOR, DRAFT).enqueue(Role.SUPERVISOR, approve())
    trace_id = await store.traces.start_run("test")

    pending = make_runner().begin(HELLO, trace_id=trace_id, speculate=True)
    await _draft_started(scripted)
    drafted_before_the_policy = len(scripted.calls(Role.COUNSELOR))
    outcome = await pending.finish(GenerationPolicy.NORMAL)

    assert drafted_before_the_policy == 1
    assert outcome.decision is Outcome.RELEASED and outcome.text == DRAFT
    assert len(scripted.calls(Role.COUNSELOR)) == 1  # not drafted twice
    record = await store.traces.get(trace_id)
    assert record is not None
    [decision] = [e.data for e in record.events if e.kind is EventKind.DECISION]
    assert decision["context"]["speculative_draft"] == {"state": "used"}


async def test_a_prohibition_cancels_a_draft_still_being_written(
    make_runner: MakeRunner, scripted: ScriptedProvider, store: Store
) -> None:
    scripted.enqueue(Role.COUNSELOR, Reply(DRAFT, delay_s=3))
    trace_id = await store.traces.start_run("test")
    pending = make_runner().begin(HELLO, trace_id=trace_id, speculate=True)
    await _draft_started(scripted)

    outcome = await asyncio.wait_for(pending.finish(GenerationPolicy.PROHIBITED), timeout=1)

    assert (outcome.decision, outcome.reason) == (
        Outcome.FALLBACK,
        ReasonCode.GENERATION_PROHIBITED,
    )
    assert outcome.attempts == () and DRAFT not in outcome.text
    assert scripted.calls(Role.SUPERVISOR) == []
    record = await store.traces.get(trace_id)
    assert record is not None
    calls = [e.data for e in record.events if e.kind is EventKind.MODEL_CALL]
    assert [(c["role"], c["outcome"]) for c in calls] == [("counselor", "cancelled")]
    [decision] = [e.data for e in record.events if e.kind is EventKind.DECISION]
    assert decision["context"]["speculative_draft"] == {"state": "cancelled", "discarded": True}
    assert decision["candidate_sha256"] is None and decision["attempts"] == []


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (DRAFT, {"state": "written", "discarded": True, "candidate_sha256": sha256_hex(DRAFT)}),
        (
            RouteHTTPError("scripted", 500),
            {"state": "failed", "discarded": True, "reason": "draft_failed"},
        ),
    ],
    ids=["written", "failed"],
)
async def test_a_prohibition_drops_a_finished_draft_unread(
    make_runner: MakeRunner,
    scripted: ScriptedProvider,
    store: Store,
    script: str | RouteHTTPError,
    expected: dict[str, object],
) -> None:
    scripted.enqueue(Role.COUNSELOR, script)
    trace_id = await store.traces.start_run("test")
    pending = make_runner().begin(HELLO, trace_id=trace_id, speculate=True)
    await _draft_recorded(store, trace_id)

    outcome = await pending.finish(GenerationPolicy.PROHIBITED)

    assert outcome.reason is ReasonCode.GENERATION_PROHIBITED and DRAFT not in outcome.text
    record = await store.traces.get(trace_id)
    assert record is not None
    [decision] = [e.data for e in record.events if e.kind is EventKind.DECISION]
    assert decision["context"]["speculative_draft"] == expected


async def test_a_discarded_reply_cancels_its_draft_and_decides_nothing(
    make_runner: MakeRunner, scripted: ScriptedProvider, store: Store
) -> None:
    scripted.enqueue(Role.COUNSELOR, Reply(DRAFT, delay_s=3))
    trace_id = await store.traces.start_run("test")
    pending = make_runner().begin(HELLO, trace_id=trace_id, speculate=True)
    await _draft_started(scripted)

    await asyncio.wait_for(pending.discard(), timeout=1)

    record = await store.traces.get(trace_id)
    assert record is not None
    assert [e.kind for e in record.events] == [EventKind.MODEL_CALL]
    with pytest.raises(UsageError):
        await pending.finish(GenerationPolicy.NORMAL)


async def test_a_pending_reply_is_finished_only_once(
    make_runner: MakeRunner, scripted: ScriptedProvider, store: Store
) -> None:
    scripted.enqueue(Role.COUNSELOR, DRAFT).enqueue(Role.SUPERVISOR, approve())
    trace_id = await store.traces.start_run("test")
    pending = make_runner().begin(HELLO, trace_id=trace_id, speculate=False)
    await pending.finish(GenerationPolicy.NORMAL)

    with pytest.raises(UsageError):
        await pending.finish(GenerationPolicy.NORMAL)
    with pytest.raises(UsageError):
        await pending.discard()


async def test_without_speculation_nothing_is_drafted_before_the_policy(
    make_runner: MakeRunner, scripted: ScriptedProvider, store: Store
) -> None:
    trace_id = await store.traces.start_run("test")
    pending = make_runner().begin(HELLO, trace_id=trace_id, speculate=False)
    await asyncio.sleep(0.01)

    outcome = await pending.finish(GenerationPolicy.PROHIBITED)

    assert scripted.requests == [] and outcome.reason is ReasonCode.GENERATION_PROHIBITED
