"""What does the support pipeline's final commit cost on SQLite, by write path?

A calm message's run is written in one transaction: the run's header (it was only
reserved), the triage's assessment (held for the run), then the statement that numbers
the events and closes the run, and the events themselves. This script writes that same
transaction, with event data the size of a real run's, three ways on one SQLite file:

* ``run_write``: what the store does now, ``Database.run_write`` (the whole transaction,
  through synchronous SQLAlchemy Core, in one trip to the dedicated writer thread);
* ``async``: the same statements through ``Database.write`` (SQLAlchemy's asyncio
  extension over aiosqlite, one trip to aiosqlite's thread per statement with the store's
  one-trip cursor, three or four with SQLAlchemy's own), the path the pipeline took before;
* ``sqlite3``: the same SQL and parameters replayed with the bare ``sqlite3`` module in
  the calling thread, the floor.

Every way commits with ``synchronous = FULL`` (a sync of the write-ahead log per commit).
It reports the process CPU time per commit (all threads) and the wall-time median.

    python benchmarks/store_commit.py [--commits 500] [--rounds 3] [--json]

Results: benchmarks/README.md (current, and how to read them), benchmarks/LOG.md (history).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import platform
import secrets
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, event

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.core.trace import EventKind, TraceEvent
from foureyes.store import Store
from foureyes.store.assessments import NewAssessment

# Sizes close to a released reply's run: six events, the gate's decision record largest.
_PAYLOAD = {f"field_{i}": "x" * 40 for i in range(20)}
_STAGES = (
    (EventKind.RISK, "l0"),
    (EventKind.RISK, "triage"),
    (EventKind.MODEL_CALL, "draft"),
    (EventKind.MODEL_CALL, "review"),
    (EventKind.DECISION, "gate"),
    (EventKind.DELIVERY, "pipeline"),
)


def _events() -> list[TraceEvent]:
    now = dt.datetime.now(dt.UTC)
    return [
        TraceEvent(
            kind,
            stage,
            {"record": _PAYLOAD, "more": _PAYLOAD} if stage == "gate" else _PAYLOAD,
            now,
        )
        for kind, stage in _STAGES
    ]


def _assessment(trace_id: str) -> NewAssessment:
    return NewAssessment(
        conversation_id="bench",
        purpose="live",
        at=dt.datetime.now(dt.UTC),
        status="ok",
        level="low",
        tier="L0",
        confirmed=False,
        policy="normal",
        reasons=[],
        detail={"locale": "en"},
        trace_id=trace_id,
    )


async def _commit(store: Store) -> None:
    """One run as the pipeline writes it: reserved, triage held, one final commit."""
    trace_id = store.traces.reserve_run(
        "support_message", conversation_id="bench", input_text="hello", meta={"purpose": "live"}
    )
    store.assessments.hold(_assessment(trace_id), text="hello")
    await store.traces.append_many(trace_id, _events(), outcome="released", reason="approved")


async def _measure(store: Store, commits: int) -> tuple[float, float]:
    for _ in range(50):
        await _commit(store)
    walls: list[float] = []
    cpu = time.process_time()
    for _ in range(commits):
        started = time.perf_counter()
        await _commit(store)
        walls.append(time.perf_counter() - started)
    cpu_ms = (time.process_time() - cpu) / commits * 1000
    return cpu_ms, statistics.median(walls) * 1000


def _async_path(monkeypatched: Store) -> None:
    """Send the store's run_write through Database.write, statement by statement."""
    db = monkeypatched._db  # the store's own database: this compares its two paths

    async def run_write(operation: str, work: Callable[[Connection], Any]) -> Any:
        async with db.write(operation) as conn:
            return await conn.run_sync(work)

    db.run_write = run_write  # type: ignore[method-assign]


def _capture(store: Store) -> tuple[list[tuple[str, Any, bool]], Callable[[], None]]:
    """Record the SQL and parameters the writer thread's engine sends to sqlite3."""
    writer = store._db._sqlite_writer
    assert writer is not None and writer._engine is not None
    engine = writer._engine
    captured: list[tuple[str, Any, bool]] = []

    def capture(_c: Any, _cur: Any, statement: str, params: Any, _ctx: Any, many: bool) -> None:
        if not statement.startswith("BEGIN"):  # the replay opens its own transaction
            captured.append((statement, params, many))

    event.listen(engine, "before_cursor_execute", capture)
    return captured, lambda: event.remove(engine, "before_cursor_execute", capture)


def _replay(
    path: Path, statements: Sequence[tuple[str, Any, bool]], commits: int
) -> tuple[float, float]:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA synchronous = FULL")
    connection.execute("PRAGMA foreign_keys = ON")
    walls: list[float] = []
    cpu = time.process_time()
    for _ in range(commits):
        # Fresh ids each time, so the inserts insert.
        run_id, assessment_id = secrets.token_hex(16), secrets.token_hex(16)
        old_run = statements[0][1][0]
        started = time.perf_counter()
        connection.execute("BEGIN IMMEDIATE")
        for sql, params, many in statements:
            if many:
                connection.executemany(
                    sql, [[run_id if v == old_run else v for v in row] for row in params]
                )
                continue
            values = [run_id if v == old_run else v for v in params]
            if sql.startswith("INSERT INTO risk_assessments"):
                values[0] = assessment_id
            connection.execute(sql, values).fetchall()
        connection.execute("COMMIT")
        walls.append(time.perf_counter() - started)
    cpu_ms = (time.process_time() - cpu) / commits * 1000
    connection.close()
    return cpu_ms, statistics.median(walls) * 1000


async def _round(workdir: Path, commits: int) -> dict[str, tuple[float, float]]:
    results: dict[str, tuple[float, float]] = {}
    for name in ("run_write", "async"):
        path = workdir / f"{name}-{secrets.token_hex(4)}.db"
        url = f"sqlite+aiosqlite:///{path}"
        store = await Store.open(StoreConfig(url=url), PrivacyConfig(), {})
        try:
            if name == "async":
                _async_path(store)
            results[name] = await _measure(store, commits)
            if name == "run_write":
                statements, stop = _capture(store)
                await _commit(store)
                stop()
        finally:
            await store.close()
        if name == "run_write":
            results["sqlite3"] = _replay(path, statements, commits)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rounds = [asyncio.run(_round(Path(tmp), args.commits)) for _ in range(args.rounds)]
    summary = {
        name: {
            "cpu_ms": [round(r[name][0], 3) for r in rounds],
            "wall_p50_ms": [round(r[name][1], 3) for r in rounds],
        }
        for name in ("run_write", "async", "sqlite3")
    }
    if args.json:
        print(json.dumps({"python": platform.python_version(), "results": summary}, indent=2))
        return
    versions = f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}"
    print(f"{versions}; {args.commits} commits x {args.rounds} rounds")
    print("| path | CPU ms per commit (rounds) | wall p50 ms (rounds) |")
    print("| --- | --- | --- |")
    for name, row in summary.items():
        cpu = " / ".join(f"{v:.2f}" for v in row["cpu_ms"])
        wall = " / ".join(f"{v:.2f}" for v in row["wall_p50_ms"])
        print(f"| {name} | {cpu} | {wall} |")


if __name__ == "__main__":
    main()
