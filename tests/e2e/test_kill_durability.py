"""Invariant 10 under group commit: ``kill -9`` loses no record of a reply that left.

A real ``foureyes serve`` (offline routes) on SQLite or PostgreSQL takes many concurrent
replies, so its run writes share commits (its ``/metrics`` shows more writes than
commits), and is killed with SIGKILL after a set number of replies arrived, mid-stream of
the others. Every reply a client received must have its finished record in the store, its
decision bound to the bytes the client got. Counts only, no clock.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import urllib.request
from pathlib import Path

import openai
import pytest

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.trace import EventKind
from foureyes.store import Store
from tests.helpers.server import RunningServer, start_serve_process, stop_process

CLIENTS = 16
KILL_AFTER = 48
"""Replies received before the kill; the other clients' requests are still in flight."""


def _metric(server: RunningServer, name: str) -> float:
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=30) as response:
        text = response.read().decode()
    match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert match is not None, f"{name} is not in /metrics"
    return float(match.group(1))


async def _replies_until_killed(server: RunningServer) -> list[tuple[str, str, str]]:
    """(trace id, delivered digest, content) of every reply received before the kill."""
    received: list[tuple[str, str, str]] = []
    enough = asyncio.Event()

    async def client(n: int) -> None:
        async with openai.AsyncOpenAI(
            base_url=server.base_url, api_key="unused-locally", max_retries=0, timeout=60
        ) as sdk:
            for turn in range(1000):
                try:
                    reply = await sdk.chat.completions.create(
                        model="foureyes-support",
                        messages=[{"role": "user", "content": f"I had a rough day ({turn})."}],
                        user=f"kill-{n}",
                    )
                except openai.APIConnectionError:
                    return  # the server is gone
                block = (reply.model_extra or {})["foureyes"]
                content = reply.choices[0].message.content or ""
                received.append((block["trace_id"], block["delivered_sha256"], content))
                if len(received) >= KILL_AFTER:
                    enough.set()

    clients = asyncio.gather(*(client(n) for n in range(CLIENTS)))
    waiting = asyncio.ensure_future(enough.wait())
    await asyncio.wait([waiting, clients], timeout=300, return_when=asyncio.FIRST_COMPLETED)
    if clients.done():  # every client stopped before the kill: show why
        waiting.cancel()
        await clients
    assert enough.is_set(), f"only {len(received)} replies arrived"
    assert server.process is not None
    # Commits shared: the run writes so far outnumber the transactions that held them.
    rounds = await asyncio.to_thread(_metric, server, "foureyes_store_group_commits_total")
    writes = await asyncio.to_thread(_metric, server, "foureyes_store_grouped_writes_total")
    assert writes > rounds > 0
    os.kill(server.process.pid, signal.SIGKILL)
    await clients
    return list(received)


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
async def test_no_reply_that_left_loses_its_record_to_kill_9(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str
) -> None:
    url = (
        f"sqlite+aiosqlite:///{tmp_path / 'killed.db'}"
        if backend == "sqlite"
        else str(request.getfixturevalue("postgres_url"))
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
    env |= {
        "FOUREYES_STORE__URL": url,
        # No rate limit in the way: every client sends as fast as it is answered.
        "FOUREYES_SERVER__RATE_PER_MINUTE": "1000000",
        "FOUREYES_SERVER__BURST": "100000",
    }
    server = start_serve_process([], env=env, cwd=tmp_path)
    assert server.process is not None
    try:
        received = await _replies_until_killed(server)
    finally:
        stop_process(server.process)
    assert server.process.returncode == -signal.SIGKILL

    assert len(received) >= KILL_AFTER
    store = await Store.open(StoreConfig(url=url), PrivacyConfig(), {})
    try:
        for trace_id, delivered, content in received:
            assert sha256_hex(content) == delivered
            record = await store.traces.get(trace_id)
            assert record is not None, trace_id
            assert record.run.finished_at is not None and record.run.outcome is not None
            [decision] = [e.data for e in record.events if e.kind is EventKind.DECISION]
            assert decision["delivered_sha256"] == delivered
    finally:
        await store.close()
