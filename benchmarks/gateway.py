"""Throughput, latency and own overhead of foureyes, side by side with NeMo Guardrails.

One run, one machine, one ``foureyes simulate`` process serving every upstream call; the
simulator answers at once, then (scenario swapped in place) after 50 ms per call. At 1, 16
and 64 closed-loop clients it measures replies/s and p50/p99 latency of

* ``openai SDK``: the bare SDK making the same two upstream calls per reply (a draft, then
  one check of it): the floor, no guardrail at all;
* ``NeMo IORails``: NeMo Guardrails 0.24's IORails engine as a library
  (``Guardrails(config, use_iorails=True, require_iorails=True).generate_async``), rail
  ``self check output``, in its own virtual environment (benchmarks/nemo/);
* ``NeMo LLMRails``: the same config on ``LLMRails.generate_async``;
* ``foureyes Guard.reply`` / ``foureyes Guard.check``: foureyes in this process through
  the library API, support mode, or the host's own draft (one SDK call) judged;
* ``NeMo IORails server``: IORails behind benchmarks/nemo/iorails_asgi.py, a bare ASGI app
  on uvicorn (NeMo 0.24.1's own server builds LLMRails only), called with the SDK;
* ``NeMo server``: ``nemoguardrails server`` with the same config, called with the SDK;
* ``foureyes gateway``: ``foureyes serve`` as shipped (Counselor and Supervisor on the
  simulator, risk roles offline), called with the SDK: L0 triage, draft, review, gate,
  trace; its routes on the default lean transport, its store with group commit;
* ``foureyes gateway, openai SDK transport``: the same with ``transport = "aiohttp"`` on its
  routes (the official SDK for upstream calls: the lean transport's "before");
* ``foureyes gateway, no group commit``: the same with ``[store] group_commit = false``
  (a commit per write: group commit's "before").

Every system is measured ``--repeats`` times per cell, the runs interleaved (run 1 of every
system, then run 2, ...); the report gives each run and the medians over runs, and the
ratios of each library row to IORails as a library and of each server row to IORails
behind its HTTP hop, within the run.

Every reply is checked (the draft released, or NeMo's check passed), the simulator's
request log gives the upstream calls per reply, and /proc gives the CPU time per reply of
each server process and of the simulator (in-process systems: this process's CPU; NeMo's
libraries: their process's). For the gateway it also reports its own overhead
per reply (first run): its request time (from its request log) minus the time inside model calls
(from the ``model_call`` events of the reply's trace), the same seen from the client, and
the part inside the pipeline run; and the speculative-draft saving: an L0-escalating
message, so triage makes an L1 call, through two gateways that differ only in
``gate.speculative_draft``. NeMo's server runs through benchmarks/nemo/serve_loopback.py,
the same command bound to 127.0.0.1 instead of 0.0.0.0.

    bash benchmarks/nemo/setup.sh      # once: NeMo's own venv, benchmarks/.venv-nemo
    python benchmarks/gateway.py [--replies 400] [--serial-replies 150] [--clients 1,16,64]
        [--latencies-ms 0,50] [--repeats 2] [--speculation-replies 100] [--json FILE]
        [--systems sdk,iorails,llmrails,guard-reply,guard-check,iorails-server,nemo-server,
                   foureyes,foureyes-sdk,foureyes-no-group]

Results and how to read them: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import gateway_parts as parts
import gateway_report
from gateway_parts import (
    ESCALATING_MESSAGE,
    MESSAGE,
    BareSdk,
    FoureyesGateway,
    InProcess,
    NemoServer,
    scenario,
)
from loadgen import (
    Cell,
    drive,
    load_average,
    load_scenario,
    reset_simulator,
    simulator_request_count,
    start_simulator,
    stop_process,
)

HERE = Path(__file__).resolve().parent
SYSTEMS = (
    "sdk",
    "iorails",
    "llmrails",
    "guard-reply",
    "guard-check",
    "iorails-server",
    "nemo-server",
    "foureyes",
    "foureyes-sdk",
    "foureyes-no-group",
)
LABELS = {
    "sdk": gateway_report.SDK,
    "iorails": gateway_report.IORAILS,
    "llmrails": gateway_report.LLMRAILS,
    "guard-reply": gateway_report.GUARD_REPLY,
    "guard-check": gateway_report.GUARD_CHECK,
    "iorails-server": gateway_report.IORAILS_SERVER,
    "nemo-server": gateway_report.NEMO_SERVER,
    "foureyes": gateway_report.FOUREYES,
    "foureyes-sdk": gateway_report.FOUREYES_SDK,
    "foureyes-no-group": gateway_report.FOUREYES_NO_GROUP,
}
LIBRARY_ENGINES = {"iorails": "iorails", "llmrails": "llmrails"}
"""The systems measured inside NeMo's interpreter (benchmarks/nemo/library_bench.py)."""
NEMO = {"iorails", "llmrails", "iorails-server", "nemo-server"}


@dataclass(frozen=True)
class Phase:
    """What every measurement of one model latency shares."""

    sim_url: str
    sim_pid: int
    latency_ms: int
    warmup: int
    run: int = 1


async def measure(system: Any, label: str, phase: Phase, clients: int, replies: int) -> Cell:
    """Warm up, then one measured run of ``replies`` replies at ``clients`` clients.

    Besides latency it takes the CPU time per reply of the server process (none for the
    bare SDK; this process for a system running in it), of the simulator and of this
    load-generating process.
    """
    await drive(system.reply, max(phase.warmup, clients), clients)
    reset_simulator(phase.sim_url)
    server: int | None = getattr(system, "pid", None)
    pids = [phase.sim_pid] if server is None else [phase.sim_pid, server]
    cell = Cell(label, phase.latency_ms, clients, 0.0, [], load_before=load_average())
    before = [parts.cpu_seconds(pid) for pid in pids], time.process_time()
    cell.wall_s, cell.latencies_ms, outcomes = await drive(system.reply, replies, clients)
    spent = [parts.cpu_seconds(pid) - b for pid, b in zip(pids, before[0], strict=True)]
    cell.extra["client_cpu_ms"] = round((time.process_time() - before[1]) / replies * 1000, 2)
    cell.load_after = load_average()
    cell.failures = sum(not o.ok for o in outcomes)
    cell.extra["calls_per_reply"] = round(simulator_request_count(phase.sim_url) / replies, 2)
    cell.extra["simulator_cpu_ms"] = round(spent[0] / replies * 1000, 2)
    cell.extra["server_cpu_ms"] = round(spent[1] / replies * 1000, 2) if server else None
    if getattr(system, "in_process", False):
        cell.extra["server_cpu_ms"] = cell.extra["client_cpu_ms"]
    cell.extra["run"] = phase.run
    cell.trace_ids = [o.trace_id for o in outcomes]
    cell.source = getattr(system, "name", None)
    return cell


def library_cells(
    key: str, nemo_python: Path, config_dir: Path, phase: Phase, plan: Sequence[tuple[int, int]]
) -> list[Cell]:
    """NeMo as a library, measured inside its own interpreter (benchmarks/nemo/library_bench.py)."""
    reset_simulator(phase.sim_url)
    sim_cpu = parts.cpu_seconds(phase.sim_pid)
    engine = LIBRARY_ENGINES[key]
    report = parts.run_library_bench(nemo_python, config_dir, plan, phase.warmup, engine)
    generate_calls = sum(max(phase.warmup, c) + r for c, r in plan)
    calls_per_reply = round(simulator_request_count(phase.sim_url) / generate_calls, 2)
    # The simulator's CPU is known for the whole run only: an average over every call.
    sim_ms = round((parts.cpu_seconds(phase.sim_pid) - sim_cpu) / generate_calls * 1000, 2)
    cells = []
    for raw in report["cells"]:
        replies = len(raw["latencies_ms"])
        cell = Cell(
            LABELS[key],
            phase.latency_ms,
            int(raw["concurrency"]),
            float(raw["wall_s"]),
            list(raw["latencies_ms"]),
            failures=int(raw["failure_count"]),
            load_before=float(raw["load_before"]),
            load_after=float(raw["load_after"]),
        )
        # The library and its callers share one process: its CPU is the "server's".
        cell.extra["client_cpu_ms"] = None
        cell.extra["calls_per_reply"] = calls_per_reply
        cell.extra["simulator_cpu_ms"] = sim_ms
        cell.extra["server_cpu_ms"] = round(float(raw["cpu_s"]) / replies * 1000, 2)
        cell.extra["run"] = phase.run
        if raw["failures"]:
            cell.extra["failure_samples"] = raw["failures"]
        cells.append(cell)
        print(gateway_report.progress(cell), file=sys.stderr)
    return cells


async def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    systems = [s.strip() for s in args.systems.split(",")]
    clients = [int(c) for c in args.clients.split(",")]
    plan = [(c, args.serial_replies if c == 1 else args.replies) for c in clients]
    simulator, sim_url = start_simulator(scenario(0.0), tmp)
    servers = parts.Servers(tmp)
    cells: list[Cell] = []
    spec_cells: list[Cell] = []
    live: dict[str, Any] = {}
    speculation: dict[str, FoureyesGateway] = {}
    try:
        nemo_dir = parts.nemo_config(HERE / "nemo" / "config", tmp / "nemo", sim_url)
        if "sdk" in systems:
            live["sdk"] = BareSdk(sim_url)
        for key, mode in (("guard-reply", "reply"), ("guard-check", "check")):
            if key in systems:
                live[key] = await InProcess.start(key, sim_url, mode, tmp)
        if "iorails-server" in systems:
            url = servers.iorails_asgi(args.nemo_python, nemo_dir)
            live["iorails-server"] = NemoServer(url, servers.last_pid)
        if "nemo-server" in systems:
            url = servers.nemo_server(args.nemo_python, nemo_dir.parent)
            live["nemo-server"] = NemoServer(url, servers.last_pid)
        if "foureyes" in systems:
            url = servers.foureyes(sim_url, "main")
            live["foureyes"] = FoureyesGateway("main", url, servers.last_pid, MESSAGE)
        if "foureyes-sdk" in systems:
            url = servers.foureyes(sim_url, "sdk", transport="aiohttp")
            live["foureyes-sdk"] = FoureyesGateway("sdk", url, servers.last_pid, MESSAGE)
        if "foureyes-no-group" in systems:
            url = servers.foureyes(sim_url, "no-group", group_commit=False)
            live["foureyes-no-group"] = FoureyesGateway("no-group", url, servers.last_pid, MESSAGE)
        if args.speculation_replies:
            for mode, speculate in (("sequential", False), ("speculative", True)):
                url = servers.foureyes(sim_url, mode, risk_on_simulator=True, speculate=speculate)
                speculation[mode] = FoureyesGateway(mode, url, servers.last_pid, ESCALATING_MESSAGE)
        for latency_ms in (int(x) for x in args.latencies_ms.split(",")):
            load_scenario(sim_url, scenario(latency_ms / 1000))
            for run_number in range(1, args.repeats + 1):
                phase = Phase(sim_url, simulator.pid, latency_ms, args.warmup, run_number)
                for key in (k for k in SYSTEMS if k in systems):
                    if key in LIBRARY_ENGINES:
                        cells += library_cells(key, args.nemo_python, nemo_dir, phase, plan)
                        continue
                    for n, replies in plan:
                        cells.append(await measure(live[key], LABELS[key], phase, n, replies))
                        print(gateway_report.progress(cells[-1]), file=sys.stderr)
            for mode, gateway in speculation.items():
                label = f"foureyes, {mode}"
                spec_cells.append(await measure(gateway, label, phase, 1, args.speculation_replies))
                print(gateway_report.progress(spec_cells[-1]), file=sys.stderr)
    finally:
        for system in [*live.values(), *speculation.values()]:
            await system.aclose()
        servers.close()
        stop_process(simulator)
    # The overhead split reads every reply's trace: the first run's cells are enough.
    mine = [c for c in cells if c.system in gateway_report.GATEWAYS and c.extra["run"] == 1]
    return {
        "cells": cells,
        "spec_cells": spec_cells,
        "overheads": await gateway_report.overheads(servers, mine),
        "speculation": await gateway_report.speculation(servers, spec_cells),
    }


def environment() -> dict[str, Any]:
    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "absent"

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True)
        return done.stdout.strip()

    return {
        "commit": git("rev-parse", "--short", "HEAD")
        + (" + changes" if git("status", "--porcelain", "--", "../src") else ""),
        "python": platform.python_version(),
        "cpus": parts.cpu_count(),
        "foureyes": version("foureyes"),
        "openai": version("openai"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=400, help="replies per cell, >1 client")
    parser.add_argument("--serial-replies", type=int, default=150, help="replies at 1 client")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured replies per cell")
    parser.add_argument("--clients", default="1,16,64")
    parser.add_argument("--latencies-ms", default="0,50")
    parser.add_argument("--repeats", type=int, default=2, help="measured runs of every cell")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--speculation-replies", type=int, default=100, help="0: skip")
    parser.add_argument("--nemo-python", type=Path, default=HERE / ".venv-nemo" / "bin" / "python")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args()
    unknown = set(args.systems.split(",")) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}; known: {', '.join(SYSTEMS)}")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if NEMO & set(args.systems.split(",")) and not args.nemo_python.exists():
        parser.error(f"{args.nemo_python} is missing: run `bash benchmarks/nemo/setup.sh` first")

    env = environment() | {"nemoguardrails": parts.nemo_version(args.nemo_python)}
    env["load_avg_start"] = round(load_average(), 2)
    with tempfile.TemporaryDirectory(prefix="foureyes-bench-") as tmp:
        results = asyncio.run(run(args, Path(tmp)))
    env["load_avg_end"] = round(load_average(), 2)
    print(gateway_report.report(env, sys.argv[1:], results))
    if args.json is not None:
        args.json.write_text(
            json.dumps(gateway_report.as_json(env, vars(args), results), indent=2) + "\n"
        )


if __name__ == "__main__":
    main()
