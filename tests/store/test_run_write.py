"""``Database.run_write``: a synchronous transaction, on SQLite's writer thread or PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from sqlalchemy import Column, Connection, Integer, MetaData, String, Table, insert, select

from foureyes.core.errors import StoreError, UsageError
from foureyes.store._database import Database, DriverSelect
from tests.store._support import without_a_turn

_META = MetaData()
_NOTES = Table(
    "run_write_notes",
    _META,
    Column("id", Integer, primary_key=True),
    Column("text", String, nullable=False, unique=True),
)


@pytest.fixture
async def db(store_url: str) -> AsyncIterator[Database]:
    database = Database.create(store_url, timeout_s=0.2)
    await database.probe("open")
    async with database.write("create") as conn:
        await conn.run_sync(_META.drop_all)
        await conn.run_sync(_META.create_all)
    yield database
    await database.dispose()


async def texts(db: Database) -> list[str]:
    async with db.read("list") as conn:
        return list((await conn.execute(select(_NOTES.c.text).order_by(_NOTES.c.id))).scalars())


async def test_work_commits_and_returns_its_result(db: Database) -> None:
    def work(conn: Connection) -> int:
        conn.execute(insert(_NOTES), [{"text": "a"}, {"text": "b"}])
        return len(conn.execute(select(_NOTES.c.id)).all())

    assert await db.run_write("two notes", work) == 2
    assert await texts(db) == ["a", "b"]


async def test_work_that_raises_writes_nothing(db: Database) -> None:
    def half(conn: Connection) -> None:
        conn.execute(insert(_NOTES).values(text="first"))
        raise StoreError("half", "refused after the first row")

    with pytest.raises(StoreError, match="refused after the first row"):
        await db.run_write("half", half)

    def duplicate(conn: Connection) -> None:
        conn.execute(insert(_NOTES).values(text="x"))
        conn.execute(insert(_NOTES).values(text="x"))

    with pytest.raises(StoreError, match="duplicate") as caught:
        await db.run_write("duplicate", duplicate)
    assert "IntegrityError" in caught.value.detail or "Unique" in caught.value.detail
    assert await texts(db) == []
    # The writer's connection after a failed transaction (on SQLite, a new one) still writes.
    await db.run_write("after", lambda conn: conn.execute(insert(_NOTES).values(text="y")))
    assert await texts(db) == ["y"]


async def test_a_closed_database_refuses_work(db: Database) -> None:
    await db.dispose()
    with pytest.raises(UsageError, match="closed"):
        await db.run_write("late", lambda conn: None)


async def test_sqlite_work_runs_whole_on_one_writer_thread(
    sqlite_url: str,
) -> None:
    db = Database.create(sqlite_url, timeout_s=0.2)
    await db.probe("open")
    seen: list[str] = []
    try:
        async with db.write("create") as conn:
            await conn.run_sync(_META.create_all)

        def work(conn: Connection) -> None:
            seen.append(threading.current_thread().name)
            conn.execute(insert(_NOTES).values(text=f"n{len(seen)}"))

        await asyncio.gather(*(db.run_write("note", work) for _ in range(5)))
    finally:
        await db.dispose()
    assert len(seen) == 5 and len(set(seen)) == 1
    assert seen[0].startswith("foureyes-sqlite-writer")


async def test_sqlite_work_waits_for_another_process_then_fails_cleanly(
    sqlite_path: Path, sqlite_url: str
) -> None:
    db = Database.create(sqlite_url, timeout_s=0.1)
    await db.probe("open")
    other = sqlite3.connect(sqlite_path, timeout=1, isolation_level=None)
    try:
        async with db.write("create") as conn:
            await conn.run_sync(_META.create_all)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        with pytest.raises(StoreError, match="locked"):
            await db.run_write(
                "blocked", lambda conn: conn.execute(insert(_NOTES).values(text="b"))
            )
        other.execute("ROLLBACK")
        await db.run_write("free", lambda conn: conn.execute(insert(_NOTES).values(text="f")))
        assert await texts(db) == ["f"]
    finally:
        other.close()
        await db.dispose()


async def test_sqlite_writes_of_both_paths_queue_on_one_lock(sqlite_url: str) -> None:
    # An async write holding the lock makes run_write wait, not fail on the busy timeout.
    db = Database.create(sqlite_url, timeout_s=0.1)
    await db.probe("open")
    try:
        async with db.write("create") as conn:
            await conn.run_sync(_META.create_all)
        async with db.write("slow") as conn:
            await conn.execute(insert(_NOTES).values(text="async"))
            queued = asyncio.ensure_future(
                db.run_write("queued", lambda c: c.execute(insert(_NOTES).values(text="sync")))
            )
            await asyncio.sleep(0.3)  # longer than the busy timeout
            assert not queued.done()
        await queued
        assert await texts(db) == ["async", "sync"]
    finally:
        await db.dispose()


async def test_run_read_sees_what_was_committed(db: Database) -> None:
    await db.run_write("seed", lambda conn: conn.execute(insert(_NOTES), [{"text": "r"}]))

    def read(conn: Connection) -> list[str]:
        return list(conn.execute(select(_NOTES.c.text)).scalars())

    assert await db.run_read("read", read) == ["r"]
    with pytest.raises(StoreError, match="bad read"):
        await db.run_read("bad read", lambda conn: conn.exec_driver_sql("SELEC 1"))
    # The failed read's connection was closed; the next read opens another.
    assert await db.run_read("read again", read) == ["r"]
    await db.dispose()
    with pytest.raises(UsageError, match="closed"):
        await db.run_read("late", read)


def _read_noting_thread(seen: list[str]) -> Callable[[Connection], list[str]]:
    def read(conn: Connection) -> list[str]:
        seen.append(threading.current_thread().name)
        return list(conn.execute(select(_NOTES.c.text)).scalars())

    return read


async def _seeded_sqlite(sqlite_url: str, timeout_s: float) -> Database:
    db = Database.create(sqlite_url, timeout_s=timeout_s)
    await db.probe("open")
    await db.run_write("create", lambda conn: _META.create_all(conn))
    await db.run_write("seed", lambda conn: conn.execute(insert(_NOTES), [{"text": "w"}]))
    return db


async def test_sqlite_reads_run_on_the_calling_thread_beside_a_held_write_lock(
    sqlite_path: Path, sqlite_url: str
) -> None:
    db = await _seeded_sqlite(sqlite_url, 0.1)
    other = sqlite3.connect(sqlite_path, timeout=1, isolation_level=None)
    seen: list[str] = []
    try:
        other.execute("BEGIN IMMEDIATE")  # a writer elsewhere does not block readers (WAL)
        assert await db.run_read("read", _read_noting_thread(seen)) == ["w"]
        assert await db.run_read("again", _read_noting_thread(seen)) == ["w"]
    finally:
        other.close()
        await db.dispose()
    assert seen == [threading.current_thread().name] * 2


async def test_a_sqlite_read_that_would_wait_waits_on_the_reader_thread(
    sqlite_path: Path, sqlite_url: str
) -> None:
    await (await _seeded_sqlite(sqlite_url, 1)).dispose()
    # Another connection in exclusive locking mode keeps its lock after its write:
    # every read elsewhere is busy until it lets go.
    other = sqlite3.connect(sqlite_path, timeout=1, isolation_level=None)
    db = Database.create(sqlite_url, timeout_s=10)
    seen: list[str] = []
    try:
        other.execute("SELECT 1 FROM run_write_notes").fetchall()  # in WAL mode, shared
        other.execute("PRAGMA locking_mode = EXCLUSIVE")
        other.execute("INSERT INTO run_write_notes (text) VALUES ('x')")
        read = asyncio.ensure_future(db.run_read("read", _read_noting_thread(seen)))
        await asyncio.sleep(0)
        # Tried here (busy at once, so not waited for), then handed to the reader thread
        # without a pause in between: the thread waits for the lock, up to the timeout.
        assert not read.done()
        other.execute("PRAGMA locking_mode = NORMAL")
        other.execute("SELECT 1 FROM run_write_notes").fetchall()  # lets the lock go
        assert await read == ["w", "x"]
    finally:
        other.close()
        await db.dispose()
    assert len(seen) == 1 and seen[0].startswith("foureyes-sqlite-reader")


async def test_a_sqlite_read_from_another_thread_runs_on_the_reader_thread(
    sqlite_url: str,
) -> None:
    db = await _seeded_sqlite(sqlite_url, 1)
    seen: list[str] = []
    try:
        assert await db.run_read("here", _read_noting_thread(seen)) == ["w"]

        def elsewhere() -> list[str]:
            return asyncio.run(db.run_read("elsewhere", _read_noting_thread(seen)))

        assert await asyncio.to_thread(elsewhere) == ["w"]
    finally:
        await db.dispose()
    assert seen[0] == threading.current_thread().name
    assert seen[1].startswith("foureyes-sqlite-reader")


async def test_a_write_through_a_sqlite_read_fails_and_writes_nothing(
    sqlite_url: str,
) -> None:
    # Both read connections (the calling thread's and the reader thread's) are read-only:
    # a read that writes by mistake cannot take the write lock from the event loop's
    # thread or slip a row in outside the writer.
    db = await _seeded_sqlite(sqlite_url, 1)
    seen: list[str] = []

    def writes(conn: Connection) -> None:
        seen.append(threading.current_thread().name)
        conn.execute(insert(_NOTES), [{"text": "sneaked"}])

    def elsewhere() -> None:
        asyncio.run(db.run_read("elsewhere", writes))

    try:
        with pytest.raises(StoreError, match="readonly") as here:
            await db.run_read("here", writes)
        with pytest.raises(StoreError, match="readonly") as there:
            await asyncio.to_thread(elsewhere)
        assert await db.run_read("read", _read_noting_thread(seen)) == ["w"]
    finally:
        await db.dispose()
    assert (here.value.operation, there.value.operation) == ("here", "elsewhere")
    assert seen[0] == seen[2] == threading.current_thread().name
    assert seen[1].startswith("foureyes-sqlite-reader")


def _insert_noting_thread(seen: list[str], text: str) -> Callable[[Connection], int]:
    def write(conn: Connection) -> int:
        seen.append(threading.current_thread().name)
        conn.execute(insert(_NOTES).values(text=text))
        return len(seen)

    return write


async def test_grouped_writes_commit_on_the_calling_thread(db: Database) -> None:
    # On SQLite a round of group commit runs on the event loop's thread (no hand-off to
    # the writer thread and back); a write alone does not even wait for the loop's next
    # turn, where a grouped one waits for the commit point the writes of that turn share.
    # Alone or not, a write is committed when it returns, on both backends.
    seen: list[str] = []
    before = db.group_commits
    alone = await without_a_turn(
        db.run_grouped_write("alone", _insert_noting_thread(seen, "a"), alone=True)
    )
    grouped = await without_a_turn(
        db.run_grouped_write("grouped", _insert_noting_thread(seen, "b"))
    )
    assert await texts(db) == ["a", "b"]
    after = db.group_commits
    assert (after.rounds - before.rounds, after.writes - before.writes) == (2, 2)
    if db.dialect == "sqlite":
        assert alone == (1, True) and grouped == (2, False)
        assert seen == [threading.current_thread().name] * 2


@pytest.mark.parametrize("turns", [(6,), (1, 1)], ids=["one turn", "and the next"])
async def test_grouped_sqlite_writes_of_a_turn_and_the_next_share_one_round_on_this_thread(
    sqlite_url: str, turns: tuple[int, ...]
) -> None:
    # The commit point comes two turns of the loop after the first write: the writes
    # queued in that turn and in the next join its round, one commit for all of them.
    db = await _seeded_sqlite(sqlite_url, 10)
    seen: list[str] = []
    names: list[str] = []
    writes: list[asyncio.Future[int]] = []
    try:
        before = db.group_commits
        for turn, count in enumerate(turns):
            if turn:
                await asyncio.sleep(0)  # the writes so far are queued, the commit point set
                assert seen == []
            for name in (f"n{len(names) + n}" for n in range(count)):
                names.append(name)
                write = db.run_grouped_write(name, _insert_noting_thread(seen, name))
                writes.append(asyncio.ensure_future(write))
        assert sorted(await asyncio.gather(*writes)) == list(range(1, len(names) + 1))
        after = db.group_commits
        assert (after.rounds - before.rounds, after.writes - before.writes) == (1, len(names))
        assert await texts(db) == ["w", *names]
    finally:
        await db.dispose()
    assert seen == [threading.current_thread().name] * len(names)


async def test_closing_runs_a_round_that_was_due_before_anything_is_closed(
    sqlite_path: Path,
) -> None:
    db = await _seeded_sqlite(f"sqlite+aiosqlite:///{sqlite_path}", 10)
    write = asyncio.ensure_future(db.run_grouped_write("due", _insert_noting_thread([], "due")))
    await asyncio.sleep(0)  # queued, its commit point set for the loop's next turn
    await db.dispose()
    with sqlite3.connect(sqlite_path) as conn:
        rows = conn.execute("SELECT text FROM run_write_notes ORDER BY id").fetchall()
    assert rows == [("w",), ("due",)]
    assert await write == 1


@pytest.mark.parametrize("alone", [True, False])
async def test_sqlite_writes_that_would_wait_wait_on_the_writer_thread(
    sqlite_path: Path, alone: bool
) -> None:
    # Alone, or a round of three at the commit point: busy at once on the event loop's
    # thread (nothing run, nothing waited for there), so handed to the writer thread,
    # which waits for the lock up to the timeout.
    db = await _seeded_sqlite(f"sqlite+aiosqlite:///{sqlite_path}", 10)
    other = sqlite3.connect(sqlite_path, timeout=1, isolation_level=None)
    seen: list[str] = []
    names = ["a"] if alone else ["n0", "n1", "n2"]
    try:
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        writes = asyncio.gather(
            *(
                db.run_grouped_write(name, _insert_noting_thread(seen, name), alone=alone)
                for name in names
            )
        )
        for _ in range(3):
            await asyncio.sleep(0)
        assert not writes.done() and seen == []
        other.execute("ROLLBACK")
        assert sorted(await writes) == list(range(1, len(names) + 1))
        assert await texts(db) == ["w", *names]
    finally:
        other.close()
        await db.dispose()
    assert len(seen) == len(names)
    assert all(name.startswith("foureyes-sqlite-writer") for name in seen)


async def test_a_sqlite_write_alone_joins_the_writes_under_way(sqlite_url: str) -> None:
    # Another write holds the writer: a write said to be alone is not, and queues behind
    # it (its round too) rather than taking the file's lock from the event loop's thread.
    db = await _seeded_sqlite(sqlite_url, 10)
    started, release = threading.Event(), threading.Event()
    seen: list[str] = []

    def slow(conn: Connection) -> None:
        started.set()
        release.wait(10)
        conn.execute(insert(_NOTES).values(text="slow"))

    try:
        first = asyncio.ensure_future(db.run_write("slow", slow))
        assert await asyncio.to_thread(started.wait, 10)
        alone = asyncio.ensure_future(
            db.run_grouped_write("alone", _insert_noting_thread(seen, "a"), alone=True)
        )
        for _ in range(3):
            await asyncio.sleep(0)
        assert not alone.done() and seen == []
        release.set()
        await first
        assert await alone == 1
        assert await texts(db) == ["w", "slow", "a"]
    finally:
        release.set()
        await db.dispose()
    assert len(seen) == 1 and seen[0].startswith("foureyes-sqlite-writer")


async def test_a_failed_write_alone_writes_nothing_and_the_next_one_commits(
    db: Database,
) -> None:
    def half(conn: Connection) -> None:
        conn.execute(insert(_NOTES).values(text="first"))
        conn.execute(insert(_NOTES).values(text="first"))  # unique: refused

    before = db.group_commits
    with pytest.raises(StoreError, match="alone") as caught:
        await db.run_grouped_write("alone", half, alone=True)
    assert caught.value.operation == "alone"
    assert await texts(db) == []
    after = db.group_commits  # a failed round is a round, alone or grouped
    assert (after.rounds - before.rounds, after.writes - before.writes) == (1, 1)
    seen: list[str] = []
    # On SQLite the failed transaction closed its connection; the next opens another.
    assert await db.run_grouped_write("again", _insert_noting_thread(seen, "b"), alone=True) == 1
    assert await texts(db) == ["b"]
    await db.dispose()
    with pytest.raises(UsageError, match="closed"):
        await db.run_grouped_write("late", _insert_noting_thread(seen, "c"), alone=True)


async def test_a_sqlite_select_on_the_driver_that_would_wait_waits_on_the_reader_thread(
    sqlite_path: Path, sqlite_url: str
) -> None:
    # A DriverSelect runs as one statement on the calling thread's connection (no BEGIN
    # and COMMIT around it); when that statement would wait, it goes to the reader thread
    # as any read does, and reads what the lock's holder committed.
    await (await _seeded_sqlite(sqlite_url, 1)).dispose()
    other = sqlite3.connect(sqlite_path, timeout=1, isolation_level=None)
    db = Database.create(sqlite_url, timeout_s=10)
    texts_of = DriverSelect(select(_NOTES.c.text).order_by(_NOTES.c.id))
    try:
        other.execute("SELECT 1 FROM run_write_notes").fetchall()
        other.execute("PRAGMA locking_mode = EXCLUSIVE")
        other.execute("INSERT INTO run_write_notes (text) VALUES ('x')")
        read = asyncio.ensure_future(db.run_statement("there", texts_of, {}, write=False))
        await asyncio.sleep(0)
        assert not read.done()  # busy here at once: handed to the reader thread, waiting
        other.execute("PRAGMA locking_mode = NORMAL")
        other.execute("SELECT 1 FROM run_write_notes").fetchall()  # lets the lock go
        assert [r.text for r in await read] == ["w", "x"]
    finally:
        other.close()
        await db.dispose()
