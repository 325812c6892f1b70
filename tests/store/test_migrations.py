from __future__ import annotations

import asyncio
import datetime as dt
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import JSON, Connection, bindparam, create_engine, inspect, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import create_async_engine

from foureyes.config import PrivacyConfig
from foureyes.core.digest import text_fingerprint
from foureyes.core.errors import StoreError
from foureyes.store._migrate import (
    HEAD_REVISION,
    alembic_config,
    current_revisions,
    head_revision,
)
from foureyes.store.tables import UTCDateTime, metadata
from foureyes.store.trace_list import RunFilter
from foureyes.store.unknowns import normalise_unknown
from tests.store._support import OpenStore


def _schema_state(connection: Connection) -> tuple[str | None, list[Any], list[str]]:
    context = MigrationContext.configure(connection)
    diff = compare_metadata(context, metadata)
    return context.get_current_revision(), diff, sorted(inspect(connection).get_table_names())


async def _inspect(url: str) -> tuple[str | None, list[Any], list[str]]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(_schema_state)
    finally:
        await engine.dispose()


def test_revisions_form_one_linear_history() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    revisions = list(script.walk_revisions())
    assert script.get_heads() == [head_revision()]
    assert revisions[-1].down_revision is None
    assert all(not r.is_merge_point and not r.is_branch_point for r in revisions)


async def test_an_empty_database_upgrades_to_head_matching_tables_py(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    await store.close()

    revision, diff, tables = await _inspect(store_url)

    assert revision == head_revision()
    assert diff == []
    assert set(metadata.tables) | {"alembic_version"} == set(tables)


async def test_reopening_an_upgraded_database_is_a_no_op(
    open_store: OpenStore, sqlite_url: str, sqlite_path: Path
) -> None:
    first = await open_store(sqlite_url)
    trace_id = await first.traces.start_run("t")
    await first.close()
    with sqlite3.connect(sqlite_path) as conn:
        schema_before = conn.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall()
    conn.close()

    second = await open_store(sqlite_url)

    with sqlite3.connect(sqlite_path) as conn:
        schema_after = conn.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall()
    conn.close()
    assert schema_after == schema_before
    assert await second.traces.get(trace_id) is not None


# In a child interpreter (this one has read the scripts already): count the opens of the
# revision scripts (an audit hook sees every file opened) while a store is opened four
# times on one SQLite file: the first migrates it, the others find it at head.
_COUNT_SCRIPT_READS = """
import asyncio, json, sys
from foureyes.config import Config

reads = []
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and "/migrations/versions/" in args[0]:
        reads.append(args[0])
sys.addaudithook(hook)

from foureyes.store import Store

async def main():
    cfg = Config.model_validate({"store": {"url": sys.argv[1]}})
    counts = []
    for _ in range(4):
        before = len(reads)
        store = await Store.open(cfg.store, cfg.privacy, {})
        await store.close()
        counts.append(len(reads) - before)
    print(json.dumps(counts))

asyncio.run(main())
"""


def test_opening_a_store_at_head_reads_no_migration_script(sqlite_url: str) -> None:
    child = subprocess.run(
        [sys.executable, "-c", _COUNT_SCRIPT_READS, sqlite_url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    first, *again = json.loads(child.stdout)
    assert first > 0  # the hook sees them: the first open migrated an empty file
    assert again == [0, 0, 0]


async def test_stores_opening_a_fresh_database_together_migrate_it_once(
    open_store: OpenStore, store_url: str
) -> None:
    stores = await asyncio.gather(*(open_store(store_url) for _ in range(3)))
    fingerprints = {s.traces.fingerprint("same text") for s in stores}

    revision, diff, _ = await _inspect(store_url)

    assert revision == head_revision() and diff == []
    # One generated HMAC key won, and every instance uses it.
    assert len(fingerprints) == 1


async def test_a_database_from_a_newer_foureyes_is_refused(
    open_store: OpenStore, sqlite_url: str, sqlite_path: Path
) -> None:
    await (await open_store(sqlite_url)).close()
    with sqlite3.connect(sqlite_path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'f00dfeed'")
    conn.close()

    with pytest.raises(StoreError, match="f00dfeed") as caught:
        await open_store(sqlite_url)
    assert caught.value.operation == "migrate"
    # Alembic's own error, as it says it (Alembic is imported only to migrate).
    assert caught.value.detail.startswith("CommandError: ")


def test_the_head_revision_constant_is_the_head_alembic_computes() -> None:
    # A store at HEAD_REVISION is taken as migrated without loading Alembic: a new
    # revision script must move the constant, or stores would never be upgraded to it.
    assert HEAD_REVISION == head_revision()


def test_current_revisions_reads_the_version_table(sqlite_path: Path) -> None:
    engine = create_engine(f"sqlite:///{sqlite_path}")
    with engine.begin() as conn:
        assert current_revisions(conn) == ()  # no table yet: nothing migrated
        command.upgrade(alembic_config(conn), "0016")
        assert current_revisions(conn) == ("0016",)
        assert current_revisions(conn) == (MigrationContext.configure(conn).get_current_heads())
        conn.execute(text("DELETE FROM alembic_version"))
        assert current_revisions(conn) == ()
    engine.dispose()


async def test_a_store_one_revision_behind_is_upgraded(
    open_store: OpenStore, sqlite_path: Path, sqlite_url: str
) -> None:
    previous = ScriptDirectory.from_config(alembic_config()).get_revision(HEAD_REVISION)
    assert previous is not None and isinstance(previous.down_revision, str)
    engine = create_engine(f"sqlite:///{sqlite_path}")
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), previous.down_revision)
    engine.dispose()

    await (await open_store(sqlite_url)).close()

    revision, diff, _ = await _inspect(sqlite_url)
    assert revision == HEAD_REVISION and diff == []


async def test_observations_written_before_0011_belong_to_the_local_tenant(
    sqlite_path: Path, sqlite_url: str, open_store: OpenStore
) -> None:
    engine = create_engine(f"sqlite:///{sqlite_path}")
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0010")
        conn.execute(
            text(
                "INSERT INTO observations (id, commit_id, subject, snapshot_id, evidence_ref, "
                "evidence_kind, evidence_sha256, kind, locale, label, description, "
                "catalog_sha256, kinds_sha256, renderer_version, created_at) VALUES "
                "('o1', 'c1', 'u', 's', 'r', 'k.x', :d, 'k', 'en', 'L', 'D', :d, :d, '1', "
                "'2026-12-01 00:00:00')"
            ),
            {"d": "0" * 64},
        )
    engine.dispose()

    store = await open_store(sqlite_url)
    try:
        [row] = await store.observations.for_subject("u", tenant="local")
        assert await store.observations.for_subject("u", tenant="key:x") == []
    finally:
        await store.close()
    assert (row.id, row.tenant) == ("o1", "local")


async def test_an_unscreened_triage_can_be_recorded_after_0012(
    sqlite_path: Path, sqlite_url: str, open_store: OpenStore
) -> None:
    insert = text(
        "INSERT INTO risk_assessments (id, conversation_id, purpose, day, at, status, tier, "
        "text_fingerprint, "
        "confirmed, policy, reasons, detail) VALUES (:id, 'c', 'test', '2026-12-01', "
        "'2026-12-01 00:00:00', :status, 'L0', 'f', 0, 'restricted', '[]', '{}')"
    )
    engine = create_engine(f"sqlite:///{sqlite_path}")
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0011")
    with pytest.raises(Exception, match="CHECK"), engine.begin() as conn:
        conn.execute(insert, {"id": "a0", "status": "unscreened"})
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0012")
        conn.execute(insert, {"id": "a1", "status": "unscreened"})
    with pytest.raises(Exception, match="CHECK"), engine.begin() as conn:
        conn.execute(insert, {"id": "a2", "status": "maybe"})
    engine.dispose()
    with sqlite3.connect(sqlite_path) as db:
        [[ddl]] = db.execute("SELECT sql FROM sqlite_master WHERE name = 'risk_assessments'")
    assert "ck_risk_assessments_ck_risk_assessments_purpose" in ddl and "'unscreened'" in ddl


async def test_runs_written_before_0016_belong_to_the_tenant_their_meta_names(
    open_store: OpenStore, store_url: str
) -> None:
    metas: list[dict[str, Any]] = [
        {"tenant": "key:a", "purpose": "live"},
        {"purpose": "live"},
        {"tenant": 7},
        {"tenant": ""},
        {"tenant": "k" * 129},
        {"tenant": "key:b"},
    ]
    insert = text(
        "INSERT INTO trace_runs (trace_id, kind, conversation_id, started_at, last_seq, meta)"
        " VALUES (:id, 'support_message', 'shared', :at, 0, :meta)"
    ).bindparams(
        bindparam("at", type_=UTCDateTime()),
        bindparam("meta", type_=JSON().with_variant(JSONB(), "postgresql")),
    )
    at = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    rows = [{"id": f"{n:032x}", "at": at, "meta": meta} for n, meta in enumerate(metas, 1)]
    engine = create_async_engine(store_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(lambda c: command.upgrade(alembic_config(c), "0015"))
            await conn.execute(insert, rows)
    finally:
        await engine.dispose()

    store = await open_store(store_url)
    listed = [(r.trace_id, r.tenant) for r in await store.traces.list_runs()]
    of_a = await store.traces.list_runs(RunFilter(tenant="key:a", conversation_id="shared"))
    await store.close()

    tenants = ["key:a", "local", "local", "local", "local", "key:b"]
    assert listed == [(row["id"], tenant) for row, tenant in zip(rows, tenants, strict=True)][::-1]
    assert [r.trace_id for r in of_a] == [rows[0]["id"]]
    # And back: the revision's downgrade drops the column and its index in place.
    engine = create_async_engine(store_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "0015"))
            columns = await conn.run_sync(
                lambda c: [col["name"] for col in inspect(c).get_columns("trace_runs")]
            )
            count = (await conn.execute(text("SELECT count(*) FROM trace_runs"))).scalar()
    finally:
        await engine.dispose()
    assert "tenant" not in columns and count == len(metas)


async def test_unknowns_open_before_0017_stay_open_and_are_sealed_when_raised_again(
    open_store: OpenStore, store_url: str
) -> None:
    words = "whether she is alone tonight"
    at = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    run = {"id": "a" * 32, "at": at, "meta": {}}
    unknown = {
        "id": "u" * 32,
        "key": text_fingerprint(normalise_unknown(words), b"k"),
        "run": run["id"],
        "at": at,
    }
    engine = create_async_engine(store_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(lambda c: command.upgrade(alembic_config(c), "0016"))
            await conn.execute(
                text(
                    "INSERT INTO trace_runs (trace_id, kind, conversation_id, started_at, "
                    "last_seq, meta) VALUES (:id, 'gate_reply', 'c1', :at, 0, :meta)"
                ).bindparams(
                    bindparam("at", type_=UTCDateTime()),
                    bindparam("meta", type_=JSON().with_variant(JSONB(), "postgresql")),
                ),
                run,
            )
            # Kept by its HMAC alone, as every unknown was under default privacy.
            await conn.execute(
                text(
                    "INSERT INTO gate_open_unknowns (id, conversation_id, text_sha256, "
                    "raised_by, raised_at) VALUES (:id, 'c1', :key, :run, :at)"
                ).bindparams(bindparam("at", type_=UTCDateTime())),
                unknown,
            )
    finally:
        await engine.dispose()

    privacy = PrivacyConfig(hmac_key_env="H")
    store = await open_store(store_url, privacy=privacy, environ={"H": "k"})
    [before] = await store.unknowns.open("c1", limit=10)
    assert (before.id, before.words, before.resolved_at) == (unknown["id"], None, None)
    # Raised again by a verdict, the same unknown (its HMAC) gets its words sealed.
    await store.unknowns.add("c1", [words.upper()], trace_id=str(run["id"]))
    [after] = await store.unknowns.open("c1", limit=10)
    assert (after.id, after.words, after.text) == (unknown["id"], words.upper(), None)
    await store.close()

    # And back: the revision's downgrade drops the sealed columns and keeps the unknown.
    engine = create_async_engine(store_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "0016"))
            columns = await conn.run_sync(
                lambda c: [col["name"] for col in inspect(c).get_columns("gate_open_unknowns")]
            )
            rows = (await conn.execute(text("SELECT id FROM gate_open_unknowns"))).all()
    finally:
        await engine.dispose()
    assert not {"sealed_text", "sealed_expires_at"} & set(columns)
    assert [row.id for row in rows] == [unknown["id"]]
