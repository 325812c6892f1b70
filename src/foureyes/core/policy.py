"""Generation policy: what triage allows the Counselor to do for one message."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["GenerationPolicy"]


class GenerationPolicy(StrEnum):
    """Set upstream (by triage) and enforced by the gate; no approval can lift it."""

    NORMAL = "normal"
    """Free generation, subject to review."""
    RESTRICTED = "restricted"
    """Free generation, but the delivered reply must carry code-rendered crisis resources."""
    PROHIBITED = "prohibited"
    """No free generation: a code-rendered crisis reply goes out; any draft is discarded."""

    @property
    def allows_generation(self) -> bool:
        """Whether a Counselor draft may be released at all under this policy."""
        return self is not GenerationPolicy.PROHIBITED

    @property
    def restriction(self) -> int:
        """How much the policy restricts the reply: 0 for normal, 2 for prohibited."""
        return _RESTRICTION[self]

    def stricter(self, other: GenerationPolicy) -> GenerationPolicy:
        """The more restrictive of this policy and ``other``."""
        return other if other.restriction > self.restriction else self


_RESTRICTION = {policy: rank for rank, policy in enumerate(GenerationPolicy)}
