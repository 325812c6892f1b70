"""``foureyes serve --workers``: a bad count stops the start with the config's own error."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from foureyes.cli import app
from foureyes.cli.serve_cmd import outnumber

runner = CliRunner()


@pytest.mark.parametrize(
    ("workers", "problem"),
    [
        ("0", "expected a number of at least 1, got '0'"),
        ("-2", "expected a number of at least 1, got '-2'"),
        ("two", "expected a whole number, got 'two'"),
        ("1.5", "expected a whole number, got '1.5'"),
    ],
)
def test_a_bad_worker_count_stops_serve_before_it_listens(workers: str, problem: str) -> None:
    result = runner.invoke(app, ["serve", "--port", "1", "--workers", workers, "--json"])
    assert result.exit_code == 1
    body = json.loads(result.output)
    assert body["error"] == "ConfigError"
    assert any(p.startswith("server.workers") and problem in p for p in body["problems"]), body


def test_workers_with_in_process_rate_limits_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOUREYES_SERVER__RATE_LIMIT_BACKEND", "memory")
    result = runner.invoke(app, ["serve", "--port", "1", "--workers", "3", "--json"])
    assert result.exit_code == 1
    body = json.loads(result.output)
    assert any("rate_limit_backend = 'memory'" in p for p in body["problems"]), body


@pytest.mark.postgres
def test_pools_that_do_not_fit_in_postgres_stop_serve_before_it_listens(
    monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    # 3 workers x 80 connections: more than the 200 the test server allows.
    monkeypatch.setenv("FOUREYES_STORE__URL", postgres_url)
    monkeypatch.setenv("FOUREYES_STORE__POOL_SIZE", "80")
    result = runner.invoke(app, ["serve", "--port", "1", "--workers", "3", "--json"])
    assert result.exit_code == 1, result.output
    body = json.loads(result.output)
    assert body["error"] == "ConfigError"
    [problem] = body["problems"]
    assert problem.startswith("server.workers = 3: 3 x store.pool_size 80 = 240 connections")


@pytest.mark.parametrize(
    ("workers", "cpus", "crowded"),
    [(1, 1, False), (2, 2, False), (2, 8, False), (3, 2, True), (2, 1, True), (4, None, False)],
)
def test_workers_crowd_only_when_they_outnumber_the_cpus(
    workers: int, cpus: int | None, crowded: bool
) -> None:
    assert outnumber(workers, cpus) is crowded
