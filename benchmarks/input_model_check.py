"""The model input check's plumbing on a scripted model: what it adds to a reply's time.

Starts ``foureyes simulate`` on loopback and answers the same message through the support
pipeline (L0 triage, the ``[input]`` stage, the gate, the durable record in SQLite) with
``[input] model_check`` off and on, strictly alternated (off, on, off, on, ...). Every
Counselor and Supervisor call takes ``--delay-ms``; the scripted ``input_checker`` answers
after ``--check-ms`` with a verdict naming the digest it was shown and no category. The
check runs beside triage and the speculative draft, so while it is no slower than the
draft it should add nothing but its own CPU; a second cell makes it slower than the draft
(``--delay-ms`` + ``--check-ms``) to show that it is then on the path.

Per cell: median, minimum and maximum of each round's median reply time, checker calls
per reply, the share of replies released, and the machine's load average.

    python benchmarks/input_model_check.py [--replies 30] [--rounds 3] [--delay-ms 50]
        [--check-ms 20] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from loadgen import load_scenario, start_simulator, stop_process

from foureyes.config import Config, GateConfig, InputConfig, RolesConfig, RouteConfig, StoreConfig
from foureyes.pipeline import Runtime, SupportMessage

DRAFT = "Thank you for telling me. What was the hardest part of today?"
APPROVE = '{"candidate_sha256": "{{candidate_sha256}}", "decision": "approve"}'
CLEAN = '{"items": [{"sha256": "{{candidate_sha256}}", "categories": []}]}'
MESSAGE = SupportMessage(text="I had a rough day at work and I can't sleep.")


def scenario(delay_s: float, check_s: float) -> dict[str, Any]:
    """The Counselor and Supervisor take ``delay_s``, the input checker ``check_s``."""

    def slow(content: str, seconds: float) -> dict[str, Any]:
        return {"content": content, "fault": "delay", "delay_s": seconds}

    return {
        "models": {
            "counselor-sim": [slow(DRAFT, delay_s)],
            "supervisor-sim": [slow(APPROVE, delay_s)],
            "checker-sim": [slow(CLEAN, check_s)],
        }
    }


def config(base_url: str, db: Path, *, model_check: bool) -> Config:
    def route(model: str) -> RouteConfig:
        return RouteConfig(kind="openai", base_url=base_url, model=model, timeout_s=10)

    return Config(
        store=StoreConfig(url=f"sqlite+aiosqlite:///{db}"),
        routes={
            "c": route("counselor-sim"),
            "s": route("supervisor-sim"),
            "k": route("checker-sim"),
        },
        roles=RolesConfig(counselor="c", supervisor="s", input_checker="k"),
        gate=GateConfig(max_calls=10),
        input=InputConfig(model_check=model_check),
    )


async def measure(runtime: Runtime, replies: int) -> dict[str, float]:
    """``replies`` messages through the pipeline: median time, checker calls, released share."""
    times: list[float] = []
    checks = released = 0
    for _ in range(replies):
        started = time.perf_counter()
        outcome = await runtime.pipeline.handle(MESSAGE)
        times.append((time.perf_counter() - started) * 1000)
        checks += sum(1 for call in outcome.calls if call.role == "input_checker")
        released += outcome.text == DRAFT
    return {
        "median_ms": statistics.median(times),
        "checker_calls_per_reply": checks / replies,
        "released_share": released / replies,
    }


async def cell(
    base_url: str, tmp: Path, *, delay_s: float, check_s: float, replies: int, rounds: int
) -> dict[str, Any]:
    """Off and on, alternated ``rounds`` times, on one simulator scenario."""
    load_scenario(base_url, scenario(delay_s, check_s))
    tmp.mkdir(parents=True, exist_ok=True)
    runtimes = {
        arm: await Runtime.open(config(base_url, tmp / f"{arm}.db", model_check=arm == "on"), {})
        for arm in ("off", "on")
    }
    runs: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    try:
        for _ in range(rounds):
            for arm in ("off", "on"):
                runs[arm].append(await measure(runtimes[arm], replies))
    finally:
        for runtime in runtimes.values():
            await runtime.aclose()
    summary: dict[str, Any] = {"load": os.getloadavg()[0]}
    for arm, results in runs.items():
        medians = [r["median_ms"] for r in results]
        summary[arm] = {
            "median_ms": statistics.median(medians),
            "min_ms": min(medians),
            "max_ms": max(medians),
            "checker_calls_per_reply": statistics.mean(
                r["checker_calls_per_reply"] for r in results
            ),
            "released_share": statistics.mean(r["released_share"] for r in results),
        }
    summary["added_ms"] = summary["on"]["median_ms"] - summary["off"]["median_ms"]
    return summary


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--check-ms", type=float, default=20.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    delay_s, check_s = args.delay_ms / 1000, args.check_ms / 1000
    cells: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        process, base_url = start_simulator(scenario(delay_s, check_s), Path(tmp))
        try:
            for name, seconds in (("faster", check_s), ("slower", delay_s + check_s)):
                cells[name] = await cell(
                    base_url,
                    Path(tmp) / name,
                    delay_s=delay_s,
                    check_s=seconds,
                    replies=args.replies,
                    rounds=args.rounds,
                )
        finally:
            stop_process(process)
    if args.json:
        print(json.dumps({"python": platform.python_version(), "cells": cells}, indent=2))
        return
    print(
        f"{args.replies} replies x {args.rounds} alternated rounds per arm; Counselor and "
        f"Supervisor {args.delay_ms:g} ms per call"
    )
    print(
        "| checker | off: median (range) ms | on: median (range) ms | added | checks/reply "
        "| released | load |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, c in cells.items():
        seconds = check_s if name == "faster" else delay_s + check_s
        off, on = c["off"], c["on"]
        print(
            f"| {seconds * 1000:g} ms ({name} than the draft) "
            f"| {off['median_ms']:.1f} ({off['min_ms']:.1f}-{off['max_ms']:.1f}) "
            f"| {on['median_ms']:.1f} ({on['min_ms']:.1f}-{on['max_ms']:.1f}) "
            f"| {c['added_ms']:+.1f} | {on['checker_calls_per_reply']:.2f} "
            f"| {on['released_share']:.0%} | {c['load']:.2f} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
