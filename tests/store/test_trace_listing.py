"""Batched appends and the run list of the trace writer, on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from foureyes.core.errors import StoreError, UsageError
from foureyes.core.trace import EventKind, TraceEvent
from foureyes.store import NewAssessment, Store
from foureyes.store.trace_list import MAX_LIST, RunFilter
from tests.helpers.clock import ManualClock
from tests.store._support import OpenStore


def _event(stage: str, **data: object) -> TraceEvent:
    return TraceEvent(EventKind.RISK, stage, data)


async def test_a_batch_follows_earlier_events_and_can_finish_the_run(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    trace_id = await store.traces.start_run("support_message")
    await store.traces.append(trace_id, _event("l0", n=1))

    batch = [_event("l1", n=2), _event("triage", n=3), _event("delivery", n=4)]
    await store.traces.append_many(trace_id, batch, outcome="released", reason="approved")

    record = await store.traces.get(trace_id)
    assert record is not None
    assert [e.data["n"] for e in record.events] == [1, 2, 3, 4]
    assert (record.run.outcome, record.run.reason) == ("released", "approved")
    assert record.run.finished_at is not None
    with pytest.raises(StoreError, match="finished"):
        await store.traces.append_many(trace_id, [_event("late")])


async def test_a_batch_without_an_outcome_leaves_the_run_open(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    trace_id = await store.traces.start_run("support_message")

    await store.traces.append_many(trace_id, [_event("a"), _event("b")])
    await store.traces.append(trace_id, _event("c"))

    record = await store.traces.get(trace_id)
    assert record is not None and record.run.finished_at is None
    assert [e.stage for e in record.events] == ["a", "b", "c"]


async def test_an_empty_batch_with_an_outcome_only_finishes(
    open_store: OpenStore, sqlite_url: str
) -> None:
    store = await open_store(sqlite_url)
    trace_id = await store.traces.start_run("x")

    await store.traces.append_many(trace_id, [], outcome="error", reason=None)

    record = await store.traces.get(trace_id)
    assert record is not None and record.events == () and record.run.outcome == "error"


async def test_a_batch_for_an_unknown_run_writes_nothing(
    open_store: OpenStore, sqlite_url: str
) -> None:
    store = await open_store(sqlite_url)

    with pytest.raises(StoreError, match="unknown") as caught:
        await store.traces.append_many("f" * 32, [_event("a")], outcome="released")

    assert caught.value.operation == "append_many"


@pytest.mark.parametrize(
    "bad",
    [
        TraceEvent(EventKind.RISK, "x", {"value": float("nan")}),
        TraceEvent(EventKind.RISK, "x", {}, at=dt.datetime(2026, 1, 1)),  # noqa: DTZ001
    ],
    ids=["not-json", "naive-time"],
)
async def test_one_bad_event_refuses_the_whole_batch(
    open_store: OpenStore, sqlite_url: str, bad: TraceEvent
) -> None:
    store = await open_store(sqlite_url)
    trace_id = await store.traces.start_run("x")

    with pytest.raises(UsageError):
        await store.traces.append_many(trace_id, [_event("good"), bad], outcome="released")

    record = await store.traces.get(trace_id)
    assert record is not None and record.events == () and record.run.finished_at is None


async def test_a_reason_needs_an_outcome(open_store: OpenStore, sqlite_url: str) -> None:
    store = await open_store(sqlite_url)
    trace_id = await store.traces.start_run("x")

    with pytest.raises(UsageError):
        await store.traces.append_many(trace_id, [], reason="approved")


async def _run(
    store: Store,
    clock: ManualClock,
    *,
    kind: str = "support_message",
    conversation: str = "c1",
    outcome: str = "released",
    reason: str = "approved",
    level: str | None = "low",
    status: str = "ok",
    purpose: str | None = None,
) -> str:
    meta = None if purpose is None else {"purpose": purpose}
    trace_id = await store.traces.start_run(kind, conversation_id=conversation, meta=meta)
    if status:
        await store.assessments.record(
            NewAssessment(
                conversation_id=conversation,
                purpose="live",
                at=clock(),
                status=status,
                level=level,
                tier="L1",
                confirmed=False,
                policy="normal",
                reasons=[],
                detail={},
                trace_id=trace_id,
            ),
            text="hello",
        )
    await store.traces.append_many(trace_id, [], outcome=outcome, reason=reason)
    clock.advance(minutes=10)
    return trace_id


async def test_runs_are_listed_newest_first_with_their_triage(
    open_store: OpenStore, store_url: str
) -> None:
    clock = ManualClock()
    store = await open_store(store_url, clock=clock)
    first = await _run(store, clock, level="high")
    second = await _run(store, clock, status="", outcome="fallback", reason="draft_failed")

    runs = await store.traces.list_runs()

    assert [r.trace_id for r in runs] == [second, first]
    assert runs[1].as_json()["risk"] == {
        "status": "ok",
        "level": "high",
        "tier": "L1",
        "confirmed": False,
    }
    assert runs[0].as_json()["risk"] is None
    assert runs[1].started_at == dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)


async def test_filters_narrow_the_list(open_store: OpenStore, store_url: str) -> None:
    clock = ManualClock()
    store = await open_store(store_url, clock=clock)
    high = await _run(store, clock, level="high", outcome="fallback", reason="rejected")
    unknown = await _run(store, clock, level=None, status="unknown", conversation="c2")
    gate = await _run(store, clock, kind="gate_reply", status="")
    low = await _run(store, clock, level="low")

    async def ids(**where: object) -> list[str]:
        return [r.trace_id for r in await store.traces.list_runs(RunFilter(**where))]  # type: ignore[arg-type]

    assert await ids(reason="rejected") == [high]
    assert await ids(outcome="released", kind="support_message") == [low, unknown]
    assert await ids(kind="gate_reply") == [gate]
    assert await ids(risk_level="high") == [high]
    assert await ids(risk_level="unknown") == [unknown]
    assert await ids(conversation_id="c2") == [unknown]
    start = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)
    assert await ids(since=start + dt.timedelta(minutes=10)) == [low, gate, unknown]
    assert await ids(until=start + dt.timedelta(minutes=10)) == [high]
    assert await ids(
        since=start + dt.timedelta(minutes=5), until=start + dt.timedelta(minutes=25)
    ) == [gate, unknown]
    assert await ids(before=gate) == [unknown, high]


async def test_the_list_is_paged_by_limit_and_before(
    open_store: OpenStore, sqlite_url: str
) -> None:
    clock = ManualClock()
    store = await open_store(sqlite_url, clock=clock)
    made = [await _run(store, clock) for _ in range(5)]

    page = await store.traces.list_runs(limit=2)
    rest = await store.traces.list_runs(RunFilter(before=page[-1].trace_id), limit=10)

    assert [r.trace_id for r in page + rest] == made[::-1]


@pytest.mark.parametrize("limit", [0, MAX_LIST + 1])
async def test_a_limit_out_of_range_is_refused(
    open_store: OpenStore, sqlite_url: str, limit: int
) -> None:
    store = await open_store(sqlite_url)
    with pytest.raises(UsageError):
        await store.traces.list_runs(limit=limit)


async def test_a_naive_date_bound_is_refused(open_store: OpenStore, sqlite_url: str) -> None:
    store = await open_store(sqlite_url)
    with pytest.raises(UsageError):
        await store.traces.list_runs(RunFilter(since=dt.datetime(2026, 1, 1)))  # noqa: DTZ001


async def test_the_level_filter_tells_unscreened_from_unknown(
    open_store: OpenStore, store_url: str
) -> None:
    clock = ManualClock()
    store = await open_store(store_url, clock=clock)
    unknown = await _run(store, clock, level=None, status="unknown")
    unscreened = await _run(store, clock, level=None, status="unscreened")

    async def ids(level: str) -> list[str]:
        return [r.trace_id for r in await store.traces.list_runs(RunFilter(risk_level=level))]

    assert await ids("unknown") == [unknown]
    assert await ids("unscreened") == [unscreened]


async def test_the_purpose_filter_keeps_eval_runs_apart_from_chat_runs(
    open_store: OpenStore, store_url: str
) -> None:
    clock = ManualClock()
    store = await open_store(store_url, clock=clock)
    chat = await _run(store, clock, purpose="live")
    untagged_chat = await _run(store, clock)
    gate_eval = await _run(store, clock, kind="gate_reply", status="", purpose="test")
    triage_eval = await _run(store, clock, kind="risk_triage", purpose="calibration")
    review = await _run(store, clock, kind="review", status="")
    live_triage = await _run(store, clock, kind="risk_triage", purpose="live")
    # Guard mode and /v1/check are chat the gateway served too (they were "other").
    guard = await _run(store, clock, kind="guard_message", purpose="live")
    check = await _run(store, clock, kind="draft_check", purpose="live")

    async def ids(purpose: str) -> list[str]:
        return [r.trace_id for r in await store.traces.list_runs(RunFilter(purpose=purpose))]

    assert await ids("chat") == [check, guard, untagged_chat, chat]
    assert await ids("eval") == [triage_eval, gate_eval]
    assert await ids("other") == [live_triage, review]
    listed = {r.trace_id: r.as_json()["purpose"] for r in await store.traces.list_runs()}
    assert listed[chat] == "chat" and listed[gate_eval] == "eval" and listed[review] == "other"
    with pytest.raises(UsageError, match="purpose"):
        await store.traces.list_runs(RunFilter(purpose="live"))


async def test_ids_with_a_prefix_are_found_in_order(open_store: OpenStore, store_url: str) -> None:
    clock = ManualClock()
    store = await open_store(store_url, clock=clock)
    first = await _run(store, clock)
    second = await _run(store, clock)
    common = len(os.path.commonprefix([first, second]))

    assert await store.traces.ids_with_prefix(first[:common]) == [first, second]
    assert await store.traces.ids_with_prefix(first[:common], limit=1) == [first]
    assert await store.traces.ids_with_prefix(second[: common + 1]) == [second]
    assert await store.traces.ids_with_prefix(first) == [first]
    assert await store.traces.ids_with_prefix("f" * 32) == []
    for bad in ("", "ABC", "x1", "0" * 33):
        with pytest.raises(UsageError):
            await store.traces.ids_with_prefix(bad)


async def test_each_run_is_listed_under_its_tenant_and_a_tenant_narrows_a_shared_conversation(
    open_store: OpenStore, store_url: str
) -> None:
    clock = ManualClock()
    store = await open_store(store_url, clock=clock)

    async def start(tenant: str | None, conversation: str = "shared") -> str:
        meta = None if tenant is None else {"tenant": tenant, "purpose": "live"}
        trace_id = await store.traces.start_run(
            "support_message", conversation_id=conversation, meta=meta
        )
        clock.advance(minutes=1)
        return trace_id

    a = await start("key:a")
    b = await start("key:b")
    local = await start(None)
    a_other = await start("key:a", "other")
    # A reserved run's header is written by its first write, with its tenant.
    reserved = store.traces.reserve_run(
        "support_message", conversation_id="shared", meta={"tenant": "key:b"}
    )
    await store.traces.append_many(reserved, [], outcome="released", reason="approved")

    async def listed(**where: str) -> list[tuple[str, str]]:
        runs = await store.traces.list_runs(RunFilter(**where))  # type: ignore[arg-type]
        return [(r.trace_id, r.tenant) for r in runs]

    assert await listed(conversation_id="shared") == [
        (reserved, "key:b"),
        (local, "local"),
        (b, "key:b"),
        (a, "key:a"),
    ]
    assert await listed(tenant="key:a") == [(a_other, "key:a"), (a, "key:a")]
    assert await listed(tenant="key:a", conversation_id="shared") == [(a, "key:a")]
    assert await listed(tenant="key:b", conversation_id="shared") == [
        (reserved, "key:b"),
        (b, "key:b"),
    ]
    assert await listed(tenant="local") == [(local, "local")]
    assert await listed(tenant="key:c") == []
    [summary] = await store.traces.list_runs(RunFilter(tenant="local"))
    assert summary.as_json()["tenant"] == "local"


@pytest.mark.parametrize("tenant", ["", "k" * 129])
async def test_a_tenant_filter_that_names_no_tenant_is_refused(
    open_store: OpenStore, sqlite_url: str, tenant: str
) -> None:
    store = await open_store(sqlite_url)
    with pytest.raises(UsageError, match="tenant"):
        await store.traces.list_runs(RunFilter(tenant=tenant))


@pytest.mark.parametrize("tenant", ["", "k" * 129, 7, None])
async def test_a_run_whose_meta_names_no_tenant_is_refused_before_it_is_written(
    open_store: OpenStore, sqlite_url: str, tenant: object
) -> None:
    store = await open_store(sqlite_url)
    with pytest.raises(UsageError, match="tenant"):
        await store.traces.start_run("support_message", meta={"tenant": tenant})
    with pytest.raises(UsageError, match="tenant"):
        store.traces.reserve_run("support_message", meta={"tenant": tenant})
    assert await store.traces.list_runs() == []
