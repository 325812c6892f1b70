"""Several `foureyes serve` processes on one store: every limit holds across them.

Two real servers (one of them with ``--workers 2``) on one PostgreSQL database, driven
concurrently over HTTP with the official openai SDK; and ``--workers 2`` on one SQLite
file. Counts only: the rate limit's window is hours long, so no refill happens mid-test.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.core.budget import utc_day
from foureyes.llm.calls import route_limit
from foureyes.store import Store
from tests.helpers.server import RunningServer, start_serve_process, stop_process

RATE_KEY = "client-key-" + "r" * 24
BUDGET_KEY = "client-key-" + "b" * 24
BURST = 5
DAILY_CALLS = 3


def _env(store_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
    return env | {
        "FOUREYES_STORE__URL": store_url,
        "FOUREYES_SERVER__API_KEYS_ENV": "CLIENT_KEYS",
        "CLIENT_KEYS": f"{RATE_KEY},{BUDGET_KEY}",
        "FOUREYES_SERVER__RATE_LIMIT_BACKEND": "store",
        "FOUREYES_SERVER__BURST": str(BURST),
        # One token back per 1000 minutes: the burst is all a key gets in this test.
        "FOUREYES_SERVER__RATE_PER_MINUTE": "0.001",
        # The Counselor drafts on a route of its own with a daily call limit.
        "FOUREYES_ROUTES__DRAFTS__KIND": "offline",
        "FOUREYES_ROUTES__DRAFTS__DAILY_CALLS": str(DAILY_CALLS),
        "FOUREYES_ROLES__COUNSELOR": "drafts",
    }


@pytest.fixture
def servers(tmp_path: Path, postgres_url: str) -> Iterator[list[RunningServer]]:
    """A single-process server and a two-worker server on one PostgreSQL database."""
    env = _env(postgres_url)
    started: list[RunningServer] = []
    try:
        for args in ([], ["--workers", "2"]):
            started.append(start_serve_process(args, env=env, cwd=tmp_path))
        yield started
    finally:
        for server in started:
            assert server.process is not None
            stop_process(server.process)


async def _list_models(server: RunningServer, key: str) -> str:
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key=key, max_retries=0) as client:
        try:
            await client.models.list()
        except openai.RateLimitError:
            return "limited"
    return "ok"


async def _rate_outcomes(targets: list[RunningServer], key: str, requests: int) -> list[str]:
    return list(
        await asyncio.gather(
            *(_list_models(targets[n % len(targets)], key) for n in range(requests))
        )
    )


@pytest.mark.postgres
async def test_limits_hold_across_processes_on_one_postgresql(
    servers: list[RunningServer], postgres_url: str
) -> None:
    outcomes = await _rate_outcomes(servers, RATE_KEY, 4 * BURST)
    # Exactly the burst across both servers (three processes), not the burst of each.
    assert outcomes.count("ok") == BURST
    assert outcomes.count("limited") == 3 * BURST

    async def chat(server: RunningServer) -> None:
        async with openai.AsyncOpenAI(
            base_url=server.base_url, api_key=BUDGET_KEY, max_retries=0
        ) as client:
            await client.chat.completions.create(
                model="foureyes-support",
                messages=[{"role": "user", "content": "I had a long day at work."}],
            )

    # More replies than the Counselor's route may draft today, half on each server.
    await asyncio.gather(*(chat(servers[n % 2]) for n in range(BURST)))
    store = await Store.open(StoreConfig(url=postgres_url), PrivacyConfig(), {})
    try:
        key = route_limit("drafts", daily_calls=DAILY_CALLS, daily_budget_usd=None).key
        used = await store.ledger.usage(key, utc_day())
    finally:
        await store.close()
    assert used.calls == DAILY_CALLS
    assert used.reserved_calls == 0


def test_two_workers_on_one_sqlite_file_share_the_rate_limit(tmp_path: Path) -> None:
    server = start_serve_process(
        ["--workers", "2"], env=_env(f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}"), cwd=tmp_path
    )
    assert server.process is not None
    try:
        outcomes = asyncio.run(_rate_outcomes([server], RATE_KEY, 4 * BURST))
    finally:
        output = stop_process(server.process)
    assert outcomes.count("ok") == BURST
    assert outcomes.count("limited") == 3 * BURST
    # No region configured: serve said what users will then be shown, once.
    assert output.count("gate.region is not set") == 1
    # Two workers were started, and each one that served drained on SIGTERM.
    assert output.count("Started server process") == 2
    served = output.count("Application startup complete.")
    assert served >= 1 and output.count("Finished server process") == served
    assert server.process.returncode == 0


_TWO_CPUS_TO_PIN = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux's CPU affinity and two CPUs to pin the server to",
)


@_TWO_CPUS_TO_PIN
@pytest.mark.parametrize(
    ("pinned", "flags", "note"),
    [
        (1, [], "note: 2 workers on the 1 CPU(s) this process may use"),
        (1, ["--json"], '{"warning": "workers_exceed_cpus", "workers": 2, "cpus": 1}'),
        (2, [], None),
    ],
)
def test_serve_says_when_its_workers_outnumber_its_cpus(
    tmp_path: Path, pinned: int, flags: list[str], note: str | None
) -> None:
    # Two workers on one CPU: said once at start-up (a line, or a JSON object with --json),
    # and the server still serves; on two CPUs nothing is said.
    server = start_serve_process(
        ["--workers", "2", *flags],
        env=_env(f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}"),
        cwd=tmp_path,
        cpus=set(sorted(os.sched_getaffinity(0))[:pinned]),
    )
    assert server.process is not None
    try:
        outcomes = asyncio.run(_rate_outcomes([server], RATE_KEY, 1))
    finally:
        output = stop_process(server.process)
    assert outcomes == ["ok"]
    said = [
        line
        for line in output.splitlines()
        if line.startswith(("note:", '{"warning"')) and "workers" in line
    ]
    if note is None:
        assert said == [], output
    else:
        assert len(said) == 1 and said[0].startswith(note), output
