"""Metrics of hand-made records, checked against counts worked out by hand."""

from __future__ import annotations

import json

import pytest

from foureyes.evals.agent_arm import DONE, NOT_DONE, restated_items
from foureyes.evals.metrics import PairRecord, compute_metrics, confusion
from foureyes.evals.suite import SuiteKind
from foureyes.review.packet import check_packet
from foureyes.review.session import ReasoningBlock, TextBlock
from tests.review._session_support import Build


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


def test_unique_delta_counts_a_contradiction_of_the_primary_as_new() -> None:
    session = (
        Build()
        .turn("fix clamp")
        .step(
            ReasoningBlock(text="The bug is in clamp. The fix is correct."),
            TextBlock(text="修复是正确的。测试通过了。"),
        )
        .session()
    )
    entries = [
        ("conclusion", "The fix is not correct."),  # contradicts: new
        ("observation", "The fix is probably correct."),  # a hedged restatement
        ("possible_error", "修复是错误的"),  # contradicts: new
        ("observation", "测试没有失败"),  # restates 测试通过了 (no failure: passed)
    ]
    body = [{"kind": k, "certainty": "likely", "content": c} for k, c in entries]
    checked = check_packet(
        json.dumps({"role": "masked-review", "status": "update", "items": body}), max_chars=10_000
    )
    assert checked.packet is not None
    assert restated_items(checked.packet, session) == 2
    record = PairRecord(
        case_id="1",
        arm="a",
        passed=True,
        failed=False,
        prediction=DONE,
        expected=DONE,
        cost_usd=0.0,
        latency_ms=10.0,
        detail={"reviewed": True, "items": len(entries), "restated": 2},
    )
    m = compute_metrics(
        SuiteKind.AGENT, [record], arms=["a"], baseline="a", labels=[DONE, NOT_DONE], seed=0
    )
    review = m.arms[0].review
    assert review is not None and review.unique_delta is not None
    assert review.unique_delta.estimate == 0.5
