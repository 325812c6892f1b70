"""What does a per-key rate limit cost per request: in this process, or in the store?

Takes tokens the way the request path does (``KeyLimiter.admit``) from three limiters:
``memory`` (the in-process bucket), ``store`` on an SQLite file, and ``store`` on
PostgreSQL (the shared buckets ``serve --workers N`` and N instances use: one
``INSERT ... ON CONFLICT DO UPDATE`` per request): a throwaway cluster with its durable
defaults (tests/helpers/postgres.py), started by the script unless ``--postgres URL``
names a server, or left out with ``--postgres none``. Each is measured one request at a
time (latency per request: p50, p99) and with ``--concurrency`` requests in flight over
``--keys`` keys (requests per second, and CPU per request: this process's, and the
PostgreSQL server's when the script started it). The bucket is large enough that every
request is granted, so each one writes its row.

    python benchmarks/rate_limiter.py [--requests 2000] [--concurrency 16] [--keys 16]
        [--postgres auto|none|postgresql+asyncpg://user@host/db] [--repeats 1] [--json]

Numbers mean something only on an idle machine; results: benchmarks/README.md.
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
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gateway_parts import postgres_clock

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.server.limits import KeyLimiter, RateLimiter, StoreRateLimiter
from foureyes.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.postgres import running_postgres  # noqa: E402

_RATE = 1e9  # tokens per minute: never the limit here
_BURST = 1_000_000


def _no_server_cpu() -> float:
    return 0.0


async def _measure(
    limiter: KeyLimiter,
    *,
    requests: int,
    concurrency: int,
    keys: int,
    server_cpu: Callable[[], float] = _no_server_cpu,
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

    cpu, server = time.process_time(), server_cpu()
    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    cpu, server = time.process_time() - cpu, server_cpu() - server
    latencies.sort()
    return {
        "p50_us": round(statistics.median(latencies) * 1e6, 1),
        "p99_us": round(latencies[int(len(latencies) * 0.99) - 1] * 1e6, 1),
        "concurrent_per_s": round(requests / elapsed),
        "cpu_us": round(cpu / requests * 1e6, 1),
        "server_cpu_us": round(server / requests * 1e6, 1),
    }


async def _store_limiter(url: str) -> tuple[Store, StoreRateLimiter]:
    store = await Store.open(StoreConfig(url=url), PrivacyConfig(), {})
    return store, StoreRateLimiter(store.rate_buckets, rate_per_minute=_RATE, burst=_BURST)


@contextlib.contextmanager
def _postgres(choice: str) -> Iterator[tuple[str | None, Callable[[], float]]]:
    """The PostgreSQL URL to measure (``None``: none) and how to read its server's CPU."""
    if choice == "none":
        yield None, _no_server_cpu
    elif choice != "auto":
        yield choice, _no_server_cpu
    else:
        with running_postgres(durable=True) as server:
            yield server.url(server.create_database()), postgres_clock(server.port)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    options = {"requests": args.requests, "concurrency": args.concurrency, "keys": args.keys}
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder, _postgres(args.postgres) as (pg, pg_cpu):
        for repeat in range(args.repeats):
            memory = RateLimiter(rate_per_minute=_RATE, burst=_BURST)
            results: dict[str, Any] = {"memory": await _measure(memory, **options)}
            urls = {"store_sqlite": f"sqlite+aiosqlite:///{Path(folder) / f'{repeat}.db'}"}
            if pg is not None:
                urls["store_postgresql"] = pg
            for name, url in urls.items():
                store, limiter = await _store_limiter(url)
                server_cpu = pg_cpu if url == pg else _no_server_cpu
                try:
                    results[name] = await _measure(limiter, server_cpu=server_cpu, **options)
                finally:
                    await store.close()
            runs.append(results)
    return {"machine": platform.platform(), "options": options, "runs": runs}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--keys", type=int, default=16)
    parser.add_argument(
        "--postgres",
        default="auto",
        help="auto (start a throwaway cluster), none, or a PostgreSQL store URL",
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()
    report = asyncio.run(main(arguments))
    if arguments.json:
        print(json.dumps(report, indent=2))
    else:
        for number, results in enumerate(report["runs"], 1):
            for name, row in results.items():
                print(
                    f"run {number} {name:18} p50 {row['p50_us']:>8} us  p99 {row['p99_us']:>8} us"
                    f"  {row['concurrent_per_s']:>7} /s at concurrency "
                    f"{report['options']['concurrency']}, CPU {row['cpu_us']:>7} us"
                    f" + server {row['server_cpu_us']:>7} us per request"
                )
