"""What do daily budgets cost a reply? The gateway with and without route limits.

Starts one ``foureyes simulate`` answering at once and two ``foureyes serve`` on the same
store kind, the same in everything but their routes: one as in ``gateway.py``, one with a
daily call limit and a daily spend limit (with prices) on the Counselor's and the
Supervisor's routes, far above what a run uses. With limits, each of a reply's two model
calls reserves room in the store's ledger before it is made and settles it after, so a
reply costs four ledger transactions more. The two are driven in alternating rounds at
``--clients`` closed-loop clients (a bare aiohttp client, every reply checked: approved,
the draft released); per round: replies/s and the server's CPU per reply (``/proc``), and
PostgreSQL's with ``--postgres`` (a throwaway cluster with its durable defaults; the
default store is an SQLite file).

    python benchmarks/budgets.py [--replies 1500] [--clients 16] [--rounds 2] [--postgres]
        [--json]

Results: benchmarks/LOG.md ("Daily budgets").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import platform
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gateway_parts as parts
from loadgen import drive, measured_round, start_simulator, stop_process
from workers import LeanClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.postgres import PostgresServer, running_postgres  # noqa: E402

GATEWAYS = ("plain", "budgets")


@contextlib.contextmanager
def _postgres(wanted: bool) -> Iterator[PostgresServer | None]:
    if not wanted:
        yield None
        return
    with running_postgres(durable=True) as server:
        yield server


async def _round(
    url: str, pid: int, replies: int, clients: int, postgres: PostgresServer | None
) -> dict[str, Any]:
    client = LeanClient(url)
    clocks = {"server": lambda: parts.cpu_seconds(pid)}
    if postgres is not None:
        clocks["postgres"] = parts.postgres_clock(postgres.port)
    try:
        await drive(client.reply, clients * 4, clients)  # warm the pools
        return await measured_round(client.reply, replies, clients, clocks)
    finally:
        await client.aclose()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder, _postgres(args.postgres) as postgres:
        workdir = Path(folder)
        simulator, sim_url = start_simulator(parts.scenario(0.0), workdir)
        servers = parts.Servers(workdir)
        try:
            live: dict[str, tuple[str, int]] = {}
            for name in GATEWAYS:
                store = postgres.url(postgres.create_database()) if postgres else None
                url = servers.foureyes(
                    sim_url,
                    name,
                    store_url=store,
                    shared_limits=postgres is not None,
                    budgets=name == "budgets",
                )
                live[name] = (url, servers.last_pid)
            for number in range(args.rounds):
                # Alternate which goes first, so drift hits both alike.
                order = GATEWAYS if number % 2 == 0 else GATEWAYS[::-1]
                for name in order:
                    url, pid = live[name]
                    cell = await _round(url, pid, args.replies, args.clients, postgres)
                    rounds.append({"round": number + 1, "gateway": name, **cell})
                    print(json.dumps(rounds[-1]), file=sys.stderr, flush=True)
        finally:
            servers.close()
            stop_process(simulator)
    medians = {
        name: {
            key: statistics.median(r[key] for r in rounds if r["gateway"] == name)
            for key in ("replies_per_s", "server_cpu_ms")
        }
        for name in GATEWAYS
    }
    return {
        "machine": platform.platform(),
        "store": "postgresql" if args.postgres else "sqlite",
        "options": {"replies": args.replies, "clients": args.clients, "rounds": args.rounds},
        "rounds": rounds,
        "medians": medians,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=1500)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--postgres", action="store_true", help="store on PostgreSQL")
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()
    report = asyncio.run(main(arguments))
    if arguments.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"store {report['store']}, {arguments.clients} clients")
        print("| gateway | round | replies/s | CPU ms/reply | PostgreSQL CPU ms/reply | failed |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for row in report["rounds"]:
            pg = row.get("postgres_cpu_ms", "–")
            print(
                f"| {row['gateway']} | {row['round']} | {row['replies_per_s']} "
                f"| {row['server_cpu_ms']} | {pg} | {row['failed']} |"
            )
        plain, budgets = report["medians"]["plain"], report["medians"]["budgets"]
        ratio = budgets["replies_per_s"] / plain["replies_per_s"]
        print(f"budgets / plain (medians): {ratio:.2f}x replies/s")
