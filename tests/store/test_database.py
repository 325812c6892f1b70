"""The engine's settings and pools: durable commits, no transaction left open, dead connections."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import Connection, text

from foureyes.config import PrivacyConfig
from foureyes.core.errors import StoreDataError, StoreError, UsageError
from foureyes.store._database import Database
from tests.helpers.postgres import free_port
from tests.store._support import OpenStore, begin_and_end, cancel_under_way


async def test_sqlite_commits_sync_the_log_every_time(sqlite_url: str) -> None:
    # Invariant 10: a committed decision record must survive a power loss, not just a
    # crash of the process; synchronous=FULL (2) syncs the WAL on every commit.
    db = Database.create(sqlite_url, timeout_s=1.0)
    try:
        await db.probe("open")
        async with db.read("pragma") as conn:
            level = (await conn.exec_driver_sql("PRAGMA synchronous")).scalar()
    finally:
        await db.dispose()
    assert level == 2


async def test_a_connection_returned_inside_a_transaction_is_rolled_back(
    sqlite_url: str, sqlite_path: Path
) -> None:
    db = Database.create(sqlite_url, timeout_s=1.0)
    try:
        await db.probe("open")
        async with db.write("ddl") as conn:
            await conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
        async with db.read("raw") as conn:
            raw = await conn.get_raw_connection()
            driver = raw.driver_connection
            assert driver is not None
            # A transaction SQLAlchemy does not know about (as an interrupted block
            # could leave): it holds the write lock and an uncommitted row.
            await driver.commit()
            await driver.execute("BEGIN IMMEDIATE")
            await driver.execute("INSERT INTO t VALUES (1)")
        other = sqlite3.connect(sqlite_path, timeout=0.5, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # the lock was released on return to the pool
            other.execute("ROLLBACK")
            assert other.execute("SELECT count(*) FROM t").fetchone() == (0,)
        finally:
            other.close()
        async with db.write("after") as conn:  # the pooled connection is usable again
            await conn.exec_driver_sql("INSERT INTO t VALUES (2)")
            count = (await conn.exec_driver_sql("SELECT count(*) FROM t")).scalar()
        assert count == 1
    finally:
        await db.dispose()


@pytest.mark.parametrize(
    ("value", "postgres_only"), [("a\ud83db", False), ("a\x00b", True)], ids=["surrogate", "nul"]
)
async def test_text_the_database_cannot_hold_is_bad_data_not_a_store_outage(
    store_url: str, open_store: OpenStore, value: str, postgres_only: bool
) -> None:
    # A NUL (PostgreSQL only; SQLite keeps it) or an unpaired surrogate (no driver can
    # encode it) would be refused again on every retry: it must not read as "retry later".
    store = await open_store(store_url, privacy=PrivacyConfig(store_raw_text=True))
    if postgres_only and store.dialect == "sqlite":
        await store.traces.start_run("probe", conversation_id=value)
        return
    with pytest.raises(StoreDataError) as raised:
        await store.traces.start_run("probe", conversation_id=value)
    assert raised.value.operation == "start_run"
    assert value not in raised.value.detail  # the driver's message quotes the value
    # The store is still fine for the next request.
    assert await store.traces.start_run("probe", conversation_id="ok")


async def _backend_pid(db: Database) -> int:
    async with db.read("pid") as conn:
        return int((await conn.exec_driver_sql("SELECT pg_backend_pid()")).scalar_one())


async def _elsewhere(url: str, query: str, *args: object) -> Any:
    """``query``'s value, read on a connection of its own, outside the store's pool."""
    other = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        return await other.fetchval(query, *args)
    finally:
        await other.close()


async def _terminate(url: str, pid: int) -> None:
    # Waits (up to 5 s) until the backend is gone.
    assert await _elsewhere(url, "SELECT pg_terminate_backend($1, 5000)", pid)


@pytest.mark.postgres
async def test_an_idle_connection_the_server_dropped_is_replaced_before_use(
    postgres_url: str,
) -> None:
    # Idle for at least the threshold (here 0 s): pinged at checkout, and a dead one
    # replaced, so the caller never sees it.
    db = Database.create(postgres_url, timeout_s=5.0, ping_after_idle_s=0.0)
    try:
        first = await _backend_pid(db)
        await _terminate(postgres_url, first)
        second = await _backend_pid(db)
    finally:
        await db.dispose()
    assert second != first


@pytest.mark.postgres
async def test_a_connection_in_steady_use_is_not_pinged(postgres_url: str) -> None:
    # Used again well within the threshold: no ping, so a connection the server dropped
    # meanwhile fails that one transaction (typed, fail closed), and the pool then
    # connects anew.
    db = Database.create(postgres_url, timeout_s=5.0, ping_after_idle_s=3600.0)
    try:
        first = await _backend_pid(db)
        await _terminate(postgres_url, first)
        with pytest.raises(StoreError):
            await _backend_pid(db)
        second = await _backend_pid(db)
    finally:
        await db.dispose()
    assert second != first


_UPSERT = text(
    "INSERT INTO counters (k, n) VALUES (:k, 1)"
    " ON CONFLICT (k) DO UPDATE SET n = counters.n + 1 RETURNING n"
)


async def _counters(db: Database) -> None:
    await db.run_write(
        "create",
        lambda conn: conn.exec_driver_sql("CREATE TABLE counters (k TEXT PRIMARY KEY, n INT)"),
    )


@pytest.mark.postgres
async def test_one_statement_runs_on_postgresql_as_its_own_transaction(
    postgres_url: str, postgres_queries: list[str]
) -> None:
    # No BEGIN and COMMIT around it (two round trips, which a transaction of one
    # statement sends), and what it wrote is committed: another connection sees it.
    # (No idle pings here: they would send a BEGIN and ROLLBACK of their own.)
    db = Database.create(postgres_url, timeout_s=5.0, ping_after_idle_s=3600.0)
    try:
        await _counters(db)
        postgres_queries.clear()
        await db.run_write("count", lambda conn: conn.execute(_UPSERT, {"k": "a"}))
        in_transaction = begin_and_end(postgres_queries)
        postgres_queries.clear()
        second = await db.run_statement("count", _UPSERT, {"k": "a"}, write=True)
        read = await db.run_statement(
            "read", text("SELECT n FROM counters WHERE k = :k"), {"k": "a"}, write=False
        )
        alone = begin_and_end(postgres_queries)
    finally:
        await db.dispose()
    assert in_transaction == ["BEGIN", "COMMIT"]  # the logger sees them when they are sent
    assert alone == []
    assert [tuple(row) for row in second + read] == [(2,), (2,)]
    assert await _elsewhere(postgres_url, "SELECT n FROM counters WHERE k = 'a'") == 2


@pytest.mark.postgres
async def test_a_failed_statement_writes_nothing_and_leaves_transactions_whole(
    postgres_url: str,
) -> None:
    # One pooled connection: the one the failed statement used, back in its pool, must
    # again run a transaction that rolls back as a whole.
    db = Database.create(postgres_url, timeout_s=5.0, pool_size=1)
    failing = text("INSERT INTO counters (k, n) SELECT 'b', 1 / (:zero)::int")
    try:
        await _counters(db)
        with pytest.raises(StoreError) as raised:
            await db.run_statement("divide", failing, {"zero": 0}, write=True)

        def half_then_fail(conn: Connection) -> None:
            conn.execute(_UPSERT, {"k": "c"})
            raise StoreError("half", "refused mid-way")

        with pytest.raises(StoreError):
            await db.run_write("half", half_then_fail)
        left = await db.run_statement("read", text("SELECT k FROM counters"), {}, write=False)
    finally:
        await db.dispose()
    assert raised.value.operation == "divide"
    assert left == []


async def test_one_statement_on_sqlite_reads_and_writes_as_transactions_do(
    sqlite_url: str,
) -> None:
    db = Database.create(sqlite_url, timeout_s=1.0)
    try:
        await _counters(db)
        written = [await db.run_statement("count", _UPSERT, {"k": "a"}, write=True) for _ in "ab"]
        read = await db.run_statement(
            "read", text("SELECT n FROM counters WHERE k = :k"), {"k": "a"}, write=False
        )
    finally:
        await db.dispose()
    assert [tuple(row) for rows in written for row in rows] == [(1,), (2,)]
    assert [tuple(row) for row in read] == [(2,)]


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
async def test_one_statement_on_a_closed_or_unreachable_store_raises(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = request.getfixturevalue("sqlite_url" if backend == "sqlite" else "postgres_url")
    closed = Database.create(url, timeout_s=1.0)
    await closed.dispose()
    with pytest.raises(UsageError):
        await closed.run_statement("read", text("SELECT 1"), {}, write=False)
    nowhere = (
        f"sqlite+aiosqlite:///{tmp_path}/missing/store.db"
        if backend == "sqlite"
        else f"postgresql+asyncpg://nobody@127.0.0.1:{free_port()}/none"
    )
    unreachable = Database.create(nowhere, timeout_s=1.0)
    try:
        with pytest.raises(StoreError):
            await unreachable.run_statement("read", text("SELECT 1"), {}, write=False)
    finally:
        await unreachable.dispose()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
async def test_what_a_cancelled_callers_write_made_is_undone_and_only_that(
    backend: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("sqlite_url" if backend == "sqlite" else "postgres_url")
    db = Database.create(url, timeout_s=5.0)
    undone: list[object] = []

    def count(key: str) -> Callable[[Connection], str]:
        def work(conn: Connection) -> str:
            conn.execute(_UPSERT, {"k": key})
            return key

        return work

    async def undo(key: str) -> None:
        undone.append(key)
        forget = text("DELETE FROM counters WHERE k = :k")
        await db.run_write("undo", lambda conn: conn.execute(forget, {"k": key}))

    def broken(conn: Connection) -> str:
        conn.execute(text("INSERT INTO missing_table VALUES (1)"))
        return "never"

    try:
        await _counters(db)
        for work in (count("a"), broken):
            await cancel_under_way(db.run_undoable(db.run_write("count", work), undo))
        # An uncancelled caller gets the value, and nothing is undone.
        kept = await db.run_undoable(db.run_write("count", count("b")), undo)
        await db.dispose()  # waits for the undoing
        assert kept == "b" and undone == ["a"]  # the broken write made nothing to undo
        reopened = Database.create(url, timeout_s=5.0)
        left = await reopened.run_statement("read", text("SELECT k FROM counters"), {}, write=False)
        await reopened.dispose()
    finally:
        await db.dispose()
    assert [tuple(row) for row in left] == [("b",)]
