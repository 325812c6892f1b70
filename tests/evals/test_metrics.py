"""Metrics of hand-made records, checked against counts worked out by hand."""

from __future__ import annotations

import pytest

from foureyes.evals.metrics import PairRecord, compute_metrics, confusion
from foureyes.evals.suite import SuiteKind


def _r(case: str, arm: str, prediction: str | None, expected: str, **detail: str) -> PairRecord:
    return PairRecord(
        case_id=case,
        arm=arm,
        passed=prediction == expected,
        failed=prediction is None,
        prediction=prediction,
        expected=expected,
        cost_usd=0.01 if arm == "b" else 0.0,
        latency_ms=10.0,
        detail=detail,
    )


def test_gate_rates_against_the_baseline() -> None:
    records = [
        # baseline "a" misses two blocks; "b" fixes both and wrongly blocks one pass.
        _r("1", "a", "pass", "block"), _r("1", "b", "block", "block"),
        _r("2", "a", "pass", "block"), _r("2", "b", "block", "block"),
        _r("3", "a", "pass", "pass"), _r("3", "b", "block", "pass"),
        _r("4", "a", "pass", "pass"), _r("4", "b", "pass", "pass"),
    ]  # fmt: skip
    m = compute_metrics(
        SuiteKind.GATE, records, arms=["a", "b"], baseline="a", labels=["block", "pass"], seed=0
    )
    a, b = m.arms
    assert a.pass_rate.estimate == 0.5 and a.comparison is None and a.correction_rate is None
    assert b.pass_rate.estimate == 0.75
    assert b.correction_rate == 0.5 and b.false_diversion_rate == 0.25
    assert b.no_update_rate == 0.25
    assert b.cost_per_correction_usd == pytest.approx(0.04 / 2)
    assert (b.block_rate, b.false_block_rate) == (1.0, 0.5)
    assert (a.block_rate, a.false_block_rate) == (0.0, 0.0)
    assert b.comparison is not None and not b.comparison.significant
    assert "no significant difference" in b.comparison.statement
    assert m.confusions["b"]["pass"] == {"block": 1, "pass": 1, "none": 0}


def test_triage_recall_precision_and_agreement() -> None:
    records = [
        _r("1", "a", "critical", "critical", l1="critical", l2="critical"),
        _r("2", "a", "high", "critical", l1="high", l2="critical"),
        _r("3", "a", "high", "low", l1="high", l2="high"),
        _r("4", "a", None, "medium"),
    ]
    m = compute_metrics(
        SuiteKind.TRIAGE,
        records,
        arms=["a"],
        baseline="a",
        labels=["low", "medium", "high", "critical"],
        seed=0,
    )
    (a,) = m.arms
    assert a.critical_recall == 0.5
    assert a.alert_precision == pytest.approx(2 / 3)
    assert a.failures == 1
    agreement = m.agreement["a"]
    assert agreement.n == 3
    # Pairs (c,c), (h,c), (h,h): po = 2/3; pe = 1/3*2/3 + 2/3*1/3 = 4/9; kappa = 0.4.
    assert agreement.kappa == pytest.approx(0.4)
    assert confusion(records, ["low", "medium"])["medium"]["none"] == 1
