"""Model answers for scripted providers and simulator scenarios.

As a risk assessor (L1 or L2) would write them, and the Supervisor verdicts the gate
tests script (``{{candidate_sha256}}`` is filled in by the simulator).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

__all__ = [
    "APPROVE",
    "CRISIS_WORDS",
    "DIMENSIONS",
    "FLAGS",
    "LOW",
    "REJECT",
    "answer",
    "by_message",
    "report",
]

DIMENSIONS = (
    "depression",
    "anxiety",
    "loneliness",
    "hopelessness",
    "trapped",
    "farewell",
    "arranging",
    "agitation",
)
FLAGS = ("fiction", "quote", "third_party", "joke")

APPROVE = json.dumps(
    {"candidate_sha256": "{{candidate_sha256}}", "decision": "approve", "violations": []}
)
"""A Supervisor verdict approving the candidate it was shown."""
REJECT = json.dumps(
    {
        "candidate_sha256": "{{candidate_sha256}}",
        "decision": "reject",
        "violations": [{"rule": "dismissive", "span": [0, 4], "note": "cold"}],
    }
)
"""A Supervisor verdict rejecting it (rule ``dismissive`` on its first four characters)."""


def report(
    level: str = "critical",
    confidence: Any = 0.95,
    *,
    flags: Iterable[str] = (),
    evidence: str = "plan and means named",
    **overrides: Any,
) -> dict[str, Any]:
    """A risk-assessment answer as a model would write it."""
    flagged = set(flags)
    data: dict[str, Any] = {
        "risk_level": level,
        "confidence": confidence,
        "dimensions": {name: 0.5 for name in DIMENSIONS},
        "evidence": evidence,
        "context_flags": {name: name in flagged for name in FLAGS},
    }
    data.update(overrides)
    return data


def answer(level: str = "critical", confidence: Any = 0.95, **kwargs: Any) -> str:
    """:func:`report` as the JSON text of a model answer."""
    return json.dumps(report(level, confidence, **kwargs))


LOW = answer("low", 0.9, evidence="an ordinary day")
"""An assessment of a message that expresses no risk."""

CRISIS_WORDS = (
    r"(?i)want to die|kill myself|suicid|end (?:it all|my life)|pills|jump|overdose"
    r"|不想活|想死|自杀|自殺|轻生|輕生"
)
"""What the tests' crisis messages say (searched in a model's last message)."""


def by_message(crisis: str, calm: str = LOW) -> list[dict[str, Any]]:
    """An assessor's rules: ``crisis`` for a message with a crisis word, ``calm`` otherwise.

    ``[risk] l1_policy = "every"`` (the default) has L1 read every message: a test that
    scripts L1 for its crisis message scripts it for its calm ones too.
    """
    return [{"match": CRISIS_WORDS, "content": crisis}, {"content": calm}]
