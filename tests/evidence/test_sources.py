import datetime as dt
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import JSON, Boolean, Column, DateTime, MetaData, String, Table, Text, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from foureyes.evidence import (
    Catalog,
    CatalogError,
    ColumnMap,
    JsonFileCatalogSource,
    SqlCatalogSource,
)
from tests.evidence._support import CATALOG_FILE, example_catalog, example_document

SNAPSHOT = "body-state/u-1001/2026-03-14"

# The application's own table, with its own column names.
app_metadata = MetaData()
body_records = Table(
    "body_records",
    app_metadata,
    Column("record_id", String(64), primary_key=True),
    Column("person_version", String(128), nullable=False),
    Column("category", String(64), nullable=False),
    Column("payload", JSON().with_variant(JSONB(), "postgresql"), nullable=False),
    Column("origin", Text, nullable=False),
    Column("verified", Boolean, nullable=False),
    Column("recorded_at", String(64), nullable=False),
    Column("person", String(64), nullable=False),
)
COLUMNS = ColumnMap(
    snapshot_id="person_version",
    ref="record_id",
    kind="category",
    value="payload",
    source="origin",
    admissible="verified",
    observed_at="recorded_at",
    subject="person",
)


async def test_the_json_file_source_reads_the_pinned_form() -> None:
    source = JsonFileCatalogSource(CATALOG_FILE)
    catalog = await source.read()
    assert catalog == example_catalog()
    assert (await source.snapshot(SNAPSHOT)).sha256 == catalog.sha256


async def test_the_json_file_source_refuses_another_snapshot_or_a_bad_file(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="holds snapshot"):
        await JsonFileCatalogSource(CATALOG_FILE).snapshot("body-state/u-1001/2026-03-01")
    with pytest.raises(CatalogError, match="does not exist"):
        await JsonFileCatalogSource(tmp_path / "none.json").read()
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff")
    with pytest.raises(CatalogError, match="cannot be read"):
        await JsonFileCatalogSource(bad).read()
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(CatalogError, match="not valid JSON"):
        await JsonFileCatalogSource(bad).read()


@pytest.fixture
async def app_engine(store_url: str) -> AsyncIterator[AsyncEngine]:
    """The application's database (the store's URL: a fresh SQLite file or PG database)."""
    engine = create_async_engine(store_url)
    async with engine.begin() as conn:
        await conn.run_sync(app_metadata.create_all)
        rows = [
            {
                "record_id": item["ref"],
                "person_version": SNAPSHOT,
                "category": item["kind"],
                "payload": item["value"],
                "origin": item["source"],
                "verified": item["admissible"],
                "recorded_at": item["observed_at"],
                "person": example_document()["subject"],
            }
            for item in example_document()["items"]
        ]
        rows.append(rows[0] | {"record_id": "other-1", "person_version": "another-snapshot"})
        await conn.execute(body_records.insert(), rows)
    yield engine
    await engine.dispose()


async def test_the_sql_source_builds_the_same_catalog_as_the_file(app_engine: AsyncEngine) -> None:
    catalog = await SqlCatalogSource(app_engine, "body_records", columns=COLUMNS).snapshot(SNAPSHOT)
    assert catalog.sha256 == example_catalog().sha256
    assert catalog.get("other-1") is None
    lab = catalog.get("lab-2")
    assert lab is not None and lab.admissible is False


async def test_a_snapshot_whose_rows_name_two_subjects_is_refused(
    app_engine: AsyncEngine,
) -> None:
    # Whom the records are about is the evidence's own: one snapshot, one subject.
    async with app_engine.begin() as conn:
        await conn.execute(
            update(body_records).where(body_records.c.record_id == "ex-2").values(person="u-2002")
        )
    with pytest.raises(CatalogError, match="2 subjects"):
        await SqlCatalogSource(app_engine, "body_records", columns=COLUMNS).snapshot(SNAPSHOT)
    # Without a subject column the catalog names nobody (and the owner commits nothing).
    unbound = COLUMNS.model_copy(update={"subject": None})
    catalog = await SqlCatalogSource(app_engine, "body_records", columns=unbound).snapshot(SNAPSHOT)
    assert catalog.subject is None and catalog.sha256 != example_catalog().sha256


async def test_the_sql_source_sees_changes_and_refuses_bad_rows(app_engine: AsyncEngine) -> None:
    source = SqlCatalogSource(app_engine, "body_records", columns=COLUMNS)
    before = await source.snapshot(SNAPSHOT)
    async with app_engine.begin() as conn:
        await conn.execute(
            update(body_records)
            .where(body_records.c.record_id == "ex-1")
            .values(payload={"activity": "健身", "frequency": "5"})
        )
    after = await source.snapshot(SNAPSHOT)
    assert after.sha256 != before.sha256
    async with app_engine.begin() as conn:
        await conn.execute(
            update(body_records).where(body_records.c.record_id == "ex-2").values(category="Bad")
        )
    with pytest.raises(CatalogError, match="record 'ex-2'"):
        await source.snapshot(SNAPSHOT)


async def test_the_sql_source_refuses_an_unknown_snapshot_and_a_broken_query(
    app_engine: AsyncEngine,
) -> None:
    with pytest.raises(CatalogError, match="no records of snapshot"):
        await SqlCatalogSource(app_engine, "body_records", columns=COLUMNS).snapshot("nope")
    with pytest.raises(CatalogError, match="catalog table 'missing_table'"):
        await SqlCatalogSource(app_engine, "missing_table", columns=COLUMNS).snapshot(SNAPSHOT)


plain_metadata = MetaData()
plain_records = Table(
    "records",
    plain_metadata,
    Column("snapshot_id", String(64)),
    Column("ref", String(64)),
    Column("kind", String(64)),
    Column("value", Text),
    Column("source", Text),
    Column("admissible", Boolean),
    Column("observed_at", DateTime(timezone=True)),
)


async def _plain_source(url: str, value: Any, *, json_value: bool) -> Catalog:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(plain_metadata.create_all)
            await conn.execute(
                plain_records.insert(),
                {
                    "snapshot_id": "s",
                    "ref": "r",
                    "kind": "lifestyle.sleep",
                    "value": value,
                    "source": "wearable",
                    "admissible": True,
                    "observed_at": dt.datetime(2026, 3, 13, 23, 0, tzinfo=dt.UTC),
                },
            )
        columns = ColumnMap(json_value=json_value)
        return await SqlCatalogSource(engine, "records", columns=columns).snapshot("s")
    finally:
        await engine.dispose()


async def test_default_columns_text_values_and_timestamps(store_url: str) -> None:
    catalog = await _plain_source(store_url, "每晚 6.5 小时", json_value=False)
    item = catalog.get("r")
    assert item is not None and item.value == "每晚 6.5 小时"
    # A timestamp is written in ISO 8601; on SQLite, which keeps no zone, as stored.
    observed = dt.datetime.fromisoformat(item.observed_at)
    assert observed.replace(tzinfo=observed.tzinfo or dt.UTC) == dt.datetime(
        2026, 3, 13, 23, 0, tzinfo=dt.UTC
    )


async def test_json_text_values_are_decoded(sqlite_url: str) -> None:
    catalog = await _plain_source(sqlite_url, json.dumps({"hours": 6.5}), json_value=True)
    item = catalog.get("r")
    assert item is not None and item.value == {"hours": 6.5}


async def test_a_value_that_is_not_json_is_refused(sqlite_url: str) -> None:
    with pytest.raises(CatalogError, match="catalog table 'records'"):
        await _plain_source(sqlite_url, "plain words", json_value=True)
