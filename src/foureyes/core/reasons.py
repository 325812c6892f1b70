"""Reason codes: the closed set of outcomes a decision can record (docs/design.md 5)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ReasonCode"]


class ReasonCode(StrEnum):
    """Why a reply was released, or why the restricted fallback went out instead.

    Values are the pinned wire strings; tests and users rely on them.
    """

    APPROVED = "approved"
    """A valid verdict approved the exact digest that was released."""
    REJECTED = "rejected"
    """The Supervisor rejected the candidate."""
    INSUFFICIENT = "insufficient"
    """The Supervisor said it cannot judge with the information it was given."""
    REVIEW_TIMEOUT = "review_timeout"
    """The Supervisor gave no answer in time."""
    REVIEW_FAILED = "review_failed"
    """The Supervisor's route failed (connection, HTTP error, bad response)."""
    REVIEW_MALFORMED = "review_malformed"
    """The verdict broke its contract (not JSON, bad enum, unknown rule, span out of range)."""
    VERDICT_MISMATCH = "verdict_mismatch"
    """The verdict names a digest other than the candidate's."""
    RULE_VIOLATION = "rule_violation"
    """A deterministic rule fired on the candidate, whatever the Supervisor said."""
    DRAFT_FAILED = "draft_failed"
    """The Counselor produced no usable draft."""
    GENERATION_PROHIBITED = "generation_prohibited"
    """Upstream (triage) forbade free generation; no approval can lift that."""
    DEADLINE_EXCEEDED = "deadline_exceeded"
    """The run's deadline passed before a decision could be reached."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """A call or spend budget ran out before a decision could be reached."""
    TOOL_NOT_ALLOWED = "tool_not_allowed"
    """The candidate calls a tool that ``gate.tools_deny`` names or that a non-empty
    ``gate.tools_allow`` does not; settled in code, before any review."""
    INPUT_BLOCKED = "input_blocked"
    """An input check found what ``[input]`` blocks (in the message, a source or a tool
    result): no model drafted a reply."""
    INPUT_RESTRICTED = "input_restricted"
    """The input was restricted (a finding, or a check that could not judge) and the
    draft carried tool calls, which a restricted input may not release."""
    INPUT_UNCHECKED = "input_unchecked"
    """An input check could not judge (timeout, malformed answer, wrong digest, budget,
    route error, a text it refused) and ``[input] on_failure`` is ``block``."""

    @property
    def is_fallback(self) -> bool:
        """Whether this reason sends the restricted fallback instead of the candidate."""
        return self is not ReasonCode.APPROVED

    @property
    def is_review_failure(self) -> bool:
        """Whether the review itself failed (as opposed to judging the candidate)."""
        return self in _REVIEW_FAILURES


_REVIEW_FAILURES = frozenset(
    {ReasonCode.REVIEW_TIMEOUT, ReasonCode.REVIEW_FAILED, ReasonCode.REVIEW_MALFORMED}
)
