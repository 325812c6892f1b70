from __future__ import annotations

import asyncio
import secrets
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import create_async_engine

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.core.budget import SpendLimit
from foureyes.core.errors import ConfigError, StoreError, UsageError
from foureyes.core.trace import EventKind, TraceEvent
from foureyes.store import Store
from foureyes.store._database import Database
from tests.helpers.clock import ManualClock
from tests.helpers.postgres import free_port
from tests.store._support import OpenStore

PRAGMAS = ("journal_mode", "busy_timeout", "foreign_keys")


def _pragmas(conn: Connection) -> list[object]:
    return [conn.exec_driver_sql(f"PRAGMA {name}").scalar() for name in PRAGMAS]


async def test_sqlite_connections_use_wal_busy_timeout_and_foreign_keys(sqlite_url: str) -> None:
    # every way an operation reaches the file (the async pool for reads and writes, the
    # writer and reader threads) waits the busy timeout for a lock, then fails as locked;
    # a read on the calling thread never waits (it goes to the reader thread instead).
    # A read from a thread other than the first reader's is the reader thread's.
    db = Database.create(sqlite_url, timeout_s=1.5)
    try:
        await db.probe("open")
        async with db.read("pragmas") as conn:
            pooled_read = await conn.run_sync(_pragmas)
        async with db.write("pragmas") as conn:
            pooled_write = await conn.run_sync(_pragmas)
        threaded_write = await db.run_write("pragmas", _pragmas)
        inline_read = await db.run_read("pragmas", _pragmas)
        threaded_read = await asyncio.to_thread(
            lambda: asyncio.run(db.run_read("pragmas", _pragmas))
        )
    finally:
        await db.dispose()
    expected = ["wal", 1500, 1]
    assert [pooled_read, pooled_write, threaded_write, threaded_read] == [expected] * 4
    assert inline_read == ["wal", 0, 1]


async def test_the_store_is_an_async_context_manager(sqlite_url: str) -> None:
    async with await Store.open(StoreConfig(url=sqlite_url), PrivacyConfig(), {}) as store:
        trace_id = await store.traces.start_run("t")
        assert store.dialect == "sqlite"
    with pytest.raises(UsageError, match="closed"):
        await store.traces.get(trace_id)
    await store.close()


async def test_a_locked_database_is_a_store_error_and_nothing_is_half_written(
    open_store: OpenStore, sqlite_url: str, sqlite_path: Path, clock: ManualClock
) -> None:
    store = await open_store(sqlite_url, timeout_s=0.2, clock=clock)
    trace_id = await store.traces.start_run("t")
    limit = SpendLimit("route:flash", max_calls=5)
    holder = sqlite3.connect(sqlite_path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="locked") as appended:
            await store.traces.append(trace_id, TraceEvent(EventKind.DECISION, "gate"))
        with pytest.raises(StoreError, match="locked") as reserved:
            await store.ledger.reserve(limit, calls=1, usd=0.1)
        with pytest.raises(StoreError, match="locked"):
            await store.traces.start_run("t2")
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    assert (appended.value.operation, reserved.value.operation) == ("append", "reserve")
    # SQLite's own refusal once the busy timeout (read back above) ran out, not ours
    for caught in (appended, reserved):
        cause = caught.value.__cause__
        driver = getattr(cause, "orig", cause)
        assert isinstance(driver, sqlite3.OperationalError)
        assert str(driver) == "database is locked"
    record = await store.traces.get(trace_id)
    assert record is not None and record.events == ()
    assert (await store.ledger.usage("route:flash", clock.now.date())).reserved_calls == 0
    await store.traces.append(trace_id, TraceEvent(EventKind.DECISION, "gate"))


async def test_an_unwritable_sqlite_path_is_a_store_error(
    open_store: OpenStore, tmp_path: Path
) -> None:
    # A regular file where a directory should be: refused even for root.
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    with pytest.raises(StoreError, match="unable to open") as caught:
        await open_store(f"sqlite+aiosqlite:///{blocker / 'store.db'}")
    assert caught.value.operation == "open"


async def test_a_postgres_server_that_is_down_is_a_store_error_without_the_password(
    open_store: OpenStore,
) -> None:
    url = f"postgresql+asyncpg://app:s3cret-pw@127.0.0.1:{free_port()}/foureyes"
    with pytest.raises(StoreError) as caught:
        await open_store(url, timeout_s=2)
    assert caught.value.operation == "open"
    assert "s3cret-pw" not in str(caught.value)
    assert "refused" in caught.value.detail.lower() or "connect" in caught.value.detail.lower()


@pytest.mark.postgres
async def test_a_missing_postgres_database_is_a_store_error(
    open_store: OpenStore, postgres_url: str
) -> None:
    url = postgres_url.rsplit("/", 1)[0] + "/no_such_database"
    with pytest.raises(StoreError, match="no_such_database"):
        await open_store(url)


@pytest.mark.postgres
async def test_the_store_repr_hides_the_password(open_store: OpenStore, postgres_url: str) -> None:
    # The test server trusts loopback, so any password is accepted and must still be hidden.
    url = postgres_url.replace("foureyes@", "foureyes:hunter2@")
    store = await open_store(url)
    assert "hunter2" not in repr(store) and "***" in repr(store)
    assert store.dialect == "postgresql"


@pytest.mark.parametrize("url", ["sqlite+aiosqlite://", "sqlite+aiosqlite:///:memory:"])
async def test_an_in_memory_sqlite_database_is_refused(open_store: OpenStore, url: str) -> None:
    with pytest.raises(ConfigError, match="file path"):
        await open_store(url)


async def test_sqlite_is_shared_by_worker_processes_in_wal_mode(sqlite_url: str) -> None:
    store = await Store.open(StoreConfig(url=sqlite_url), PrivacyConfig(), {})
    try:
        assert await store.shared_by_processes(1) is None
        assert await store.shared_by_processes(4) is None  # open() switched it to WAL
    finally:
        await store.close()


@pytest.mark.postgres
@pytest.mark.parametrize(("workers", "fits"), [(1, True), (3, True), (4, False)])
async def test_postgres_pools_must_fit_in_max_connections(
    postgres_url: str, workers: int, fits: bool
) -> None:
    # The test server allows 200 connections; its superuser may use the reserved slots.
    store = await Store.open(StoreConfig(url=postgres_url, pool_size=60), PrivacyConfig(), {})
    try:
        problem = await store.shared_by_processes(workers)
    finally:
        await store.close()
    if fits:
        assert problem is None
    else:
        assert problem is not None
        assert f"{workers} x store.pool_size 60 = {workers * 60} connections" in problem
        assert "more than the 200 this PostgreSQL server allows (max_connections)" in problem


@pytest.mark.postgres
async def test_postgres_pools_must_fit_in_the_roles_connection_limit(postgres_url: str) -> None:
    # A role that is no superuser is bound by its own limit and cannot use reserved slots.
    role = f"limited_{secrets.token_hex(4)}"
    database = postgres_url.rsplit("/", 1)[1]
    admin = create_async_engine(postgres_url, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 7"))
            await conn.execute(text(f"ALTER DATABASE {database} OWNER TO {role}"))
        url = postgres_url.replace("://foureyes@", f"://{role}@")
        store = await Store.open(StoreConfig(url=url, pool_size=3), PrivacyConfig(), {})
        try:
            assert await store.shared_by_processes(2) is None  # 6 of 7
            problem = await store.shared_by_processes(3)  # 9 of 7
        finally:
            await store.close()
        assert problem is not None and "9 connections, more than the 7" in problem
        assert "(the connection limit of this role)" in problem
    finally:
        async with admin.connect() as conn:
            await conn.execute(text(f"ALTER DATABASE {database} OWNER TO foureyes"))
            await conn.execute(text(f"DROP OWNED BY {role}"))
            await conn.execute(text(f"DROP ROLE {role}"))
        await admin.dispose()
