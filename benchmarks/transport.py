"""Which HTTP transport should the ``openai`` route kind use: aiohttp or httpx?

Starts ``foureyes simulate`` on loopback (a separate process, so server and client do not
share an event loop), then pushes the same calls through ``OpenAIProvider`` with each
transport, repeats alternating, and reports the median throughput of each and their ratio.

    python benchmarks/transport.py [--calls 2000] [--concurrency 32] [--repeats 5] [--json]

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
from pathlib import Path
from typing import Literal

from loadgen import start_simulator, stop_process

from foureyes.config import RouteConfig
from foureyes.llm.openai_compat import OpenAIProvider
from foureyes.llm.provider import ChatMessage, ChatRequest

Transport = Literal["aiohttp", "httpx"]
TRANSPORTS: tuple[Transport, ...] = ("httpx", "aiohttp")
SCENARIO = {
    "models": {
        "bench": [
            {
                "content": "I hear you. That sounds really hard; do you want to tell me more?",
                "usage": {"prompt_tokens": 40, "completion_tokens": 16},
            }
        ]
    }
}
REQUEST = ChatRequest(
    messages=(
        ChatMessage.system("You are a supportive listener."),
        ChatMessage.user("I had a rough day and I can't sleep."),
    )
)
WARMUP_CALLS = 100


async def run_calls(provider: OpenAIProvider, calls: int, concurrency: int) -> None:
    remaining = iter(range(calls))

    async def worker() -> None:
        for _ in remaining:
            await provider.complete(REQUEST, timeout_s=30)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def measure(base_url: str, transport: Transport, calls: int, concurrency: int) -> float:
    """Calls per second of one run on a fresh provider (its pool warmed up first)."""
    route = RouteConfig(kind="openai", base_url=base_url, model="bench", transport=transport)
    provider = OpenAIProvider("bench", route, api_key="unused")
    try:
        await run_calls(provider, WARMUP_CALLS, concurrency)
        started = time.perf_counter()
        await run_calls(provider, calls, concurrency)
        return calls / (time.perf_counter() - started)
    finally:
        await provider.aclose()


async def benchmark(
    base_url: str, calls: int, concurrency: int, repeats: int
) -> dict[Transport, list[float]]:
    rates: dict[Transport, list[float]] = {t: [] for t in TRANSPORTS}
    for repeat in range(repeats):
        # Alternate the order so drift (thermal, other load) hits both alike.
        order = TRANSPORTS if repeat % 2 == 0 else TRANSPORTS[::-1]
        for transport in order:
            rates[transport].append(await measure(base_url, transport, calls, concurrency))
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        process, base_url = start_simulator(SCENARIO, Path(tmp))
        try:
            rates = asyncio.run(benchmark(base_url, args.calls, args.concurrency, args.repeats))
        finally:
            stop_process(process)
            if process.stdout is not None:
                process.stdout.close()

    medians = {t: statistics.median(r) for t, r in rates.items()}
    ratio = medians["aiohttp"] / medians["httpx"]
    if args.json:
        report = {
            "calls": args.calls,
            "concurrency": args.concurrency,
            "repeats": args.repeats,
            "rates": rates,
            "median": medians,
            "aiohttp_over_httpx": ratio,
        }
        print(json.dumps(report, indent=2))
        return
    print(
        f"{args.calls} calls x {args.repeats} repeats at concurrency {args.concurrency}; "
        f"Python {platform.python_version()} on {platform.machine()}\n"
    )
    print("| transport | median calls/s | runs (calls/s) |")
    print("| --- | ---: | --- |")
    for transport in TRANSPORTS:
        runs = ", ".join(f"{r:.0f}" for r in rates[transport])
        print(f"| {transport} | {medians[transport]:.0f} | {runs} |")
    print(f"\naiohttp / httpx median throughput: {ratio:.2f}x")


if __name__ == "__main__":
    main()
