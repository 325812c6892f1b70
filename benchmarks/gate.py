"""What does the release gate add to a reply beyond the model calls themselves?

Starts ``foureyes simulate`` on loopback (a separate process) with a Counselor and a
Supervisor that answer at once, then sends replies one after another through the real
path: ``GateRunner`` → ``ModelCaller`` → the ``openai`` route → HTTP, with the trace in a
SQLite file. For each reply it splits the wall time into

* model calls' own time: the two HTTP round trips (``latency_ms`` of each ``model_call``
  event, measured around the provider),
* the metered caller's overhead: the rest of the time inside ``ModelCaller.call``
  (mostly writing its ``model_call`` events),
* the gate's own work: everything else (review-input assembly, rules, decision, release,
  and the gate's own trace writes).

Three modes: ``standalone`` (the runner opens and closes its own run), ``pipeline`` (the
run was opened by the caller, so the gate writes only its decision record), and
``memory`` (an in-memory trace, isolating the gate's CPU work from SQLite).

    python benchmarks/gate.py [--replies 400] [--warmup 50] [--json]

Results: benchmarks/README.md (current, and how to read them), benchmarks/LOG.md (history).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loadgen import start_simulator, stop_process

from foureyes.config import Config, PrivacyConfig, RolesConfig, RouteConfig, StoreConfig
from foureyes.core.trace import EventKind, TraceEvent, TraceRecord
from foureyes.gate import GateRunner, ReplyRequest, Source, Turn
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.store import Store

DRAFT = (
    "Thank you for telling me. It sounds like today took a lot out of you, and it makes "
    "sense to feel worn down. What was the hardest part of it?"
)
APPROVE = (
    '{"candidate_sha256": "{{candidate_sha256}}", "decision": "approve", '
    '"violations": [], "missing": []}'
)
SCENARIO = {
    "models": {
        "counselor-sim": [
            {"content": DRAFT, "usage": {"prompt_tokens": 400, "completion_tokens": 40}}
        ],
        "supervisor-sim": [
            {"content": APPROVE, "usage": {"prompt_tokens": 900, "completion_tokens": 30}}
        ],
    }
}
REQUEST = ReplyRequest(
    message="I had a rough day at work and I can't sleep.",
    conversation_id="bench",
    history=(
        Turn(role="user", text="Work has been a lot lately."),
        Turn(role="assistant", text="That sounds tiring. What has been going on?"),
    ),
    sources=(Source(id="kb:sleep", origin="care-guide", text="Wind down before bed."),),
)


class MemoryTrace:
    """A trace writer that keeps runs in memory: only to isolate the gate's CPU work."""

    def __init__(self) -> None:
        self.events: dict[str, list[TraceEvent]] = {}

    async def start_run(self, kind: str, **_: Any) -> str:
        trace_id = f"{len(self.events):032x}"
        self.events[trace_id] = []
        return trace_id

    async def append(self, trace_id: str, event: TraceEvent) -> None:
        self.events[trace_id].append(event)

    async def finish_run(self, trace_id: str, *, outcome: str, reason: str | None) -> None:
        return None

    async def get(self, trace_id: str) -> TraceRecord | None:
        return None


async def events_of(traces: Any, trace_id: str) -> list[TraceEvent]:
    if isinstance(traces, MemoryTrace):
        return traces.events[trace_id]
    record = await traces.get(trace_id)
    return list(record.events)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(mode: str, base_url: str, db: Path, replies: int, warmup: int) -> dict[str, Any]:
    config = Config(
        store=StoreConfig(url=f"sqlite+aiosqlite:///{db}"),
        routes={
            "c": RouteConfig(kind="openai", base_url=base_url, model="counselor-sim"),
            "s": RouteConfig(kind="openai", base_url=base_url, model="supervisor-sim"),
        },
        roles=RolesConfig(counselor="c", supervisor="s"),
    )
    store = await Store.open(config.store, PrivacyConfig(), {})
    traces: Any = MemoryTrace() if mode == "memory" else store.traces
    routes = Routes.build(config, {})
    caller = ModelCaller(routes, ledger=store.ledger, trace=traces)
    unknowns = None if mode == "memory" else store.unknowns
    runner = GateRunner(caller, traces=traces, unknowns=unknowns)
    rows: dict[str, list[float]] = {"total": [], "provider": [], "caller": [], "gate": []}
    try:
        for n in range(warmup + replies):
            trace_id = None
            if mode == "pipeline":
                trace_id = await traces.start_run("support_message", input_text=REQUEST.message)
            started = time.perf_counter()
            outcome = await runner.reply(REQUEST, trace_id=trace_id)
            total = (time.perf_counter() - started) * 1000
            events = await events_of(traces, outcome.trace_id)
            provider = sum(e.data["latency_ms"] for e in events if e.kind is EventKind.MODEL_CALL)
            if n < warmup:
                continue
            in_caller = outcome.timings.model_ms
            rows["total"].append(total)
            rows["provider"].append(provider)
            rows["caller"].append(in_caller - provider)
            rows["gate"].append(total - in_caller)
    finally:
        await routes.aclose()
        await store.close()
    return {
        name: {"median_ms": statistics.median(v), "p99_ms": percentile(v, 0.99)}
        for name, v in rows.items()
    } | {
        "gate_to_model_ratio": statistics.median(rows["gate"]) / statistics.median(rows["provider"])
    }


def table(results: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [
        "| mode | gate's own work median / p99 (ms) | model calls median / p99 (ms) "
        "| caller overhead median (ms) | gate / model calls |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for mode, r in results.items():
        lines.append(
            f"| {mode} | {r['gate']['median_ms']:.2f} / {r['gate']['p99_ms']:.2f} "
            f"| {r['provider']['median_ms']:.2f} / {r['provider']['p99_ms']:.2f} "
            f"| {r['caller']['median_ms']:.2f} | {r['gate_to_model_ratio']:.2f}× |"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        process, base_url = start_simulator(SCENARIO, Path(tmp))
        try:
            results = {
                mode: await measure(
                    mode, base_url, Path(tmp) / f"{mode}.db", args.replies, args.warmup
                )
                for mode in ("standalone", "pipeline", "memory")
            }
        finally:
            stop_process(process)
    if args.json:
        print(json.dumps({"python": platform.python_version(), "results": results}, indent=2))
    else:
        python = platform.python_version()
        print(f"{args.replies} replies per mode after {args.warmup} warm-up, Python {python}")
        print(table(results))


if __name__ == "__main__":
    asyncio.run(main())
