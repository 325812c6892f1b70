"""One worker against two: ``foureyes serve --workers N`` on one durable PostgreSQL.

Starts a throwaway PostgreSQL cluster with its durable defaults (fsync and synchronous
commit on; tests/helpers/postgres.py), one ``foureyes simulate`` answering every upstream
call at once, and ``foureyes serve`` (Counselor and Supervisor on the simulator, risk roles
offline, the per-key rate limit in the store, as several workers need it) with 1 and then
2 workers, each on a fresh database. At ``--clients`` closed-loop clients it measures
replies/s, p50/p99 and the CPU per reply of the server's processes (all workers), the
simulator, the PostgreSQL cluster and this load generator, which posts with a bare
aiohttp session (no SDK) to take as little of the machine's two cores as it can. Every
reply is checked (approved, the draft released). Runs are interleaved (1 worker, 2
workers, 1, 2, ...).

On two cores the simulator and the load generator share the cores with the workers, so
the ratio is the scaling left over after them, not the workers' alone. So it also prints,
for each run, how many CPUs one worker's cell kept busy (every measured process's CPU per
reply times replies/s) and the most two workers could make of it on this machine's CPUs
at the same CPU per reply: its ceiling.

    python benchmarks/workers.py [--replies 1500] [--clients 64] [--repeats 2] [--json]

Results and how to read them: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import gateway_parts as parts
from gateway_parts import DRAFT, MESSAGE, Outcome, scenario
from loadgen import drive, load_average, percentile, start_simulator, stop_process

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.postgres import running_postgres  # noqa: E402


def postgres_cpu_seconds() -> float:
    """CPU time of every live PostgreSQL server process (the cluster's backends)."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm", encoding="ascii") as comm:
                    if comm.read().strip() != "postgres":
                        continue
                total += parts.cpu_seconds(int(entry))
            except OSError:
                continue
    return total


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` and every live descendant (uvicorn's worker processes)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            total += parts.cpu_seconds(current)
        except OSError:
            continue
        todo += children.get(current, [])
    return total


class LeanClient:
    """Posts the message to the gateway with aiohttp; every reply a new conversation."""

    def __init__(self, url: str) -> None:
        self.url = url + "/v1/chat/completions"
        self.session = aiohttp.ClientSession()
        self.sent = 0

    async def reply(self, n: int) -> Outcome:
        self.sent += 1
        body = {
            "model": parts.GATEWAY_MODEL,
            "messages": [{"role": "user", "content": MESSAGE}],
            "user": f"workers-{id(self):x}-{self.sent}",
        }
        async with self.session.post(self.url, json=body) as response:
            answer = await response.json()
        meta = answer.get("foureyes") or {}
        text = answer["choices"][0]["message"]["content"] if response.status == 200 else ""
        return Outcome(meta.get("reason") == "approved" and text.startswith(DRAFT), None)

    async def aclose(self) -> None:
        await self.session.close()


async def measure(
    url: str, server_pid: int, sim_pid: int, clients: int, replies: int
) -> dict[str, Any]:
    client = LeanClient(url)
    try:
        await drive(client.reply, clients * 4, clients)  # warm every worker's pools
        load = load_average()
        before = (
            tree_cpu_seconds(server_pid),
            parts.cpu_seconds(sim_pid),
            time.process_time(),
            postgres_cpu_seconds(),
        )
        wall_s, latencies, outcomes = await drive(client.reply, replies, clients)
        server_s = tree_cpu_seconds(server_pid) - before[0]
        sim_s = parts.cpu_seconds(sim_pid) - before[1]
        client_s = time.process_time() - before[2]
        postgres_s = postgres_cpu_seconds() - before[3]
    finally:
        await client.aclose()
    return {
        "replies_per_s": round(replies / wall_s, 1),
        "p50_ms": round(percentile(latencies, 0.5), 1),
        "p99_ms": round(percentile(latencies, 0.99), 1),
        "server_cpu_ms": round(server_s / replies * 1000, 2),
        "simulator_cpu_ms": round(sim_s / replies * 1000, 2),
        "postgres_cpu_ms": round(postgres_s / replies * 1000, 2),
        "client_cpu_ms": round(client_s / replies * 1000, 2),
        "failed": sum(not o.ok for o in outcomes),
        "load_before": load,
        "load_after": load_average(),
    }


def busy_cpus(cell: dict[str, Any]) -> float:
    """How many CPUs a cell kept busy: every measured process's CPU per reply x replies/s."""
    per_reply_ms = sum(
        cell[name]
        for name in ("server_cpu_ms", "postgres_cpu_ms", "simulator_cpu_ms", "client_cpu_ms")
    )
    return float(cell["replies_per_s"]) * per_reply_ms / 1000


def ceiling(one_worker: dict[str, Any], cpus: int) -> float:
    """The most two workers can make of one worker's cell on ``cpus`` CPUs.

    Two workers do twice one worker's work at best, and no more than the CPUs allow at
    the same CPU per reply of every process (server, PostgreSQL, simulator, client).
    """
    return round(min(2.0, cpus / busy_cpus(one_worker)), 2)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=1500)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp, running_postgres(durable=True) as postgres:
        simulator, sim_url = start_simulator(scenario(0.0), Path(tmp))
        servers = parts.Servers(Path(tmp))
        try:
            urls: dict[int, tuple[str, int]] = {}
            for workers in runs:
                store = postgres.url(postgres.create_database())
                url = servers.foureyes(
                    sim_url, f"w{workers}", store_url=store, workers=workers, shared_limits=True
                )
                urls[workers] = (url, servers.last_pid)
            for run in range(args.repeats):
                for workers, (url, pid) in urls.items():
                    cell = await measure(url, pid, simulator.pid, args.clients, args.replies)
                    runs[workers].append(cell)
                    print(f"run {run + 1}, {workers} worker(s): {cell}", file=sys.stderr)
        finally:
            servers.close()
            stop_process(simulator)
    ratios = [
        round(two["replies_per_s"] / one["replies_per_s"], 2)
        for one, two in zip(runs[1], runs[2], strict=True)
    ]
    cpus = parts.cpu_count()
    ceilings = [ceiling(one, cpus) for one in runs[1]]
    if args.json:
        report = {
            "python": platform.python_version(),
            "runs": runs,
            "ratios": ratios,
            "cpus": cpus,
            "ceilings": ceilings,
        }
        print(json.dumps(report, indent=2))
        return
    print(f"{args.replies} replies per run at {args.clients} clients, PostgreSQL (durable)")
    print(
        "| workers | run | replies/s | p50 ms | p99 ms | CPU ms/reply: foureyes "
        "| PostgreSQL | simulator | client | failed |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for workers, cells in runs.items():
        for n, c in enumerate(cells, 1):
            print(
                f"| {workers} | {n} | {c['replies_per_s']} | {c['p50_ms']} | {c['p99_ms']} "
                f"| {c['server_cpu_ms']} | {c['postgres_cpu_ms']} | {c['simulator_cpu_ms']} "
                f"| {c['client_cpu_ms']} | {c['failed']} |"
            )
    print(f"\ntwo workers / one, per run: {' / '.join(f'{r:.2f}x' for r in ratios)}")
    print(f"median: {statistics.median(ratios):.2f}x")
    for n, (one, bound) in enumerate(zip(runs[1], ceilings, strict=True), 1):
        print(
            f"run {n}: one worker kept {busy_cpus(one):.2f} of the {cpus} CPUs busy (every "
            f"process's CPU per reply x replies/s); at the same costs per reply two workers "
            f"can reach at most {bound:.2f}x"
        )


if __name__ == "__main__":
    asyncio.run(main())
