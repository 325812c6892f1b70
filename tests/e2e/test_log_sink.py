"""A log sink that stops reading costs log lines, counted, never the gateway (issue 41).

A real ``foureyes serve`` writes its JSON log to a pipe nobody reads (the helper's
stdout/stderr pipe, read only when the server stops): the pipe fills after a few hundred
lines. Thousands of requests later every one was answered, ``/healthz`` answered all along,
and ``foureyes_log_lines_dropped_total`` counts what was lost. Once the pipe is drained,
the server says how many lines it dropped. Counts only, no clock: a frozen server fails on
the client's (generous) timeout instead of passing.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.server import RunningServer, start_serve_process, stop_process

REQUESTS = 2400
"""Requests sent while nothing reads the log: about ten times what the pipe holds."""
CLIENTS = 8
QUEUE_LINES = 32
"""``[server] log_queue_lines``: small, so lines are dropped early."""
TIMEOUT_S = 60.0
"""Each request's timeout: a bound on a frozen server, never a measurement."""
SCRAPES = 40
"""Scrapes of /metrics at most, each on a new connection, to reach a worker that lost lines."""


def _serve(tmp_path: Path, workers: int) -> RunningServer:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
    env |= {
        "FOUREYES_STORE__URL": f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}",
        "FOUREYES_SERVER__LOG_QUEUE_LINES": str(QUEUE_LINES),
        "FOUREYES_SERVER__RATE_PER_MINUTE": "10000000",
        "FOUREYES_SERVER__BURST": "1000000",
    }
    return start_serve_process(["--workers", str(workers)], env=env, cwd=tmp_path)


async def _load(server: RunningServer) -> list[int]:
    """Send :data:`REQUESTS` requests, a chat completion in every tenth, ``/healthz`` too."""
    statuses: list[int] = []
    sent = iter(range(REQUESTS))

    async def client(http: httpx.AsyncClient) -> None:
        for n in sent:
            if n % 10 == 0:
                response = await http.post(
                    "/v1/chat/completions",
                    json={
                        "model": "foureyes-support",
                        "messages": [{"role": "user", "content": f"A long day at work ({n})."}],
                    },
                )
            elif n % 10 == 5:
                response = await http.get("/healthz")
            else:
                response = await http.get("/v1/models")
            statuses.append(response.status_code)

    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as http:
        await asyncio.gather(*(client(http) for _ in range(CLIENTS)))
    return statuses


def _dropped(server: RunningServer) -> int:
    response = httpx.get(f"{server.url}/metrics", timeout=TIMEOUT_S)
    response.raise_for_status()
    match = re.search(r"^foureyes_log_lines_dropped_total (\S+)$", response.text, re.MULTILINE)
    assert match is not None, "foureyes_log_lines_dropped_total is not in /metrics"
    return int(float(match.group(1)))


class _Drain:
    """Reads the server's pipe from a thread, from the moment it is started."""

    def __init__(self, server: RunningServer) -> None:
        assert server.process is not None and server.process.stdout is not None
        self._pipe = server.process.stdout
        self.lines: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for raw in self._pipe:
            text = raw.decode(errors="replace").strip()
            if text.startswith("{"):
                self.lines.append(json.loads(text))

    def notes(self) -> list[dict[str, Any]]:
        return [line for line in list(self.lines) if line.get("event") == "log_lines_dropped"]


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_log_pipe_nobody_reads_costs_counted_lines_not_answers(
    tmp_path: Path, workers: int
) -> None:
    server = _serve(tmp_path, workers)
    assert server.process is not None
    try:
        statuses = await _load(server)
        assert len(statuses) == REQUESTS
        assert set(statuses) == {200}
        # Each scrape is a fresh connection, answered by whichever worker accepts it: with
        # two, the one that lost lines is found within a few (the other may have lost none).
        dropped = 0
        for _ in range(SCRAPES):
            dropped = max(dropped, await asyncio.to_thread(_dropped, server))
            if dropped:
                break
        assert dropped > 0

        drain = _Drain(server)
        # Drained, a process that lost lines says how many. With two workers the one
        # that lost none (the kernel may have given the other every connection) says
        # nothing; polled by count.
        for _ in range(600):
            if drain.notes():
                break
            await asyncio.sleep(0.05)
        notes = drain.notes()
        assert notes, drain.lines[-5:]
        for pid in {note["pid"] for note in notes}:
            own = [note for note in notes if note["pid"] == pid]
            assert sum(note["dropped"] for note in own) == own[-1]["dropped_total"] > 0
        if workers == 1:
            final = await asyncio.to_thread(_dropped, server)
            assert notes[-1]["dropped_total"] == final >= dropped
            assert {"level", "ts", "logger"} <= set(notes[-1])
    finally:
        stop_process(server.process)
