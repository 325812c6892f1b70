from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import math
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from foureyes.config import PrivacyConfig
from foureyes.core.digest import text_fingerprint
from foureyes.core.errors import ConfigError, StoreError, UsageError
from foureyes.core.trace import EventKind, PrivateText, TraceEvent, TraceWriter
from foureyes.store import SqlTraceWriter, Store, new_trace_id
from tests.helpers.clock import ManualClock
from tests.store._support import OpenStore

MESSAGE = "I have not slept in three days and nobody answers — 我很累"


def _event(kind: EventKind, stage: str, **data: object) -> TraceEvent:
    return TraceEvent(kind=kind, stage=stage, data=data)


def _db_bytes(path: Path) -> bytes:
    # The WAL holds recent writes until a checkpoint, so both files are searched.
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


async def test_run_and_events_round_trip(open_store: OpenStore, store_url: str) -> None:
    store = await open_store(store_url)
    writer: TraceWriter = store.traces
    trace_id = await writer.start_run(
        "support_message", conversation_id="conv-1", meta={"route": "flash", "n": 1}
    )
    events = [
        _event(EventKind.PROPOSAL, "draft", sha256="a" * 64, tokens=[1, 2]),
        _event(EventKind.VERDICT, "review", decision="approve", nested={"x": None}),
        _event(EventKind.DECISION, "gate", reason="approved"),
    ]
    for event in events:
        await writer.append(trace_id, event)
    await writer.finish_run(trace_id, outcome="released", reason="approved")

    record = await writer.get(trace_id)

    assert record is not None
    assert record.events == tuple(events)
    run = record.run
    assert (run.trace_id, run.kind, run.conversation_id) == (trace_id, "support_message", "conv-1")
    assert (run.outcome, run.reason, run.meta) == (
        "released",
        "approved",
        {"route": "flash", "n": 1},
    )
    assert run.started_at.tzinfo is dt.UTC and run.finished_at is not None
    assert run.started_at <= run.finished_at
    assert run.input_fingerprint is None and run.input_text is None


async def test_unknown_trace_reads_as_none(open_store: OpenStore, sqlite_url: str) -> None:
    store = await open_store(sqlite_url)
    assert await store.traces.get("0" * 32) is None


async def test_event_times_keep_their_instant_in_utc(
    open_store: OpenStore, sqlite_url: str
) -> None:
    store = await open_store(sqlite_url)
    trace_id = await store.traces.start_run("t")
    taipei = dt.timezone(dt.timedelta(hours=8))
    at = dt.datetime(2026, 1, 1, 7, 30, 0, 123456, tzinfo=taipei)
    await store.traces.append(trace_id, TraceEvent(EventKind.RISK, "l0", {}, at=at))

    record = await store.traces.get(trace_id)

    assert record is not None
    assert record.events[0].at == at
    assert record.events[0].at.tzinfo is dt.UTC


async def test_raw_text_is_absent_by_default_and_the_fingerprint_stable_across_reopen(
    open_store: OpenStore, sqlite_url: str, sqlite_path: Path
) -> None:
    store = await open_store(sqlite_url)
    trace_id = await store.traces.start_run("support_message", input_text=MESSAGE)
    first = await store.traces.get(trace_id)
    await store.close()

    reopened = await open_store(sqlite_url)
    again = await reopened.traces.get(trace_id)

    assert first is not None and again is not None
    assert first.run.input_text is None
    assert first.run.input_fingerprint == again.run.input_fingerprint
    assert again.run.input_fingerprint == reopened.traces.fingerprint(MESSAGE)
    assert MESSAGE.encode() not in _db_bytes(sqlite_path)
    assert "nobody answers".encode() not in _db_bytes(sqlite_path)


async def test_fingerprint_uses_the_key_from_the_configured_variable(
    open_store: OpenStore, sqlite_url: str
) -> None:
    privacy = PrivacyConfig(hmac_key_env="TRACE_KEY")
    store = await open_store(sqlite_url, privacy=privacy, environ={"TRACE_KEY": "k3y"})
    trace_id = await store.traces.start_run("support_message", input_text=MESSAGE)

    record = await store.traces.get(trace_id)

    assert record is not None
    assert record.run.input_fingerprint == text_fingerprint(MESSAGE, b"k3y")


async def test_a_configured_key_variable_that_is_unset_is_a_config_error(
    open_store: OpenStore, sqlite_url: str, sqlite_path: Path
) -> None:
    with pytest.raises(ConfigError, match="TRACE_KEY"):
        await open_store(sqlite_url, privacy=PrivacyConfig(hmac_key_env="TRACE_KEY"))
    assert not sqlite_path.exists()


async def test_stores_have_different_generated_keys(open_store: OpenStore, tmp_path: Path) -> None:
    one = await open_store(f"sqlite+aiosqlite:///{tmp_path / 'one.db'}")
    two = await open_store(f"sqlite+aiosqlite:///{tmp_path / 'two.db'}")
    assert one.traces.fingerprint(MESSAGE) != two.traces.fingerprint(MESSAGE)


async def test_raw_text_is_kept_when_configured_until_it_expires(
    open_store: OpenStore, sqlite_url: str, sqlite_path: Path, clock: ManualClock
) -> None:
    privacy = PrivacyConfig(store_raw_text=True, retention_days=7)
    store = await open_store(sqlite_url, privacy=privacy, clock=clock)
    trace_id = await store.traces.start_run("support_message", input_text=MESSAGE)
    kept = await store.traces.get(trace_id)

    clock.advance(days=7)
    expired = await store.traces.get(trace_id)

    assert kept is not None and expired is not None
    assert kept.run.input_text == MESSAGE
    assert kept.run.input_fingerprint == store.traces.fingerprint(MESSAGE)
    # Expired text is hidden on read even before a purge has run.
    assert expired.run.input_text is None
    assert expired.run.input_fingerprint == kept.run.input_fingerprint


async def test_purge_expired_erases_only_expired_raw_text(
    open_store: OpenStore, sqlite_url: str, sqlite_path: Path, clock: ManualClock
) -> None:
    privacy = PrivacyConfig(store_raw_text=True, retention_days=1)
    store = await open_store(sqlite_url, privacy=privacy, clock=clock)
    old = await store.traces.start_run("support_message", input_text=MESSAGE)
    clock.advance(hours=12)
    recent = await store.traces.start_run("support_message", input_text="still fresh")

    purged = await store.traces.purge_expired(clock.now + dt.timedelta(hours=13))
    again = await store.traces.purge_expired(clock.now + dt.timedelta(hours=13))

    assert (purged.inputs, purged.total, again.total) == (1, 1, 0)
    with sqlite3.connect(sqlite_path) as conn:
        rows = dict(conn.execute("SELECT trace_id, input_text FROM trace_runs").fetchall())
    conn.close()
    assert rows == {old: None, recent: "still fresh"}
    record = await store.traces.get(old)
    assert record is not None and record.run.input_fingerprint == store.traces.fingerprint(MESSAGE)


NOTE = "she said she kept the pills from last spring"


async def _rows(url: str, query: str) -> list[tuple[object, ...]]:
    """What the database itself holds, read past the store."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return [tuple(row) for row in (await conn.execute(text(query))).all()]
    finally:
        await engine.dispose()


async def _run_with_model_text(store: Store, conversation: str) -> str:
    """A run with raw input, a decision event holding private text, and an open unknown."""
    trace_id = await store.traces.start_run(
        "gate_reply", conversation_id=conversation, input_text=MESSAGE
    )
    data = {"missing": [PrivateText(NOTE)], "violations": [{"note": PrivateText(NOTE)}], "n": 1}
    await store.traces.append(trace_id, _event(EventKind.DECISION, "gate", **data))
    await store.unknowns.add(conversation, [NOTE], trace_id=trace_id)
    return trace_id


async def test_model_written_text_follows_retention_and_the_purge_erases_it(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    privacy = PrivacyConfig(store_raw_text=True, retention_days=1)
    store = await open_store(store_url, privacy=privacy, clock=clock)
    trace_id = await _run_with_model_text(store, "c1")

    record = await store.traces.get(trace_id)
    assert record is not None
    assert record.events[0].data == {"missing": [NOTE], "violations": [{"note": NOTE}], "n": 1}
    assert [u.text for u in await store.unknowns.open("c1", limit=5)] == [NOTE]

    clock.advance(days=1)
    # Past its retention the text reads as None before any purge ...
    record = await store.traces.get(trace_id)
    assert record is not None
    assert record.events[0].data == {"missing": [None], "violations": [{"note": None}], "n": 1}
    assert [u.text for u in await store.unknowns.open("c1", limit=5)] == [None]
    assert len(await _rows(store_url, "SELECT text FROM trace_texts")) == 1

    # ... and the purge erases it from the database; the unknown stays open by its HMAC.
    purged = await store.traces.purge_expired()
    again = await store.traces.purge_expired()

    assert (purged.inputs, purged.texts, purged.unknowns, again.total) == (1, 1, 1, 0)
    assert await _rows(store_url, "SELECT text FROM trace_texts") == []
    assert await _rows(store_url, "SELECT input_text FROM trace_runs") == [(None,)]
    assert await _rows(store_url, "SELECT text, resolved_at FROM gate_open_unknowns") == [
        (None, None)
    ]
    await store.unknowns.add("c1", [NOTE.upper()], trace_id=trace_id)
    assert len(await store.unknowns.entries("c1", include_resolved=True)) == 1


async def test_without_raw_text_model_written_text_is_never_stored(
    open_store: OpenStore, sqlite_url: str, sqlite_path: Path
) -> None:
    store = await open_store(sqlite_url)
    trace_id = await _run_with_model_text(store, "c1")

    record = await store.traces.get(trace_id)
    assert record is not None
    assert record.events[0].data == {"missing": [None], "violations": [{"note": None}], "n": 1}
    assert [u.text for u in await store.unknowns.open("c1", limit=5)] == [None]
    await store.close()
    assert NOTE.encode() not in _db_bytes(sqlite_path)
    # In its place the event holds the text's HMAC, as it holds the input's.
    assert store.traces.fingerprint(NOTE).encode() in _db_bytes(sqlite_path)


async def test_purges_run_in_bounded_batches_and_two_stores_count_each_row_once(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    privacy = PrivacyConfig(store_raw_text=True, retention_days=1)
    first = await open_store(store_url, privacy=privacy, clock=clock)
    second = await open_store(store_url, privacy=privacy, clock=clock)
    for n in range(10):
        await _run_with_model_text(first, f"c{n}")
    later = clock.now + dt.timedelta(days=1)

    alone = await first.traces.purge_expired(later - dt.timedelta(hours=1), batch_size=4)
    both = await asyncio.gather(
        first.traces.purge_expired(later, batch_size=4),
        second.traces.purge_expired(later, batch_size=4),
    )

    assert alone.total == 0
    assert sum(c.inputs for c in both) == sum(c.texts for c in both) == 10
    assert sum(c.unknowns for c in both) == 10
    # 4 + 4 + 2 rows of each kind: no transaction erased more than a batch.
    assert all(c.batches >= 1 for c in both) and sum(c.batches for c in both) >= 3
    assert await _rows(store_url, "SELECT text FROM trace_texts") == []
    assert await _rows(
        store_url, "SELECT count(*) FROM gate_open_unknowns WHERE text IS NOT NULL"
    ) == [(0,)]
    with pytest.raises(UsageError):
        await first.traces.purge_expired(batch_size=0)


async def test_purge_refuses_a_naive_time(open_store: OpenStore, sqlite_url: str) -> None:
    store = await open_store(sqlite_url)
    with pytest.raises(UsageError):
        await store.traces.purge_expired(dt.datetime(2026, 1, 1))  # noqa: DTZ001


def test_the_writer_has_no_method_to_edit_or_delete() -> None:
    public = {
        name
        for name, member in inspect.getmembers(SqlTraceWriter)
        if not name.startswith("_") and callable(member)
    }
    # reserve_run and abandon_reserved touch only a run not written yet (in memory).
    assert public == {
        "abandon_reserved",
        "append",
        "append_many",
        "finish_run",
        "fingerprint",
        "get",
        "ids_with_prefix",
        "list_runs",
        "purge_expired",
        "reserve_run",
        "start_run",
    }


async def test_appending_to_an_unknown_run_is_a_store_error(
    open_store: OpenStore, sqlite_url: str
) -> None:
    store = await open_store(sqlite_url)
    with pytest.raises(StoreError, match="unknown") as caught:
        await store.traces.append("f" * 32, _event(EventKind.ERROR, "gate"))
    assert caught.value.operation == "append"


async def test_a_finished_run_takes_no_more_events_and_cannot_finish_again(
    open_store: OpenStore, sqlite_url: str
) -> None:
    store = await open_store(sqlite_url)
    trace_id = await store.traces.start_run("review")
    await store.traces.append(trace_id, _event(EventKind.DECISION, "publish", status="update"))
    await store.traces.finish_run(trace_id, outcome="published", reason=None)

    with pytest.raises(StoreError, match="finished"):
        await store.traces.append(trace_id, _event(EventKind.DELIVERY, "publish"))
    with pytest.raises(StoreError, match="finished") as caught:
        await store.traces.finish_run(trace_id, outcome="other", reason=None)
    with pytest.raises(StoreError, match="unknown"):
        await store.traces.finish_run("e" * 32, outcome="x", reason=None)

    record = await store.traces.get(trace_id)
    assert caught.value.operation == "finish_run"
    assert record is not None and len(record.events) == 1
    assert record.run.outcome == "published"


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        (TraceEvent(EventKind.RULES, "gate", {"x": object()}), "JSON"),
        (TraceEvent(EventKind.RULES, "gate", {"x": math.nan}), "JSON"),
        (TraceEvent("not_a_kind", "gate", {}), "kind"),  # type: ignore[arg-type]
        (TraceEvent(EventKind.RULES, "gate", {}, at=dt.datetime(2026, 1, 1)), "naive"),  # noqa: DTZ001
    ],
)
async def test_bad_events_are_refused_before_anything_is_written(
    open_store: OpenStore, sqlite_url: str, event: TraceEvent, problem: str
) -> None:
    store = await open_store(sqlite_url)
    trace_id = await store.traces.start_run("t")

    with pytest.raises(UsageError, match=problem):
        await store.traces.append(trace_id, event)
    await store.traces.append(trace_id, _event(EventKind.RULES, "gate"))

    record = await store.traces.get(trace_id)
    assert record is not None and len(record.events) == 1


async def test_meta_must_be_json(open_store: OpenStore, sqlite_url: str) -> None:
    store = await open_store(sqlite_url)
    with pytest.raises(UsageError, match="meta"):
        await store.traces.start_run("t", meta={"when": dt.date(2026, 1, 1)})


async def test_concurrent_appends_to_one_run_get_consecutive_numbers(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    trace_id = await store.traces.start_run("t")

    await asyncio.gather(
        *(store.traces.append(trace_id, _event(EventKind.RULES, "r", i=i)) for i in range(30))
    )

    record = await store.traces.get(trace_id)
    assert record is not None
    assert sorted(e.data["i"] for e in record.events) == list(range(30))


async def test_a_failed_append_leaves_nothing_half_written(
    open_store: OpenStore, sqlite_url: str, sqlite_path: Path
) -> None:
    store = await open_store(sqlite_url)
    trace_id = await store.traces.start_run("t")
    # A trigger makes the event insert fail after the run's sequence number was taken.
    with sqlite3.connect(sqlite_path) as conn:
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON trace_events "
            "BEGIN SELECT RAISE(ABORT, 'refused by test'); END"
        )
    conn.close()

    with pytest.raises(StoreError, match="refused by test"):
        await store.traces.append(trace_id, _event(EventKind.RULES, "gate"))

    with sqlite3.connect(sqlite_path) as conn:
        conn.execute("DROP TRIGGER refuse")
        last_seq = conn.execute("SELECT last_seq FROM trace_runs").fetchone()[0]
    conn.close()
    await store.traces.append(trace_id, _event(EventKind.RULES, "gate"))
    record = await store.traces.get(trace_id)
    assert last_seq == 0
    assert record is not None and len(record.events) == 1


def test_trace_ids_sort_by_start_time() -> None:
    start = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)
    ids = [
        new_trace_id(start + dt.timedelta(milliseconds=ms)) for ms in (0, 1, 2, 1000, 86_400_000)
    ]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


async def test_recent_events_are_the_conversations_latest_finished_runs_newest_first(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    writer = store.traces
    ids = []
    for n, (tenant, conversation) in enumerate(
        [("local", "c"), ("local", "c"), ("key:k1", "c"), ("local", "other"), ("local", "c")]
    ):
        trace_id = await writer.start_run(
            "guard_message", conversation_id=conversation, meta={"tenant": tenant}
        )
        await writer.append(trace_id, _event(EventKind.INPUT, "input", n=n))
        await writer.append(trace_id, _event(EventKind.DECISION, "gate", n=n))
        await writer.finish_run(trace_id, outcome="released", reason="approved")
        ids.append(trace_id)
    unfinished = await writer.start_run("guard_message", conversation_id="c")
    await writer.append(unfinished, _event(EventKind.INPUT, "input", n=99))

    recent = await writer.recent_events("local", "c", EventKind.INPUT, runs=2)

    # Only that tenant's conversation, only finished runs, only input events, newest first.
    assert recent == [(ids[4], {"n": 4}), (ids[1], {"n": 1})]
    assert await writer.recent_events("key:k1", "c", EventKind.INPUT, runs=5) == [
        (ids[2], {"n": 2})
    ]
    with pytest.raises(UsageError):
        await writer.recent_events("local", "c", EventKind.INPUT, runs=0)
