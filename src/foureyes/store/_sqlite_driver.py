"""SQLAlchemy's aiosqlite dialect, with one trip to the driver's thread per statement.

aiosqlite runs each SQLite call on its connection's own thread, and SQLAlchemy's adapter
makes one trip there for every cursor operation: open the cursor, execute, fetch the
rows, close it. Each trip is a queue hand-off to the thread and a wake-up of the event
loop, and on the gateway's hot path those hand-offs, not SQLite, were most of the store's
CPU. The cursor here runs the four steps as one function in one trip and keeps what
SQLAlchemy reads afterwards (the rows, ``description``, ``rowcount``, ``lastrowid``).

Everything else is the stock dialect: the same connection, pool, transaction handling and
error translation. Only the SQLite engine of :class:`~foureyes.store._database.Database`
uses it; the URL a user writes stays ``sqlite+aiosqlite://``.
"""

from __future__ import annotations

import collections
import sqlite3
from typing import Any

from sqlalchemy.dialects import registry
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
    SQLiteDialect_aiosqlite,
)
from sqlalchemy.util import EMPTY_DICT

__all__ = ["DRIVER_NAME", "OneTripSQLiteDialect"]

DRIVER_NAME = "sqlite+foureyes_aiosqlite"
"""The ``drivername`` that selects :class:`OneTripSQLiteDialect` in an engine URL."""

_Outcome = tuple[list[Any], Any, int, int | None]


def _execute(
    connection: sqlite3.Connection, operation: str, parameters: Any, many: bool
) -> _Outcome:
    """Runs on aiosqlite's thread: the whole life of one cursor."""
    cursor = connection.cursor()
    try:
        if many:
            cursor.executemany(operation, parameters)
        elif parameters is None:
            cursor.execute(operation)
        else:
            cursor.execute(operation, parameters)
        rows = cursor.fetchall() if cursor.description else []
        # Read after the fetch: for UPDATE ... RETURNING, SQLite counts rows as they step.
        return rows, cursor.description, cursor.rowcount, cursor.lastrowid
    finally:
        cursor.close()


class _OneTripCursor(AsyncAdapt_aiosqlite_cursor):
    """A client-side cursor whose statement, fetch and close are one trip to the thread."""

    __slots__ = ("_description", "_lastrowid", "_rowcount")

    def __init__(self, adapt_connection: AsyncAdapt_aiosqlite_connection) -> None:
        # The parent opens a driver cursor here (a trip of its own); this one opens it
        # on the thread, inside the statement's trip.
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._rows: collections.deque[Any] = collections.deque()
        self._soft_closed_memoized = EMPTY_DICT
        self._description: Any = None
        self._rowcount = -1
        self._lastrowid: int | None = None

    @property
    def description(self) -> Any:
        return self._description

    @property
    def rowcount(self) -> int:
        return self._rowcount

    @property
    def lastrowid(self) -> Any:
        return self._lastrowid

    @property
    def arraysize(self) -> int:
        return 1

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        pass

    async def _async_soft_close(self) -> None:
        return None

    def close(self) -> None:
        self._rows.clear()

    async def _execute_async(self, operation: Any, parameters: Any) -> None:
        await self._run(operation, parameters, many=False)

    async def _executemany_async(self, operation: Any, seq_of_parameters: Any) -> None:
        await self._run(operation, seq_of_parameters, many=True)

    async def _run(self, operation: Any, parameters: Any, *, many: bool) -> None:
        aio = self._connection
        async with self._adapt_connection._execute_mutex:
            # aiosqlite's queue to its thread; its ``_conn`` is the sqlite3 connection
            # (raising "no active connection" once closed, as any other call would).
            rows, description, rowcount, lastrowid = await aio._execute(
                _execute, aio._conn, operation, parameters, many
            )
        self._rows = collections.deque(rows)
        self._description = description
        self._rowcount = rowcount
        self._lastrowid = lastrowid


class _OneTripConnection(AsyncAdapt_aiosqlite_connection):
    __slots__ = ()

    # The stock class annotates its cursor class exactly; ours is a subclass.
    _cursor_cls = _OneTripCursor  # type: ignore[assignment]


class _OneTripDbapi(AsyncAdapt_aiosqlite_dbapi):
    def connect(self, *arg: Any, **kw: Any) -> AsyncAdapt_aiosqlite_connection:
        adapted = super().connect(*arg, **kw)
        return _OneTripConnection(self, adapted._connection)


class OneTripSQLiteDialect(SQLiteDialect_aiosqlite):
    """The aiosqlite dialect with :class:`_OneTripCursor` as its (client-side) cursor."""

    supports_statement_cache = True

    @classmethod
    def import_dbapi(cls) -> AsyncAdapt_aiosqlite_dbapi:
        return _OneTripDbapi(__import__("aiosqlite"), __import__("sqlite3"))


registry.register(DRIVER_NAME.replace("+", "."), __name__, "OneTripSQLiteDialect")
