"""Evaluation runs and their results: each case x arm pair stored as it finishes.

The pair's primary key is ``(run_id, case_id, arm)`` and a result is inserted in its own
transaction, so a run killed halfway leaves only whole results and a rerun, which skips
the pairs already stored, can neither duplicate nor half-write one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select

from foureyes.store._clock import WallClock, require_utc, utc_now
from foureyes.store._database import Database
from foureyes.store.tables import eval_results, eval_runs

__all__ = ["EvalResultRow", "EvalRunRow", "SqlEvalStore"]

_r = eval_runs.c
_x = eval_results.c


@dataclass(frozen=True, slots=True)
class EvalRunRow:
    """A stored run."""

    run_id: str
    """The run's id."""
    suite: str
    """Suite name."""
    suite_sha256: str
    """Digest of the suite it ran."""
    facts: Mapping[str, Any]
    """Reproducibility facts (arms, routes, seed, config digest, version)."""
    created_at: dt.datetime
    """When the run was first started."""


@dataclass(frozen=True, slots=True)
class EvalResultRow:
    """A stored case x arm result."""

    case_id: str
    """The case."""
    arm: str
    """The arm."""
    status: str
    """``ok``, or ``failed`` when the arm produced no usable answer."""
    passed: bool
    """Whether the case passed under the arm."""
    record: Mapping[str, Any]
    """The full result document."""


class SqlEvalStore:
    """Eval runs in the ``eval_runs`` and ``eval_results`` tables."""

    def __init__(self, db: Database, *, clock: WallClock = utc_now) -> None:
        self._db = db
        self._clock = clock

    async def start_run(
        self, run_id: str, *, suite: str, suite_sha256: str, facts: Mapping[str, Any]
    ) -> EvalRunRow:
        """Create the run, or return it unchanged when it already exists (a resume).

        Raises:
            StoreError: the store failed.
        """
        now = require_utc(self._clock(), "the store clock")
        async with self._db.write("start_eval_run") as conn:
            await conn.execute(
                self._db.insert_ignoring_conflict(
                    eval_runs,
                    {
                        "run_id": run_id,
                        "suite": suite,
                        "suite_sha256": suite_sha256,
                        "facts": dict(facts),
                        "created_at": now,
                    },
                    ["run_id"],
                )
            )
            row = (await conn.execute(select(eval_runs).where(_r.run_id == run_id))).one()
        return EvalRunRow(row.run_id, row.suite, row.suite_sha256, row.facts, row.created_at)

    async def get_run(self, run_id: str) -> EvalRunRow | None:
        """The run ``run_id``, or ``None``.

        Raises:
            StoreError: the store failed.
        """
        async with self._db.read("get_eval_run") as conn:
            row = (await conn.execute(select(eval_runs).where(_r.run_id == run_id))).first()
        if row is None:
            return None
        return EvalRunRow(row.run_id, row.suite, row.suite_sha256, row.facts, row.created_at)

    async def runs(self, *, limit: int = 50) -> tuple[EvalRunRow, ...]:
        """The most recent runs first.

        Raises:
            StoreError: the store failed.
        """
        query = select(eval_runs).order_by(_r.created_at.desc(), _r.run_id).limit(limit)
        async with self._db.read("list_eval_runs") as conn:
            rows = (await conn.execute(query)).all()
        return tuple(
            EvalRunRow(r.run_id, r.suite, r.suite_sha256, r.facts, r.created_at) for r in rows
        )

    async def result_counts(self, run_ids: Sequence[str]) -> dict[str, int]:
        """How many pairs each of ``run_ids`` has stored (0 for a run with none or unknown).

        Raises:
            StoreError: the store failed.
        """
        if not run_ids:
            return {}
        query = (
            select(_x.run_id, func.count()).where(_x.run_id.in_(list(run_ids))).group_by(_x.run_id)
        )
        async with self._db.read("eval_result_counts") as conn:
            counted: dict[str, int] = {row[0]: row[1] for row in await conn.execute(query)}
        return {run_id: int(counted.get(run_id, 0)) for run_id in run_ids}

    async def record(self, run_id: str, result: EvalResultRow) -> bool:
        """Store one finished pair; ``False`` when it was already stored (kept as it was).

        Raises:
            StoreError: the store failed; nothing is written then.
        """
        now = require_utc(self._clock(), "the store clock")
        async with self._db.write("record_eval_result") as conn:
            inserted = await conn.execute(
                self._db.insert_ignoring_conflict(
                    eval_results,
                    {
                        "run_id": run_id,
                        "case_id": result.case_id,
                        "arm": result.arm,
                        "status": result.status,
                        "passed": result.passed,
                        "record": dict(result.record),
                        "finished_at": now,
                    },
                    ["run_id", "case_id", "arm"],
                )
            )
        return bool(inserted.rowcount)

    async def results(self, run_id: str) -> tuple[EvalResultRow, ...]:
        """The run's stored pairs, by case then arm.

        Raises:
            StoreError: the store failed.
        """
        query = select(eval_results).where(_x.run_id == run_id).order_by(_x.case_id, _x.arm)
        async with self._db.read("eval_results") as conn:
            rows = (await conn.execute(query)).all()
        return tuple(EvalResultRow(r.case_id, r.arm, r.status, r.passed, r.record) for r in rows)
