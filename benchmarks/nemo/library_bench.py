"""NeMo Guardrails as a library: ``generate_async`` under concurrent callers.

``--engine llmrails`` builds ``LLMRails(config)``; ``--engine iorails`` builds
``Guardrails(config, use_iorails=True, require_iorails=True)``, NeMo 0.24's IORails engine,
which raises instead of falling back to LLMRails when it cannot run the config.

Runs inside NeMo's own virtual environment (benchmarks/.venv-nemo), started by
benchmarks/gateway.py, which owns the simulator and reads the one JSON object this prints
on stdout: per concurrency level, the wall time and every reply's latency in ms.

    .venv-nemo/bin/python benchmarks/nemo/library_bench.py --config DIR --message TEXT \
        --cells 1:200,16:400,64:400 [--engine llmrails|iorails] [--warmup 20] [--expect TEXT]
    .venv-nemo/bin/python benchmarks/nemo/library_bench.py --serve --config DIR ...

``--serve`` keeps one engine for a whole run, so benchmarks/gateway.py can alternate it
with foureyes cell by cell: it prints ``{"ready": true}`` once the engine is up, then reads
one command a line from stdin, ``CONCURRENCY REPLIES``, and answers each with one JSON line
(the cell, as in ``--cells``); it stops at the end of its input.

``--expect`` is the draft the simulator returns: a reply that differs (e.g. NeMo's refusal)
is counted as a failure, so a misconfigured rail cannot pass for a fast one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

os.environ.setdefault("NEMO_GUARDRAILS_NO_USAGE_STATS", "1")

from typing import Any  # noqa: E402

from nemoguardrails import Guardrails, LLMRails, RailsConfig  # noqa: E402  (after the env default)


async def drive(
    rails: Any, message: str, replies: int, concurrency: int, expect: str | None
) -> dict[str, object]:
    remaining = iter(range(replies))
    latencies: list[float] = []
    failures: list[str] = []

    async def worker() -> None:
        for _ in remaining:
            started = time.perf_counter()
            try:
                answer = await rails.generate_async(messages=[{"role": "user", "content": message}])
            except Exception as exc:  # a failed reply is data here, not the end of the run
                failures.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append((time.perf_counter() - started) * 1000)
            content = answer.get("content") if isinstance(answer, dict) else None
            if expect is not None and content != expect:
                failures.append(f"unexpected reply: {str(content)[:80]!r}")

    load_before = os.getloadavg()[0]
    cpu = time.process_time()
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {
        "concurrency": concurrency,
        "wall_s": time.perf_counter() - started,
        "cpu_s": time.process_time() - cpu,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "latencies_ms": latencies,
        "failures": failures[:5],
        "failure_count": len(failures),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--message", required=True)
    parser.add_argument("--cells", help="concurrency:replies,...")
    parser.add_argument("--serve", action="store_true", help="cells from stdin, one a line")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--expect")
    parser.add_argument("--engine", choices=("llmrails", "iorails"), default="llmrails")
    args = parser.parse_args()
    if (args.cells is None) == (not args.serve):
        parser.error("give exactly one of --cells and --serve")
    given = (args.cells or "").split(",")
    cells = [tuple(int(x) for x in cell.split(":")) for cell in given if cell]

    config = RailsConfig.from_path(args.config)
    if args.engine == "iorails":
        rails: Any = Guardrails(config, use_iorails=True, require_iorails=True)
        await rails.startup()
    else:
        rails = LLMRails(config)
    if args.serve:
        print(json.dumps({"ready": True}), flush=True)
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            concurrency, replies = (int(x) for x in line.split())
            cell = await drive(rails, args.message, replies, concurrency, args.expect)
            print(json.dumps(cell), flush=True)
    results = []
    for concurrency, replies in cells:
        await drive(rails, args.message, max(args.warmup, concurrency), concurrency, args.expect)
        results.append(await drive(rails, args.message, replies, concurrency, args.expect))
    if args.engine == "iorails":
        await rails.shutdown()
    if not args.serve:
        json.dump({"cells": results}, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
