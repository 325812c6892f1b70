"""Store fixtures: a URL per backend, a clock, stores closed after each test, the SQL sent.

The SQL sent: every engine's statements, and asyncpg's queries with BEGIN and COMMIT.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import asyncpg
import pytest
from sqlalchemy import Engine, event
from sqlalchemy.pool import Pool

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.store import Store
from tests.helpers.clock import ManualClock
from tests.store._support import OpenStore


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


@pytest.fixture
def statements() -> Iterator[list[str]]:
    """Every SQL statement any engine sends (the SQLite threads' and asyncpg's too)."""
    sent: list[str] = []

    def note(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        sent.append(statement)

    event.listen(Engine, "before_cursor_execute", note)
    try:
        yield sent
    finally:
        event.remove(Engine, "before_cursor_execute", note)


@pytest.fixture
def postgres_queries() -> Iterator[list[str]]:
    """Every query asyncpg sends on connections opened meanwhile, BEGIN and COMMIT included."""
    sent: list[str] = []

    def connected(dbapi_connection: Any, _record: object) -> None:
        driver = dbapi_connection.driver_connection
        if isinstance(driver, asyncpg.Connection):
            driver.add_query_logger(lambda logged: sent.append(logged.query))

    event.listen(Pool, "connect", connected)
    try:
        yield sent
    finally:
        event.remove(Pool, "connect", connected)
