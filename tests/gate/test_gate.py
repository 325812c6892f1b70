from __future__ import annotations

import ast
import inspect
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import foureyes.gate.failures
import foureyes.gate.fallback
import foureyes.gate.gate
import foureyes.gate.release
import foureyes.gate.review_input
import foureyes.gate.rules
import foureyes.gate.verdict
from foureyes.core.digest import sha256_hex
from foureyes.core.errors import UsageError
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.gate import (
    Decision,
    Outcome,
    RuleFinding,
    Verdict,
    VerdictDecision,
    Violation,
    decide,
)

A = sha256_hex("draft A")
B = sha256_hex("draft B")
NORMAL = GenerationPolicy.NORMAL
FINDING = RuleFinding("guarantee_claim", (0, 4), "promises an outcome")


def verdict(decision: str = "approve", digest: str = A) -> Verdict:
    violations = (
        (Violation(rule="dismissive", span=(0, 1), note=""),) if decision == "reject" else ()
    )
    missing = ("context",) if decision == "insufficient" else ()
    return Verdict(
        candidate_sha256=digest,
        decision=VerdictDecision(decision),
        violations=violations,
        missing=missing,
    )


def test_an_approval_of_the_candidates_digest_releases_that_digest() -> None:
    decision = decide(NORMAL, candidate_sha256=A, findings=(), verdict=verdict(), failure=None)
    assert decision.released and decision.outcome is Outcome.RELEASED
    assert decision.reason is ReasonCode.APPROVED and decision.approved_sha256 == A


@pytest.mark.parametrize(
    ("policy", "kw", "reason"),
    [
        ("prohibited", {}, ReasonCode.GENERATION_PROHIBITED),
        ("normal", {"failure": ReasonCode.REVIEW_TIMEOUT}, ReasonCode.REVIEW_TIMEOUT),
        ("normal", {"failure": ReasonCode.DEADLINE_EXCEEDED}, ReasonCode.DEADLINE_EXCEEDED),
        ("normal", {"candidate_sha256": None}, ReasonCode.DRAFT_FAILED),
        ("normal", {"findings": (FINDING,)}, ReasonCode.RULE_VIOLATION),
        ("normal", {"verdict": None}, ReasonCode.REVIEW_FAILED),
        ("normal", {"verdict": verdict(digest=B)}, ReasonCode.VERDICT_MISMATCH),
        ("normal", {"verdict": verdict("reject")}, ReasonCode.REJECTED),
        ("normal", {"verdict": verdict("insufficient")}, ReasonCode.INSUFFICIENT),
        ("restricted", {"verdict": verdict("reject")}, ReasonCode.REJECTED),
        # Earlier lines win over later ones.
        ("prohibited", {"failure": ReasonCode.REVIEW_FAILED}, ReasonCode.GENERATION_PROHIBITED),
        (
            "normal",
            {"failure": ReasonCode.BUDGET_EXHAUSTED, "findings": (FINDING,)},
            ReasonCode.BUDGET_EXHAUSTED,
        ),
        (
            "normal",
            {"findings": (FINDING,), "verdict": verdict(digest=B)},
            ReasonCode.RULE_VIOLATION,
        ),
    ],
)
def test_each_line_of_the_decision(policy: str, kw: dict[str, Any], reason: ReasonCode) -> None:
    facts: dict[str, Any] = {
        "candidate_sha256": A,
        "findings": (),
        "verdict": verdict(),
        "failure": None,
    } | kw
    decision = decide(GenerationPolicy(policy), **facts)
    assert decision.outcome is Outcome.FALLBACK and decision.reason is reason
    assert decision.approved_sha256 is None


@given(
    candidate=st.sampled_from([A, B, None]),
    named=st.sampled_from([A, B]),
    kind=st.sampled_from(list(VerdictDecision)),
    findings=st.booleans(),
    failure=st.sampled_from([None, *[r for r in ReasonCode if r.is_fallback]]),
    has_verdict=st.booleans(),
)
def test_no_approval_lifts_a_prohibition(
    candidate: str | None,
    named: str,
    kind: VerdictDecision,
    findings: bool,
    failure: ReasonCode | None,
    has_verdict: bool,
) -> None:
    facts: dict[str, Any] = {
        "candidate_sha256": candidate,
        "findings": (FINDING,) if findings else (),
        "verdict": verdict(kind.value, digest=named) if has_verdict else None,
        "failure": failure,
    }
    prohibited = decide(GenerationPolicy.PROHIBITED, **facts)
    assert prohibited.reason is ReasonCode.GENERATION_PROHIBITED
    # And elsewhere a release happens only for the digest the verdict named.
    for policy in (GenerationPolicy.NORMAL, GenerationPolicy.RESTRICTED):
        decision = decide(policy, **facts)
        if decision.released:
            assert has_verdict and kind is VerdictDecision.APPROVE and failure is None
            assert decision.approved_sha256 == candidate == named and not findings


def test_approved_is_not_a_failure() -> None:
    with pytest.raises(UsageError):
        decide(NORMAL, candidate_sha256=A, findings=(), verdict=None, failure=ReasonCode.APPROVED)
    with pytest.raises(UsageError):
        Decision.fallback(ReasonCode.APPROVED)


def test_a_decision_cannot_be_built_or_changed_outside_the_gate() -> None:
    with pytest.raises(UsageError):
        Decision()
    decision = Decision.fallback(ReasonCode.REJECTED)
    with pytest.raises(AttributeError):
        decision._reason = ReasonCode.APPROVED  # type: ignore[misc]
    assert decision == Decision.fallback(ReasonCode.REJECTED)
    assert "rejected" in repr(decision)


PURE_MODULES = [
    foureyes.gate.gate,
    foureyes.gate.rules,
    foureyes.gate.verdict,
    foureyes.gate.failures,
    foureyes.gate.fallback,
    foureyes.gate.release,
    foureyes.gate.review_input,
]
FORBIDDEN = ("asyncio", "openai", "sqlalchemy", "foureyes.store", "foureyes.server", "time")


@pytest.mark.parametrize("module", PURE_MODULES, ids=lambda m: m.__name__)
def test_decision_modules_import_no_io(module: Any) -> None:
    tree = ast.parse(inspect.getsource(module))
    imported = {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
    }
    bad = {n for n in imported if any(n == f or n.startswith(f + ".") for f in FORBIDDEN)}
    assert not bad, f"{module.__name__} imports {bad}"
    assert not any(isinstance(n, ast.AsyncFunctionDef | ast.Await) for n in ast.walk(tree))
