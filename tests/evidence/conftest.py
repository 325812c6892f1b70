"""Evidence fixtures: the example, an open store per backend, and an owner over it."""

from __future__ import annotations

from collections.abc import AsyncIterator

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
async def store(sqlite_url: str) -> AsyncIterator[Store]:
    opened = await Store.open(StoreConfig(url=sqlite_url), PrivacyConfig(), {})
    yield opened
    await opened.close()
