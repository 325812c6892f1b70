"""What does a per-key rate limit cost per request: in this process, or in the store?

Takes tokens the way the request path does (``KeyLimiter.admit``) from three limiters:
``memory`` (the in-process bucket), ``store`` on an SQLite file, and ``store`` on
PostgreSQL when ``--postgres URL`` is given (the shared buckets ``serve --workers N`` and
N instances use: one ``INSERT ... ON CONFLICT DO UPDATE`` per request). Each is measured
one request at a time (latency per request: p50, p99) and with ``--concurrency``
requests in flight over ``--keys`` keys (requests per second). The bucket is large
enough that every request is granted, so each one writes its row.

    python benchmarks/rate_limiter.py [--requests 2000] [--concurrency 16] [--keys 16]
        [--postgres postgresql+asyncpg://user@host/db] [--json]

Numbers mean something only on an idle machine; results: benchmarks/README.md.
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

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.server.limits import KeyLimiter, RateLimiter, StoreRateLimiter
from foureyes.store import Store

_RATE = 1e9  # tokens per minute: never the limit here
_BURST = 1_000_000


async def _measure(
    limiter: KeyLimiter, *, requests: int, concurrency: int, keys: int
) -> dict[str, Any]:
    for n in range(keys):  # warm-up: every key's row exists, every connection is open
        await limiter.admit(f"key-{n}")
    latencies: list[float] = []
    for n in range(requests):
        start = time.perf_counter()
        decision = await limiter.admit(f"key-{n % keys}")
        latencies.append(time.perf_counter() - start)
        assert decision.allowed
    queue = iter(range(requests))

    async def worker() -> None:
        for n in queue:
            assert (await limiter.admit(f"key-{n % keys}")).allowed

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "p50_us": round(statistics.median(latencies) * 1e6, 1),
        "p99_us": round(latencies[int(len(latencies) * 0.99) - 1] * 1e6, 1),
        "concurrent_per_s": round(requests / elapsed),
    }


async def _store_limiter(url: str) -> tuple[Store, StoreRateLimiter]:
    store = await Store.open(StoreConfig(url=url), PrivacyConfig(), {})
    return store, StoreRateLimiter(store.rate_buckets, rate_per_minute=_RATE, burst=_BURST)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    options = {"requests": args.requests, "concurrency": args.concurrency, "keys": args.keys}
    results: dict[str, Any] = {
        "memory": await _measure(RateLimiter(rate_per_minute=_RATE, burst=_BURST), **options)
    }
    with tempfile.TemporaryDirectory() as folder:
        urls = {"store_sqlite": f"sqlite+aiosqlite:///{Path(folder) / 'bench.db'}"}
        if args.postgres:
            urls["store_postgresql"] = args.postgres
        for name, url in urls.items():
            store, limiter = await _store_limiter(url)
            try:
                results[name] = await _measure(limiter, **options)
            finally:
                await store.close()
    return {"machine": platform.platform(), "options": options, "results": results}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--keys", type=int, default=16)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL store URL to measure too")
    parser.add_argument("--json", action="store_true")
    report = asyncio.run(main(parser.parse_args()))
    if parser.parse_args().json:
        print(json.dumps(report, indent=2))
    else:
        for name, row in report["results"].items():
            print(
                f"{name:18} p50 {row['p50_us']:>8} us  p99 {row['p99_us']:>8} us  "
                f"{row['concurrent_per_s']:>7} /s at concurrency {report['options']['concurrency']}"
            )
