"""The eval store on SQLite and on a real PostgreSQL server: runs, results, their counts."""

from __future__ import annotations

from foureyes.store.evals import EvalResultRow
from tests.helpers.clock import ManualClock
from tests.store._support import OpenStore

FACTS = {"kind": "gate", "arms": [{"name": "a"}, {"name": "b"}], "baseline": "a"}


def _row(case_id: str, arm: str, passed: bool = True) -> EvalResultRow:
    status = "ok" if passed else "failed"
    return EvalResultRow(case_id, arm, status, passed, {"prediction": "pass", "case": case_id})


async def test_runs_results_and_their_counts(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    store = await open_store(store_url, clock=clock)
    evals = store.evals
    first = await evals.start_run("r1", suite="gate", suite_sha256="0" * 64, facts=FACTS)
    clock.advance(seconds=5)
    await evals.start_run("r2", suite="gate", suite_sha256="0" * 64, facts=FACTS)
    again = await evals.start_run("r1", suite="other", suite_sha256="1" * 64, facts={})

    assert again == first  # a resume returns the run as first stored
    assert [r.run_id for r in await evals.runs()] == ["r2", "r1"]
    assert [r.run_id for r in await evals.runs(limit=1)] == ["r2"]
    assert await evals.record("r1", _row("c1", "a"))
    assert await evals.record("r1", _row("c1", "b", passed=False))
    assert await evals.record("r1", _row("c2", "a"))
    assert not await evals.record("r1", _row("c1", "a", passed=False))  # kept as it was

    counts = await evals.result_counts(["r1", "r2", "unknown"])
    assert counts == {"r1": 3, "r2": 0, "unknown": 0}
    assert await evals.result_counts([]) == {}
    results = await evals.results("r1")
    assert [(r.case_id, r.arm, r.passed) for r in results] == [
        ("c1", "a", True),
        ("c1", "b", False),
        ("c2", "a", True),
    ]
    assert results[0].record == {"prediction": "pass", "case": "c1"}
