"""One worker against two: ``foureyes serve --workers N`` on one durable PostgreSQL.

Starts a throwaway PostgreSQL cluster with its durable defaults (fsync and synchronous
commit on; tests/helpers/postgres.py), one ``foureyes simulate`` answering every upstream
call at once, and ``foureyes serve`` (Counselor and Supervisor on the simulator, risk roles
offline, the per-key rate limit in the store, as several workers need it) with 1 and then
2 workers, each on a fresh database. At ``--clients`` closed-loop clients it measures
replies/s, p50/p99 and, from /proc, the CPU per reply of exactly the processes under
test: the server's process tree (all workers), the simulator, this run's PostgreSQL
cluster (its postmaster and backends, found by port; no other ``postgres`` on the
machine) and this load generator, which posts with a bare aiohttp session (no SDK) to
take as little of the machine's two cores as it can. Each cell records the load average
and, from /proc/stat, the CPUs left idle and the CPUs busy with other processes. Every
reply is checked (approved, the draft released). Runs are interleaved (1 worker, 2
workers, 1, 2, ...).

On two cores the simulator and the load generator share the cores with the workers, so
the ratio is the scaling left over after them, not the workers' alone. So it also prints,
for each run, how many CPUs one worker's cell kept busy (every measured process's CPU per
reply times replies/s) and the most two workers could make of it at the same CPU per
reply on the CPUs it could have had (those it kept busy plus those left idle during the
cell, not the machine's count, since others took the rest): its ceiling; and a second
ceiling that also counts the CPUs niced processes had, which the scheduler gives to the
workers first (on a machine busy with niced test runs, two workers took them: 1.96x
measured against an idle-only ceiling of 1.00x, 2026-12-08).

    python benchmarks/workers.py [--replies 1500] [--clients 64] [--repeats 2] [--json]

Results: benchmarks/README.md (current, and how to read them), benchmarks/LOG.md (history).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gateway_parts as parts
from gateway_parts import DRAFT, MESSAGE, Outcome, scenario
from loadgen import (
    contention,
    drive,
    load_average,
    machine_cpu,
    percentile,
    start_simulator,
    stop_process,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.postgres import running_postgres  # noqa: E402


class LeanClient:
    """Posts the message to the gateway (``gateway_parts.LeanHttp``); a new conversation each."""

    def __init__(self, url: str) -> None:
        self.client = parts.LeanHttp(url + "/v1")
        self.sent = 0

    async def reply(self, n: int) -> Outcome:
        self.sent += 1
        status, answer, text = await self.client.chat(
            {
                "model": parts.GATEWAY_MODEL,
                "messages": [{"role": "user", "content": MESSAGE}],
                "user": f"workers-{id(self):x}-{self.sent}",
            }
        )
        meta = answer.get("foureyes") or {}
        return Outcome(
            status == 200 and meta.get("reason") == "approved" and text.startswith(DRAFT)
        )

    async def aclose(self) -> None:
        await self.client.aclose()


async def measure(
    url: str,
    server_pid: int,
    sim_pid: int,
    postgres: Callable[[], float],
    clients: int,
    replies: int,
) -> dict[str, Any]:
    """One measured cell; CPU from /proc of the server's tree, the simulator, the cluster."""
    client = LeanClient(url)
    try:
        await drive(client.reply, clients * 4, clients)  # warm every worker's pools
        load = load_average()
        machine = machine_cpu()
        before = (
            parts.tree_cpu_seconds(server_pid),
            parts.cpu_seconds(sim_pid),
            time.process_time(),
            postgres(),
        )
        wall_s, latencies, outcomes = await drive(client.reply, replies, clients)
        server_s = parts.tree_cpu_seconds(server_pid) - before[0]
        sim_s = parts.cpu_seconds(sim_pid) - before[1]
        client_s = time.process_time() - before[2]
        postgres_s = postgres() - before[3]
        others = contention(
            machine, machine_cpu(), wall_s, server_s + sim_s + client_s + postgres_s
        )
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
        **others,
    }


def busy_cpus(cell: dict[str, Any]) -> float:
    """How many CPUs a cell kept busy: every measured process's CPU per reply x replies/s."""
    per_reply_ms = sum(
        cell[name]
        for name in ("server_cpu_ms", "postgres_cpu_ms", "simulator_cpu_ms", "client_cpu_ms")
    )
    return float(cell["replies_per_s"]) * per_reply_ms / 1000


def ceiling(one_worker: dict[str, Any]) -> float:
    """The most two workers can make of one worker's cell on the CPUs it could have had.

    Two workers do twice one worker's work at best, and no more than the CPUs allow at
    the same CPU per reply of every process (server, PostgreSQL, simulator, client): the
    CPUs the cell kept busy plus the CPUs left idle during it (``idle_cpus``, read from
    /proc/stat), not the machine's CPU count, since other work took the rest.
    """
    busy = busy_cpus(one_worker)
    available = busy + float(one_worker["idle_cpus"])
    return round(min(2.0, available / busy), 2)


def preempting_ceiling(one_worker: dict[str, Any]) -> float:
    """:func:`ceiling` counting also the CPUs niced processes had (``niced_cpus``).

    The scheduler gives a CPU to a process at the default priority before a niced one, so
    on a machine busy with niced work (other sessions' test runs) two workers can take
    some of it: the idle-only ceiling is then too low, and this one is the bound.
    """
    busy = busy_cpus(one_worker)
    available = busy + float(one_worker["idle_cpus"]) + float(one_worker.get("niced_cpus", 0))
    return round(min(2.0, available / busy), 2)


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
        pg_cpu = parts.postgres_clock(postgres.port)
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
                    cell = await measure(
                        url, pid, simulator.pid, pg_cpu, args.clients, args.replies
                    )
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
    ceilings = [ceiling(one) for one in runs[1]]
    preempting = [preempting_ceiling(one) for one in runs[1]]
    if args.json:
        report = {
            "python": platform.python_version(),
            "replies": args.replies,
            "clients": args.clients,
            "runs": runs,
            "ratios": ratios,
            "cpus": cpus,
            "ceilings": ceilings,
            "preempting_ceilings": preempting,
        }
        print(json.dumps(report, indent=2))
        return
    print(f"{args.replies} replies per run at {args.clients} clients, PostgreSQL (durable)")
    print(
        "| workers | run | replies/s | p50 ms | p99 ms | CPU ms/reply: foureyes "
        "| PostgreSQL | simulator | client | failed | load avg | CPUs idle "
        "| CPUs busy with others (niced) |"
    )
    print("| ---: " * 10 + "| --- | ---: | ---: |")
    for workers, cells in runs.items():
        for n, c in enumerate(cells, 1):
            print(
                f"| {workers} | {n} | {c['replies_per_s']} | {c['p50_ms']} | {c['p99_ms']} "
                f"| {c['server_cpu_ms']} | {c['postgres_cpu_ms']} | {c['simulator_cpu_ms']} "
                f"| {c['client_cpu_ms']} | {c['failed']} "
                f"| {c['load_before']:.1f} → {c['load_after']:.1f} | {c['idle_cpus']} "
                f"| {c['other_cpus']} ({c['niced_cpus']}) |"
            )
    print(f"\ntwo workers / one, per run: {' / '.join(f'{r:.2f}x' for r in ratios)}")
    print(f"median: {statistics.median(ratios):.2f}x")
    for n, (one, bound, wider) in enumerate(zip(runs[1], ceilings, preempting, strict=True), 1):
        print(
            f"run {n}: one worker kept {busy_cpus(one):.2f} CPUs busy (every measured "
            f"process's CPU per reply x replies/s) and left {one['idle_cpus']:.2f} of the "
            f"{cpus} idle ({one['other_cpus']:.2f} busy with others, {one['niced_cpus']:.2f} "
            f"of them niced); at the same costs per reply two workers can reach at most "
            f"{bound:.2f}x on the idle CPUs, {wider:.2f}x if they also take the niced ones"
        )


if __name__ == "__main__":
    asyncio.run(main())
