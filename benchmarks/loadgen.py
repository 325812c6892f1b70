"""Closed-loop load and the processes behind benchmarks/gateway.py.

* :func:`drive`: ``concurrency`` clients, each sending its next request as soon as the
  last one is answered, until a fixed number of replies is done (bounded by count);
  :func:`measured_round`: one such run with the CPU per reply of the given processes.
* :class:`Cell`: one measured run (system, model latency, clients) and its statistics.
* :func:`start_process` / :func:`stop_process`: a server subprocess on loopback, its
  output in a log file, ready once an HTTP GET answers.
* :func:`start_simulator` / :func:`load_scenario`: ``foureyes simulate`` and its scenario.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
STARTUP_S = 60.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in [0, 1]) of a non-empty sequence."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def load_average() -> float:
    """The one-minute load average of the machine."""
    return os.getloadavg()[0]


def machine_cpu() -> tuple[float, float, float]:
    """CPU seconds the whole machine has spent busy, idle and niced so far (/proc/stat).

    Idle is ``idle`` plus ``iowait``; busy is every other state; niced (a part of busy) is
    user time at a lower priority, which a process at the default priority takes first.
    Two readings around a cell give how many CPUs were busy, idle and niced during it.
    """
    with open("/proc/stat", encoding="ascii") as stat:
        values = [int(x) for x in stat.readline().split()[1:9]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = values[3] + values[4]
    return (sum(values) - idle) / tick, idle / tick, values[1] / tick


def contention(
    before: tuple[float, float, float],
    after: tuple[float, float, float],
    wall_s: float,
    ours_s: float,
    ours_niced: bool | None = None,
) -> dict[str, float]:
    """Per cell: the CPUs left idle, busy with processes not under test, and niced.

    ``ours_s`` is the CPU time of every measured process during the cell (the system
    under test, the simulator, the load generator); whatever else the machine was busy
    with in that wall time belongs to someone else (other helpers, the kernel).
    ``niced_cpus`` is the part of it at a lower priority than ours (``ours_niced``: our
    processes run niced themselves, so the niced time is partly ours; default: whether
    this process is), which the scheduler hands to ours when they want it.
    """
    if ours_niced is None:
        ours_niced = os.getpriority(os.PRIO_PROCESS, 0) > 0
    busy = (after[0] - before[0]) / wall_s
    idle = (after[1] - before[1]) / wall_s
    others = max(0.0, busy - ours_s / wall_s)
    niced = (after[2] - before[2]) / wall_s - (ours_s / wall_s if ours_niced else 0.0)
    return {
        "idle_cpus": round(idle, 2),
        "other_cpus": round(others, 2),
        "niced_cpus": round(min(others, max(0.0, niced)), 2),
    }


@dataclass
class Cell:
    """One measured run: ``replies`` answered by ``system`` to ``concurrency`` clients."""

    system: str
    latency_ms: int
    concurrency: int
    wall_s: float
    latencies_ms: list[float]
    failures: int = 0
    load_before: float = 0.0
    load_after: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    trace_ids: list[str | None] = field(default_factory=list)
    """The foureyes trace of each reply, aligned with ``latencies_ms`` (else empty)."""
    source: str | None = None
    """The foureyes server (store and log) that answered, when one did."""

    @property
    def throughput(self) -> float:
        return len(self.latencies_ms) / self.wall_s

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies_ms)

    @property
    def p99(self) -> float:
        return percentile(self.latencies_ms, 0.99)

    def summary(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "model_latency_ms": self.latency_ms,
            "clients": self.concurrency,
            "replies": len(self.latencies_ms),
            "failures": self.failures,
            "replies_per_s": round(self.throughput, 1),
            "p50_ms": round(self.p50, 2),
            "p99_ms": round(self.p99, 2),
            "load_avg_before": round(self.load_before, 2),
            "load_avg_after": round(self.load_after, 2),
        } | self.extra


async def drive(
    reply: Callable[[int], Awaitable[T]], replies: int, concurrency: int
) -> tuple[float, list[float], list[T]]:
    """Run ``replies`` calls of ``reply(n)`` from ``concurrency`` closed-loop clients.

    Returns the wall time, each reply's latency in ms and each reply's result (in
    completion order, aligned with the latencies). An exception ends the run.
    """
    numbers = iter(range(replies))
    latencies: list[float] = []
    results: list[T] = []

    async def client() -> None:
        for n in numbers:
            started = time.perf_counter()
            result = await reply(n)
            latencies.append((time.perf_counter() - started) * 1000)
            results.append(result)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return time.perf_counter() - started, latencies, results


async def measured_round(
    reply: Callable[[int], Awaitable[Any]],
    replies: int,
    concurrency: int,
    clocks: Mapping[str, Callable[[], float]],
) -> dict[str, Any]:
    """One :func:`drive` of ``replies`` checked replies, with each clock's CPU per reply.

    ``clocks`` names CPU-second counters (a server's ``/proc`` time, PostgreSQL's); each
    is reported as ``<name>_cpu_ms``. A reply's result must have an ``ok`` attribute.
    """
    load = load_average()
    before = {name: clock() for name, clock in clocks.items()}
    wall_s, _latencies, outcomes = await drive(reply, replies, concurrency)
    cpu = {name: clock() - before[name] for name, clock in clocks.items()}
    return {
        "replies_per_s": round(replies / wall_s, 1),
        **{f"{name}_cpu_ms": round(seconds / replies * 1000, 2) for name, seconds in cpu.items()},
        "failed": sum(not outcome.ok for outcome in outcomes),
        "load_average": load,
    }


def http_get(url: str, timeout_s: float = 2.0) -> int:
    """The status of a GET (an HTTP error status too); raises when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def start_process(
    args: Sequence[str], *, ready_url: str, log: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a server, its output appended to ``log``; return once ``ready_url`` answers.

    Raises:
        RuntimeError: it exited or did not answer within ``STARTUP_S`` (log tail included).
    """
    with log.open("ab") as out:
        process = subprocess.Popen(
            list(args),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
        )
    deadline = time.monotonic() + STARTUP_S
    while True:
        try:
            http_get(ready_url)
            return process
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if process.poll() is not None or time.monotonic() > deadline:
                stop_process(process)
                tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
                raise RuntimeError(f"{args[0]} did not start ({' '.join(args)}):\n{tail}") from None
            time.sleep(0.1)


def stop_process(process: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def start_simulator(
    scenario: Mapping[str, Any], workdir: Path
) -> tuple[subprocess.Popen[str], str]:
    """Start ``foureyes simulate`` on a free loopback port; return it and its base URL."""
    path = workdir / "scenario.json"
    path.write_text(json.dumps(scenario), encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "foureyes.cli", "simulate", "--scenario", str(path)]
        + ["--port", "0", "--json"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    ready = json.loads(process.stdout.readline())
    return process, str(ready["base_url"])


def load_scenario(base_url: str, scenario: Mapping[str, Any]) -> None:
    """Replace the simulator's scenario (which also resets its request log)."""
    request = urllib.request.Request(
        base_url.removesuffix("/v1") + "/_sim/scenario",
        data=json.dumps(scenario).encode(),
        headers={"Content-Type": "application/json"},
        method="PUT",
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


def reset_simulator(base_url: str) -> None:
    """Forget the simulator's request log (and rule uses)."""
    request = urllib.request.Request(base_url.removesuffix("/v1") + "/_sim/reset", method="POST")
    with urllib.request.urlopen(request, timeout=10):
        pass


def simulator_request_count(base_url: str) -> int:
    """How many chat requests the simulator received since its last reset."""
    url = base_url.removesuffix("/v1") + "/_sim/requests"
    with urllib.request.urlopen(url, timeout=30) as response:
        return len(json.loads(response.read())["requests"])
