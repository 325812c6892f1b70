"""Store fixtures: a URL per backend, a settable clock, and stores closed after each test."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.store import Store
from tests.helpers.clock import ManualClock
from tests.store._support import OpenStore


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def sqlite_url(sqlite_path: Path) -> str:
    return f"sqlite+aiosqlite:///{sqlite_path}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    """The same test on an SQLite file and on a fresh database of the real PostgreSQL server."""
    if request.param == "sqlite":
        return sqlite_url
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC))


@pytest.fixture
async def open_store() -> AsyncIterator[OpenStore]:
    """Open stores that are closed when the test ends, whatever happened in it."""
    opened: list[Store] = []

    async def _open(
        url: str,
        *,
        privacy: PrivacyConfig | None = None,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> Store:
        store = await Store.open(
            StoreConfig(url=url), privacy or PrivacyConfig(), environ or {}, **options
        )
        opened.append(store)
        return store

    yield _open
    for store in opened:
        await store.close()
