"""Store URLs for tests that run once on an SQLite file and once on the real PostgreSQL server.

``migrated_sqlite`` (session) is an SQLite file migrated to head once per session, with no
HMAC key in it; ``seed_migrated(template, path)`` copies it to where a test's store will
open, so that test does not pay for every migration again (``Store.open`` still runs the
upgrade, which finds the file at head). Only for tests that are not about the schema: the
migrations themselves run from an empty file wherever a test opens a store it did not seed.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

import pytest

from foureyes.store._database import Database
from foureyes.store._migrate import head_revision, upgrade_to_head

__all__ = [
    "migrated_sqlite",
    "refuse_assessment_writes",
    "seed_migrated",
    "sqlite_path",
    "sqlite_url",
    "store_url",
]


async def _migrate(path: Path) -> None:
    db = Database.create(f"sqlite+aiosqlite:///{path}", timeout_s=30)
    try:
        await db.probe("open")
        await upgrade_to_head(db)
    finally:
        await db.dispose()


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SQLite file at the head revision: the schema only (no HMAC key, no rows)."""
    path = tmp_path_factory.mktemp("migrated") / "template.db"
    asyncio.run(_migrate(path))
    # Closed cleanly: everything is in the main file, which is all a copy takes.
    assert not path.with_name(path.name + "-wal").exists()
    with sqlite3.connect(path) as conn:
        (revision,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    conn.close()
    assert revision == head_revision()
    return path


def seed_migrated(template: Path, path: Path) -> None:
    """Put a copy of the migrated ``template`` at ``path`` (a store file not yet created)."""
    assert not path.exists(), f"{path} already exists"
    shutil.copyfile(template, path)


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    """The SQLite file of the test's store (not created until the store opens)."""
    return tmp_path / "store.db"


@pytest.fixture
def sqlite_url(sqlite_path: Path) -> str:
    """The store URL of :func:`sqlite_path`."""
    return f"sqlite+aiosqlite:///{sqlite_path}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    """The same test on an SQLite file and on a fresh database of the real PostgreSQL server."""
    if request.param == "sqlite":
        return sqlite_url
    return str(request.getfixturevalue("postgres_url"))


def refuse_assessment_writes(path: Path | str) -> None:
    """Make every write of a triage record to the SQLite file ``path`` fail.

    As a store hiccup would: reads (the trend) still work.
    """
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON risk_assessments "
            "BEGIN SELECT RAISE(ABORT, 'disk hiccup'); END"
        )
    conn.close()
