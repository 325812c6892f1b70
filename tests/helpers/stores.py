"""Store URLs for tests that run once on an SQLite file and once on the real PostgreSQL server."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

__all__ = ["refuse_assessment_writes", "sqlite_path", "sqlite_url", "store_url"]


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
