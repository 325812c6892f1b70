"""Reserved runs: the header written by the first write that names the run, in its transaction."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import Connection, select

from foureyes.config import PrivacyConfig
from foureyes.core.errors import StoreError, UsageError
from foureyes.core.trace import EventKind, TraceEvent
from foureyes.store import Store
from foureyes.store._database import Database
from foureyes.store._pending import PendingRuns
from foureyes.store.tables import metadata, trace_runs
from tests.store._support import OpenStore, without_a_turn
from tests.store.test_assessments import row

AT = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)


def event(stage: str) -> TraceEvent:
    return TraceEvent(EventKind.RISK, stage, {"stage": stage}, AT)


async def append_while_locked(store: Store, sqlite_path: Path, trace_id: str) -> None:
    """Append event "a" while another process holds the write lock: the append fails."""
    other = sqlite3.connect(sqlite_path, timeout=1, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreError):
            await store.traces.append(trace_id, event("a"))
        other.execute("ROLLBACK")
    finally:
        other.close()


async def reserved(store: Store) -> str:
    trace_id = store.traces.reserve_run(
        "support_message", conversation_id="c1", input_text="hello", meta={"purpose": "live"}
    )
    assert await store.traces.get(trace_id) is None  # nothing written yet
    return trace_id


def header_updates(statements: list[str]) -> list[str]:
    return [s for s in statements if s.lstrip().upper().startswith("UPDATE TRACE_RUNS")]


async def test_the_first_append_writes_the_header_with_the_event(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    trace_id = await reserved(store)

    await store.traces.append(trace_id, event("a"))
    await store.traces.append(trace_id, event("b"))

    record = await store.traces.get(trace_id)
    assert record is not None and [e.stage for e in record.events] == ["a", "b"]
    assert record.run.kind == "support_message" and record.run.conversation_id == "c1"
    assert record.run.input_fingerprint == store.traces.fingerprint("hello")
    assert record.run.input_text is None and record.run.meta == {"purpose": "live"}
    assert record.run.finished_at is None
    assert store.traces.abandon_reserved(trace_id) is False  # written: no longer reserved


async def test_one_commit_writes_header_events_and_outcome(
    open_store: OpenStore, store_url: str, statements: list[str]
) -> None:
    store = await open_store(store_url)
    trace_id = await reserved(store)
    statements.clear()

    await store.traces.append_many(
        trace_id, [event("a"), event("b")], outcome="released", reason="approved"
    )

    # The header is inserted numbered and closed: no UPDATE of it in that transaction.
    assert header_updates(statements) == []
    record = await store.traces.get(trace_id)
    assert record is not None and [e.stage for e in record.events] == ["a", "b"]
    assert (record.run.outcome, record.run.reason) == ("released", "approved")
    with pytest.raises(StoreError, match="finished"):
        await store.traces.append(trace_id, event("late"))


async def test_the_first_append_numbers_the_header_and_later_ones_update_it(
    open_store: OpenStore, store_url: str, statements: list[str]
) -> None:
    store = await open_store(store_url)
    trace_id = await reserved(store)
    statements.clear()

    await store.traces.append_many(trace_id, [event("a"), event("b")])
    assert header_updates(statements) == []
    await store.traces.append_many(trace_id, [event("c")], outcome="released", reason=None)
    assert len(header_updates(statements)) == 1

    record = await store.traces.get(trace_id)
    # A header numbered wrongly would have the update take a seq already used.
    assert record is not None and [e.stage for e in record.events] == ["a", "b", "c"]
    assert record.run.outcome == "released"


async def test_a_header_written_meanwhile_is_numbered_by_the_update(
    open_store: OpenStore, sqlite_path: Path, sqlite_url: str
) -> None:
    # The header of a reserved run already in the table (as a concurrent write naming the
    # run leaves it on PostgreSQL): the insert is ignored, and the events are numbered
    # after the ones already there, by the update, not from 1.
    store = await open_store(sqlite_url)
    trace_id = await reserved(store)
    other = sqlite3.connect(sqlite_path, isolation_level=None)
    try:
        other.execute(
            "INSERT INTO trace_runs (trace_id, kind, started_at, last_seq, meta) "
            "VALUES (?, 'support_message', '2026-03-14 12:00:00.000000', 0, '{}')",
            (trace_id,),
        )
        other.execute(
            "INSERT INTO trace_events (trace_id, seq, kind, stage, at, data) "
            "VALUES (?, 1, 'risk', 'before', '2026-03-14 12:00:00.000000', '{}')",
            (trace_id,),
        )
        other.execute("UPDATE trace_runs SET last_seq = 1 WHERE trace_id = ?", (trace_id,))
    finally:
        other.close()

    await store.traces.append_many(trace_id, [event("a")], outcome="released", reason=None)

    record = await store.traces.get(trace_id)
    assert record is not None and [e.stage for e in record.events] == ["before", "a"]
    assert record.run.outcome == "released"
    with sqlite3.connect(sqlite_path) as check:
        seqs = check.execute(
            "SELECT seq FROM trace_events WHERE trace_id = ? ORDER BY seq", (trace_id,)
        ).fetchall()
        last = check.execute(
            "SELECT last_seq FROM trace_runs WHERE trace_id = ?", (trace_id,)
        ).fetchone()
    check.close()
    assert seqs == [(1,), (2,)] and last == (2,)


async def test_finishing_a_reserved_run_writes_it_closed(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    trace_id = await reserved(store)

    await store.traces.finish_run(trace_id, outcome="error", reason=None)

    record = await store.traces.get(trace_id)
    assert record is not None and record.events == () and record.run.outcome == "error"


async def test_an_assessment_of_a_reserved_run_writes_the_header_first(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    trace_id = await reserved(store)

    assessment_id = await store.assessments.record(row(trace_id=trace_id), text="hello")

    stored = await store.assessments.get(assessment_id)
    record = await store.traces.get(trace_id)
    assert stored is not None and stored.trace_id == trace_id
    assert record is not None and record.run.finished_at is None and record.events == ()
    # The run goes on as any written run: its events and outcome come later.
    await store.traces.append_many(trace_id, [event("a")], outcome="released", reason=None)
    finished = await store.traces.get(trace_id)
    assert finished is not None and finished.run.outcome == "released"


async def test_unknowns_raised_by_a_reserved_run_write_the_header_first(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    trace_id = await reserved(store)

    await store.unknowns.add("c1", ["which medication?"], trace_id=trace_id)

    [kept] = await store.unknowns.open("c1", limit=5)
    assert kept.raised_by == trace_id
    assert await store.traces.get(trace_id) is not None


async def test_an_abandoned_reservation_is_never_written(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    trace_id = await reserved(store)

    assert store.traces.abandon_reserved(trace_id) is True
    assert store.traces.abandon_reserved(trace_id) is False

    with pytest.raises(StoreError, match="unknown"):
        await store.traces.append(trace_id, event("a"))
    with pytest.raises(StoreError):  # the foreign key: no such run
        await store.assessments.record(row(trace_id=trace_id), text="hello")
    assert await store.traces.get(trace_id) is None


async def test_reserving_refuses_meta_that_is_not_json(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    with pytest.raises(UsageError):
        store.traces.reserve_run("x", meta={"bad": float("nan")})


async def test_a_failed_first_write_keeps_the_run_reserved(
    open_store: OpenStore, sqlite_path: Path, sqlite_url: str
) -> None:
    store = await open_store(sqlite_url, timeout_s=0.1)
    trace_id = store.traces.reserve_run("support_message", input_text="hello")
    await append_while_locked(store, sqlite_path, trace_id)

    # Rolled back with the event; the next write names the run and writes it after all.
    assert await store.traces.get(trace_id) is None
    await store.traces.append(trace_id, event("b"))
    record = await store.traces.get(trace_id)
    assert record is not None and [e.stage for e in record.events] == ["b"]


async def test_raw_text_of_a_reserved_run_follows_the_privacy_settings(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(
        store_url, privacy=PrivacyConfig(store_raw_text=True, retention_days=3)
    )
    trace_id = store.traces.reserve_run("x", input_text="kept for three days")
    await store.traces.finish_run(trace_id, outcome="ok", reason=None)

    record = await store.traces.get(trace_id)
    assert record is not None and record.run.input_text == "kept for three days"


async def test_a_held_assessment_is_written_by_the_runs_next_write(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    trace_id = await reserved(store)

    assessment_id = store.assessments.hold(row(trace_id=trace_id), text="hello")

    assert await store.assessments.get(assessment_id) is None  # held, not written
    await store.traces.append_many(trace_id, [event("a")], outcome="released", reason=None)
    stored = await store.assessments.get(assessment_id)
    assert stored is not None and stored.trace_id == trace_id
    assert stored.text_fingerprint == store.assessments.fingerprint("hello")
    # Written once: the run's next write carries nothing more.
    finished = await store.traces.get(trace_id)
    assert finished is not None and finished.run.outcome == "released"
    assert [a.id for a in await store.assessments.for_conversation("c1")] == [assessment_id]


async def test_a_held_assessment_of_a_dropped_run_is_never_written(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    trace_id = await reserved(store)
    assessment_id = store.assessments.hold(row(trace_id=trace_id), text="hello")

    assert store.traces.abandon_reserved(trace_id) is True

    other = store.traces.reserve_run("support_message", conversation_id="c1")
    await store.traces.finish_run(other, outcome="ok", reason=None)
    assert await store.assessments.get(assessment_id) is None
    assert await store.assessments.for_conversation("c1") == []


async def test_a_held_assessment_survives_a_failed_write_and_is_written_once(
    open_store: OpenStore, sqlite_path: Path, sqlite_url: str
) -> None:
    store = await open_store(sqlite_url, timeout_s=0.1)
    trace_id = store.traces.reserve_run("support_message", conversation_id="c1")
    assessment_id = store.assessments.hold(row(trace_id=trace_id), text="hello")
    await append_while_locked(store, sqlite_path, trace_id)

    assert await store.assessments.get(assessment_id) is None
    await store.traces.append(trace_id, event("b"))
    await store.traces.append(trace_id, event("c"))
    assert [a.id for a in await store.assessments.for_conversation("c1")] == [assessment_id]


async def test_holding_an_assessment_needs_a_run(open_store: OpenStore, store_url: str) -> None:
    store = await open_store(store_url)
    with pytest.raises(UsageError, match="trace_id"):
        store.assessments.hold(row(trace_id=None), text="hello")


async def test_only_the_one_run_in_flight_commits_alone(sqlite_url: str) -> None:
    # The reserved runs are the replies in flight: a run's write is alone (on SQLite,
    # committed at once, without waiting for the commit point of the loop's next turn
    # that concurrent writes share) only while no other run is reserved.
    db = Database.create(sqlite_url, timeout_s=1)
    await db.probe("open")

    def work(conn: Connection) -> str:
        return str(conn.execute(select(trace_runs.c.trace_id)).scalars().all())

    try:
        await db.run_write("create", lambda conn: metadata.create_all(conn))
        pending = PendingRuns(db)
        for trace_id in ("first", "second"):
            pending.reserve(
                {"trace_id": trace_id, "kind": "k", "started_at": AT, "last_seq": 0, "meta": {}}
            )
        results = [
            await without_a_turn(pending.run("first", "first", work)),
            await without_a_turn(pending.run("second", "second", work)),
            # Written: no longer reserved, and no other run is; still not alone.
            await without_a_turn(pending.run("again", "second", work)),
        ]
    finally:
        await db.dispose()
    assert results == [
        ("['first']", False),
        ("['first', 'second']", True),
        ("['first', 'second']", False),
    ]
