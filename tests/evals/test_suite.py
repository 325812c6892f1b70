"""Suites: the shipped ones load; a broken case refuses the suite, naming the case."""

from __future__ import annotations

from pathlib import Path

import pytest

from foureyes.evals.suite import SuiteError, SuiteKind, load_suite, shipped_suites, suite_path
from tests.evals._support import GATE_HEAD, gate_case, write_suite


def test_shipped_suites_load_with_one_baseline_each() -> None:
    suites = {name: load_suite(path) for name, path in shipped_suites().items()}
    assert {"gate", "triage", "review-smoke"} <= set(suites)
    review = suites["review-smoke"]
    assert [a.name for a in review.arms if a.mask is None] == ["baseline"]
    assert any(a.observe_only for a in review.arms)
    gate, triage = suites["gate"], suites["triage"]
    assert gate.kind is SuiteKind.GATE and triage.kind is SuiteKind.TRIAGE
    assert gate.baseline.name == "rules-only" and triage.baseline.name == "l1-only"
    assert {c.expected for c in gate.cases} == {"block", "pass"}
    locales = {c.state["locale"] for c in triage.cases}
    assert {"en", "zh-Hans"} <= locales
    assert {c.expected for c in triage.cases} == {"low", "medium", "high", "critical"}


def test_a_broken_case_refuses_the_suite_and_names_every_broken_case(tmp_path: Path) -> None:
    cases = [
        gate_case("fine", "Hello there.", "pass"),
        {"id": "no-state", "goal": "g", "expected": "pass"},
        gate_case("bad-label", "Hello.", "maybe"),
        {"id": "no-check", "goal": "g", "state": {"draft": "x"}},
    ]
    folder = write_suite(tmp_path / "s", GATE_HEAD, cases)
    with pytest.raises(SuiteError) as caught:
        load_suite(folder)
    problems = caught.value.problems
    assert any(p.startswith("case no-state:") for p in problems)
    assert any(p.startswith("case bad-label:") and "maybe" in p for p in problems)
    assert any(p.startswith("case no-check:") for p in problems)
    assert not any("fine" in p for p in problems)


def test_duplicate_ids_missing_baseline_and_unreadable_files_are_refused(tmp_path: Path) -> None:
    twice = [gate_case("a", "x", "pass"), gate_case("a", "y", "block")]
    with pytest.raises(SuiteError, match="id used twice"):
        load_suite(write_suite(tmp_path / "d", GATE_HEAD, twice))
    head = GATE_HEAD | {"arms": [{"name": "x"}, {"name": "y"}]}
    with pytest.raises(SuiteError, match="baseline"):
        load_suite(write_suite(tmp_path / "b", head, [gate_case("a", "x", "pass")]))
    broken = tmp_path / "j"
    broken.mkdir()
    (broken / "suite.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(SuiteError, match="suite.json"):
        load_suite(broken)


def test_suite_path_and_arm_lookup(tmp_path: Path) -> None:
    assert suite_path("gate") == shipped_suites()["gate"]
    assert suite_path(str(tmp_path)) == tmp_path
    with pytest.raises(SuiteError, match="no suite"):
        suite_path("no-such-suite")
    suite = load_suite(suite_path("gate"))
    with pytest.raises(SuiteError, match="no arm"):
        suite.arm("nope")
