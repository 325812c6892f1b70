"""Auth, limits and errors over real uvicorn on 127.0.0.1, with the official openai SDK."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx2
import openai
import pytest

from foureyes.config import Config, ServerConfig, StoreConfig
from foureyes.server.app import create_app
from tests.helpers.postgres import PostgresServer
from tests.helpers.server import (
    RunningServer,
    serve_app,
    start_serve_process,
    start_server,  # noqa: F401  (fixture)
    stop_process,
)
from tests.server._support import ADMIN_KEY, CLIENT_KEY, KEYS_ENV, keyed

Start = Callable[..., RunningServer]
JSON = {"Content-Type": "application/json"}


def _client(server: RunningServer, key: str) -> openai.OpenAI:
    # No retries: every refusal must surface as the SDK's typed error on the first answer.
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=30)


def _post_keys(client: openai.OpenAI, **options: object) -> httpx2.Response:
    return client.post("/keys", cast_to=httpx2.Response, **options)  # type: ignore[arg-type]


@pytest.fixture
def keyed_server(start_server: Start) -> RunningServer:  # noqa: F811
    return start_server(keyed(rate_per_minute=60, burst=5), KEYS_ENV)


def test_models_answer_the_sdk_with_a_valid_key(keyed_server: RunningServer) -> None:
    with _client(keyed_server, CLIENT_KEY) as client:
        assert [m.id for m in client.models.list().data] == ["foureyes-support"]


def test_no_key_and_a_wrong_key_are_authentication_errors(keyed_server: RunningServer) -> None:
    with _client(keyed_server, "sk-wrong-0123456789abcdef") as client:
        with pytest.raises(openai.AuthenticationError) as wrong:
            client.models.list()
        with pytest.raises(openai.AuthenticationError) as missing:
            client.models.list(extra_headers={"Authorization": openai.Omit()})
    assert wrong.value.status_code == 401 and wrong.value.code == "invalid_api_key"
    assert missing.value.code == "missing_api_key"
    assert missing.value.request.headers.get("authorization") is None
    assert wrong.value.response.headers["www-authenticate"] == "Bearer"


def test_a_client_key_on_an_admin_endpoint_is_permission_denied(
    keyed_server: RunningServer,
) -> None:
    with _client(keyed_server, CLIENT_KEY) as client:
        with pytest.raises(openai.PermissionDeniedError) as metrics:
            client.get(f"{keyed_server.url}/metrics", cast_to=httpx2.Response)
        with pytest.raises(openai.PermissionDeniedError) as keys:
            _post_keys(client, body={"name": "x"})
    assert metrics.value.code == keys.value.code == "insufficient_scope"
    with _client(keyed_server, ADMIN_KEY) as admin:
        scraped = admin.get(f"{keyed_server.url}/metrics", cast_to=httpx2.Response)
    assert "foureyes_http_requests_total" in scraped.text


def test_a_2mb_body_is_refused_with_413(keyed_server: RunningServer) -> None:
    with _client(keyed_server, CLIENT_KEY) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(
                model="foureyes-support",
                messages=[{"role": "user", "content": "x" * 2_000_000}],
            )
    assert caught.value.status_code == 413
    assert caught.value.code == "request_too_large"
    assert caught.value.body == {
        "message": "The request body is larger than the limit of 1048576 bytes.",
        "type": "invalid_request_error",
        "code": "request_too_large",
        "param": None,
    }


def test_past_the_burst_the_sdk_gets_a_rate_limit_error(keyed_server: RunningServer) -> None:
    with _client(keyed_server, CLIENT_KEY) as client:
        for _ in range(5):
            client.models.list()
        with pytest.raises(openai.RateLimitError) as caught:
            client.models.list()
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.response.headers["retry-after"] == "1"
    # Another key has its own bucket.
    with _client(keyed_server, ADMIN_KEY) as other:
        assert other.models.list().data


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b'{"name": "unfinished', "invalid_json"),
        (b'{"name": "caf\xe9"}', "invalid_encoding"),
        (b'{"name": "ok"}'.decode().encode("utf-16"), "invalid_encoding"),
    ],
)
def test_unreadable_bodies_are_bad_request_errors(
    keyed_server: RunningServer, content: bytes, code: str
) -> None:
    with _client(keyed_server, ADMIN_KEY) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            _post_keys(client, content=content, options={"headers": JSON})
    assert caught.value.code == code
    assert caught.value.response.headers["content-type"] == "application/json"


def test_a_valid_json_body_that_is_not_a_valid_request_is_unprocessable(
    keyed_server: RunningServer,
) -> None:
    with _client(keyed_server, ADMIN_KEY) as client:
        with pytest.raises(openai.UnprocessableEntityError) as caught:
            _post_keys(client, body={"scope": "root"})
    assert caught.value.code == "invalid_request"
    assert caught.value.param == "scope"


def test_a_locked_store_is_503_and_nothing_is_created(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    store = StoreConfig(url=f"sqlite+aiosqlite:///{path}", timeout_s=0.5)
    cfg = Config(store=store, server=ServerConfig(api_keys_env="C", admin_keys_env="A"))
    with serve_app(create_app(cfg, {"C": CLIENT_KEY, "A": ADMIN_KEY})) as server:
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            with _client(server, ADMIN_KEY) as client:
                with pytest.raises(openai.InternalServerError) as caught:
                    _post_keys(client, body={"name": "while locked"})
            holder.execute("ROLLBACK")
            with _client(server, ADMIN_KEY) as client:
                listed = client.get("/keys", cast_to=httpx2.Response).json()
        finally:
            holder.close()
    assert caught.value.status_code == 503
    assert caught.value.code == "store_unavailable"
    assert all(k["name"] != "while locked" for k in listed["data"])


@pytest.mark.postgres
def test_a_store_that_goes_away_makes_every_keyed_request_503(
    postgres_server: PostgresServer,
) -> None:
    database = postgres_server.create_database()
    store = StoreConfig(url=postgres_server.url(database), timeout_s=2)
    cfg = Config(store=store, server=ServerConfig(api_keys_env="C", key_cache_s=0))
    with serve_app(create_app(cfg, {"C": CLIENT_KEY})) as server:
        with _client(server, CLIENT_KEY) as client:
            assert client.models.list().data
            postgres_server.drop_database(database)
            with pytest.raises(openai.InternalServerError) as caught:
                client.models.list()
            with pytest.raises(openai.InternalServerError) as health:
                client.get(f"{server.url}/healthz", cast_to=httpx2.Response)
    assert caught.value.status_code == 503 and caught.value.code == "store_unavailable"
    assert health.value.response.json()["status"] == "unavailable"


# --- the `foureyes serve` and `foureyes keys` commands ---------------------------------


@pytest.fixture
def serve_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
    return env | {
        "FOUREYES_STORE__URL": f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}",
        "FOUREYES_SERVER__API_KEYS_ENV": "SUPPORT_KEYS",
        "SUPPORT_KEYS": CLIENT_KEY,
    }


@pytest.fixture
def served(serve_env: dict[str, str], tmp_path: Path) -> Iterator[RunningServer]:
    server = start_serve_process([], env=serve_env, cwd=tmp_path)
    assert server.process is not None
    try:
        yield server
    finally:
        stop_process(server.process)


def test_foureyes_serve_takes_keys_from_env_and_from_keys_create(
    served: RunningServer, serve_env: dict[str, str], tmp_path: Path
) -> None:
    created = subprocess.run(
        [sys.executable, "-m", "foureyes.cli", "keys", "create", "--admin", "--json"],
        env=serve_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert created.returncode == 0, created.stderr
    admin_key = json.loads(created.stdout)["key"]

    with _client(served, CLIENT_KEY) as client:
        assert client.models.list().data
    with _client(served, "sk-unknown-0123456789") as client:
        with pytest.raises(openai.AuthenticationError):
            client.models.list()
    with _client(served, admin_key) as admin:
        listed = admin.get("/keys", cast_to=httpx2.Response).json()["data"]
    assert {(k["source"], k["scope"]) for k in listed} == {("env", "client"), ("created", "admin")}
