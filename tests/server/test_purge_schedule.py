"""``foureyes serve`` purges expired text on its own schedule, and survives a failed purge."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from foureyes.config import Config, PrivacyConfig, StoreConfig
from foureyes.core.trace import EventKind, PrivateText, TraceEvent
from foureyes.server import create_app
from foureyes.store import Store
from tests.helpers.server import app_client

PRIVACY = PrivacyConfig(store_raw_text=True, retention_days=1, purge_interval_s=0.05)
NOTE = "she kept the pills from last spring"
# Polls of the database before a test gives up: far more intervals than a purge needs.
POLLS = 400


def _url() -> str:
    return os.environ["FOUREYES_STORE__URL"]


def _count(query: str) -> int:
    path = Path(_url().removeprefix("sqlite+aiosqlite:///"))
    with sqlite3.connect(path) as conn:
        (value,) = conn.execute(query).fetchone()
    conn.close()
    return int(value)


def _expired_rows() -> int:
    return _count(
        "SELECT (SELECT count(*) FROM trace_runs WHERE input_text IS NOT NULL)"
        " + (SELECT count(*) FROM trace_texts)"
    )


async def _write_expired_run() -> None:
    """A run with raw input and a verdict's note, written two days ago."""
    written = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    async with await Store.open(
        StoreConfig(url=_url()), PRIVACY, {}, clock=lambda: written
    ) as store:
        trace_id = await store.traces.start_run("gate_reply", input_text="I can't sleep")
        event = TraceEvent(EventKind.DECISION, "gate", {"missing": [PrivateText(NOTE)]})
        await store.traces.append(trace_id, event)


async def _until(condition: str, check: Callable[[], bool]) -> None:
    """Poll ``check()`` (true when done) at most :data:`POLLS` times, then fail."""
    for _ in range(POLLS):
        if check():
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"serve never {condition} within {POLLS} polls")


async def test_serve_purges_expired_text_every_interval() -> None:
    await _write_expired_run()
    assert _expired_rows() == 2
    app = create_app(Config(store=StoreConfig(url=_url()), privacy=PRIVACY), {})

    async with app_client(app) as client:
        await _until("purged at start-up", lambda: _expired_rows() == 0)
        # Not only once: text expiring while it runs goes at a later interval.
        await _write_expired_run()
        await _until("purged again", lambda: _expired_rows() == 0)
        assert (await client.get("/healthz")).status_code == 200


async def test_a_failed_purge_is_logged_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="foureyes.server")
    await _write_expired_run()
    store = StoreConfig(url=_url(), timeout_s=0.1)
    app = create_app(Config(store=store, privacy=PRIVACY), {})

    async with app_client(app) as client:
        await _until("purged at start-up", lambda: _expired_rows() == 0)
        # Another process holds the database's write lock: the purges fail meanwhile.
        path = Path(_url().removeprefix("sqlite+aiosqlite:///"))
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
        try:
            await _until(
                "logged a failed purge",
                lambda: any(r.getMessage().startswith("purging expired") for r in caplog.records),
            )
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        await _write_expired_run()

        await _until("purged after the failure", lambda: _expired_rows() == 0)
        assert (await client.get("/healthz")).status_code == 200
