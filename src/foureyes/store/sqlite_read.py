"""The run list read straight from an SQLite store at head, without opening the store.

``foureyes trace list`` is one query. Opening the store for it (:meth:`Store.open`) loads
the async engine (SQLAlchemy's asyncio extension, which imports its ORM, and aiosqlite)
and runs a write transaction, several times the CPU of the query itself
(benchmarks/README.md, "Starting the command line"). A file that :meth:`Store.open`
would find at :data:`~foureyes.store._migrate.HEAD_REVISION`, in WAL mode, with its keys
made, is read here instead, by the same query (:func:`~foureyes.store.trace_list.
limited_list_query`) and the same row mapping, on one synchronous read-only connection.

Anything else returns ``None``, and the caller opens the store as before, which then
migrates the file, makes its keys, switches it to WAL or reports what failed: another
backend, no file yet, an older or newer schema, a key variable configured in
``[privacy]`` (opening checks it is set), or any error of the database.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from sqlalchemy import create_engine, func, pool, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.store._migrate import HEAD_REVISION, current_revisions
from foureyes.store.tables import HMAC_KEY_NAME, UNKNOWNS_KEY_NAME, store_secrets
from foureyes.store.trace_list import RunFilter, RunSummary, limited_list_query, summary_of

__all__ = ["list_runs_at_head"]

_KEYS = (HMAC_KEY_NAME, UNKNOWNS_KEY_NAME)


def _sqlite_file(url: str) -> Path | None:
    """The file of an SQLite store URL that names an existing file, else ``None``."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    path = Path(parsed.database)
    return path if path.is_file() else None


def list_runs_at_head(
    store: StoreConfig, privacy: PrivacyConfig, where: RunFilter, *, limit: int
) -> list[RunSummary] | None:
    """The runs ``where`` selects, newest first, if the store is an SQLite file at head.

    The same list as ``Store.traces.list_runs(where, limit=limit)`` on that store; ``None``
    when this path does not serve it (see the module's docstring), the store untouched.

    Raises:
        UsageError: ``limit`` is out of range or ``where`` is not a filter, as
            :meth:`~foureyes.store.traces.SqlTraceWriter.list_runs` says.
    """
    query = limited_list_query(where, limit)
    path = _sqlite_file(store.url)
    if path is None or privacy.hmac_key_env is not None or privacy.unknowns_key_env is not None:
        return None

    def connect() -> sqlite3.Connection:
        # ``timeout`` is the busy timeout; the file exists (checked above), and reading
        # only, this connection never writes it.
        connection = sqlite3.connect(path, timeout=store.timeout_s)
        connection.execute("PRAGMA query_only = ON")
        return connection

    engine = create_engine("sqlite://", creator=connect, poolclass=pool.NullPool)
    try:
        with contextlib.closing(engine.connect()) as conn:
            mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
            if str(mode).lower() != "wal" or current_revisions(conn) != (HEAD_REVISION,):
                return None
            keys = select(func.count()).where(store_secrets.c.name.in_(_KEYS))
            if conn.execute(keys).scalar_one() != len(_KEYS):
                return None
            rows = conn.execute(query).all()
    except (SQLAlchemyError, sqlite3.Error, OSError):
        return None  # opening the store reports it, as a StoreError
    finally:
        engine.dispose()
    return [summary_of(row) for row in rows]
