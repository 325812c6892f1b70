"""Model answers for pipeline tests: risk assessments as L1/L2 would write them."""

from __future__ import annotations

from tests.helpers.answers import answer


def assessment(level: str, confidence: float = 0.95, *, flags: tuple[str, ...] = ()) -> str:
    """A risk assessment's JSON text."""
    return answer(level, confidence, flags=flags, evidence="as the model saw it")
