"""The policy floor: pure, over real L0 results and triage results built by hand."""

from __future__ import annotations

import ast
import inspect

import pytest

from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.pipeline import PolicyFloor, apply_floor, floor, has_strong_term
from foureyes.risk.assess import Tier
from foureyes.risk.l0 import L0Gate
from foureyes.risk.levels import RiskLevel, RiskStatus
from foureyes.risk.result import RunPurpose, TriageResult
from tests.pipeline.conftest import _L0

GATE: L0Gate = _L0


def triage(text: str, policy: GenerationPolicy, level: RiskLevel | None) -> TriageResult:
    return TriageResult(
        conversation_id="c1",
        purpose=RunPurpose.TEST,
        status=RiskStatus.OK if level else RiskStatus.UNKNOWN,
        level=level,
        confirmed=False,
        tier=Tier.L1,
        policy=policy,
        reasons=(),
        locale=Locale.EN,
        l0=GATE.scan(text),
        l1=None,
        l2=None,
        confirmation=None,
        trend=None,
        calls=1,
        cost_usd=0.0,
        latency_ms=1.0,
    )


@pytest.mark.parametrize(
    ("text", "strong"),
    [
        ("I want to die", True),
        ("我不想活了", True),
        ("I don't want to die", False),  # negated: not strong
        ("this traffic is killing me lol", False),
        ("I had a rough day", False),
    ],
)
def test_a_strong_term_is_one_of_full_weight_without_a_negation(text: str, strong: bool) -> None:
    assert has_strong_term(GATE.scan(text)) is strong


def test_a_normal_policy_over_a_strong_term_becomes_restricted() -> None:
    applied = apply_floor(triage("I want to die", GenerationPolicy.NORMAL, RiskLevel.LOW))

    assert applied.policy is GenerationPolicy.RESTRICTED
    assert applied.triage is GenerationPolicy.NORMAL
    assert applied.floor is PolicyFloor.L0_STRONG_TERM
    assert applied.as_json() == {
        "applied": "restricted",
        "triage": "normal",
        "floor": "l0_strong_term",
    }


@pytest.mark.parametrize("policy", [GenerationPolicy.RESTRICTED, GenerationPolicy.PROHIBITED])
def test_the_floor_never_lowers_a_stricter_policy(policy: GenerationPolicy) -> None:
    applied = apply_floor(triage("I want to die", policy, RiskLevel.CRITICAL))

    assert (applied.policy, applied.floor) == (policy, None)


def test_without_a_strong_term_triage_stands() -> None:
    result = triage("I feel a bit down", GenerationPolicy.NORMAL, RiskLevel.LOW)

    assert (apply_floor(result).policy, apply_floor(result).floor) == (
        GenerationPolicy.NORMAL,
        None,
    )


def test_the_floor_is_a_pure_decision() -> None:
    tree = ast.parse(inspect.getsource(floor))
    imported = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    forbidden = ("asyncio", "openai", "sqlalchemy", "foureyes.store", "foureyes.server", "time")
    assert not {n for n in imported if any(n == f or n.startswith(f + ".") for f in forbidden)}
    assert not any(isinstance(n, ast.AsyncFunctionDef | ast.Await) for n in ast.walk(tree))
