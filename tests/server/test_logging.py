from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from fastapi import Request

from foureyes.core.errors import StoreError
from foureyes.server._logging import JsonFormatter, describe_exception, log_event
from foureyes.server.app import create_app
from foureyes.server.auth import ClientKey
from tests.helpers.postgres import free_port
from tests.helpers.server import app_client
from tests.server._support import CLIENT_KEY, KEYS_ENV, bearer, keyed

SECRET = "please-never-log-this-4711"


def _lines(records: list[logging.LogRecord]) -> list[dict[str, Any]]:
    formatter = JsonFormatter()
    lines = [formatter.format(r) for r in records]
    assert all("\n" not in line for line in lines)
    return [json.loads(line) for line in lines]


def test_an_event_is_one_json_object_with_its_fields(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="foureyes.test")
    log_event(
        logging.getLogger("foureyes.test"),
        "decision",
        trace_id="t-1",
        message="released",
        reason="approved",
        ms=1.5,
    )
    (line,) = _lines(caplog.records)
    assert line["event"] == "decision" and line["trace_id"] == "t-1"
    assert line["reason"] == "approved" and line["ms"] == 1.5
    assert line["message"] == "released" and line["level"] == "info"
    assert line["logger"] == "foureyes.test" and line["ts"].endswith("+00:00")


def test_events_below_the_level_cost_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="foureyes.test")
    log_event(logging.getLogger("foureyes.test"), "noise", level="debug", n=1)
    assert caplog.records == []


def test_other_libraries_records_are_json_too(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="uvicorn.error")
    logging.getLogger("uvicorn.error").info("Started server process [%d]", 42)
    (line,) = _lines(caplog.records)
    assert line["event"] == "log" and line["message"] == "Started server process [42]"


def test_exceptions_keep_their_type_and_stack_but_only_our_messages() -> None:
    def fail(exc: Exception) -> Exception:
        try:
            raise exc
        except Exception as caught:
            return caught

    foreign = describe_exception(fail(ValueError(f"bad value {SECRET!r}")))
    ours = describe_exception(fail(StoreError("append", "database is locked")))

    assert foreign["type"] == "builtins.ValueError" and "message" not in foreign
    assert any("in fail" in frame for frame in foreign["stack"])
    assert SECRET not in json.dumps(foreign)
    assert ours["message"] == "store failed during append: database is locked"


async def test_each_request_gets_an_id_and_one_line_without_its_content(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = create_app(keyed(), KEYS_ENV)

    @app.post("/v1/echo-length/{conversation}")
    async def echo_length(request: Request, conversation: str, _: ClientKey) -> dict[str, int]:
        request.state.trace_id = "trace-123"
        return {"n": len(await request.body())}

    caplog.set_level(logging.INFO, logger="foureyes.server")
    async with app_client(app) as client:
        given = await client.post(
            f"/v1/echo-length/{SECRET}?q={SECRET}",
            content=json.dumps({"text": SECRET}),
            headers=bearer(CLIENT_KEY) | {"x-request-id": "req-42.a"},
        )
        invented = await client.get("/healthz", headers={"x-request-id": "has spaces"})

    assert given.headers["x-request-id"] == "req-42.a"
    assert invented.headers["x-request-id"] != "has spaces"
    first, second = [line for line in _lines(caplog.records) if line["event"] == "http_request"]
    expected = {
        "request_id": "req-42.a",
        "trace_id": "trace-123",
        "route": "/v1/echo-length/{conversation}",
        "method": "POST",
        "status": 200,
    }
    assert {k: first[k] for k in expected} == expected
    assert first["key"].startswith("env-") and first["duration_ms"] >= 0
    assert second["request_id"] == invented.headers["x-request-id"]
    assert "trace_id" not in second and second["key"] is None
    assert SECRET not in json.dumps([first, second])


def test_uvicorn_with_the_logging_config_writes_only_json_lines(tmp_path: Path) -> None:
    port = free_port()
    script = textwrap.dedent(
        f"""
        import threading, time, urllib.request, uvicorn
        from foureyes.config import load_config
        from foureyes.server._logging import logging_config
        from foureyes.server.app import create_app

        config = load_config(environ={{"FOUREYES_STORE__URL": "sqlite+aiosqlite:///{tmp_path}/l.db"}})
        server = uvicorn.Server(uvicorn.Config(
            create_app(config, {{}}), host="127.0.0.1", port={port},
            log_config=logging_config(), access_log=False,
        ))
        def poke():
            while not server.started:
                time.sleep(0.02)
            urllib.request.urlopen("http://127.0.0.1:{port}/v1/models?q={SECRET}").read()
            server.should_exit = True
        threading.Thread(target=poke).start()
        server.run()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    events = {line["event"] for line in lines}
    assert {"auth_mode", "http_request", "log"} <= events
    (request,) = [line for line in lines if line["event"] == "http_request"]
    assert request["route"] == "/v1/models" and request["status"] == 200
    assert SECRET not in result.stderr
