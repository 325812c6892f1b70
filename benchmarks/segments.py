"""Whole release against segment release: time to first released byte, total, Supervisor calls.

Starts ``foureyes simulate`` on loopback with a Counselor and a Supervisor that each wait
``--delay-ms`` before answering (50 ms by default, the issue's goal setting), then answers
the same message through ``GateRunner`` in both ``[gate] release`` modes, the Counselor
reached over the ``openai`` route (streamed in segment mode) and the trace in SQLite.
Per reply it records when the first released text was handed over (segment mode: the
first approved segment; whole mode: the outcome), the total time, and the Supervisor
calls made.

The simulator waits before its first byte and then sends the whole stream at once, so
the draft's own streaming time is not modelled: the gain segment release is for (a draft
reviewed while the model still writes) does not show here, its cost (one review per
segment) does.

    python benchmarks/segments.py [--replies 50] [--delay-ms 50] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from loadgen import start_simulator, stop_process

from foureyes.config import Config, GateConfig, PrivacyConfig, RolesConfig, RouteConfig, StoreConfig
from foureyes.core.policy import GenerationPolicy
from foureyes.core.roles import Role
from foureyes.gate import GateRunner, ReplyRequest
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.store import Store

DRAFT = (
    "Thank you for telling me. It sounds like today took a lot out of you. "
    "It makes sense to feel worn down. What was the hardest part of it?"
)
APPROVE = '{"candidate_sha256": "{{candidate_sha256}}", "decision": "approve"}'
REQUEST = ReplyRequest(message="I had a rough day at work and I can't sleep.")


def scenario(delay_s: float) -> dict[str, Any]:
    return {
        "models": {
            "counselor-sim": [{"content": DRAFT, "fault": "delay", "delay_s": delay_s}],
            "supervisor-sim": [{"content": APPROVE, "fault": "delay", "delay_s": delay_s}],
        }
    }


async def measure(release: str, base_url: str, db: Path, replies: int) -> dict[str, Any]:
    config = Config(
        store=StoreConfig(url=f"sqlite+aiosqlite:///{db}"),
        routes={
            "c": RouteConfig(kind="openai", base_url=base_url, model="counselor-sim"),
            "s": RouteConfig(kind="openai", base_url=base_url, model="supervisor-sim"),
        },
        roles=RolesConfig(counselor="c", supervisor="s"),
        gate=GateConfig(release=release, max_calls=10),  # type: ignore[arg-type]
    )
    store = await Store.open(config.store, PrivacyConfig(), {})
    routes = Routes.build(config, {})
    caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
    runner = GateRunner(caller, traces=store.traces)
    first_ms: list[float] = []
    total_ms: list[float] = []
    reviews: list[int] = []
    try:
        for _ in range(replies):
            trace_id = await store.traces.start_run("gate_reply", input_text=REQUEST.message)
            started = time.perf_counter()
            first: list[float] = []

            async def sink(segment: str, first: list[float] = first) -> None:
                if not first:
                    first.append(time.perf_counter())

            pending = runner.begin(REQUEST, trace_id=trace_id, speculate=False)
            outcome = await pending.finish(GenerationPolicy.NORMAL, on_segment=sink)
            done = time.perf_counter()
            assert outcome.text == DRAFT, outcome.reason
            first_ms.append(((first[0] if first else done) - started) * 1000)
            total_ms.append((done - started) * 1000)
            reviews.append(outcome.calls.get(Role.SUPERVISOR, 0))
    finally:
        await routes.aclose()
        await store.close()
    return {
        "first_byte_median_ms": statistics.median(first_ms),
        "total_median_ms": statistics.median(total_ms),
        "supervisor_calls_per_reply": statistics.mean(reviews),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=50)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        process, base_url = start_simulator(scenario(args.delay_ms / 1000), Path(tmp))
        try:
            results = {
                release: await measure(release, base_url, Path(tmp) / f"{release}.db", args.replies)
                for release in ("whole", "segments")
            }
        finally:
            stop_process(process)
    if args.json:
        print(json.dumps({"python": platform.python_version(), "results": results}, indent=2))
        return
    print(f"{args.replies} replies per mode, {args.delay_ms:g} ms per model call")
    print("| release | first byte (median ms) | total (median ms) | Supervisor calls per reply |")
    print("|---|---|---|---|")
    for release, r in results.items():
        print(
            f"| {release} | {r['first_byte_median_ms']:.1f} | {r['total_median_ms']:.1f} "
            f"| {r['supervisor_calls_per_reply']:.1f} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
