from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from foureyes.cli import keys_cmd
from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.server.app import create_app
from foureyes.store import Store
from foureyes.store.api_keys import EnvKey, KeyScope
from tests.helpers.postgres import free_port
from tests.helpers.server import app_client
from tests.server._support import bearer, config

runner = CliRunner()


def _json(*args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(keys_cmd.app, [*args, "--json"])
    return result.exit_code, json.loads(result.stdout)


def _db_bytes() -> bytes:
    path = Path(os.environ["FOUREYES_STORE__URL"].removeprefix("sqlite+aiosqlite:///"))
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def test_create_prints_the_key_once_and_stores_only_its_digest() -> None:
    code, created = _json("create", "--name", "web shop")
    assert code == 0 and created["ok"] is True
    key = created["key"]
    assert key.startswith(created["prefix"] + "_")
    assert (created["scope"], created["source"], created["name"]) == (
        "client",
        "created",
        "web shop",
    )

    code, listed = _json("list")
    assert code == 0
    assert [k["prefix"] for k in listed["keys"]] == [created["prefix"]]
    assert key not in json.dumps(listed)
    assert key.encode() not in _db_bytes()


def test_the_plain_output_is_the_key_alone_on_stdout() -> None:
    result = runner.invoke(keys_cmd.app, ["create", "--admin"])
    assert result.exit_code == 0, result.output
    key = result.stdout.strip()
    assert key.startswith("fy_") and len(key.split()) == 1
    assert "shown only this once" in result.stderr and key not in result.stderr
    listed = runner.invoke(keys_cmd.app, ["list"])
    assert "admin" in listed.stdout and key not in listed.stdout


async def test_a_created_key_opens_the_running_service() -> None:
    async with app_client(create_app(config(key_cache_s=0), {})) as client:
        # The service starts open to local callers; once a key exists, all need one.
        code, created = await asyncio.to_thread(_json, "create")
        assert code == 0
        without = await client.get("/v1/models")
        with_key = await client.get("/v1/models", headers=bearer(created["key"]))
        code, revoked = await asyncio.to_thread(_json, "revoke", created["prefix"])
        after = await client.get("/v1/models", headers=bearer(created["key"]))

    assert without.status_code == 401 and without.json()["error"]["code"] == "missing_api_key"
    assert with_key.status_code == 200
    assert code == 0 and revoked["outcome"] == "revoked"
    assert after.status_code == 401


def test_revoke_by_prefix_or_id_and_again() -> None:
    _, first = _json("create")
    _, second = _json("create")

    assert _json("revoke", first["prefix"])[1]["outcome"] == "revoked"
    assert _json("revoke", second["id"])[1]["outcome"] == "revoked"
    code, again = _json("revoke", first["prefix"])
    assert code == 0 and again["outcome"] == "already_revoked"
    _, listed = _json("list")
    assert [k["active"] for k in listed["keys"]] == [False, False]


def test_revoking_an_unknown_key_fails() -> None:
    code, body = _json("revoke", "fy_00000000")
    assert code == 1
    assert body["ok"] is False and body["outcome"] == "unknown"
    assert body["problems"] == ["no key has the prefix or id 'fy_00000000'"]
    human = runner.invoke(keys_cmd.app, ["revoke", "fy_[bold]x"])
    assert human.exit_code == 1 and "fy_[bold]x" in human.stderr


async def test_revoking_a_shared_prefix_fails_and_lists_the_ids() -> None:
    store = await Store.open(
        StoreConfig(url=os.environ["FOUREYES_STORE__URL"]), PrivacyConfig(), {}
    )
    await store.api_keys.sync_env(
        [
            EnvKey(digest="ab" * 32, scope=KeyScope.CLIENT, variable="K"),
            EnvKey(digest="ab" * 4 + "cd" * 28, scope=KeyScope.CLIENT, variable="K"),
        ]
    )
    await store.close()

    code, body = await asyncio.to_thread(_json, "revoke", "env-abababab")
    assert code == 1 and body["outcome"] == "ambiguous" and len(body["keys"]) == 2
    _, listed = await asyncio.to_thread(_json, "list")
    assert all(k["active"] for k in listed["keys"])


@pytest.mark.parametrize("name", ["", "   ", "n" * 129])
def test_a_bad_name_is_a_usage_error(name: str) -> None:
    result = runner.invoke(keys_cmd.app, ["create", "--name", name])
    assert result.exit_code == 2
    assert _json("list")[1]["keys"] == []


def test_an_unreachable_store_fails_cleanly(monkeypatch: pytest.MonkeyPatch) -> None:
    down = f"postgresql+asyncpg://fy:pw@127.0.0.1:{free_port()}/x"
    monkeypatch.setenv("FOUREYES_STORE__URL", down)
    monkeypatch.setenv("FOUREYES_STORE__TIMEOUT_S", "2")
    for command in (["create"], ["list"], ["revoke", "fy_00000000"]):
        code, body = _json(*command)
        assert code == 1
        assert body["ok"] is False and body["error"] == "StoreError"
        assert "pw@" not in json.dumps(body)
