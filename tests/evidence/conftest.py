"""Evidence fixtures: the example, an open store per backend, and an owner over it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.evidence import Catalog, KindRegistry
from foureyes.store import Store
from tests.evidence._support import example_catalog, example_kinds


@pytest.fixture
def catalog() -> Catalog:
    return example_catalog()


@pytest.fixture
def kinds() -> KindRegistry:
    return example_kinds()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'evidence.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    if request.param == "sqlite":
        return sqlite_url
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def store(sqlite_url: str) -> AsyncIterator[Store]:
    opened = await Store.open(StoreConfig(url=sqlite_url), PrivacyConfig(), {})
    yield opened
    await opened.close()
