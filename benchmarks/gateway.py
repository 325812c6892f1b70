"""Throughput, latency and own overhead of foureyes, side by side with NeMo Guardrails.

One run, one machine, one ``foureyes simulate`` process serving every upstream call; the
simulator answers at once, then (scenario swapped in place) after 50 ms per call. At each
``--clients`` count of closed-loop clients it measures replies/s and p50/p99 latency of

* ``sdk``: the floor, no guardrail at all: the same two upstream calls per reply (a draft,
  then one check of it) posted straight to the simulator by the bare client below;
* ``NeMo IORails``: NeMo Guardrails 0.24's IORails engine as a library
  (``Guardrails(config, use_iorails=True, require_iorails=True).generate_async``), rail
  ``self check output``, in its own virtual environment (benchmarks/nemo/), one process
  for the whole run (benchmarks/nemo/library_bench.py ``--serve``);
* ``NeMo LLMRails``: the same config on ``LLMRails.generate_async``;
* ``foureyes Guard.reply`` / ``foureyes Guard.check``: foureyes in this process through
  the library API, support mode, or the host's own draft (one call) judged;
* ``NeMo IORails server``: IORails behind benchmarks/nemo/iorails_asgi.py, a bare ASGI app
  on uvicorn (NeMo 0.24.1's own server builds LLMRails only);
* ``NeMo server``: ``nemoguardrails server`` with the same config;
* ``foureyes gateway``: ``foureyes serve`` as shipped (Counselor and Supervisor on the
  simulator, risk roles offline): L0 triage, draft, review, gate, trace; its routes on
  the default lean transport, its store with group commit;
* ``foureyes gateway, openai SDK transport``: the same with ``transport = "aiohttp"`` on its
  routes (the official SDK for upstream calls: the lean transport's "before");
* ``foureyes gateway, no group commit``: the same with ``[store] group_commit = false``
  (a commit per write: group commit's "before").

Every HTTP server is called by the same thin client, one aiohttp session posting JSON
(``gateway_parts.LeanHttp``: no SDK, no response models), so the client costs little
beside the servers and the same for each. Within each cell (model latency, clients) the
systems are strictly alternated, ``--repeats`` times (A B A B ...), so the runs a ratio
pairs are seconds apart; the report gives each run, the medians and ranges over runs, and
the paired ratios (run k of a system over run k of its reference: a library row over
IORails as a library, a server row over IORails behind its HTTP hop), median and range.

Every reply is checked (the draft released, or NeMo's check passed), the simulator's
request log gives the upstream calls per reply, and ``/proc`` gives the CPU time per reply
of exactly the processes under test: each server's process tree, the simulator, this
load generator (in-process systems: this process; NeMo's libraries: their process).
Every cell also records the load average before and after it and, from /proc/stat, the
CPUs left idle during it and the CPUs busy with processes not under test ("others"). For
the gateway it also reports its own overhead per reply (first run): its request time
(from its request log) minus the time inside model calls (from the ``model_call`` events
of the reply's trace), the same seen from the client, and the part inside the pipeline
run; and the speculative-draft saving: an L0-escalating message, so triage makes an L1
call, through two gateways that differ only in ``gate.speculative_draft``. NeMo's server
runs through benchmarks/nemo/serve_loopback.py, the same command bound to 127.0.0.1.

    bash benchmarks/nemo/setup.sh      # once: NeMo's own venv, benchmarks/.venv-nemo
    python benchmarks/gateway.py [--replies 400] [--serial-replies 150] [--clients 1,16,64]
        [--latencies-ms 0,50] [--repeats 3] [--speculation-replies 100] [--json FILE]
        [--systems sdk,iorails,llmrails,guard-reply,guard-check,iorails-server,nemo-server,
                   foureyes,foureyes-sdk,foureyes-no-group]
    python benchmarks/gateway.py --headline     # the README's headline table

``--headline`` is ``--systems iorails,guard-reply,iorails-server,foureyes --clients
1,4,16,64 --repeats 3 --speculation-replies 0`` (other options still apply).

Results: benchmarks/README.md (current, and how to read them), benchmarks/LOG.md (history).
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
    NemoLibrary,
    NemoServer,
    scenario,
)
from loadgen import (
    Cell,
    contention,
    drive,
    load_average,
    load_scenario,
    machine_cpu,
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
DEFAULTS: dict[str, Any] = {
    "systems": ",".join(SYSTEMS),
    "clients": "1,16,64",
    "repeats": 3,
    "speculation_replies": 100,
}
HEADLINE: dict[str, Any] = {
    "systems": "iorails,guard-reply,iorails-server,foureyes",
    "clients": "1,4,16,64",
    "repeats": 3,
    "speculation_replies": 0,
}
"""``--headline``: foureyes (library, gateway) against IORails (library, bare server)."""


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

    Besides latency it takes, from ``/proc``, the CPU time per reply of exactly the
    processes under test: the server (its process tree; for a system running in this
    process, this process), the simulator, and this load-generating process; and, from
    /proc/stat, how many CPUs were left idle and how many were busy with anything else.
    """
    await drive(system.reply, max(phase.warmup, clients), clients)
    reset_simulator(phase.sim_url)
    server: int | None = getattr(system, "pid", None)
    in_process = getattr(system, "in_process", False)
    cell = Cell(label, phase.latency_ms, clients, 0.0, [], load_before=load_average())
    machine = machine_cpu()
    sim_s = parts.cpu_seconds(phase.sim_pid)
    server_s = parts.tree_cpu_seconds(server) if server else 0.0
    own_s = time.process_time()
    cell.wall_s, cell.latencies_ms, outcomes = await drive(system.reply, replies, clients)
    own_s = time.process_time() - own_s
    sim_s = parts.cpu_seconds(phase.sim_pid) - sim_s
    server_s = parts.tree_cpu_seconds(server) - server_s if server else 0.0
    cell.extra |= contention(machine, machine_cpu(), cell.wall_s, own_s + sim_s + server_s)
    cell.load_after = load_average()
    cell.failures = sum(not o.ok for o in outcomes)
    per_reply = 1000 / replies
    # In this process the client and the system share one clock: it is the system's.
    cell.extra["client_cpu_ms"] = None if in_process else round(own_s * per_reply, 2)
    if in_process:
        cell.extra["server_cpu_ms"] = round(own_s * per_reply, 2)
    else:
        cell.extra["server_cpu_ms"] = None if server is None else round(server_s * per_reply, 2)
    cell.extra["simulator_cpu_ms"] = round(sim_s * per_reply, 2)
    cell.extra["calls_per_reply"] = round(simulator_request_count(phase.sim_url) / replies, 2)
    cell.extra["run"] = phase.run
    cell.trace_ids = [o.trace_id for o in outcomes]
    cell.source = getattr(system, "name", None)
    return cell


async def library_cell(
    library: NemoLibrary, label: str, phase: Phase, clients: int, replies: int
) -> Cell:
    """One cell of NeMo as a library, in its own interpreter, measured as :func:`measure`."""
    await asyncio.to_thread(library.warm, clients, max(phase.warmup, clients))
    reset_simulator(phase.sim_url)
    cell = Cell(label, phase.latency_ms, clients, 0.0, [], load_before=load_average())
    machine = machine_cpu()
    sim_s = parts.cpu_seconds(phase.sim_pid)
    own_s = time.process_time()
    raw = await asyncio.to_thread(library.run, clients, replies)
    own_s = time.process_time() - own_s
    sim_s = parts.cpu_seconds(phase.sim_pid) - sim_s
    cell.wall_s, cell.latencies_ms = float(raw["wall_s"]), list(raw["latencies_ms"])
    server_s = float(raw["proc_cpu_s"])
    cell.extra |= contention(machine, machine_cpu(), cell.wall_s, own_s + sim_s + server_s)
    cell.load_after = load_average()
    cell.failures = int(raw["failure_count"])
    # The library and its callers share one process: its CPU is the "server's".
    cell.extra["client_cpu_ms"] = None
    cell.extra["server_cpu_ms"] = round(server_s / replies * 1000, 2)
    cell.extra["simulator_cpu_ms"] = round(sim_s / replies * 1000, 2)
    cell.extra["calls_per_reply"] = round(simulator_request_count(phase.sim_url) / replies, 2)
    cell.extra["run"] = phase.run
    if raw["failures"]:
        cell.extra["failure_samples"] = raw["failures"]
    return cell


async def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    systems = [s for s in SYSTEMS if s in {s.strip() for s in args.systems.split(",")}]
    clients = [int(c) for c in args.clients.split(",")]
    plan = [(c, args.serial_replies if c == 1 else args.replies) for c in clients]
    simulator, sim_url = start_simulator(scenario(0.0), tmp)
    servers = parts.Servers(tmp)
    cells: list[Cell] = []
    spec_cells: list[Cell] = []
    live: dict[str, Any] = {}
    libraries: list[NemoLibrary] = []
    speculation: dict[str, FoureyesGateway] = {}
    try:
        nemo_dir = parts.nemo_config(HERE / "nemo" / "config", tmp / "nemo", sim_url)
        if "sdk" in systems:
            live["sdk"] = BareSdk(sim_url)
        for key, engine in LIBRARY_ENGINES.items():
            if key in systems:
                library = await asyncio.to_thread(NemoLibrary, args.nemo_python, nemo_dir, engine)
                libraries.append(library)
                live[key] = library
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
            # Strictly alternated within each cell: run 1 of every system, run 2 of every
            # system, ..., so the runs a ratio pairs are seconds apart, not minutes.
            for n, replies in plan:
                for run_number in range(1, args.repeats + 1):
                    phase = Phase(sim_url, simulator.pid, latency_ms, args.warmup, run_number)
                    for key in systems:
                        if key in LIBRARY_ENGINES:
                            cell = await library_cell(live[key], LABELS[key], phase, n, replies)
                        else:
                            cell = await measure(live[key], LABELS[key], phase, n, replies)
                        cells.append(cell)
                        print(gateway_report.progress(cell), file=sys.stderr)
            phase = Phase(sim_url, simulator.pid, latency_ms, args.warmup)
            for mode, gateway in speculation.items():
                label = f"foureyes, {mode}"
                spec_cells.append(await measure(gateway, label, phase, 1, args.speculation_replies))
                print(gateway_report.progress(spec_cells[-1]), file=sys.stderr)
    finally:
        for key, system in live.items():
            if key not in LIBRARY_ENGINES:
                await system.aclose()
        for gateway in speculation.values():
            await gateway.aclose()
        for library in libraries:
            library.close()
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
        "aiohttp": version("aiohttp"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=400, help="replies per cell, >1 client")
    parser.add_argument("--serial-replies", type=int, default=150, help="replies at 1 client")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured replies per cell")
    parser.add_argument("--clients")
    parser.add_argument("--latencies-ms", default="0,50")
    parser.add_argument("--repeats", type=int, help="measured runs of every cell (default 3)")
    parser.add_argument("--systems")
    parser.add_argument("--speculation-replies", type=int, help="0: skip (default 100)")
    parser.add_argument(
        "--headline", action="store_true", help="IORails and foureyes only, 1/4/16/64 clients"
    )
    parser.add_argument("--nemo-python", type=Path, default=HERE / ".venv-nemo" / "bin" / "python")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args()
    defaults = HEADLINE if args.headline else DEFAULTS
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    unknown = set(args.systems.split(",")) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}; known: {', '.join(SYSTEMS)}")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if min(args.replies, args.serial_replies) < 1 or args.warmup < 0:
        parser.error("--replies and --serial-replies must be at least 1, --warmup at least 0")
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
