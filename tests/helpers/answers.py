"""Model answers as a risk assessor (L1 or L2) would write them, for scripted providers."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

__all__ = ["DIMENSIONS", "FLAGS", "answer", "report"]

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
