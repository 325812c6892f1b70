"""Risk levels with a real total order, and the triage status that is not a level.

A ``StrEnum`` of level names would sort alphabetically (``critical < high < low <
medium``), which is exactly the bug that lets a critical case sort below a low one. Levels
here compare by severity rank, and ``unknown`` is a :class:`RiskStatus`, never a level, so
no comparison can treat a failed assessment as low or as high.
"""

from __future__ import annotations

from enum import Enum, StrEnum
from functools import total_ordering
from typing import Any

__all__ = ["RiskLevel", "RiskStatus"]


@total_ordering
class RiskLevel(Enum):
    """Severity of a risk assessment: ``low < medium < high < critical``.

    ``str(level)`` and ``level.value`` are the pinned wire strings of docs/design.md 5.
    """

    LOW = "low"
    """Everyday negative mood, no sign of risk to life."""
    MEDIUM = "medium"
    """Marked distress or passive thoughts of death, no intent."""
    HIGH = "high"
    """Wish to die or self-harm with some intent; needs resources now."""
    CRITICAL = "critical"
    """Plan, means, timing or an attempt under way."""

    @property
    def rank(self) -> int:
        """Position in the severity order, 0 for low."""
        return _RANK[self]

    def __lt__(self, other: Any) -> bool:
        if not isinstance(other, RiskLevel):
            return NotImplemented
        return self.rank < other.rank

    def __str__(self) -> str:
        return self.value

    @property
    def is_elevated(self) -> bool:
        """Whether the level is high or critical (the levels that call for L2 and resources)."""
        return self.rank >= _RANK[RiskLevel.HIGH]

    @classmethod
    def capped(cls, level: RiskLevel, cap: RiskLevel) -> RiskLevel:
        """``level``, lowered to ``cap`` if it is above it."""
        return min(level, cap)


_RANK = {level: rank for rank, level in enumerate(RiskLevel)}


class RiskStatus(StrEnum):
    """Whether a triage produced a usable level at all."""

    OK = "ok"
    """A level was assessed."""
    UNKNOWN = "unknown"
    """No usable assessment (failure, limit, drop); never read as low or as high."""
    UNSCREENED = "unscreened"
    """The message is in a language the screen does not cover
    (:func:`~foureyes.core.locale.is_covered`) and no model assessed it: L0 cannot clear
    it and the offline assessor reads no other language, so it is never read as low."""
    L0_ONLY = "l0_only"
    """``risk.l1_policy = "every"`` would have had a model read the message, but a daily
    limit of L1 assessments (the conversation's or the key's) was reached: L0 alone
    screened it and did not escalate it. Its level is L0's ``low``, said as no model's."""
