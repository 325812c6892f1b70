"""The SQLite dialect with one trip to aiosqlite's thread per statement."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select, text, update

from foureyes.core.errors import StoreError
from foureyes.store import _database
from foureyes.store._database import Database
from foureyes.store._sqlite_driver import OneTripSQLiteDialect

_META = MetaData()
_ITEMS = Table(
    "items",
    _META,
    Column("id", Integer, primary_key=True),
    Column("name", String, nullable=False, unique=True),
    Column("hits", Integer, nullable=False, default=0),
)


@pytest.fixture(params=["one-trip", "stock"])
async def db(
    request: pytest.FixtureRequest, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Database]:
    """The store's database, and the same on SQLAlchemy's own aiosqlite dialect.

    The stock dialect is the reference the one-trip cursor must behave like.
    """
    if request.param == "stock":
        monkeypatch.setattr(_database, "_one_trip", lambda url: url)
    database = Database.create(sqlite_url, timeout_s=0.2)
    await database.probe("open")
    async with database.write("create") as conn:
        await conn.run_sync(_META.create_all)
    yield database
    await database.dispose()


async def test_the_sqlite_engine_uses_the_one_trip_dialect(sqlite_url: str) -> None:
    db = Database.create(sqlite_url, timeout_s=0.2)
    async with db.read("dialect") as conn:
        assert isinstance(conn.dialect, OneTripSQLiteDialect)
        assert conn.dialect.name == "sqlite"
    assert db.masked_url.startswith("sqlite+aiosqlite:///")  # the URL users wrote
    await db.dispose()


async def test_rows_counts_and_ids_come_back_as_from_the_stock_driver(db: Database) -> None:
    async with db.write("fill") as conn:
        first = await conn.execute(insert(_ITEMS).values(name="a"))
        assert first.inserted_primary_key == (1,)
        many = await conn.execute(insert(_ITEMS), [{"name": "b"}, {"name": "c"}])
        assert many.rowcount == 2
        returned = await conn.execute(
            update(_ITEMS)
            .where(_ITEMS.c.name != "a")
            .values(hits=_ITEMS.c.hits + 5)
            .returning(_ITEMS.c.name, _ITEMS.c.hits)
        )
        assert sorted(returned.all()) == [("b", 5), ("c", 5)]
        counted = await conn.execute(update(_ITEMS).values(hits=1))
        assert counted.rowcount == 3
    async with db.read("list") as conn:
        rows = (await conn.execute(select(_ITEMS.c.name).order_by(_ITEMS.c.name))).scalars()
        assert list(rows) == ["a", "b", "c"]
        one = await conn.execute(select(_ITEMS.c.name).where(_ITEMS.c.name == "b"))
        assert one.scalar_one() == "b"
        empty = await conn.execute(select(_ITEMS).where(_ITEMS.c.name == "zzz"))
        assert empty.first() is None


async def test_a_failing_statement_rolls_back_its_transaction(db: Database) -> None:
    async with db.write("seed") as conn:
        await conn.execute(insert(_ITEMS).values(name="a"))

    with pytest.raises(StoreError, match="IntegrityError"):
        async with db.write("duplicate") as conn:
            await conn.execute(insert(_ITEMS).values(name="new"))
            await conn.execute(insert(_ITEMS).values(name="a"))  # unique name

    async with db.read("list") as conn:
        assert (await conn.execute(select(_ITEMS.c.name))).scalars().all() == ["a"]
    with pytest.raises(StoreError, match="syntax"):
        async with db.read("bad sql") as conn:
            await conn.execute(text("SELEC 1"))


async def test_statements_run_on_the_drivers_thread_not_the_event_loop(db: Database) -> None:
    seen: list[str] = []

    def record_thread(value: int) -> int:
        seen.append(threading.current_thread().name)
        return value

    async with db.read("thread") as conn:
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection
        assert driver is not None
        await driver.create_function("record_thread", 1, record_thread)
        assert (await conn.execute(text("SELECT record_thread(7)"))).scalar_one() == 7
    assert seen and seen[0] != threading.current_thread().name


async def test_a_write_cancelled_mid_transaction_leaves_nothing_and_frees_the_lock(
    db: Database, sqlite_path: Path
) -> None:
    inside = asyncio.Event()

    async def write_then_hang() -> None:
        async with db.write("hang") as conn:
            await conn.execute(insert(_ITEMS).values(name="half"))
            inside.set()
            await asyncio.sleep(3600)

    task = asyncio.create_task(write_then_hang())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    # Another process can take the write lock at once, and the half-done row is gone.
    other = sqlite3.connect(sqlite_path, timeout=0.5, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    finally:
        other.close()
    async with db.write("after") as conn:
        await conn.execute(insert(_ITEMS).values(name="whole"))
    async with db.read("list") as conn:
        assert (await conn.execute(select(_ITEMS.c.name))).scalars().all() == ["whole"]
