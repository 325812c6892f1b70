"""What one gate run produced: its attempts, its outcome, and its decision record.

:class:`GateOutcome` is what a caller (the gateway, the CLI) reads: the decision, the
reason, the digests, the delivered text, the trace id, the verdict, the rules fired,
timings and calls per role. :func:`decision_record` is the same run as the JSON the trace
keeps, written before the reply is handed over; ``foureyes trace show`` reads it back.
Neither holds a rejected candidate's text: only its digest and length. The record holds a
verdict's notes and missing items and the open unknowns as
:class:`~foureyes.core.trace.PrivateText`, which the trace writer keeps like raw input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.core.roles import Role
from foureyes.core.trace import PrivateText
from foureyes.gate.candidate import ToolCall
from foureyes.gate.fallback import fallback_source, family_of
from foureyes.gate.gate import Outcome
from foureyes.gate.release import PartKind, Release
from foureyes.gate.rules import RuleFinding
from foureyes.gate.segments import SegmentStep
from foureyes.gate.supervisor import Review
from foureyes.gate.verdict import Verdict

__all__ = [
    "Attempt",
    "GateOutcome",
    "RECORD_SCHEMA",
    "RoleUsage",
    "Timings",
    "decision_record",
]

RECORD_SCHEMA = "foureyes.gate.decision/1"
"""The ``schema`` of a decision record; readers check it before interpreting one."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One draft and its judgement; a run has one, plus one per revision."""

    revision: int
    """0 for the first draft, 1.. for revisions."""
    candidate_sha256: str | None
    """Digest of the draft; ``None`` when drafting failed."""
    candidate_chars: int | None
    """Length of the draft in characters."""
    draft_route: str | None
    """Route that wrote the draft."""
    findings: tuple[RuleFinding, ...]
    """Rules checked in code that fired on the draft (no review then)."""
    review: Review | None
    """The verdict obtained, with any problem it has for this draft."""
    failure: ReasonCode | None
    """The reason a stage of this attempt failed, per that stage's table."""
    error: str | None
    """The failure's class and message, for the trace."""
    reason: ReasonCode
    """What this attempt alone decided."""

    def as_json(self) -> dict[str, Any]:
        """The attempt as recorded in the trace."""
        review: dict[str, Any] | None = None
        if self.review is not None:
            problem = self.review.problem
            review = {
                "verdict_sha256": self.review.verdict_sha256,
                "verdict": _verdict_json(self.review.verdict),
                "route": self.review.route,
                "offline": self.review.offline,
                "calls": self.review.attempts,
                "problem": None
                if problem is None
                else {"reason": problem.reason.value, "detail": problem.detail},
            }
        return {
            "revision": self.revision,
            "candidate_sha256": self.candidate_sha256,
            "candidate_chars": self.candidate_chars,
            "draft_route": self.draft_route,
            "rules_fired": [f.as_json() for f in self.findings],
            "review": review,
            "failure": None if self.failure is None else self.failure.value,
            "error": self.error,
            "reason": self.reason.value,
        }


def _verdict_json(verdict: Verdict) -> dict[str, Any]:
    """The verdict as recorded, its model-written notes and missing items as private text.

    They may restate the user's words, so they are kept only as configured.
    """
    document = verdict.model_dump(mode="json")
    document["violations"] = [
        {**violation, "note": PrivateText(violation["note"])}
        for violation in document["violations"]
    ]
    document["missing"] = [PrivateText(item) for item in document["missing"]]
    return document


@dataclass(frozen=True, slots=True)
class RoleUsage:
    """What one role's calls cost in a run."""

    calls: int
    """Calls made (failed ones included)."""
    model_ms: float
    """Wall time spent in those calls."""
    prompt_tokens: int
    """Prompt tokens reported."""
    completion_tokens: int
    """Completion tokens reported."""
    cost_usd: float
    """Cost at the route's prices (0 without prices)."""
    routes: tuple[str, ...]
    """Routes that answered."""

    def as_json(self) -> dict[str, Any]:
        """The usage as recorded in the trace."""
        return {
            "calls": self.calls,
            "model_ms": round(self.model_ms, 3),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "routes": list(self.routes),
        }


@dataclass(frozen=True, slots=True)
class Timings:
    """Where a run's time went, in milliseconds."""

    total_ms: float
    """From the start of the run to the decision record written."""
    model_ms: float
    """Inside model calls (the metered caller, with its ledger and call records)."""
    gate_ms: float
    """The gate's own work: assembly, rules, decision, trace writes."""

    def as_json(self) -> dict[str, float]:
        """The timings as recorded in the trace."""
        return {
            "total_ms": round(self.total_ms, 3),
            "model_ms": round(self.model_ms, 3),
            "gate_ms": round(self.gate_ms, 3),
        }


@dataclass(frozen=True, slots=True)
class GateOutcome:
    """Which text went out for one reply, based on what, and if no candidate did, why not."""

    decision: Outcome
    """``released`` or ``fallback``."""
    reason: ReasonCode
    """``approved``, or the fallback's reason."""
    candidate_sha256: str | None
    """Digest of the released candidate; ``None`` for a fallback."""
    delivered_sha256: str
    """Digest of the delivered text (candidate plus any code-rendered parts)."""
    text: str
    """The delivered text."""
    trace_id: str
    """The run's trace."""
    verdict: Verdict | None
    """The last verdict obtained, if any."""
    rules_fired: tuple[RuleFinding, ...]
    """Rules checked in code that fired on the last draft."""
    attempts: tuple[Attempt, ...]
    """Every draft and its judgement."""
    timings: Timings
    """Where the time went."""
    usage: Mapping[Role, RoleUsage]
    """Calls, tokens and cost per role."""
    policy: GenerationPolicy
    """The generation policy applied."""
    locale: Locale
    """The language of code-rendered text."""
    region: str | None
    """The user's region, if known."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The released candidate's tool calls, exactly as digested; none for a fallback."""
    segments: tuple[SegmentStep, ...] = ()
    """In segment release, the segments released, in order (the text may end with the
    fallback continuation after them); empty for a reply released whole."""

    @property
    def calls(self) -> dict[Role, int]:
        """Model calls per role."""
        return {role: usage.calls for role, usage in self.usage.items()}


def decision_record(
    *,
    release: Release,
    attempts: Sequence[Attempt],
    context: Mapping[str, Any],
    usage: Mapping[Role, RoleUsage],
    timings: Timings,
    limits: Mapping[str, Any],
) -> dict[str, Any]:
    """The decision record of a run, as the trace keeps it (JSON).

    Args:
        release: the release about to be delivered.
        attempts: every draft and its judgement.
        context: what the review was based on (turns shown, sources, open unknowns).
        usage: calls, tokens and cost per role.
        timings: where the time went.
        limits: the run's limits and what was used of them.
    """
    decision = release.decision
    return {
        "schema": RECORD_SCHEMA,
        "outcome": decision.outcome.value,
        "reason": decision.reason.value,
        "fallback_family": None if decision.released else family_of(decision.reason).value,
        "fallback_wording": None
        if decision.released
        else {
            "mode": release.mode.value,
            "source": fallback_source(decision.reason, release.mode, release.texts),
        },
        "policy": release.policy.value,
        "locale": release.locale.value,
        "region": release.region,
        "candidate_sha256": decision.approved_sha256,
        "delivered_sha256": release.sha256,
        "delivered_chars": len(release.text),
        "parts": [
            {"kind": p.kind.value, "sha256": p.sha256, "chars": len(p.text)} for p in release.parts
        ],
        "code_rendered": [p.kind.value for p in release.parts if p.kind is not PartKind.CANDIDATE],
        "tool_calls_delivered": len(release.tool_calls),
        "attempts": [a.as_json() for a in attempts],
        "context": dict(context),
        "usage": {role.value: u.as_json() for role, u in usage.items()},
        "timings": timings.as_json(),
        "limits": dict(limits),
    }
