"""Inserts and selects on SQLite's driver: the same values as SQLAlchemy's, the same failures."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import (
    JSON,
    Column,
    Connection,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    bindparam,
    insert,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB

from foureyes.core.errors import StoreError
from foureyes.store._database import Database, DriverInsert, DriverSelect, EncodedJSON
from foureyes.store.tables import UTCDateTime

_META = MetaData()
_PARENTS = Table("parents", _META, Column("id", String(8), primary_key=True))


def _rows_table(name: str) -> Table:
    # The column types of the store's hot inserts: text, a nullable count, UTC time, JSON.
    return Table(
        name,
        _META,
        Column("id", Integer, primary_key=True),
        Column("parent", String(8), ForeignKey("parents.id"), nullable=False),
        Column("label", String(64), nullable=True),
        Column("count", Integer, nullable=True),
        Column("at", UTCDateTime, nullable=False),
        Column("doc", JSON().with_variant(JSONB(), "postgresql"), nullable=False),
    )


_DRIVER = _rows_table("by_driver")
_SQLALCHEMY = _rows_table("by_sqlalchemy")

# Text the driver can encode (a lone surrogate is refused by both ways alike).
_TEXT_CHARS = st.characters(exclude_categories=["Cs"])
_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(_TEXT_CHARS, max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(_TEXT_CHARS, max_size=5), inner)
    ),
    max_leaves=6,
)
_ZONES = st.builds(
    dt.timezone, st.integers(-23 * 60, 23 * 60).map(lambda m: dt.timedelta(minutes=m))
)
_ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "label": st.none() | st.text(_TEXT_CHARS, max_size=20),
            "count": st.none() | st.integers(-(2**62), 2**62),
            "at": st.datetimes(timezones=_ZONES).filter(lambda at: at.year > 1),
            "doc": st.dictionaries(st.text(max_size=4).filter(str.isalnum), _JSON_VALUES),
        }
    ),
    min_size=1,
    max_size=5,
)


async def _database(url: str) -> Database:
    db = Database.create(url, timeout_s=5.0)
    await db.probe("open")
    await db.run_write("create", lambda conn: _META.create_all(conn))
    await db.run_write("parent", lambda conn: conn.execute(insert(_PARENTS), [{"id": "p"}]))
    return db


def _numbered(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{"id": n, "parent": "p", **row} for n, row in enumerate(rows, 1)]


def _parent(by_driver: DriverInsert, name: str) -> Callable[[Connection], int]:
    """A write that inserts the parent ``name`` through ``by_driver``."""
    return lambda conn: by_driver.run(conn, [{"id": name}])


def _stored(path: Path, table: str) -> list[tuple[Any, ...]]:
    """Each row as SQLite holds it: every column's storage class and value."""
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT typeof(label), label, typeof(count), count, typeof(at), at,"
            f" typeof(doc), doc FROM {table} ORDER BY id"
        ).fetchall()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(rows=_ROWS, encoded=st.booleans())
def test_the_driver_stores_exactly_what_sqlalchemy_stores(
    tmp_path_factory: pytest.TempPathFactory, rows: list[dict[str, Any]], encoded: bool
) -> None:
    # Property: whatever the rows, SQLite holds the same storage class and value in every
    # column, whether the row went through DriverInsert or through SQLAlchemy's insert.
    path = tmp_path_factory.mktemp("driver") / "store.db"
    numbered = _numbered(rows)
    if encoded:  # a document encoded already (the trace writer's) is stored as it is
        numbered = [{**row, "doc": EncodedJSON(json.dumps(row["doc"]))} for row in numbered]
    by_driver = DriverInsert(insert(_DRIVER))

    async def scenario() -> None:
        db = await _database(f"sqlite+aiosqlite:///{path}")
        try:
            inserted = await db.run_write("driver", lambda conn: by_driver.run(conn, numbered))
            await db.run_write(
                "sqlalchemy", lambda conn: conn.execute(insert(_SQLALCHEMY), numbered)
            )
            assert inserted == len(numbered)
            read = await db.run_read("read", lambda conn: conn.execute(select(_DRIVER)).all())
        finally:
            await db.dispose()
        # Read back through SQLAlchemy, the values are the rows' (times in UTC).
        assert [(r.label, r.count, r.at, r.doc) for r in read] == [
            (r["label"], r["count"], r["at"], _document(r["doc"])) for r in numbered
        ]

    asyncio.run(scenario())
    assert _stored(path, "by_driver") == _stored(path, "by_sqlalchemy")


def _document(doc: Any) -> Any:
    return json.loads(doc) if isinstance(doc, EncodedJSON) else doc


async def test_a_refused_row_fails_the_insert_and_its_transaction_writes_nothing(
    store_url: str,
) -> None:
    db = await _database(store_url)
    by_driver = DriverInsert(insert(_DRIVER))
    at = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)
    good = {"id": 1, "parent": "p", "label": "a", "count": 1, "at": at, "doc": {}}
    orphan = good | {"id": 2, "parent": "nobody"}  # no such parent: the foreign key refuses

    def both(conn: Connection) -> int:
        return by_driver.run(conn, [good, orphan])

    try:
        with pytest.raises(StoreError) as refused:
            await db.run_write("insert", both)
        count = await db.run_read("count", lambda conn: len(conn.execute(select(_DRIVER)).all()))
        # The connection is usable after the failure; the good row alone goes in.
        assert await db.run_write("again", lambda conn: by_driver.run(conn, [good])) == 1
    finally:
        await db.dispose()
    assert refused.value.operation == "insert"
    assert count == 0


async def test_a_conflict_ignored_counts_no_row(store_url: str) -> None:
    db = await _database(store_url)
    by_driver = DriverInsert(db.insert_ignoring_conflict_of(_PARENTS, ["id"]))
    try:
        counts = [await db.run_write("parent", _parent(by_driver, name)) for name in ("p", "q")]
    finally:
        await db.dispose()
    assert counts == [0, 1]


async def test_columns_the_table_lacks_are_refused(sqlite_url: str) -> None:
    db = await _database(sqlite_url)
    by_driver = DriverInsert(insert(_PARENTS))
    try:
        with pytest.raises(StoreError, match="nickname"):
            await db.run_write("insert", lambda conn: by_driver.run(conn, [{"nickname": "x"}]))
        assert await db.run_write("empty", lambda conn: by_driver.run(conn, [])) == 0
    finally:
        await db.dispose()


async def test_on_another_driver_the_insert_goes_through_sqlalchemy(sqlite_url: str) -> None:
    # The async engine's SQLite connections (aiosqlite) cannot take the rows directly:
    # the insert runs through SQLAlchemy there, with the same result.
    db = await _database(sqlite_url)
    by_driver = DriverInsert(db.insert_ignoring_conflict_of(_PARENTS, ["id"]))
    try:
        async with db.write("parents") as conn:
            counts = [await conn.run_sync(_parent(by_driver, name)) for name in ("p", "q")]
        names = await db.run_read("read", lambda conn: conn.execute(select(_PARENTS.c.id)).all())
    finally:
        await db.dispose()
    assert counts == [0, 1]
    assert sorted(name for (name,) in names) == ["p", "q"]


def _counted_at_least() -> DriverSelect:
    # Parameters of the caller's (a bound, a limit) and one of the statement's own (the
    # OFFSET SQLite's dialect adds to a LIMIT), every column type of the table.
    return DriverSelect(
        select(_DRIVER)
        .where(_DRIVER.c.count >= bindparam("least"))
        .order_by(_DRIVER.c.at.desc(), _DRIVER.c.id)
        .limit(bindparam("limit"))
    )


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    rows=_ROWS,
    least=st.integers(-(2**62), 2**62),
    limit=st.integers(0, 6),
)
def test_the_driver_reads_exactly_what_sqlalchemy_reads(
    tmp_path_factory: pytest.TempPathFactory, rows: list[dict[str, Any]], least: int, limit: int
) -> None:
    # Property: whatever the rows and parameters, a DriverSelect returns the rows
    # SQLAlchemy's execution returns, in the same order, each field processed alike
    # (times as aware UTC datetimes, documents decoded), read by the columns' keys.
    path = tmp_path_factory.mktemp("select") / "store.db"
    numbered = _numbered(rows)
    by_driver = _counted_at_least()
    params = {"least": least, "limit": limit}

    async def scenario() -> tuple[Sequence[Any], Sequence[Any]]:
        db = await _database(f"sqlite+aiosqlite:///{path}")
        try:
            await db.run_write("rows", lambda conn: conn.execute(insert(_DRIVER), numbered))
            driver = await db.run_read("driver", lambda conn: by_driver.run(conn, params))
            alchemy = await db.run_read(
                "sqlalchemy", lambda conn: conn.execute(by_driver.statement, params).all()
            )
            return driver, alchemy
        finally:
            await db.dispose()

    driver, alchemy = asyncio.run(scenario())
    assert [tuple(row) for row in driver] == [tuple(row) for row in alchemy]
    assert [(r.id, r.label, r.count, r.at, r.doc) for r in driver] == [
        (r.id, r.label, r.count, r.at, r.doc) for r in alchemy
    ]


async def test_a_select_through_run_statement_reads_rows_by_key(store_url: str) -> None:
    # On SQLite on the driver; on PostgreSQL through SQLAlchemy: the same rows either way.
    db = await _database(store_url)
    at = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)
    row = {"id": 1, "parent": "p", "label": "a", "count": 3, "at": at, "doc": {"k": [1]}}
    by_driver = _counted_at_least()
    try:
        await db.run_write("row", lambda conn: conn.execute(insert(_DRIVER), [row]))
        found = await db.run_statement("read", by_driver, {"least": 2, "limit": 5}, write=False)
        none = await db.run_statement("none", by_driver, {"least": 4, "limit": 5}, write=False)
        with pytest.raises(StoreError) as missing:
            await db.run_statement("missing", by_driver, {"limit": 5}, write=False)
    finally:
        await db.dispose()
    assert [(r.id, r.label, r.count, r.at, r.doc) for r in found] == [(1, "a", 3, at, {"k": [1]})]
    assert found[0].at.tzinfo is not None and list(none) == []
    assert missing.value.operation == "missing" and "least" in str(missing.value)
