"""HeldTraces: a pipeline run's events held in memory and committed in one transaction."""

from __future__ import annotations

import asyncio

import pytest

from foureyes.core.errors import StoreError, UsageError
from foureyes.core.trace import EventKind, TraceEvent
from foureyes.pipeline._buffer import HeldTraces
from foureyes.store import Store


def event(stage: str) -> TraceEvent:
    return TraceEvent(EventKind.RISK, stage, {"stage": stage})


async def test_a_held_run_reaches_the_store_only_when_committed(store: Store) -> None:
    traces = HeldTraces(store.traces)
    trace_id = await traces.start_held_run("support_message", conversation_id="c1")
    await traces.append(trace_id, event("a"))
    await traces.append(trace_id, event("b"))

    before = await store.traces.get(trace_id)
    await traces.commit(trace_id, event("c"), outcome="released", reason="approved")
    after = await store.traces.get(trace_id)

    assert before is not None and before.events == ()  # the run itself exists at once
    assert after is not None and [e.stage for e in after.events] == ["a", "b", "c"]
    assert (after.run.outcome, after.run.reason) == ("released", "approved")
    assert traces.held(trace_id) == ()


async def test_a_run_not_held_is_written_event_by_event(store: Store) -> None:
    traces = HeldTraces(store.traces)
    trace_id = await traces.start_run("risk_triage")
    await traces.append(trace_id, event("a"))

    record = await store.traces.get(trace_id)
    assert record is not None and [e.stage for e in record.events] == ["a"]
    await traces.finish_run(trace_id, outcome="ok", reason=None)
    finished = await traces.get(trace_id)
    assert finished is not None and finished.run.outcome == "ok"


async def test_finishing_a_held_run_commits_it(store: Store) -> None:
    traces = HeldTraces(store.traces)
    trace_id = await traces.start_held_run("x")
    await traces.append(trace_id, event("a"))

    await traces.finish_run(trace_id, outcome="fallback", reason="draft_failed")

    record = await store.traces.get(trace_id)
    assert record is not None and len(record.events) == 1 and record.run.outcome == "fallback"


async def test_a_failed_commit_or_a_drop_releases_what_was_held(store: Store) -> None:
    traces = HeldTraces(store.traces)
    trace_id = await traces.start_held_run("x")
    await store.traces.finish_run(trace_id, outcome="error", reason=None)  # closed elsewhere
    await traces.append(trace_id, event("a"))

    with pytest.raises(StoreError):
        await traces.commit(trace_id, outcome="released", reason="approved")

    assert traces.held(trace_id) == ()
    other = await traces.start_held_run("x")
    await traces.append(other, event("b"))
    assert [e.stage for e in traces.drop(other)] == ["b"] and traces.held(other) == ()


async def test_the_observer_sees_every_event_as_it_is_appended(store: Store) -> None:
    seen: list[str] = []
    traces = HeldTraces(store.traces, observer=lambda e: seen.append(e.stage))
    held = await traces.start_held_run("x")
    direct = await traces.start_run("y")

    await traces.append(held, event("a"))
    await traces.append(direct, event("b"))

    assert seen == ["a", "b"]


async def test_a_reserved_run_is_written_with_its_commit(store: Store) -> None:
    traces = HeldTraces(store.traces)
    trace_id = await traces.start_held_run("support_message", input_text="hi", reserve=True)
    await traces.append(trace_id, event("a"))

    assert await store.traces.get(trace_id) is None  # no transaction of its own
    await traces.commit(trace_id, event("b"), outcome="released", reason="approved")

    record = await store.traces.get(trace_id)
    assert record is not None and [e.stage for e in record.events] == ["a", "b"]
    assert record.run.input_fingerprint == store.traces.fingerprint("hi")
    assert (record.run.outcome, record.run.reason) == ("released", "approved")


async def test_a_reserved_run_dropped_or_failed_is_forgotten(store: Store) -> None:
    traces = HeldTraces(store.traces)
    dropped = await traces.start_held_run("x", reserve=True)
    await traces.append(dropped, event("a"))
    assert [e.stage for e in traces.drop(dropped)] == ["a"]
    assert store.traces.abandon_reserved(dropped) is False

    failed = await traces.start_held_run("x", reserve=True)
    await store.close()  # every write fails from here on
    with pytest.raises(UsageError):
        await traces.commit(failed, outcome="released", reason="approved")
    assert store.traces.abandon_reserved(failed) is False and traces.held(failed) == ()


async def test_an_event_appended_while_a_flush_writes_is_kept_for_the_next_write(
    store: Store,
) -> None:
    # Segment release flushes before each segment while the draft still streams; the
    # draft's model call may be recorded during that write and must not be lost.
    traces = HeldTraces(store.traces)
    trace_id = await traces.start_held_run("support_message", reserve=True)
    await traces.append(trace_id, event("a"))
    flushing = asyncio.create_task(traces.flush(trace_id))
    await asyncio.sleep(0)  # the flush took "a" and waits for its commit
    await traces.append(trace_id, event("b"))
    await flushing

    written = await store.traces.get(trace_id)
    assert written is not None and [e.stage for e in written.events] == ["a"]
    assert [e.stage for e in traces.held(trace_id)] == ["a", "b"]
    await traces.commit(trace_id, outcome="released", reason="approved")
    record = await store.traces.get(trace_id)
    assert record is not None and [e.stage for e in record.events] == ["a", "b"]
