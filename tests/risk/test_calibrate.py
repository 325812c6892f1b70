"""Calibration: case files, metrics on real triages, and the thresholds gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from foureyes.core.errors import ConfigError
from foureyes.core.roles import Role
from foureyes.risk.calibrate import (
    Case,
    CaseFormat,
    Thresholds,
    cohen_kappa,
    load_cases,
    load_thresholds,
    run_cases,
    sos1k_level,
    summarise,
)
from foureyes.risk.l0 import L0Gate, L0Signal
from foureyes.risk.levels import RiskLevel
from foureyes.risk.lexicon_report import Signal, wilson
from foureyes.risk.triage import Triage
from tests.helpers.answers import answer
from tests.helpers.data import require_data
from tests.risk._support import ScriptedProvider
from tests.risk.conftest import MakeTriage

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "risk"
CASES = FIXTURES / "cases.jsonl"
LOW, MEDIUM, HIGH, CRITICAL = RiskLevel


def test_jsonl_cases_are_read_strictly(tmp_path: Path) -> None:
    cases = load_cases(CASES)
    assert len(cases) == 9 and cases[5].turns()[1].speaker == "assistant"
    assert [c.at_risk for c in cases] == [True, True, False, False, True, True, False, True, False]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x"}\nnot json\n{"text": "y", "expected_level": "dire"}\n', "utf-8")
    with pytest.raises(ConfigError) as caught:
        load_cases(bad)
    problems = "\n".join(caught.value.problems)
    assert "bad.jsonl:1" in problems and "bad.jsonl:2: not JSON" in problems
    assert "bad.jsonl:3: expected_level" in problems


@pytest.mark.parametrize(
    ("grade", "level"),
    [(0, LOW), (1, LOW), (2, MEDIUM), (3, MEDIUM), (4, HIGH), (5, HIGH), (6, CRITICAL),
     (9, CRITICAL), (10, CRITICAL)],
)  # fmt: skip
def test_sos1k_grades_map_onto_levels(grade: int, level: RiskLevel) -> None:
    assert sos1k_level(grade) is level


def test_sos1k_grades_outside_the_scale_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        sos1k_level(11)
    bad = tmp_path / "fold.tsv"
    bad.write_text("comment\tmyLabel\n想死\t12\n", "utf-8")
    with pytest.raises(ConfigError, match="fold.tsv:2"):
        load_cases(bad, CaseFormat.SOS1K)


@pytest.mark.parametrize(
    ("path", "fmt", "rows"),
    [
        ("risk/zh/sos1k_fold1.tsv", CaseFormat.SOS1K, 200),
        ("risk/en/twitter_suicidal_intention.csv", CaseFormat.TWITTER, 9109),
        ("risk/en/sdcnl_combined.csv", CaseFormat.SDCNL, 1895),
    ],
)
def test_the_shared_sets_are_read_in_their_own_formats(
    path: str, fmt: CaseFormat, rows: int
) -> None:
    source = require_data(path)
    cases = load_cases(source, fmt)
    assert len(cases) == rows and all(c.text.strip() for c in cases)
    assert {c.at_risk for c in cases} == {True, False}


def test_kappa() -> None:
    assert cohen_kappa([]) is None
    assert cohen_kappa([(HIGH, HIGH)] * 3) is None  # one level only: undefined
    assert cohen_kappa([(HIGH, HIGH), (CRITICAL, CRITICAL)]) == 1.0
    # 2x2 by hand: agree 3 of 4; marginals 2/2 and 1/3 -> pe = 0.5; kappa = 0.5
    pairs = [(HIGH, HIGH), (CRITICAL, CRITICAL), (HIGH, CRITICAL), (CRITICAL, CRITICAL)]
    assert cohen_kappa(pairs) == pytest.approx(0.5)
    assert cohen_kappa([(HIGH, CRITICAL), (CRITICAL, HIGH)]) == pytest.approx(-1.0)


async def test_offline_calibration_escalates_but_never_confirms(offline_triage: Triage) -> None:
    cases = load_cases(CASES)
    results = await run_cases(offline_triage, cases)
    report = summarise(cases, results)
    assert report.cases == 9
    assert report.confusion["critical"]["critical"] == 2
    assert report.confusion["low"]["low"] == 3
    assert sum(sum(row.values()) for row in report.confusion.values()) == 7
    m = report.metrics
    assert m["critical_recall"] == 1.0 and m["elevated_recall"] == 1.0
    assert m["false_escalation_rate"] == 0.0 and m["unknown_rate"] == 0.0
    assert m["alert_precision"] is None  # offline never confirms
    assert m["kappa"] == 1.0 and m["cost_usd"] == 0.0
    assert m["latency_p95_ms"] is not None and m["latency_p95_ms"] >= m["latency_p50_ms"]  # type: ignore[operator]
    assert {r.purpose.value for r in results} == {"calibration"}
    checks = report.check(load_thresholds(FIXTURES / "thresholds.toml"))
    assert [c.name for c in checks] == [
        "min_elevated_recall",
        "max_false_escalation_rate",
        "max_unknown_rate",
        "max_cost_usd",
    ]
    assert all(c.passed for c in checks)
    failing = report.check(Thresholds(min_alert_precision=0.5, max_p95_latency_ms=1e-9))
    assert [c.passed for c in failing] == [False, False]


async def test_calibration_breaks_the_l0_screen_down_by_signal(
    offline_triage: Triage, gate: L0Gate, tmp_path: Path
) -> None:
    cases = [
        *load_cases(CASES),
        Case(text="this bug is killing me lol", label="risk"),  # at risk, L0 quiet
        Case(text="I want to kill myself", label="no_risk"),  # not at risk, L0 escalates
    ]
    results = await run_cases(offline_triage, cases)
    report = summarise(cases, results)
    # An independent count: each case's text scanned here, tallied by signal and label.
    tally = {name: {True: [0, 0], False: [0, 0]} for name in ("lexicon", "scorer", "combined")}
    for case in cases:
        found = gate.scan(case.text)
        hits = {
            "lexicon": L0Signal.LEXICON in found.signals,
            "scorer": L0Signal.SCORER in found.signals,
            "combined": found.escalate,
        }
        for name, hit in hits.items():
            tally[name][case.at_risk][0] += 1
            tally[name][case.at_risk][1] += hit
    assert [b.signal for b in report.signals] == [Signal.LEXICON, Signal.SCORER, Signal.COMBINED]
    for row in report.signals:
        counts = tally[row.signal.value]
        assert (row.at_risk.texts, row.at_risk.escalated) == tuple(counts[True])
        assert (row.not_at_risk.texts, row.not_at_risk.escalated) == tuple(counts[False])
        assert row.at_risk.interval == wilson(counts[True][1], counts[True][0])
    tally = {True: tally["combined"][True], False: tally["combined"][False]}
    m = report.metrics
    assert m["screen_recall"] == tally[True][1] / tally[True][0] < 1.0
    assert m["screen_false_escalation_rate"] == tally[False][1] / tally[False][0] > 0.0
    as_json = json.loads(json.dumps(report.as_dict()))
    assert as_json["signals"][-1] == {
        "signal": "combined",
        "at_risk": report.signals[-1].at_risk.to_json(),
        "not_at_risk": report.signals[-1].not_at_risk.to_json(),
    }
    assert set(as_json["signals"][0]["at_risk"]) == {"texts", "escalated", "rate", "ci95"}
    gate_file = tmp_path / "t.toml"
    gate_file.write_text(
        f"min_screen_recall = {m['screen_recall']}\nmax_screen_false_escalation_rate = 0.0\n",
        "utf-8",
    )
    checks = report.check(load_thresholds(gate_file))
    assert [(c.name, c.passed) for c in checks] == [
        ("min_screen_recall", True),
        ("max_screen_false_escalation_rate", False),
    ]


async def test_model_calibration_measures_precision_kappa_and_cost(
    make_triage: MakeTriage, provider: ScriptedProvider
) -> None:
    cases = [
        Case(text="I want to die tonight", expected_level=CRITICAL),
        Case(text="I want to die", expected_level=HIGH),
        Case(text="I wrote my suicide note", label="no_risk"),
    ]
    for l1, l2 in [("critical", "critical"), ("high", "critical"), ("critical", "critical")]:
        provider.enqueue(Role.RISK_L1, answer(l1, 0.95))
        provider.enqueue(Role.RISK_L2, answer(l2, 0.95))
    results = await run_cases(make_triage(), cases, concurrency=1)
    report = summarise(cases, results)
    assert report.metrics["alert_precision"] == 0.5  # one confirmed case was not at risk
    assert report.metrics["kappa"] == pytest.approx(0.0)
    assert report.metrics["cost_usd"] == pytest.approx(6 * (100 * 1 + 50 * 2) / 1e6)
    assert report.confusion["high"]["critical"] == 1
    assert json.loads(json.dumps(report.as_dict()))["cases"] == 3
    combined = report.signals[-1]
    assert (combined.at_risk.texts, combined.not_at_risk.texts) == (2, 1)
    assert combined.at_risk.escalated == sum(r.l0.escalate for r in results[:2])


def test_thresholds_files_are_strict(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"min_critical_recal": 0.9}', "utf-8")
    with pytest.raises(ConfigError, match="min_critical_recal"):
        load_thresholds(path)
    with pytest.raises(ConfigError):
        load_thresholds(tmp_path / "missing.toml")
