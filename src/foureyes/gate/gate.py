"""The gate's decision: a pure function from what is known about one reply to release or fallback.

Nothing here waits, reads a clock, touches a store or calls a model: the runner gathers
the facts (policy, candidate digest, rule findings, the verdict, any stage failure) and
:func:`decide` turns them into a :class:`Decision`. A released decision can only come from
:func:`decide`, and it carries the one digest that was approved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from foureyes.core.errors import UsageError
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.gate.candidate import ToolCall
from foureyes.gate.rules import TOOL_RULE, RuleCatalogue, RuleContext, RuleFinding
from foureyes.gate.verdict import Verdict, VerdictDecision

__all__ = ["Decision", "Outcome", "ToolCallCheck", "check_tool_calls", "decide", "rule_reason"]


class Outcome(StrEnum):
    """What went out: the wire strings of the gateway's ``foureyes.decision``."""

    RELEASED = "released"
    """The approved candidate (plus any code-rendered parts the policy requires)."""
    FALLBACK = "fallback"
    """A restricted, code-rendered reply; no model text."""


class Decision:
    """The outcome code computed for one reply: release, or fallback with one reason.

    Immutable. Build fallbacks with :meth:`fallback`; a release comes only from
    :func:`decide`, so no caller can mint an approval for a digest no verdict approved.
    """

    __slots__ = ("_approved_sha256", "_outcome", "_reason")
    _outcome: Outcome
    _reason: ReasonCode
    _approved_sha256: str | None

    def __init__(self) -> None:
        raise UsageError("a Decision comes from decide() or Decision.fallback()")

    @classmethod
    def _make(cls, outcome: Outcome, reason: ReasonCode, approved: str | None) -> Decision:
        decision = object.__new__(cls)
        object.__setattr__(decision, "_outcome", outcome)
        object.__setattr__(decision, "_reason", reason)
        object.__setattr__(decision, "_approved_sha256", approved)
        return decision

    @classmethod
    def fallback(cls, reason: ReasonCode) -> Decision:
        """A fallback for ``reason``.

        Raises:
            UsageError: ``reason`` is ``approved``.
        """
        if not reason.is_fallback:
            raise UsageError("a fallback needs a fallback reason, not 'approved'")
        return cls._make(Outcome.FALLBACK, reason, None)

    @property
    def outcome(self) -> Outcome:
        """Released or fallback."""
        return self._outcome

    @property
    def reason(self) -> ReasonCode:
        """``approved`` for a release, the fallback's reason otherwise."""
        return self._reason

    @property
    def approved_sha256(self) -> str | None:
        """The digest the verdict approved (a release only)."""
        return self._approved_sha256

    @property
    def released(self) -> bool:
        """Whether the candidate goes out."""
        return self._outcome is Outcome.RELEASED

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Decision is immutable; cannot set {name}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decision):
            return NotImplemented
        return (self.outcome, self.reason, self.approved_sha256) == (
            other.outcome,
            other.reason,
            other.approved_sha256,
        )

    def __hash__(self) -> int:
        return hash((self.outcome, self.reason, self.approved_sha256))

    def __repr__(self) -> str:
        return (
            f"Decision(outcome={self.outcome.value!r}, reason={self.reason.value!r}, "
            f"approved_sha256={self.approved_sha256!r})"
        )


def decide(
    policy: GenerationPolicy,
    *,
    candidate_sha256: str | None,
    findings: Sequence[RuleFinding],
    verdict: Verdict | None,
    failure: ReasonCode | None,
) -> Decision:
    """Release or fall back, from everything known about one candidate.

    The first matching line wins:

    1. the policy forbids generation: ``generation_prohibited`` (invariant 2: no
       approval lifts a prohibition set upstream);
    2. a stage failed (draft, review, deadline, budget): that stage's reason;
    3. there is no candidate: ``draft_failed``;
    4. a tool call is not allowed (rule ``tool_not_allowed``): ``tool_not_allowed``;
       another rule checked in code fired: ``rule_violation``; whatever the verdict says;
    5. there is no verdict: ``review_failed`` (invariant 1: no verdict is no approval);
    6. the verdict names another digest: ``verdict_mismatch`` (invariant 1);
    7. the verdict rejects, or cannot judge: ``rejected``, ``insufficient``;
    8. otherwise the verdict approved this very digest: release it.

    Args:
        policy: what triage allows for this message.
        candidate_sha256: digest of the candidate, ``None`` when there is no draft.
        findings: what the rules checked in code found in the candidate.
        verdict: the Supervisor's verdict, already checked for rule ids and spans.
        failure: the reason a stage failed, mapped by that stage's table.

    Raises:
        UsageError: ``failure`` is ``approved``, which is not a failure.
    """
    if not policy.allows_generation:
        return Decision.fallback(ReasonCode.GENERATION_PROHIBITED)
    if failure is not None:
        if not failure.is_fallback:
            raise UsageError("'approved' is not a stage failure")
        return Decision.fallback(failure)
    if candidate_sha256 is None:
        return Decision.fallback(ReasonCode.DRAFT_FAILED)
    if (broken := rule_reason(findings)) is not None:
        return Decision.fallback(broken)
    if verdict is None:
        return Decision.fallback(ReasonCode.REVIEW_FAILED)
    if verdict.candidate_sha256 != candidate_sha256:
        return Decision.fallback(ReasonCode.VERDICT_MISMATCH)
    if verdict.decision is VerdictDecision.REJECT:
        return Decision.fallback(ReasonCode.REJECTED)
    if verdict.decision is VerdictDecision.INSUFFICIENT:
        return Decision.fallback(ReasonCode.INSUFFICIENT)
    return Decision._make(Outcome.RELEASED, ReasonCode.APPROVED, candidate_sha256)


def rule_reason(findings: Sequence[RuleFinding]) -> ReasonCode | None:
    """The fallback reason the rules checked in code give, ``None`` when none fired.

    A call to a tool that is not allowed is ``tool_not_allowed`` (whatever else fired);
    any other finding is ``rule_violation``: line 4 of :func:`decide`.
    """
    if any(f.rule == TOOL_RULE for f in findings):
        return ReasonCode.TOOL_NOT_ALLOWED
    if findings:
        return ReasonCode.RULE_VIOLATION
    return None


@dataclass(frozen=True, slots=True)
class ToolCallCheck:
    """What the rules checked in code say of tool calls alone (:func:`check_tool_calls`).

    Allowed means only that no rule the gate checks in code forbids the calls (the
    ``[gate]`` tool lists first): no Supervisor has seen them, so it is not an approval.
    """

    tool_calls: tuple[ToolCall, ...]
    """The calls checked, arguments parsed (:class:`~foureyes.gate.candidate.ToolCall`)."""
    findings: tuple[RuleFinding, ...]
    """What fired; empty when the calls are allowed."""
    reason: ReasonCode | None
    """``tool_not_allowed`` or ``rule_violation`` (:func:`rule_reason`); ``None``: allowed."""

    @property
    def allowed(self) -> bool:
        """Whether no rule checked in code forbids the calls."""
        return self.reason is None


def check_tool_calls(
    catalogue: RuleCatalogue, context: RuleContext, tool_calls: Sequence[ToolCall]
) -> ToolCallCheck:
    """Judge ``tool_calls`` as the gate judges a candidate of these calls and no text.

    The same rules on the same input as a draft of tool calls only gets before review
    (``gate.tools_allow`` / ``tools_deny`` by name, and any rule plugin that reads
    ``RuleInput.tool_calls``), so a call refused here is refused in a draft too. Pure:
    no model, no store, no clock.

    Raises:
        UsageError: ``tool_calls`` is empty (there is nothing to judge).
    """
    calls = tuple(tool_calls)
    if not calls:
        raise UsageError("check_tool_calls needs at least one tool call")
    findings = catalogue.check("", context, calls)
    return ToolCallCheck(calls, findings, rule_reason(findings))
