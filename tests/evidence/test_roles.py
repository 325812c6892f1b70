"""Separate trust domains on PostgreSQL: the gateway's role cannot write observations."""

from __future__ import annotations

import uuid
from pathlib import Path

import asyncpg
import pytest
from pydantic import ValidationError

from foureyes.config import EvidenceConfig, PrivacyConfig, StoreConfig
from foureyes.core.errors import StoreError, UsageError
from foureyes.core.locale import Locale
from foureyes.evidence import (
    Claim,
    CommitStatus,
    ConfiguredEvidence,
    DurableOwner,
    JsonFileCatalogSource,
)
from foureyes.store import Store
from foureyes.store._database import Database
from foureyes.store.observations import SqlObservationLog
from foureyes.store.roles import init_roles, role_statements
from tests.evidence._support import CATALOG_FILE, KINDS_FILE, example_catalog, example_kinds


def _as(url: str, role: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{role}@{rest.split('@', 1)[1]}"


def _claim(ref: str) -> Claim:
    catalog = example_catalog()
    return Claim(
        snapshot_id=catalog.snapshot_id,
        catalog_sha256=catalog.sha256,
        locale=Locale.EN,
        selections=({"kind": "exercise_pattern", "evidence_ref": ref},),
    )


async def _commit(url: str, ref: str) -> CommitStatus:
    db = Database.create(url, timeout_s=10)
    try:
        owner = DurableOwner(
            JsonFileCatalogSource(CATALOG_FILE), example_kinds(), SqlObservationLog(db)
        )
        result = await owner.commit("u-1001", _claim(ref))
        return result.status
    finally:
        await db.dispose()


@pytest.mark.postgres
async def test_only_the_owner_role_inserts_observations(postgres_url: str) -> None:
    tag = uuid.uuid4().hex[:8]
    gateway, owner = f"gw_{tag}", f"own_{tag}"
    admin = Database.create(postgres_url, timeout_s=10)
    try:
        async with await Store.open(StoreConfig(url=postgres_url), PrivacyConfig(), {}):
            pass
        await init_roles(admin, gateway, owner)
        await init_roles(admin, gateway, owner)  # again: a no-op, not an error
    finally:
        await admin.dispose()

    # The owner's own connection commits, and the rows pass the rendering check.
    assert await _commit(_as(postgres_url, owner), "ex-1") is CommitStatus.COMMITTED

    # The gateway opens its store and reads observations, but cannot insert one, by the
    # owner's code path or by hand.
    gateway_url = _as(postgres_url, gateway)
    async with await Store.open(StoreConfig(url=gateway_url), PrivacyConfig(), {}) as store:
        rows = await store.observations.for_subject("u-1001", tenant=None)
        assert [row.evidence_ref for row in rows] == ["ex-1"]
    with pytest.raises(StoreError):
        await _commit(gateway_url, "ex-2")
    conn = await asyncpg.connect(gateway_url.replace("+asyncpg", ""))
    try:
        row = await conn.fetchrow("SELECT * FROM observations")
        values = dict(row) | {"id": "f" * 32, "subject": "u-2"}
        columns = ", ".join(values)
        marks = ", ".join(f"${i}" for i in range(1, len(values) + 1))
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(
                f"INSERT INTO observations ({columns}) VALUES ({marks})", *values.values()
            )
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("INSERT INTO evidence_snapshots VALUES ($1, 'x', 'u')", "e" * 64)
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("ALTER TABLE observations DISABLE TRIGGER observations_check")
    finally:
        await conn.close()

    # The owner may not rewrite what it inserted (no privilege, and the append-only
    # trigger behind it), nor write the gateway's tables.
    conn = await asyncpg.connect(_as(postgres_url, owner).replace("+asyncpg", ""))
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("UPDATE observations SET description = 'x'")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("DELETE FROM trace_runs")
    finally:
        await conn.close()


def test_role_names_are_checked() -> None:
    with pytest.raises(UsageError):
        role_statements("gw; DROP TABLE observations", "owner")
    with pytest.raises(UsageError):
        role_statements("same", "same")


async def test_roles_are_refused_on_sqlite(sqlite_url: str) -> None:
    db = Database.create(sqlite_url, timeout_s=10)
    try:
        with pytest.raises(UsageError):
            await init_roles(db, "gw", "owner")
    finally:
        await db.dispose()


async def test_the_configured_owner_writes_through_its_own_url(tmp_path: Path) -> None:
    owner_url = f"sqlite+aiosqlite:///{tmp_path / 'owner.db'}"
    store_url = f"sqlite+aiosqlite:///{tmp_path / 'gateway.db'}"
    async with await Store.open(StoreConfig(url=owner_url), PrivacyConfig(), {}):
        pass
    evidence = ConfiguredEvidence.from_config(
        EvidenceConfig(
            kinds_file=str(KINDS_FILE), catalog_file=str(CATALOG_FILE), owner_url=owner_url
        )
    )
    assert evidence is not None
    try:
        async with await Store.open(StoreConfig(url=store_url), PrivacyConfig(), {}) as store:
            log = evidence.observation_log(store.observations)
            owner = DurableOwner(evidence.source, evidence.kinds, log)
            assert (await owner.commit("u-1001", _claim("ex-1"))).ok
            assert await store.observations.for_subject("u-1001", tenant=None) == []
        async with await Store.open(StoreConfig(url=owner_url), PrivacyConfig(), {}) as own:
            rows = await own.observations.for_subject("u-1001", tenant=None)
            assert [row.evidence_ref for row in rows] == ["ex-1"]
    finally:
        await evidence.aclose()


def test_the_owner_url_is_checked_like_every_store_url() -> None:
    with pytest.raises(ValidationError, match="evidence.owner_url"):
        EvidenceConfig(
            kinds_file=str(KINDS_FILE), catalog_file=str(CATALOG_FILE), owner_url="mysql://x"
        )
