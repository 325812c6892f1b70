"""Model answers for pipeline tests: risk assessments as L1/L2 would write them."""

from __future__ import annotations

import json

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


def assessment(level: str, confidence: float = 0.95, *, flags: tuple[str, ...] = ()) -> str:
    """A risk assessment's JSON text."""
    return json.dumps(
        {
            "risk_level": level,
            "confidence": confidence,
            "dimensions": {name: 0.5 for name in DIMENSIONS},
            "evidence": "as the model saw it",
            "context_flags": {
                flag: flag in flags for flag in ("fiction", "quote", "third_party", "joke")
            },
        }
    )
