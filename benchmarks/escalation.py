"""What does a message that L0 escalates cost the gateway? Replies/s and CPU per reply.

Starts one ``foureyes simulate`` answering at once and one ``foureyes serve`` with the
Counselor, the Supervisor and the L1 risk role on the simulator (L1 answers ``low``, so
no L2), then sends a message L0 escalates ("Sometimes I feel like I want to die."), a new
conversation each time, from ``--clients`` closed-loop clients with the ``openai`` SDK.
Each reply costs three upstream calls, and in the store: the conversation's triage lease
taken and given back, the L1 call's two daily counts (the conversation's and the key's)
reserved and settled in the ledger, the triage recorded at once, and the run's record.
Every reply is checked (approved, the draft released with the crisis resources); the
server's CPU per reply is read from ``/proc``.

    python benchmarks/escalation.py [--replies 800] [--clients 16] [--rounds 1] [--json]

Results: benchmarks/LOG.md ("Daily budgets").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import tempfile
from pathlib import Path
from typing import Any

import gateway_parts as parts
from loadgen import drive, measured_round, start_simulator, stop_process


async def main(args: argparse.Namespace) -> dict[str, Any]:
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        simulator, sim_url = start_simulator(parts.scenario(0.0), workdir)
        servers = parts.Servers(workdir)
        try:
            url = servers.foureyes(sim_url, "escalation", risk_on_simulator=True)
            gateway = parts.FoureyesGateway(
                "escalation", url, servers.last_pid, parts.ESCALATING_MESSAGE
            )
            try:
                await drive(gateway.reply, args.clients * 4, args.clients)  # warm up
                clocks = {"server": lambda: parts.cpu_seconds(gateway.pid)}
                for number in range(1, args.rounds + 1):
                    cell = await measured_round(gateway.reply, args.replies, args.clients, clocks)
                    rounds.append({"round": number, **cell})
            finally:
                await gateway.aclose()
        finally:
            servers.close()
            stop_process(simulator)
    return {
        "machine": platform.platform(),
        "options": {"replies": args.replies, "clients": args.clients},
        "rounds": rounds,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=800)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()
    report = asyncio.run(main(arguments))
    if arguments.json:
        print(json.dumps(report, indent=2))
    else:
        for row in report["rounds"]:
            print(
                f"round {row['round']}: {row['replies_per_s']} replies/s, "
                f"{row['server_cpu_ms']} ms CPU/reply, failed {row['failed']}"
            )
