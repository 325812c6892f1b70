"""Model answers for scripted providers and simulator scenarios.

As a risk assessor (L1 or L2) would write them, and the Supervisor verdicts the gate
tests script (``{{candidate_sha256}}`` is filled in by the simulator).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

__all__ = ["APPROVE", "DIMENSIONS", "FLAGS", "REJECT", "answer", "report"]

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
