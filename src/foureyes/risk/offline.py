"""The offline engine's L1 and L2 assessors: the L0 lexicon, honestly reported.

With no model, an assessment can only say what the keyword lexicon found. Both responders
read the text from ``request.subject["text"]``, map the lexicon's categories to a level
and the IS PATH WARM dimensions, and always report :data:`OFFLINE_CONFIDENCE`, which is
below the lowest confirmation threshold the config allows (``risk.confirm_confidence``
must exceed 0.5). So offline mode can show crisis resources, but it can never confirm a
crisis and so never alert anyone (DESIGN.md 4, invariant 5). The evidence says it is a
lexicon match and names categories only, never the user's words.

L2 here is the same lexicon, not an independent reviewer; its evidence says so.
"""

from __future__ import annotations

import functools
import json

from foureyes.core.errors import RouteBadResponse
from foureyes.core.roles import Role
from foureyes.llm.offline import offline_responder
from foureyes.llm.provider import ChatRequest
from foureyes.risk.l0 import L0Category, L0Gate
from foureyes.risk.levels import RiskLevel

__all__ = ["OFFLINE_CONFIDENCE", "offline_report"]

OFFLINE_CONFIDENCE = 0.4
"""The confidence of every offline assessment: a lexicon is never sure."""

_CRITICAL = frozenset({L0Category.PLAN_MEANS, L0Category.FAREWELL})
_HIGH = frozenset({L0Category.SUICIDAL_IDEATION, L0Category.SELF_HARM, L0Category.PAST_ATTEMPT})

_DIMENSIONS: dict[str, frozenset[L0Category]] = {
    "depression": _HIGH,
    "anxiety": frozenset(),
    "loneliness": frozenset({L0Category.BURDEN}),
    "hopelessness": frozenset({L0Category.HOPELESSNESS}),
    "trapped": frozenset({L0Category.TRAPPED}),
    "farewell": frozenset({L0Category.FAREWELL}),
    "arranging": frozenset({L0Category.FAREWELL, L0Category.PLAN_MEANS}),
    "agitation": frozenset(),
}
# The lexicon cannot tell these apart, so it never claims them.
_NO_FLAGS = {"fiction": False, "quote": False, "third_party": False, "joke": False}


@functools.cache
def _gate() -> L0Gate:
    return L0Gate.default()


def _level(escalate: bool, categories: frozenset[L0Category]) -> RiskLevel:
    if not escalate:
        return RiskLevel.LOW
    if categories & _CRITICAL:
        return RiskLevel.CRITICAL
    if categories & _HIGH:
        return RiskLevel.HIGH
    return RiskLevel.MEDIUM


def offline_report(text: str, *, source: str) -> str:
    """The offline assessment of ``text`` as the JSON a model would answer.

    ``source`` opens the evidence: it says where the reading came from.
    """
    result = _gate().scan(text)
    weights: dict[L0Category, float] = {}
    for match in result.matches:
        weights[match.category] = max(weights.get(match.category, 0.0), match.weight)
    categories = sorted(c.value for c in result.categories)
    evidence = f"{source}: " + (", ".join(categories) or "no match")
    report = {
        "risk_level": _level(result.escalate, result.categories).value,
        "confidence": OFFLINE_CONFIDENCE,
        "dimensions": {
            name: round(max((weights.get(c, 0.0) for c in cats), default=0.0), 3)
            for name, cats in _DIMENSIONS.items()
        },
        "evidence": evidence[:100],
        "context_flags": _NO_FLAGS,
    }
    return json.dumps(report, ensure_ascii=False)


def _text(request: ChatRequest) -> str:
    text = request.subject.get("text")
    if text is None:
        raise RouteBadResponse("offline", "the offline assessor needs subject['text']")
    return text


@offline_responder(Role.RISK_L1)
def _assess_l1(request: ChatRequest) -> str:
    """L1 offline: the lexicon's reading of the current text."""
    return offline_report(_text(request), source="offline lexicon")


@offline_responder(Role.RISK_L2)
def _assess_l2(request: ChatRequest) -> str:
    """L2 offline: the same lexicon (so no independent review), said so in the evidence."""
    return offline_report(_text(request), source="offline lexicon, not independent")
