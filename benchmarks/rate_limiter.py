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

With ``--lock-waits`` it measures instead what the shared bucket costs two processes on
one hot row (issue 39 item 3): two OS processes, each with its own store on the same
PostgreSQL database and ``--concurrency`` requests in flight, take ``--requests`` tokens
each from ONE key (as every loopback client shares one bucket without API keys), once per
lease size in ``--leases`` (1: one row update per request, as before leases; larger: one
statement per lease). For each: the bucket statements per request (counted in the
processes); the PostgreSQL backends waiting on a lock (``pg_stat_activity`` with
``wait_event_type = 'Lock'``, sampled about every millisecond from a third connection:
the mean, the most at once, and the backends' time waiting per request); on the cluster
the script starts, the lock waits PostgreSQL itself logs (``log_lock_waits`` with
``deadlock_timeout`` at 1 ms: every wait longer than 1 ms) per request; the requests per
second; and PostgreSQL's CPU per request (its backends on the database, from ``/proc``).

    python benchmarks/rate_limiter.py --lock-waits [--requests 3000] [--concurrency 16]
        [--leases 1,6,60] [--postgres auto|URL] [--repeats 1] [--json]

Numbers mean something only on an idle machine; results: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gateway_parts import cpu_seconds, postgres_clock
from sqlalchemy import Engine, event

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.server.limits import KeyLimiter, RateLimiter, StoreRateLimiter
from foureyes.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.postgres import PostgresServer, running_postgres  # noqa: E402

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


# --- two processes on one hot row (--lock-waits) ----------------------------------------

_HOT_KEY = "loopback"  # every request on one bucket, as loopback clients without keys share
_NEVER_DRY = 1_000_000_000  # burst: never runs dry in a run ...
_NO_REFILL = 1e-6  # ... nor refills (per minute), so a lease never fades: every one is spent


def _lessee(url: str, lease: int, requests: int, concurrency: int, start: Any, out: Any) -> None:
    """One process: its own store and limiter, ``requests`` tokens from the hot key."""

    async def run() -> None:
        store = await Store.open(StoreConfig(url=url), PrivacyConfig(), {})
        try:
            limiter = StoreRateLimiter(
                store.rate_buckets,
                rate_per_minute=_NO_REFILL,
                burst=_NEVER_DRY,
                lease_tokens=lease,
                sweep_every=1 << 40,
            )
            # Warm up: the pool's connections open (the bucket's row exists already).
            await asyncio.gather(*(limiter.admit(_HOT_KEY) for _ in range(concurrency)))
            queue = iter(range(requests))

            async def client() -> None:
                for _ in queue:
                    assert (await limiter.admit(_HOT_KEY)).allowed

            statements = [0]

            def note(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
                if "rate_buckets" in statement:
                    statements[0] += 1

            event.listen(Engine, "before_cursor_execute", note)
            start.wait()
            began = time.perf_counter()
            await asyncio.gather(*(client() for _ in range(concurrency)))
            out.put((time.perf_counter() - began, statements[0]))
            start.wait()  # connections kept open until the server's CPU is read
            await limiter.aclose()
        finally:
            await store.close()

    asyncio.run(run())


def _dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


async def _backends(conn: Any) -> list[int]:
    """The pids of this database's other backends (the lessees' connections)."""
    rows = await conn.fetch(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid()"
    )
    return [int(row["pid"]) for row in rows]


def _backends_cpu(pids: list[int]) -> dict[int, float]:
    spent: dict[int, float] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            spent[pid] = cpu_seconds(pid)
    return spent


def _lock_wait_lines(log: Path | None) -> int:
    if log is None:
        return 0
    with log.open(encoding="utf-8", errors="replace") as lines:
        return sum("still waiting for" in line for line in lines)


async def _one_lease_size(
    url: str, lease: int, args: argparse.Namespace, log: Path | None
) -> dict[str, Any]:
    import asyncpg  # the benchmark's own connection, beside the store's

    context = multiprocessing.get_context("spawn")
    start, out = context.Barrier(3), context.Queue()
    processes = [
        context.Process(
            target=_lessee, args=(url, lease, args.requests, args.concurrency, start, out)
        )
        for _ in range(2)
    ]
    conn = await asyncpg.connect(_dsn(url))
    try:
        for process in processes:
            process.start()
        await asyncio.to_thread(start.wait)
        cpu, logged = _backends_cpu(await _backends(conn)), _lock_wait_lines(log)
        waiting: list[int] = []
        done = asyncio.ensure_future(asyncio.to_thread(lambda: [out.get() for _ in processes]))
        while not done.done():
            waiting.append(
                await conn.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock'"
                )
            )
            await asyncio.sleep(0.001)
        results = await done
        after = _backends_cpu(await _backends(conn))
        server_cpu = sum(spent - cpu.get(pid, 0.0) for pid, spent in after.items())
        await asyncio.to_thread(start.wait)
        logged = _lock_wait_lines(log) - logged
        for process in processes:
            await asyncio.to_thread(process.join, 60)
            assert process.exitcode == 0, f"a lessee failed (exit {process.exitcode})"
    finally:
        await conn.close()
    elapsed = max(seconds for seconds, _ in results)
    statements = sum(count for _, count in results)
    total = 2 * args.requests
    mean_waiting = statistics.fmean(waiting) if waiting else 0.0
    return {
        "lease": lease,
        "requests": total,
        "statements_per_request": round(statements / total, 4),
        "lock_waiting_mean": round(mean_waiting, 3),
        "lock_waiting_max": max(waiting, default=0),
        # Backend time spent waiting on a lock, per request (mean waiting x elapsed / n).
        "lock_wait_us_per_request": round(mean_waiting * elapsed / total * 1e6, 1),
        "samples": len(waiting),
        "logged_waits_per_request": round(logged / total, 4) if log is not None else None,
        "requests_per_s": round(total / elapsed),
        "server_cpu_us": round(server_cpu / total * 1e6, 1),
    }


@contextlib.contextmanager
def _lock_wait_postgres(choice: str) -> Iterator[tuple[str, Path | None]]:
    """The database to measure, and the server log that counts lock waits (own cluster)."""
    if choice == "none":
        raise SystemExit("--lock-waits needs PostgreSQL: --postgres auto or a URL")
    if choice != "auto":
        yield choice, None
        return
    with running_postgres(durable=True) as server:
        _log_every_lock_wait(server)
        yield server.url(server.create_database()), _server_log(server)


def _log_every_lock_wait(server: PostgresServer) -> None:
    import subprocess

    for statement in (
        "ALTER SYSTEM SET log_lock_waits = on",
        "ALTER SYSTEM SET deadlock_timeout = '1ms'",
        "SELECT pg_reload_conf()",
    ):
        subprocess.run(
            [str(server.bin_dir / "psql"), "-h", "127.0.0.1", "-p", str(server.port)]
            + ["-U", "foureyes", "-d", "postgres", "-c", statement],
            check=True,
            capture_output=True,
        )


def _server_log(server: PostgresServer) -> Path:
    # running_postgres starts the cluster in <base>/data with its log at <base>/server.log.
    import subprocess

    data = subprocess.run(
        [str(server.bin_dir / "psql"), "-h", "127.0.0.1", "-p", str(server.port)]
        + ["-U", "foureyes", "-d", "postgres", "-Atc", "SHOW data_directory"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return Path(data).parent / "server.log"


async def lock_waits_main(args: argparse.Namespace) -> dict[str, Any]:
    """Two processes on one hot row, for each lease size: see the module's docstring."""
    leases = [int(size) for size in args.leases.split(",")]
    runs: list[list[dict[str, Any]]] = []
    with _lock_wait_postgres(args.postgres) as (url, log):
        store = await Store.open(StoreConfig(url=url), PrivacyConfig(), {})  # migrate once
        await store.close()
        for _ in range(args.repeats):
            runs.append([await _one_lease_size(url, lease, args, log) for lease in leases])
    options = {"requests_per_process": args.requests, "concurrency": args.concurrency}
    return {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg(),
        "options": options,
        "runs": runs,
    }


def _print_lock_waits(report: dict[str, Any]) -> None:
    print(
        "| run | lease | requests | statements/request | backends waiting on a lock"
        " (mean / max) | lock wait µs/request | logged waits > 1 ms/request | requests/s"
        " | PostgreSQL CPU µs/request |"
    )
    print("| --- " * 9 + "|")
    for number, rows in enumerate(report["runs"], 1):
        for row in rows:
            logged = row["logged_waits_per_request"]
            print(
                f"| {number} | {row['lease']} | {row['requests']} |"
                f" {row['statements_per_request']} |"
                f" {row['lock_waiting_mean']} / {row['lock_waiting_max']} |"
                f" {row['lock_wait_us_per_request']} |"
                f" {'-' if logged is None else logged} | {row['requests_per_s']} |"
                f" {row['server_cpu_us']} |"
            )
    print(f"load before: {report['load_before']}, CPUs: {report['cpus']}")


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
    parser.add_argument(
        "--lock-waits",
        action="store_true",
        help="two processes on one key's row, per lease size: PostgreSQL lock waits",
    )
    parser.add_argument("--leases", default="1,6,60", help="lease sizes for --lock-waits")
    arguments = parser.parse_args()
    if arguments.lock_waits:
        report = asyncio.run(lock_waits_main(arguments))
        if arguments.json:
            print(json.dumps(report, indent=2))
        else:
            _print_lock_waits(report)
        sys.exit(0)
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
