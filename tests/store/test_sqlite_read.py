"""The run list read from an SQLite file at head: the store's own list, or no answer."""

from __future__ import annotations

import datetime as dt
import itertools
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.core.errors import UsageError
from foureyes.store import Store
from foureyes.store._migrate import alembic_config
from foureyes.store.sqlite_read import list_runs_at_head
from foureyes.store.trace_list import MAX_LIST, RunFilter
from tests.helpers.clock import ManualClock
from tests.store._support import OpenStore
from tests.store.test_trace_listing import _run

_START = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)


async def _filled(open_store: OpenStore, url: str) -> Store:
    clock = ManualClock()
    store = await open_store(url, clock=clock)
    await _run(store, clock, level="high", outcome="fallback", reason="rejected")
    await _run(store, clock, level=None, status="unknown", conversation="c2")
    await _run(store, clock, kind="gate_reply", status="")
    await _run(store, clock, level=None, status="unscreened", purpose="test")
    await _run(store, clock, kind="guard_message", level="low")
    await _run(store, clock, kind="draft_check", status="", purpose="calibration")
    return store


async def test_the_file_read_lists_exactly_what_the_open_store_lists(
    open_store: OpenStore, sqlite_url: str
) -> None:
    store = await _filled(open_store, sqlite_url)
    filters = [
        RunFilter(purpose=p, risk_level=lv, reason=r, since=s)
        for p, lv, r, s in itertools.product(
            [None, "chat", "eval", "other"],
            [None, "high", "low", "unknown", "unscreened"],
            [None, "rejected"],
            [None, _START + dt.timedelta(minutes=15)],
        )
    ]
    filters += [
        RunFilter(kind="gate_reply"),
        RunFilter(tenant="local"),
        RunFilter(tenant="key:nobody"),
        RunFilter(conversation_id="c2"),
        RunFilter(outcome="fallback"),
        RunFilter(until=_START + dt.timedelta(minutes=25)),
    ]
    nonempty = 0
    for where, limit in itertools.product(filters, [1, 2, MAX_LIST]):
        expected = await store.traces.list_runs(where, limit=limit)
        assert list_runs_at_head(
            StoreConfig(url=sqlite_url), PrivacyConfig(), where, limit=limit
        ) == (expected), where
        nonempty += bool(expected)
    assert nonempty > len(filters)  # the filters select something: the equality bites


async def test_the_file_read_refuses_what_list_runs_refuses(
    open_store: OpenStore, sqlite_url: str
) -> None:
    await open_store(sqlite_url)
    for limit in (0, MAX_LIST + 1):
        with pytest.raises(UsageError, match="limit"):
            list_runs_at_head(
                StoreConfig(url=sqlite_url), PrivacyConfig(), RunFilter(), limit=limit
            )
    with pytest.raises(UsageError, match="purpose"):
        list_runs_at_head(
            StoreConfig(url=sqlite_url), PrivacyConfig(), RunFilter(purpose="mine"), limit=5
        )


def _sql(path: Path, statement: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement)
    conn.close()


def _at_0017(path: Path) -> None:
    path.unlink()
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0017")
    engine.dispose()


# Each leaves a store (or a URL) that opening must handle: migrate, make keys, switch to
# WAL, check a key variable, or report the failure. The file read gives no answer.
_CANNOT_SERVE: dict[str, Callable[[Path], None]] = {
    "no file yet": lambda path: path.unlink(),
    "an older schema": _at_0017,
    "a newer schema": lambda path: _sql(path, "UPDATE alembic_version SET version_num = 'f00d'"),
    "no keys made": lambda path: _sql(path, "DELETE FROM store_secrets"),
    "not in WAL mode": lambda path: _sql(path, "PRAGMA journal_mode = DELETE"),
    "not a database": lambda path: path.write_bytes(b"not a database, " * 512),
    "an empty file": lambda path: path.write_bytes(b""),
}


@pytest.mark.parametrize("case", sorted(_CANNOT_SERVE))
async def test_a_store_that_opening_would_change_gets_no_answer_and_is_left_alone(
    open_store: OpenStore, sqlite_url: str, sqlite_path: Path, case: str
) -> None:
    await (await open_store(sqlite_url)).close()
    _CANNOT_SERVE[case](sqlite_path)
    before = sqlite_path.read_bytes() if sqlite_path.exists() else None

    runs = list_runs_at_head(StoreConfig(url=sqlite_url), PrivacyConfig(), RunFilter(), limit=5)

    assert runs is None
    assert (sqlite_path.read_bytes() if sqlite_path.exists() else None) == before


@pytest.mark.parametrize(
    "privacy",
    [PrivacyConfig(hmac_key_env="MY_HMAC_KEY"), PrivacyConfig(unknowns_key_env="MY_SEAL_KEY")],
)
async def test_a_key_variable_in_the_config_leaves_the_check_to_opening(
    open_store: OpenStore, sqlite_url: str, privacy: PrivacyConfig
) -> None:
    # Opening fails when the variable is unset: the file read must not list instead.
    await (await open_store(sqlite_url)).close()
    assert list_runs_at_head(StoreConfig(url=sqlite_url), privacy, RunFilter(), limit=5) is None


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+asyncpg://someone@127.0.0.1:1/nothing",
        "sqlite+aiosqlite:///:memory:",
        "sqlite+aiosqlite://",
    ],
)
def test_a_store_that_is_not_an_sqlite_file_gets_no_answer(url: str) -> None:
    assert list_runs_at_head(StoreConfig(url=url), PrivacyConfig(), RunFilter(), limit=5) is None
