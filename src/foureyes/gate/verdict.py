"""The Supervisor's verdict (docs/design.md 5) and its check against the candidate it names.

Parsing (:func:`foureyes.llm.structured.parse_structured`) makes sure a verdict has the
pinned shape; :func:`check_verdict` then binds it to the candidate: it must name the
candidate's exact digest (``verdict_mismatch`` otherwise), cite only rules of the
catalogue and point only at spans inside the candidate (``review_malformed`` otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from foureyes.core.digest import canonical_json, sha256_hex
from foureyes.core.reasons import ReasonCode
from foureyes.gate.rules import RuleCatalogue

__all__ = [
    "MAX_MISSING",
    "MAX_VIOLATIONS",
    "Verdict",
    "VerdictDecision",
    "VerdictProblem",
    "Violation",
    "check_verdict",
    "verdict_sha256",
]

MAX_VIOLATIONS = 20
"""Most violations a verdict may list."""
MAX_MISSING = 10
"""Most missing items a verdict may list."""


class VerdictDecision(StrEnum):
    """What the Supervisor decided about one candidate."""

    APPROVE = "approve"
    """The candidate may be released."""
    REJECT = "reject"
    """The candidate breaks at least one rule."""
    INSUFFICIENT = "insufficient"
    """The Supervisor cannot judge with what it was shown; ``missing`` says what it lacks."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Violation(_Strict):
    """One rule the candidate breaks, and where."""

    rule: str = Field(min_length=1, max_length=64)
    """A rule id from the catalogue."""
    span: tuple[int, int]
    """Character offsets ``[start, end)`` into the candidate text."""
    note: str = Field(max_length=500)
    """Why, in a sentence."""


class Verdict(_Strict):
    """The Supervisor's answer: ``{"candidate_sha256", "decision", "violations", "missing"}``.

    A verdict must be consistent with itself: an approval lists no violations, a
    rejection lists at least one, and ``insufficient`` says what is missing. Anything else
    is a broken contract (a guess either way), never read as one of the three.
    """

    candidate_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The digest of the candidate judged, 64 lowercase hex characters."""
    decision: VerdictDecision
    """Approve, reject or insufficient."""
    violations: tuple[Violation, ...] = Field(default=(), max_length=MAX_VIOLATIONS)
    """Rules broken, each with a span into the candidate."""
    missing: tuple[Annotated[str, StringConstraints(min_length=1, max_length=300)], ...] = Field(
        default=(), max_length=MAX_MISSING
    )
    """What the Supervisor would need to judge (for ``insufficient``)."""

    @model_validator(mode="after")
    def _consistent(self) -> Verdict:
        if self.decision is VerdictDecision.APPROVE and self.violations:
            raise ValueError("an approval cannot list violations")
        if self.decision is VerdictDecision.REJECT and not self.violations:
            raise ValueError("a rejection must list at least one violation")
        if self.decision is VerdictDecision.INSUFFICIENT and not self.missing:
            raise ValueError("an insufficient verdict must say what is missing")
        return self


def verdict_sha256(verdict: Verdict) -> str:
    """The digest of a verdict: SHA-256 of its canonical JSON."""
    return sha256_hex(canonical_json(verdict.model_dump(mode="json")))


@dataclass(frozen=True, slots=True)
class VerdictProblem:
    """Why a well-formed verdict still cannot be used for this candidate."""

    reason: ReasonCode
    """``verdict_mismatch`` or ``review_malformed``."""
    detail: str
    """What is wrong, for the trace."""


def check_verdict(
    verdict: Verdict, *, candidate: str, candidate_sha256: str, catalogue: RuleCatalogue
) -> VerdictProblem | None:
    """Check ``verdict`` against the candidate it must judge; ``None`` when it is usable.

    The digest is checked first: spans of a verdict about other text say nothing about
    this one.
    """
    if verdict.candidate_sha256 != candidate_sha256:
        return VerdictProblem(
            ReasonCode.VERDICT_MISMATCH,
            f"verdict names {verdict.candidate_sha256}, candidate is {candidate_sha256}",
        )
    for n, violation in enumerate(verdict.violations):
        if violation.rule not in catalogue:
            return VerdictProblem(
                ReasonCode.REVIEW_MALFORMED,
                f"violations.{n}.rule {violation.rule[:64]!r} is not in the rules catalogue",
            )
        start, end = violation.span
        if not 0 <= start < end <= len(candidate):
            return VerdictProblem(
                ReasonCode.REVIEW_MALFORMED,
                f"violations.{n}.span [{start}, {end}] is outside the candidate "
                f"(0..{len(candidate)}, start before end)",
            )
    return None
