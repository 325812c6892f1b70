"""Group commit: concurrent runs' records share one transaction, each durable before it returns.

Counted, never timed: the rounds and writes of :attr:`Store.group_commits` say how the
writes were grouped. Concurrent writes are started with ``asyncio.gather``, whose tasks
each queue their write before the drain task that takes them gets its first turn.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.core.errors import StoreError
from foureyes.core.trace import EventKind, TraceEvent
from foureyes.store import GroupCommits, Store
from tests.store._support import OpenStore

AT = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)


def decision(n: int) -> TraceEvent:
    return TraceEvent(EventKind.DECISION, "gate", {"reply": n}, AT)


def reserve(store: Store, n: int) -> str:
    return store.traces.reserve_run("support_message", conversation_id=f"c{n}", input_text="hi")


def since(before: GroupCommits, store: Store) -> tuple[int, int]:
    after = store.group_commits
    return after.rounds - before.rounds, after.writes - before.writes


async def finish(store: Store, trace_id: str, n: int) -> None:
    await store.traces.append_many(trace_id, [decision(n)], outcome="released")


async def finish_all(store: Store, ids: list[str], *, first: int = 0) -> list[object]:
    """Finish every run at once (run ``n`` with decision ``first + n``); each one's result."""
    return await asyncio.gather(
        *(finish(store, trace_id, first + n) for n, trace_id in enumerate(ids)),
        return_exceptions=True,
    )


async def test_concurrent_records_share_one_commit_and_each_is_durable(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    ids = [reserve(store, n) for n in range(20)]
    before = store.group_commits

    assert await finish_all(store, ids) == [None] * len(ids)

    assert since(before, store) == (1, 20)
    for n, trace_id in enumerate(ids):
        record = await store.traces.get(trace_id)
        assert record is not None and record.run.outcome == "released"
        assert [e.data for e in record.events] == [{"reply": n}]


async def test_a_write_alone_is_a_round_of_its_own(open_store: OpenStore, store_url: str) -> None:
    store = await open_store(store_url)
    before = store.group_commits
    for n in range(3):
        await finish(store, reserve(store, n), n)
    assert since(before, store) == (3, 3)


async def test_without_group_commit_each_write_has_its_own_transaction(
    open_store: OpenStore, store_url: str
) -> None:
    store = await Store.open(StoreConfig(url=store_url, group_commit=False), PrivacyConfig(), {})
    try:
        ids = [reserve(store, n) for n in range(8)]
        assert await finish_all(store, ids) == [None] * len(ids)
        assert store.group_commits == GroupCommits(rounds=0, writes=0)
        assert all([await store.traces.get(trace_id) for trace_id in ids])
    finally:
        await store.close()


async def test_a_refused_write_is_rolled_back_alone(open_store: OpenStore, store_url: str) -> None:
    store = await open_store(store_url)
    ids = [reserve(store, n) for n in range(5)]
    await finish(store, ids[2], 2)  # finished: the group's write to it is refused
    before = store.group_commits

    results = await finish_all(store, ids, first=10)

    assert since(before, store) == (1, 5)
    assert isinstance(results[2], StoreError) and "finished" in str(results[2])
    assert [r for n, r in enumerate(results) if n != 2] == [None] * 4
    for n, trace_id in enumerate(ids):
        record = await store.traces.get(trace_id)
        assert record is not None
        expected = [{"reply": 2}] if n == 2 else [{"reply": 10 + n}]
        assert [e.data for e in record.events] == expected


async def test_a_round_whose_transaction_fails_fails_every_write_in_it(
    open_store: OpenStore, sqlite_path: Path
) -> None:
    store = await open_store(f"sqlite+aiosqlite:///{sqlite_path}", timeout_s=0.1)
    ids = [reserve(store, n) for n in range(4)]
    other = sqlite3.connect(sqlite_path, timeout=1, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        results = await finish_all(store, ids)
        other.execute("ROLLBACK")
    finally:
        other.close()

    assert all(isinstance(r, StoreError) for r in results), results
    for trace_id in ids:
        assert await store.traces.get(trace_id) is None  # nothing of the round
    # Still reserved, so a later write records each run whole.
    assert await finish_all(store, ids) == [None] * len(ids)
    assert all([await store.traces.get(trace_id) for trace_id in ids])


async def test_a_caller_cancelled_before_its_round_writes_nothing(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    ids = [reserve(store, n) for n in range(3)]
    before = store.group_commits
    tasks = [asyncio.create_task(finish(store, trace_id, n)) for n, trace_id in enumerate(ids)]
    await asyncio.sleep(0)  # every task queued its write; the drain has not run yet
    tasks[1].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)

    assert isinstance(results[1], asyncio.CancelledError)
    assert since(before, store) == (1, 2)
    assert await store.traces.get(ids[1]) is None
    assert all([await store.traces.get(ids[0]), await store.traces.get(ids[2])])


async def test_closing_waits_for_the_queued_writes(open_store: OpenStore, store_url: str) -> None:
    store = await Store.open(StoreConfig(url=store_url), PrivacyConfig(), {})
    ids = [reserve(store, n) for n in range(6)]
    writes = [asyncio.create_task(finish(store, trace_id, n)) for n, trace_id in enumerate(ids)]
    await asyncio.sleep(0)
    await store.close()
    await asyncio.gather(*writes)

    reopened = await open_store(store_url)
    for trace_id in ids:
        record = await reopened.traces.get(trace_id)
        assert record is not None and record.run.outcome == "released"


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(refused=st.lists(st.booleans(), min_size=1, max_size=12))
def test_every_write_of_a_group_ends_as_it_would_alone(
    sqlite_path: Path, refused: list[bool]
) -> None:
    # Property: whatever mix of accepted and refused writes a group holds, each caller gets
    # what its write alone would have given, and the store holds exactly the accepted ones.
    async def scenario() -> None:
        store = await Store.open(
            StoreConfig(url=f"sqlite+aiosqlite:///{sqlite_path}"), PrivacyConfig(), {}
        )
        try:
            ids = [reserve(store, n) for n in range(len(refused))]
            for trace_id, no in zip(ids, refused, strict=True):
                if no:
                    await finish(store, trace_id, -1)
            results = await finish_all(store, ids)
            for n, (trace_id, no) in enumerate(zip(ids, refused, strict=True)):
                record = await store.traces.get(trace_id)
                assert record is not None
                if no:
                    assert isinstance(results[n], StoreError)
                    assert [e.data for e in record.events] == [{"reply": -1}]
                else:
                    assert results[n] is None
                    assert [e.data for e in record.events] == [{"reply": n}]
        finally:
            await store.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("size", [64, 65, 130])
async def test_a_round_takes_at_most_64_writes(
    open_store: OpenStore, sqlite_url: str, size: int
) -> None:
    store = await open_store(sqlite_url)
    ids = [reserve(store, n) for n in range(size)]
    before = store.group_commits
    assert await finish_all(store, ids) == [None] * len(ids)
    assert since(before, store) == (-(-size // 64), size)


async def test_a_round_takes_savepoints_only_when_a_write_is_refused(
    open_store: OpenStore, sqlite_url: str, statements: list[str]
) -> None:
    store = await open_store(sqlite_url)
    ids = [reserve(store, n) for n in range(5)]
    statements.clear()
    assert await finish_all(store, ids) == [None] * 5
    assert not [s for s in statements if "SAVEPOINT" in s]

    # A write refused (its run is finished already) reruns its round with a savepoint each.
    again = [reserve(store, n) for n in range(3)]
    await finish(store, again[1], -1)
    statements.clear()
    results = await finish_all(store, again)
    assert results[0] is None and results[2] is None and isinstance(results[1], StoreError)
    assert len([s for s in statements if s.startswith("SAVEPOINT")]) == 3
