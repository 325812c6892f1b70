"""The engine behind a store, and the one boundary where driver errors become ``StoreError``."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import functools
import operator
import sqlite3
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    Engine,
    Executable,
    Insert,
    Select,
    Table,
    create_engine,
    event,
    pool,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL, Dialect, make_url
from sqlalchemy.exc import (
    ArgumentError,
    CompileError,
    DisconnectionError,
    OperationalError,
    SQLAlchemyError,
    StatementError,
)
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, PoolResetState
from sqlalchemy.util import await_only as await_

from foureyes.config import mask_url
from foureyes.core import strict_json
from foureyes.core.errors import ConfigError, StoreDataError, StoreError, UsageError
from foureyes.store._sqlite_driver import DRIVER_NAME

__all__ = [
    "Database",
    "MigrationFailed",
    "DriverInsert",
    "DriverSelect",
    "EncodedJSON",
    "GroupCommits",
    "translate_errors",
]

# Everything raised for a database that is locked, unreachable, or refuses a write.
# SQLAlchemy wraps the drivers' own errors; OSError comes through bare when a socket
# cannot be opened at all (connection refused, timeout), sqlite3's from the open probe,
# and Alembic's own comes as MigrationFailed (Alembic is imported only to migrate).


class MigrationFailed(Exception):
    """Alembic refused a migration; its own error is the cause (and the reported detail)."""


_FOREIGN_ERRORS: tuple[type[BaseException], ...] = (
    SQLAlchemyError,
    OSError,
    sqlite3.Error,
    MigrationFailed,
)
# Values the database refuses whatever its state: PostgreSQL's SQLSTATE 22021
# (character_not_in_repertoire: a NUL in text) and 22P05 (untranslatable_character: a
# \u0000 in JSON); and strings no driver can encode (an unpaired surrogate), which come
# as a UnicodeError from the driver or from SQLAlchemy's own processing.
_BAD_DATA_STATES = frozenset({"22021", "22P05"})
_CAUGHT: tuple[type[BaseException], ...] = (*_FOREIGN_ERRORS, UnicodeError)
_MAX_DETAIL = 500
_T = TypeVar("_T")
_WRITE_OPTION = "foureyes_write"
PING_AFTER_IDLE_S = 1.0
"""A pooled PostgreSQL connection idle this long is checked before it is used again."""


class EncodedJSON(str):
    """A JSON column's value that its writer has encoded already, stored as it is.

    A writer that must encode a document anyway (to check it is JSON, or to replace what
    it may not store) hands over the text instead of the document, so that the column's
    bind processing does not encode it a second time.
    """

    __slots__ = ()


def _encode_json(value: Any) -> str:
    """The engines' JSON serialiser: ``json.dumps``' document, except for :class:`EncodedJSON`."""
    if isinstance(value, EncodedJSON):
        return str(value)
    return strict_json.dumps(value)


def _driver_of(conn: Connection) -> Any:
    """The driver's own connection under ``conn`` (checked out, so it always has one)."""
    driver = conn.connection.driver_connection
    assert driver is not None
    return driver


class DriverInsert:
    """An ``INSERT`` whose rows go straight to SQLite's driver, each row's values processed once.

    Through SQLAlchemy a short ``INSERT`` costs several times the statement itself on
    SQLite: the statement's cache key, an execution context, each row's values processed
    by generic code, a result object (benchmarks/README.md, "The store's inserts on the
    driver"). This compiles the statement once per dialect and set of columns, with the
    same SQL and each column's own bind processing (its type's, as SQLAlchemy would apply
    it: a timestamp to naive UTC, a JSON document to text), and runs it on the driver's
    connection inside the caller's transaction. Only on the standard ``sqlite3`` driver (the
    connections :meth:`Database.run_write` and its kin hand to their work); on any other
    (PostgreSQL, where asyncpg pipelines an ``executemany`` itself) the statement goes
    through SQLAlchemy as before.

    The statement must take every value from its rows (no column defaults computed in
    Python): columns a row leaves out are left to the database, as SQLAlchemy leaves them.
    """

    __slots__ = ("_compiled", "statement")

    def __init__(self, statement: Insert) -> None:
        self.statement = statement
        # Per dialect (an engine's own: its JSON serialiser is part of the processing),
        # forgotten with the engine.
        self._compiled: weakref.WeakKeyDictionary[
            Dialect, dict[tuple[str, ...], tuple[str, tuple[_Bind, ...]]]
        ] = weakref.WeakKeyDictionary()

    def run(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> int:
        """Insert ``rows`` (all with the same columns) in ``conn``'s transaction; how many.

        Raises:
            sqlite3.Error, SQLAlchemyError, UnicodeError: the insert failed (the caller's
                transaction then rolls back; :func:`translate_errors` makes it a StoreError).
        """
        if not rows:
            return 0
        if conn.dialect.driver != "pysqlite":
            return conn.execute(self.statement, list(rows)).rowcount
        sql, binds = self._compiled_for(conn, tuple(rows[0]))
        values = [tuple(bind(row) for bind in binds) for row in rows]
        driver = _driver_of(conn)
        if len(values) == 1:
            return int(driver.execute(sql, values[0]).rowcount)
        return int(driver.executemany(sql, values).rowcount)

    def _compiled_for(
        self, conn: Connection, keys: tuple[str, ...]
    ) -> tuple[str, tuple[_Bind, ...]]:
        dialect = conn.dialect
        known = self._compiled.get(dialect)
        if known is None:
            known = self._compiled[dialect] = {}
        compiled = known.get(keys)
        if compiled is None:
            unknown = [key for key in keys if key not in self.statement.table.c]
            if unknown:  # as SQLAlchemy's own execution refuses them
                raise CompileError(f"Unconsumed column names: {', '.join(unknown)}")
            statement = self.statement.compile(dialect=dialect, column_keys=list(keys))
            binds = []
            for name in statement.positiontup or ():
                column_type = statement.binds[name].type.dialect_impl(dialect)
                binds.append(_bind(name, column_type.bind_processor(dialect)))
            compiled = known[keys] = (statement.string, tuple(binds))
        return compiled


_Bind = Callable[[Mapping[str, Any]], Any]


def _bind(name: str, process: Callable[[Any], Any] | None) -> _Bind:
    """The value of column ``name`` of a row, as the driver takes it."""
    if process is None:
        return operator.itemgetter(name)
    return lambda row: process(row[name])


class DriverSelect:
    """A ``SELECT`` whose statement goes straight to SQLite's driver, its rows processed once.

    The read before each review (a conversation's open unknowns) costs about 39 µs of the
    event loop's CPU through SQLAlchemy's execution and 6 µs on the driver
    (benchmarks/README.md, "The open-unknowns read on the driver"). This compiles the
    statement once per dialect, with the same SQL, each parameter's bind processing and
    each selected column's result processing taken from their types as SQLAlchemy would
    apply them, and returns rows whose fields are read by the columns' keys (a named
    tuple per row, as :meth:`Connection.execute` returns ``Row`` objects). On any driver
    but the standard ``sqlite3`` one the statement goes through SQLAlchemy as before.
    """

    __slots__ = ("_compiled", "statement")

    def __init__(self, statement: Select[Any]) -> None:
        self.statement = statement
        self._compiled: weakref.WeakKeyDictionary[Dialect, _CompiledSelect] = (
            weakref.WeakKeyDictionary()
        )

    def run(self, conn: Connection, params: Mapping[str, Any]) -> Sequence[Any]:
        """Every row the statement selects with ``params``, in ``conn``'s transaction.

        Raises:
            sqlite3.Error, SQLAlchemyError: the read failed, or a parameter without a
                value of its own is missing from ``params`` (:func:`translate_errors`
                makes either a StoreError).
        """
        if conn.dialect.driver != "pysqlite":
            return conn.execute(self.statement, params).all()
        compiled = self._compiled.get(conn.dialect)
        if compiled is None:
            compiled = self._compiled[conn.dialect] = _CompiledSelect.of(
                self.statement, conn.dialect
            )
        rows = _driver_of(conn).execute(compiled.sql, compiled.values(params)).fetchall()
        return [compiled.row(found) for found in rows]


@dataclasses.dataclass(frozen=True, slots=True)
class _CompiledSelect:
    sql: str
    names: tuple[str, ...]
    own: Mapping[str, Any]
    """The values of parameters the statement carries (an ``OFFSET`` it adds)."""
    binds: tuple[Callable[[Any], Any] | None, ...]
    results: tuple[Callable[[Any], Any] | None, ...]
    row_type: Callable[..., Any]

    @classmethod
    def of(cls, statement: Select[Any], dialect: Dialect) -> _CompiledSelect:
        compiled = statement.compile(dialect=dialect)
        names = tuple(compiled.positiontup or ())
        parameters = [compiled.binds[name] for name in names]
        own = {
            n: p.effective_value for n, p in zip(names, parameters, strict=True) if not p.required
        }
        columns = list(statement.selected_columns)
        return cls(
            sql=compiled.string,
            names=names,
            own=own,
            binds=tuple(p.type.dialect_impl(dialect).bind_processor(dialect) for p in parameters),
            results=tuple(
                c.type.dialect_impl(dialect).result_processor(dialect, None) for c in columns
            ),
            row_type=collections.namedtuple("Row", [c.key for c in columns]),  # type: ignore[misc]
        )

    def values(self, params: Mapping[str, Any]) -> list[Any]:
        values = []
        for name, process in zip(self.names, self.binds, strict=True):
            if name in params:
                value = params[name]
            elif name in self.own:
                value = self.own[name]
            else:  # as SQLAlchemy's own execution refuses it
                raise CompileError(f"A value is required for bind parameter {name!r}")
            values.append(value if process is None else process(value))
        return values

    def row(self, found: Sequence[Any]) -> Any:
        return self.row_type(
            *(
                value if process is None else process(value)
                for value, process in zip(found, self.results, strict=True)
            )
        )


@contextlib.asynccontextmanager
async def translate_errors(operation: str, url: URL) -> AsyncIterator[None]:
    """Turn any driver, SQLAlchemy or Alembic failure inside the block into ``StoreError``.

    Raises:
        StoreDataError: the database or the driver refused a value itself (see
            ``_BAD_DATA_STATES``); its detail names only the class of the refusal,
            since the driver's message may quote the value.
        StoreError: any other failure, naming ``operation``, raised from the original;
            its detail has the driver's message only (no SQL parameters, which may hold
            user text) and no password from ``url``.
    """
    try:
        yield
    except _CAUGHT as exc:
        refusal = _bad_data(exc)
        if refusal is not None:
            raise StoreDataError(operation, refusal) from exc
        raise StoreError(operation, _describe(exc, url)) from exc


def _bad_data(exc: BaseException) -> str | None:
    """What marks ``exc`` as a refusal of the data, looking through its causes."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, UnicodeError):
            return f"{type(current).__name__}: text that cannot be encoded"
        state = getattr(current, "sqlstate", None)
        if state in _BAD_DATA_STATES:
            return f"SQLSTATE {state}: text the database cannot hold"
        orig = getattr(current, "orig", None)
        nested = orig if isinstance(orig, BaseException) else None
        current = nested or current.__cause__ or current.__context__
    return None


def _describe(exc: BaseException, url: URL) -> str:
    cause = exc.orig if isinstance(exc, StatementError) and exc.orig is not None else exc
    if isinstance(exc, MigrationFailed) and exc.__cause__ is not None:
        cause = exc.__cause__
    text = f"{type(cause).__name__}: {cause}".strip().rstrip(":")
    text = mask_url(text)
    if url.password:
        text = text.replace(str(url.password), "***")
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 3] + "..."


class Database:
    """An async engine with transaction helpers that translate every failure.

    On SQLite the file is in WAL mode (see :meth:`probe`), every connection has a busy
    timeout and foreign keys on, and write transactions start with ``BEGIN IMMEDIATE``:
    the write lock is taken up front, so a transaction never fails half-way for want of it.
    Writers in one process also queue on an asyncio lock, leaving the busy timeout to
    arbitrate between processes only.
    """

    def __init__(
        self, engine: AsyncEngine, url: URL, *, timeout_s: float, group_commit: bool = True
    ) -> None:
        self._engine = engine
        self._grouping = group_commit
        self._timeout_s = timeout_s
        self._writer = engine.execution_options(**{_WRITE_OPTION: True})
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._url = url
        sqlite_file = url.get_backend_name() == "sqlite"
        self._sqlite_writes = asyncio.Lock() if sqlite_file else None
        self._sqlite_writer: _SqliteThread | None = None
        self._sqlite_reader: _SqliteThread | None = None
        if sqlite_file:
            self._sqlite_writer = _SqliteThread(url, timeout_s, name="writer", write=True)
            self._sqlite_reader = _SqliteThread(url, timeout_s, name="reader", write=False)
        self._sqlite_here = _SqliteHere(url) if sqlite_file else None
        self._sqlite_write_here = _SqliteHere(url, write=True) if sqlite_file else None
        # On SQLite a round of group commit runs on the event loop's thread when it can.
        here = None if self._sqlite_write_here is None else self._grouped_write_here
        self._group = _WriteGroup(self._transaction, here=here)
        # Writes of cancelled callers still running, and the undoing of what they wrote.
        self._abandoned: set[asyncio.Future[Any]] = set()
        self._closed = False

    @classmethod
    def create(
        cls,
        url: str,
        *,
        timeout_s: float,
        group_commit: bool = True,
        pool_size: int = 20,
        ping_after_idle_s: float = PING_AFTER_IDLE_S,
    ) -> Database:
        """Build the engine for ``url`` without connecting yet.

        Args:
            url: ``sqlite+aiosqlite:///path`` or ``postgresql+asyncpg://...``.
            timeout_s: how long to wait for the database: SQLite's busy timeout,
                PostgreSQL's connect and lock timeouts.
            group_commit: whether :meth:`run_grouped_write` groups concurrent writes
                (``False``: each is a :meth:`run_write` of its own).
            pool_size: PostgreSQL's connections in the pool, the most it opens.
            ping_after_idle_s: a pooled PostgreSQL connection that has been idle this
                long is pinged before use, and replaced if it is dead (see
                :func:`_ping_idle_connections`).

        Raises:
            ConfigError: the URL is malformed or names an in-memory SQLite database (each
                pooled connection would see its own empty database).
        """
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise ConfigError([f"store.url is not a database URL: {mask_url(url)!r}"]) from None
        millis = max(1, round(timeout_s * 1000))
        if parsed.get_backend_name() == "sqlite":
            if parsed.database in (None, "", ":memory:"):
                raise ConfigError(
                    ["store.url: SQLite needs a file path, not an in-memory database"]
                )
            # Every transaction ends in an explicit COMMIT or ROLLBACK, so the pool's own
            # rollback on return would cost a round trip to the driver thread for nothing;
            # the reset hook below rolls back only a connection still in a transaction.
            engine = create_async_engine(
                _one_trip(parsed), pool_reset_on_return=None, json_serializer=_encode_json
            )
            _configure_sqlite(engine, millis)
        else:
            engine = create_async_engine(
                parsed,
                json_serializer=_encode_json,
                # A fixed pool: connections beyond it would be closed as soon as they
                # were returned, so a busy process opened (and PostgreSQL forked) one per
                # request; waiting for a pooled one is cheaper (benchmarks/README.md).
                pool_size=pool_size,
                max_overflow=0,
                pool_timeout=timeout_s,
                connect_args={
                    "timeout": timeout_s,
                    "server_settings": {"lock_timeout": str(millis)},
                },
            )
            _ping_idle_connections(engine, ping_after_idle_s)
        return cls(engine, parsed, timeout_s=timeout_s, group_commit=group_commit)

    @property
    def pool_size(self) -> int:
        """The connections the pool keeps open at most (PostgreSQL: ``store.pool_size``)."""
        connections = self._engine.sync_engine.pool
        return connections.size() if isinstance(connections, pool.QueuePool) else 1

    @property
    def dialect(self) -> str:
        """The backend's name: ``sqlite`` or ``postgresql``."""
        return self._url.get_backend_name()

    @property
    def masked_url(self) -> str:
        """The URL with its password hidden."""
        return self._url.render_as_string(hide_password=True)

    async def probe(self, operation: str) -> None:
        """Check that the database can be reached; on SQLite, also switch the file to WAL.

        On SQLite the file is first opened with the standard driver: aiosqlite leaves the
        worker thread of a connection that failed to open to stop on its own, and if the
        event loop closes first (a CLI exiting on the error), that thread prints "Event
        loop is closed" after the real message. WAL mode is kept by the file itself, so it
        is set here once rather than on every connection.

        Raises:
            StoreError: the database cannot be reached, opened or created.
        """
        if self.dialect == "sqlite":
            path, timeout_s = str(self._url.database), self._timeout_s
            async with translate_errors(operation, self._url):
                await asyncio.to_thread(_open_in_wal_mode, path, timeout_s)
        async with self.read(operation):
            pass

    @contextlib.asynccontextmanager
    async def write(self, operation: str) -> AsyncIterator[AsyncConnection]:
        """A connection in a write transaction, committed when the block ends.

        An exception in the block rolls everything back, so a failed operation leaves
        nothing half-written.

        Raises:
            StoreError: the database failed (see :func:`translate_errors`).
            UsageError: the store is closed.
        """
        self._check_open(operation)
        async with translate_errors(operation, self._url):
            lock = self._sqlite_writes or contextlib.nullcontext()
            async with lock, self._writer.begin() as conn:
                yield conn

    async def run_write(self, operation: str, work: Callable[[Connection], _T]) -> _T:
        """Run ``work`` (synchronous, on a plain SQLAlchemy connection) in a write transaction.

        The transaction commits when ``work`` returns and rolls back if it raises. On
        SQLite the whole transaction runs in one trip to a dedicated writer thread with
        its own connection, where :meth:`write` makes a trip per statement to aiosqlite's
        thread; it queues on the same lock as :meth:`write`, so the process still has one
        writer at a time. On PostgreSQL ``work`` runs through ``run_sync`` on the async
        engine. ``work`` must only touch the database through its connection.

        If the caller is cancelled while the writer thread runs ``work``, the transaction
        still completes (a thread cannot be interrupted); what it wrote stays written.

        Raises:
            StoreError: the database failed (see :func:`translate_errors`), or ``work``
                raised it; nothing is written then.
            UsageError: the store is closed.
        """
        self._check_open(operation)
        async with translate_errors(operation, self._url):
            return await self._transaction(work)

    async def run_grouped_write(
        self, operation: str, work: Callable[[Connection], _T], *, alone: bool = False
    ) -> _T:
        """:meth:`run_write`, sharing one transaction and one commit with concurrent writes.

        Group commit: writes that arrive while a grouped transaction runs, or in the
        same turn of the event loop, wait for the next one, which runs them all in
        arrival order and commits once, so N concurrent records cost one commit and one
        log sync instead of N. On SQLite that transaction runs on the event loop's thread
        two turns of the loop after the first write of the round, so the writes of the
        next turn join it too (:class:`_WriteGroup`), and on the writer thread when it
        would wait for a lock. This returns only after the commit that holds ``work``
        succeeded, so a caller that delivers after it still delivers only what is
        durable (invariant 10).

        ``work`` must touch only rows no concurrent grouped write touches in another
        order (the trace writes of one run), so a group cannot deadlock with another
        process's group. It must act only through the connection: when a write of the
        group raises, the group's transaction is rolled back and run again with each
        write in a savepoint (and a round that would wait for a lock is run again on the
        writer thread), so ``work`` may run more than once.

        ``alone``: the caller knows of no other write of the process under way or about to
        come (no other reply in flight). On SQLite, when the writer thread is idle and no
        group is queued or due, the transaction then runs at once on the calling thread,
        its log sync included (:class:`_SqliteHere`), without waiting for the loop's next
        turn; if it would wait for a lock it goes the way of any other. It counts as a
        round of one, committed or failed. Ignored on PostgreSQL.

        Raises:
            StoreError: ``work`` raised it or the database refused it (its savepoint is
                rolled back; the others in the group still commit), or the group's
                transaction or commit failed (then nothing of the group is written).
            UsageError: the store is closed.
        """
        self._check_open(operation)
        async with translate_errors(operation, self._url):
            if alone and (here := self._idle_write_here()) is not None:
                ran = True
                try:
                    return here.run(work)
                except _WouldWait:
                    ran = False  # nothing of it ran: it goes the usual way, below
                finally:
                    if ran and self._grouping:
                        self._group.count_lone()
            if not self._grouping:
                return await self._transaction(work)
            return await self._group.submit(work)

    def _grouped_write_here(self, work: Callable[[Connection], _T]) -> _T:
        """A round of group commit on this thread (SQLite); :class:`_WouldWait` if it cannot.

        Not while another write of the process holds the writers' lock: its transaction
        may hold the file's write lock, which this connection would find busy anyway.
        """
        if self._sqlite_write_here is None or (
            self._sqlite_writes is not None and self._sqlite_writes.locked()
        ):
            raise _WouldWait
        return self._sqlite_write_here.run(work)

    def _idle_write_here(self) -> _SqliteHere | None:
        """The calling thread's write connection, if no write of the process runs or waits."""
        if self._sqlite_writes is None or self._sqlite_writes.locked() or not self._group.idle:
            return None
        return self._sqlite_write_here

    async def run_shared_write(self, operation: str, work: Callable[[Connection], _T]) -> _T:
        """:meth:`run_write` for a write to rows that concurrent writes share (daily sums).

        On SQLite it joins the group commit (:meth:`run_grouped_write`): the file's one
        write lock admits one transaction at a time, so no two groups can wait for each
        other's rows. On PostgreSQL, where a group holding one shared row could wait for
        another process's group holding the next, it is a transaction of its own. ``work``
        must act only through the connection (it may run twice, as a grouped write may).

        Raises:
            StoreError: as :meth:`run_grouped_write` and :meth:`run_write`.
            UsageError: the store is closed.
        """
        if self._sqlite_here is None:
            return await self.run_write(operation, work)
        return await self.run_grouped_write(operation, work)

    @property
    def group_commits(self) -> GroupCommits:
        """How many grouped transactions ran and how many writes they held."""
        return GroupCommits(rounds=self._group.rounds, writes=self._group.writes)

    async def _transaction(self, work: Callable[[Connection], _T]) -> _T:
        # One write transaction, as run_write runs it, without the error translation
        # (each grouped caller translates under its own operation name).
        if self._sqlite_writer is None or self._sqlite_writes is None:  # PostgreSQL
            async with self._writer.begin() as conn:
                return await conn.run_sync(work)
        async with self._sqlite_writes:
            return await self._sqlite_writer.run(work)

    async def run_read(
        self, operation: str, work: Callable[[Connection], _T], *, statement: bool = False
    ) -> _T:
        """Run ``work`` (synchronous, on a plain SQLAlchemy connection) in a read transaction.

        On SQLite on the calling thread, never waiting for a lock (see :class:`_SqliteHere`),
        or when it would have to wait, in one trip to a dedicated reader thread with its own
        connection; both connections are read-only, so a write there fails (StoreError)
        and writes nothing. On PostgreSQL through ``run_sync``. ``work`` must only touch
        the database through its connection, and read a few rows by an index: on SQLite
        it runs on the event loop's thread.

        Raises:
            StoreError: the database failed (see :func:`translate_errors`).
            UsageError: the store is closed.
        """
        self._check_open(operation)
        async with translate_errors(operation, self._url):
            if self._sqlite_reader is None or self._sqlite_here is None:
                async with self._engine.connect() as conn:
                    return await conn.run_sync(work)
            try:
                return self._sqlite_here.run(work, statement=statement)
            except _WouldWait:
                return await self._sqlite_reader.run(work)

    async def run_statement(
        self,
        operation: str,
        statement: Executable | DriverSelect,
        params: Mapping[str, Any],
        *,
        write: bool,
    ) -> Sequence[Any]:
        """Run one statement as a transaction of its own; return every row it returned (if any).

        A single statement is atomic by itself, so on PostgreSQL it runs in autocommit
        mode, straight on the async connection: no ``BEGIN`` and ``COMMIT`` (or
        ``ROLLBACK``) around it, two round trips fewer, and no ``run_sync`` hand-off
        (benchmarks/README.md, "The per-key rate limit"). On SQLite it runs as
        :meth:`run_write` (``write``) or :meth:`run_read` would run it; a
        :class:`DriverSelect` there on the driver itself, its rows named tuples.

        Raises:
            StoreError: the database failed (see :func:`translate_errors`).
            UsageError: the store is closed.
        """
        executable = statement.statement if isinstance(statement, DriverSelect) else statement

        def work(conn: Connection) -> Sequence[Any]:
            if isinstance(statement, DriverSelect):
                return statement.run(conn, params)
            result = conn.execute(statement, params)
            return result.all() if result.returns_rows else ()

        if self._sqlite_here is not None:
            if write:
                return await self.run_write(operation, work)
            # On the driver a DriverSelect is one statement: no BEGIN/COMMIT around it.
            return await self.run_read(
                operation, work, statement=isinstance(statement, DriverSelect)
            )
        self._check_open(operation)
        async with translate_errors(operation, self._url), self._autocommit.connect() as conn:
            result = await conn.execute(executable, params)
            return result.all() if result.returns_rows else ()

    @contextlib.asynccontextmanager
    async def read(self, operation: str) -> AsyncIterator[AsyncConnection]:
        """A connection in a read transaction (one consistent snapshot), rolled back at the end.

        Raises:
            StoreError: the database failed (see :func:`translate_errors`).
            UsageError: the store is closed.
        """
        self._check_open(operation)
        async with translate_errors(operation, self._url), self._engine.connect() as conn:
            yield conn

    def insert_ignoring_conflict(
        self, table: Table, values: Mapping[str, Any], conflict_columns: Sequence[str]
    ) -> Insert:
        """An INSERT that does nothing when a row with the same ``conflict_columns`` exists."""
        return self.insert_ignoring_conflict_of(table, conflict_columns).values(**values)

    def insert_ignoring_conflict_of(self, table: Table, conflict_columns: Sequence[str]) -> Insert:
        """The same INSERT without values: built once, executed with each row as parameters."""
        dialect_insert: Callable[[Table], Any]
        if self.dialect == "sqlite":
            dialect_insert = sqlite.insert
        else:
            from sqlalchemy.dialects import postgresql  # loaded for a PostgreSQL store only

            dialect_insert = postgresql.insert
        return dialect_insert(table).on_conflict_do_nothing(index_elements=list(conflict_columns))

    async def run_undoable(
        self, write: Coroutine[Any, Any, _T], undo: Callable[[_T], Awaitable[object]]
    ) -> _T:
        """``write``'s value; if the caller is cancelled meanwhile, what it made is undone.

        A write cannot be stopped half-way once it runs (on SQLite a transaction runs to
        its end on the writer thread; on PostgreSQL a statement may be committed before
        its answer arrives), so a cancelled caller would leave behind what nobody will use
        or give back: a reservation holding a day's room, a lease holding a conversation.
        Here ``write`` runs to its end regardless, and if it succeeded ``undo`` is applied
        to its value; :meth:`dispose` waits for both. An ``undo`` that fails leaves the
        write in place, as a caller that crashed would have.

        Raises:
            Whatever ``write`` raises; ``asyncio.CancelledError`` when the caller is
            cancelled.
        """
        task = asyncio.ensure_future(write)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self._abandoned.add(task)
            task.add_done_callback(functools.partial(self._undo, undo=undo))
            raise

    def _undo(self, task: asyncio.Future[_T], *, undo: Callable[[_T], Awaitable[object]]) -> None:
        self._abandoned.discard(task)
        if task.cancelled() or task.exception() is not None:
            return  # nothing was written
        undoing = asyncio.ensure_future(undo(task.result()))
        self._abandoned.add(undoing)
        undoing.add_done_callback(self._undone)

    def _undone(self, undoing: asyncio.Future[object]) -> None:
        self._abandoned.discard(undoing)
        if not undoing.cancelled():
            undoing.exception()  # retrieved, not raised: nobody is waiting for it

    async def dispose(self) -> None:
        """Close every pooled connection; the database cannot be used afterwards.

        First waits for the writes of cancelled callers to end and be undone
        (:meth:`run_undoable`).
        """
        if self._closed:
            return
        while self._abandoned:
            await asyncio.gather(*self._abandoned, return_exceptions=True)
        self._closed = True
        await self._group.drained()
        if self._sqlite_writer is not None and self._sqlite_reader is not None:
            await self._sqlite_writer.close()
            await self._sqlite_reader.close()
        if self._sqlite_here is not None:
            self._sqlite_here.close()
        if self._sqlite_write_here is not None:
            self._sqlite_write_here.close()
        await self._engine.dispose()

    def _check_open(self, operation: str) -> None:
        if self._closed:
            raise UsageError(f"the store is closed; cannot {operation}")


@dataclasses.dataclass(frozen=True, slots=True)
class GroupCommits:
    """What group commit has done in one store since it opened."""

    rounds: int
    """Grouped transactions run (committed or failed)."""
    writes: int
    """Writes those transactions held; ``writes / rounds`` is the mean group size."""


_MAX_GROUP = 64
"""The most writes one grouped transaction takes; the rest wait for the next."""


@dataclasses.dataclass(slots=True)
class _Queued:
    work: Callable[[Connection], Any]
    done: asyncio.Future[Any]


class _WriteGroup:
    """Concurrent writes folded into one transaction (see :meth:`Database.run_grouped_write`).

    Writes queue; each round takes every write queued so far (up to ``_MAX_GROUP``) into
    one transaction, and the writes that arrive meanwhile make the next round. With
    ``here`` (SQLite), the first write queued while none is sets a commit point two turns
    of the loop later, by which time the writes that became ready in this turn and the
    next have joined it, and the round runs there, synchronously on the event loop's
    thread: no hand-off to a writer thread and back, and no other coroutine runs while it
    does. The second turn makes rounds larger under load (replies finishing in the turn
    after the first one's join it) at the cost of that turn's wait. A round that
    ``here`` cannot run (it raises :class:`_WouldWait`: a lock it would wait for),
    and every round without ``here`` (PostgreSQL), runs in a drain task through
    ``transaction``; writes that arrive while a drain task runs join it. A write whose
    caller was cancelled before its round began is left out; once its round began it is
    written, as :meth:`Database.run_write` writes a cancelled caller's transaction.
    """

    def __init__(
        self,
        transaction: Callable[[Callable[[Connection], Any]], Any],
        *,
        here: Callable[[Callable[[Connection], Any]], Any] | None = None,
    ) -> None:
        self._transaction = transaction
        self._here = here
        self._queue: list[_Queued] = []
        self._drain: asyncio.Task[None] | None = None
        self._commit_point: asyncio.Handle | None = None
        self.rounds = 0
        self.writes = 0

    @property
    def idle(self) -> bool:
        """Whether no write is queued and no round is running or due."""
        return not self._queue and self._drain is None and self._commit_point is None

    def count_lone(self) -> None:
        """Count a write that ran alone, outside the group, as a round of one (either way)."""
        self.rounds += 1
        self.writes += 1

    async def submit(self, work: Callable[[Connection], _T]) -> _T:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[_T] = loop.create_future()
        self._queue.append(_Queued(work, done))
        if self._drain is None and self._commit_point is None:
            if self._here is None:
                self._start_drain(loop)
            else:
                self._commit_point = loop.call_soon(self._next_turn, loop)
        return await done

    async def drained(self) -> None:
        """Wait until every queued write has had its round."""
        while not self.idle:
            if self._commit_point is not None:
                self._commit_point.cancel()  # due anyway: its round runs now
                self._commit_here(asyncio.get_running_loop())
            if self._drain is not None:
                await asyncio.shield(self._drain)

    def _take(self) -> list[_Queued]:
        """The next round's writes: the first ``_MAX_GROUP`` queued, less cancelled callers'."""
        taken, self._queue = self._queue[:_MAX_GROUP], self._queue[_MAX_GROUP:]
        return [queued for queued in taken if not queued.done.done()]

    def _start_drain(self, loop: asyncio.AbstractEventLoop) -> None:
        self._drain = loop.create_task(self._run_rounds(), name="foureyes-group-commit")

    def _next_turn(self, loop: asyncio.AbstractEventLoop) -> None:
        # The commit point's first turn: the writes of the turn after the first one's
        # join too (benchmarks/README.md, "A commit point one turn later").
        self._commit_point = loop.call_soon(self._commit_here, loop)

    def _commit_here(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self._here is not None
        self._commit_point = None
        while self._queue and self._drain is None:
            batch = self._take()
            if not batch:
                continue
            works = [queued.work for queued in batch]
            try:
                outcomes = self._run(self._here, works)
            except _WouldWait:
                # Nothing of it was written: the round goes to the drain task, which
                # waits for the lock as long as the store's timeout allows.
                self._queue[:0] = batch
                self._start_drain(loop)
                return
            except BaseException as exc:  # the transaction or its commit
                self._count(batch)
                self._fail(batch, exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            self._count(batch)
            self._settle(batch, outcomes)

    async def _run_rounds(self) -> None:
        try:
            while self._queue:
                if batch := self._take():
                    await self._round(batch)
        finally:
            self._drain = None

    async def _round(self, batch: list[_Queued]) -> None:
        self._count(batch)
        works = [queued.work for queued in batch]
        try:
            try:
                outcomes = await self._transaction(lambda conn: _all_or_none(conn, works))
            except _Refused:
                # One write raised, so that transaction was rolled back whole: the round
                # runs again with each write in a savepoint, kept apart from the others.
                outcomes = await self._transaction(lambda conn: _each_in_savepoint(conn, works))
        except BaseException as exc:  # the transaction or its commit: the whole round failed
            self._fail(batch, exc)
            if not isinstance(exc, Exception):
                raise
            return
        self._settle(batch, outcomes)

    @staticmethod
    def _run(
        here: Callable[[Callable[[Connection], Any]], Any],
        works: Sequence[Callable[[Connection], Any]],
    ) -> list[tuple[Any, Exception | None]]:
        """A round on ``here``, as :meth:`_round` runs one through the transaction."""
        try:
            outcomes: list[tuple[Any, Exception | None]] = here(
                lambda conn: _all_or_none(conn, works)
            )
        except _Refused:
            outcomes = here(lambda conn: _each_in_savepoint(conn, works))
        return outcomes

    def _count(self, batch: list[_Queued]) -> None:
        self.rounds += 1
        self.writes += len(batch)

    @staticmethod
    def _fail(batch: list[_Queued], error: BaseException) -> None:
        for queued in batch:
            if not queued.done.done():
                queued.done.set_exception(error)

    @staticmethod
    def _settle(batch: list[_Queued], outcomes: list[tuple[Any, Exception | None]]) -> None:
        for queued, (value, error) in zip(batch, outcomes, strict=True):
            if queued.done.done():
                continue
            if error is None:
                queued.done.set_result(value)
            else:
                queued.done.set_exception(error)


class _Refused(Exception):
    """A write of a group raised: its transaction is rolled back and the round rerun."""


def _all_or_none(
    conn: Connection, works: Sequence[Callable[[Connection], Any]]
) -> list[tuple[Any, Exception | None]]:
    """Run ``works`` in order in ``conn``'s transaction, without a savepoint each.

    The common round, where every write succeeds, costs no savepoint statements. A write
    alone runs as it is (its error fails the transaction, as in ``run_write``); in a group
    the first that raises fails the transaction with :class:`_Refused`, and the round is
    rerun by :func:`_each_in_savepoint`. A write is a function of the connection only, so
    running it again after the rollback writes what it would have written the first time.
    """
    if len(works) == 1:
        return [(works[0](conn), None)]
    values = []
    for work in works:
        try:
            values.append(work(conn))
        except Exception as exc:
            raise _Refused from exc
    return [(value, None) for value in values]


def _each_in_savepoint(
    conn: Connection, works: Sequence[Callable[[Connection], Any]]
) -> list[tuple[Any, Exception | None]]:
    """Run ``works`` in order in ``conn``'s transaction, each result or error kept apart.

    Each runs in a savepoint, so one that raises is rolled back alone.
    """
    outcomes: list[tuple[Any, Exception | None]] = []
    for work in works:
        savepoint = conn.begin_nested()
        try:
            value = work(conn)
        except Exception as exc:
            savepoint.rollback()
            outcomes.append((None, exc))
        else:
            savepoint.commit()
            outcomes.append((value, None))
    return outcomes


def _one_trip(url: URL) -> URL:
    # aiosqlite's dialect with one trip to its thread per statement (see _sqlite_driver).
    return url.set(drivername=DRIVER_NAME) if url.drivername == "sqlite+aiosqlite" else url


def _ping_idle_connections(engine: AsyncEngine, idle_s: float) -> None:
    """Check a pooled connection before use only when it has been idle ``idle_s`` or more.

    SQLAlchemy's ``pool_pre_ping`` checks every checkout, and asyncpg's ping is a
    transaction of its own (``BEGIN``, an empty query, ``ROLLBACK``): three round trips
    before each of a reply's three transactions. A connection in steady use is not
    checked: if the server went away under it, the statement fails (a StoreError, so the
    request fails closed), SQLAlchemy marks the pool's connections stale, and the next
    checkout connects anew. A connection idle for ``idle_s`` (where a restart or a
    network timeout most likely struck) is pinged, and a dead one is replaced before use.
    """

    @event.listens_for(engine.sync_engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine.sync_engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
        since = record.info.get("idle_since")
        if since is None or time.monotonic() - since < idle_s:
            return  # new, or in steady use
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            # The pool discards this connection and checks out another (or a new one).
            raise DisconnectionError(f"a pooled connection idle for {idle_s} s is gone") from exc


def _configure_sqlite(engine: AsyncEngine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        # The driver's own implicit BEGIN skips SELECTs and DDL; SQLAlchemy's begin hook
        # below emits a real one instead.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            for pragma in _sqlite_pragmas(busy_timeout_ms):
                cursor.execute(pragma)
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        immediate = connection.get_execution_options().get(_WRITE_OPTION, False)
        # One statement on the driver's connection: one trip to aiosqlite's thread, where
        # a cursor through SQLAlchemy costs three (open, execute, close). Its failure (a
        # busy timeout) propagates as sqlite3.Error, which translate_errors turns into
        # StoreError like any other.
        await_(_driver_of(connection).execute("BEGIN IMMEDIATE" if immediate else "BEGIN"))

    @event.listens_for(engine.sync_engine, "reset")
    def _on_reset(
        dbapi_connection: Any, _record: ConnectionPoolEntry, state: PoolResetState
    ) -> None:
        # With pool_reset_on_return=None this is the only reset: a connection that comes
        # back still inside a transaction (its block was interrupted) is rolled back, so
        # the next user never inherits a half-done write or a held write lock.
        if state.asyncio_safe and dbapi_connection.driver_connection.in_transaction:
            dbapi_connection.rollback()


class _SqliteThread:
    """Transactions of an SQLite store, each run whole on one dedicated thread.

    The thread owns a synchronous engine (the standard ``sqlite3`` driver) on the same
    file, configured as the async one (the same pragmas; the writer's transactions begin
    with ``BEGIN IMMEDIATE``, the reader's connection is read-only). Its connection is
    opened and used only on that thread, and kept open between transactions
    (:class:`_KeptConnection`).
    """

    def __init__(self, url: URL, timeout_s: float, *, name: str, write: bool) -> None:
        busy_timeout_ms = max(1, round(timeout_s * 1000))
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"foureyes-sqlite-{name}"
        )
        self._connection = _KeptConnection(
            url.set(drivername="sqlite+pysqlite"), busy_timeout_ms, write=write
        )

    async def run(self, work: Callable[[Connection], _T]) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._connection.transaction, work)

    async def close(self) -> None:
        # The engine is disposed on its own thread, after any transaction still queued.
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._connection.close)
        self._thread.shutdown(wait=False)


class _KeptConnection:
    """One synchronous SQLite connection, kept open from one transaction to the next.

    Checking a connection out of the pool and back in around every transaction costs
    more than the short transactions of a reply; this begins each on the same open
    connection. A transaction that raises closes it, so a connection in an unknown state
    is never reused: the next transaction opens a new one. With ``write`` each
    transaction begins ``IMMEDIATE`` (it takes the write lock at once); without, the
    connection is read-only (``PRAGMA query_only``): a write through it fails.
    """

    def __init__(self, url: URL, busy_timeout_ms: int, *, write: bool) -> None:
        self._url = url
        self._busy_timeout_ms = busy_timeout_ms
        self._write = write
        self._engine: Engine | None = None
        self._connection: Connection | None = None

    def transaction(self, work: Callable[[Connection], _T], *, explicit: bool = True) -> _T:
        """``work``'s value, in a transaction of its own.

        ``explicit=False``: no ``BEGIN`` and ``COMMIT`` around ``work``, for one statement
        on the driver. The driver's connection is in autocommit mode, so that statement is
        a transaction of its own (a ``SELECT`` reads one snapshot), and SQLAlchemy's
        ``BEGIN`` and ``COMMIT`` around it would cost more than the statement.
        """
        conn = self._open()
        try:
            if not explicit:
                return work(conn)
            with conn.begin():
                return work(conn)
        except BaseException:
            self._connection = None
            conn.close()
            raise

    def _open(self) -> Connection:
        if self._connection is None:
            if self._engine is None:
                self._engine = _sync_sqlite_engine(
                    self._url, self._busy_timeout_ms, write=self._write
                )
            self._connection = self._engine.connect()
        return self._connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


_SQLITE_WAITS = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


class _WouldWait(Exception):
    """A transaction :class:`_SqliteHere` does not run: it would wait, or comes from elsewhere."""


class _SqliteHere:
    """Transactions of an SQLite store run on the calling thread, never waiting for a lock.

    Reads: a read in WAL mode needs no lock a writer holds: it reads the committed pages
    and the log's index, so a short indexed read costs tens of microseconds, less than the
    hand-off to a reader thread and back. Grouped writes (``write``): a round of group
    commit, or a write alone, skips the two hand-offs to the writer thread and back
    (about 0.3 ms of a reply at one client, and the waits for the interpreter's lock
    beside a busy loop under load; benchmarks/README.md); it blocks the calling thread
    for its statements and its log sync, which the replies of the round wait for anyway.

    The connection has a busy timeout of zero: when the transaction would have to wait
    (another connection's write lock, a checkpoint resetting the log, a recovery) it is
    not run here and :meth:`run` raises :class:`_WouldWait`, for the caller to run it on
    its thread. The connection belongs to the first thread that uses it; a transaction
    from another thread is not run here either. A reading one is read-only (``PRAGMA
    query_only``): a write through it fails, so a read on the event loop's thread never
    takes the file's write lock. A writing one begins ``IMMEDIATE``, as the writer
    thread's does.
    """

    def __init__(self, url: URL, *, write: bool = False) -> None:
        self._connection = _KeptConnection(url.set(drivername="sqlite+pysqlite"), 0, write=write)
        self._owner: int | None = None

    def run(self, work: Callable[[Connection], _T], *, statement: bool = False) -> _T:
        """``work``'s value, its transaction run on this thread.

        ``statement``: ``work`` runs one statement on the driver, which is a transaction
        of its own there (:meth:`_KeptConnection.transaction`).

        Raises:
            _WouldWait: the transaction would wait for a lock (nothing of it is written),
                or this is not the owner thread.
            sqlalchemy.exc.DBAPIError, sqlite3.Error: it failed for another reason.
        """
        here = threading.get_ident()
        if self._owner is None:
            self._owner = here
        if here != self._owner:
            raise _WouldWait
        try:
            return self._connection.transaction(work, explicit=not statement)
        except (OperationalError, sqlite3.OperationalError) as exc:
            # SQLAlchemy's error wraps the driver's; a failed BEGIN raises the driver's own.
            code = getattr(getattr(exc, "orig", exc), "sqlite_errorcode", None)
            if code is not None and code & 0xFF in _SQLITE_WAITS:
                raise _WouldWait from exc
            raise

    def close(self) -> None:
        self._connection.close()


def _sync_sqlite_engine(url: URL, busy_timeout_ms: int, *, write: bool) -> Engine:
    # The thread's only connection: every transaction ends in COMMIT or ROLLBACK. It may
    # be closed from another thread than the one it ran on (a store disposed elsewhere).
    begin = "BEGIN IMMEDIATE" if write else "BEGIN"
    pragmas = _sqlite_pragmas(busy_timeout_ms) + (() if write else ("PRAGMA query_only = ON",))
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False},
        poolclass=pool.StaticPool,
        pool_reset_on_return=None,
        json_serializer=_encode_json,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        dbapi_connection.isolation_level = None  # our own BEGIN, below
        for pragma in pragmas:
            dbapi_connection.execute(pragma)

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        # Straight on the driver's connection: SQLAlchemy's statement execution around
        # a bare BEGIN costs more than the statement (benchmarks/README.md, "Read-only
        # SQLite readers"). Its error (a busy timeout) is sqlite3's own, which
        # translate_errors turns into StoreError like any other.
        _driver_of(connection).execute(begin)

    return engine


def _sqlite_pragmas(busy_timeout_ms: int) -> tuple[str, ...]:
    """The per-connection settings of an SQLite store.

    ``synchronous = FULL`` is pinned rather than left to the build's default: in WAL mode
    it syncs the log on every commit, so a committed decision record survives a power
    loss or an OS crash, not just a crash of the process (invariant 10: the record is
    durable before the reply leaves). ``NORMAL`` would save that sync (about 0.25 ms per
    commit on the benchmark machine) by letting the last commits vanish on power loss.
    """
    return (
        f"PRAGMA busy_timeout = {busy_timeout_ms}",
        "PRAGMA foreign_keys = ON",
        "PRAGMA synchronous = FULL",
    )


def _open_in_wal_mode(path: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    with contextlib.closing(sqlite3.connect(path, timeout=timeout_s)) as connection:
        if connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
            return
        while True:
            try:
                connection.execute("PRAGMA journal_mode = WAL").fetchone()
                return
            except sqlite3.OperationalError as exc:
                # Switching to WAL does not wait on the busy handler; when another opener
                # holds the file, wait here as long as any other operation would.
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)
