"""``foureyes store purge`` through the real command line, on the configured SQLite store."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from foureyes.cli.main import app
from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.core.trace import EventKind, PrivateText, TraceEvent
from foureyes.store import Store
from tests.helpers.postgres import free_port

runner = CliRunner()
NOTE = "she kept the pills from last spring"


def _purge() -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["store", "purge", "--json"])
    return result.exit_code, json.loads(result.stdout)


def _db_path() -> Path:
    return Path(os.environ["FOUREYES_STORE__URL"].removeprefix("sqlite+aiosqlite:///"))


def _write_runs_kept_since(days_ago: int) -> str:
    """A run with raw input, a verdict's note and an open unknown, written days ago."""
    written = dt.datetime.now(dt.UTC) - dt.timedelta(days=days_ago)
    privacy = PrivacyConfig(store_raw_text=True, retention_days=30)

    async def go() -> str:
        store = await Store.open(
            StoreConfig(url=os.environ["FOUREYES_STORE__URL"]), privacy, {}, clock=lambda: written
        )
        async with store:
            trace_id = await store.traces.start_run(
                "gate_reply", conversation_id="c1", input_text="I can't sleep"
            )
            event = TraceEvent(EventKind.DECISION, "gate", {"missing": [PrivateText(NOTE)]})
            await store.traces.append(trace_id, event)
            await store.unknowns.add("c1", [NOTE], trace_id=trace_id)
            return trace_id

    return asyncio.run(go())


def _stored_texts() -> list[Any]:
    with sqlite3.connect(_db_path()) as conn:
        rows = [
            *conn.execute("SELECT input_text FROM trace_runs"),
            *conn.execute("SELECT text FROM trace_texts"),
            *conn.execute("SELECT text FROM gate_open_unknowns"),
        ]
    conn.close()
    return [value for (value,) in rows]


def test_purge_erases_expired_text_and_reports_the_counts() -> None:
    _write_runs_kept_since(days_ago=31)
    _write_runs_kept_since(days_ago=1)
    # Two runs' notes; the conversation's one unknown, its text stored again by the raise.
    assert _stored_texts().count(NOTE) == 3

    code, body = _purge()
    again_code, again = _purge()

    assert code == 0 and body == {
        "ok": True,
        "inputs": 1,
        "texts": 1,
        "unknowns": 0,
        "batches": 1,
        "total": 2,
    }
    assert (again_code, again["total"]) == (0, 0)
    assert sorted(map(str, _stored_texts())) == sorted(["I can't sleep", NOTE, NOTE, "None"])


def test_purge_erases_open_unknown_text_past_retention() -> None:
    _write_runs_kept_since(days_ago=31)

    code, body = _purge()

    assert code == 0 and (body["inputs"], body["texts"], body["unknowns"]) == (1, 1, 1)
    # The run and the unknown stay, with their HMACs; the note's row is gone.
    assert _stored_texts() == [None, None]


def test_the_plain_output_says_what_was_erased() -> None:
    _write_runs_kept_since(days_ago=31)
    result = runner.invoke(app, ["store", "purge"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("purged 3: raw input of 1 runs")


def test_an_unreachable_store_fails_with_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "FOUREYES_STORE__URL", f"postgresql+asyncpg://fy:pw@127.0.0.1:{free_port()}/x"
    )
    monkeypatch.setenv("FOUREYES_STORE__TIMEOUT_S", "2")

    code, body = _purge()

    assert code == 1 and body["ok"] is False and body["error"] == "StoreError"
    assert "pw@" not in json.dumps(body)


def test_init_roles_on_sqlite_is_refused_naming_postgresql() -> None:
    result = runner.invoke(app, ["store", "init-roles", "--json"])
    assert result.exit_code == 1
    assert "PostgreSQL" in json.loads(result.stdout)["problems"][0]


@pytest.mark.postgres
def test_init_roles_creates_both_roles_on_postgresql(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOUREYES_STORE__URL", postgres_url)
    args = ["store", "init-roles", "--json", "--gateway", "cli_gw", "--owner", "cli_own"]
    for _ in range(2):  # and again, unchanged
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.stdout
        assert json.loads(result.stdout) == {"ok": True, "gateway": "cli_gw", "owner": "cli_own"}
