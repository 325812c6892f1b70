"""What a triage returns: its outcome, the reasons it was suppressed, and its per-tier facts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.core.tenancy import LOCAL_TENANT, scoped_conversation
from foureyes.risk.assess import Assessment, Tier
from foureyes.risk.confirm import Confirmation, policy_for
from foureyes.risk.l0 import L0Result
from foureyes.risk.levels import RiskLevel, RiskStatus
from foureyes.risk.trend import Trend

__all__ = ["RunPurpose", "SuppressReason", "TriageResult", "l0_summary"]


class RunPurpose(StrEnum):
    """Why a triage ran. Only live triages feed trends and can lead to a real alert."""

    LIVE = "live"
    """Real traffic."""
    TEST = "test"
    """A test or a simulation; recorded, kept apart, never alerts anyone."""
    CALIBRATION = "calibration"
    """A calibration run over labelled cases; kept apart like tests."""


class SuppressReason(StrEnum):
    """Why a triage is ``unknown``, or why its L2 (and so any confirmation) is missing.

    Each failure has its own code (docs/design.md 4, invariant 4). The ``l2_*`` codes leave the
    status ``ok`` with L1's assessment, unconfirmed; every other code makes it ``unknown``.
    """

    TEXT_TOO_LONG = "text_too_long"
    """The text exceeds ``risk.max_text_chars``; no model saw it."""
    CONCURRENCY_DROP = "concurrency_drop"
    """An analysis of the same conversation was running; this one was dropped, not queued."""
    DAILY_CAP = "daily_cap"
    """The conversation used its ``risk.l1_daily_limit`` L1 assessments for the UTC day."""
    KEY_DAILY_CAP = "key_daily_cap"
    """The caller's key (its tenant) used its ``risk.l1_daily_limit_per_key`` L1
    assessments for the UTC day, over all its conversations."""
    BUDGET = "budget"
    """The L1 route's daily calls or USD budget, or the triage's call budget, is used up."""
    DEADLINE = "deadline"
    """The triage's deadline passed before L1 could start."""
    L1_TIMEOUT = "l1_timeout"
    """L1's route gave no answer in time."""
    L1_FAILED = "l1_failed"
    """L1's route failed: connection, HTTP error (429 included), unusable response."""
    L1_MALFORMED = "l1_malformed"
    """L1's answer broke the schema twice (first answer and its one retry)."""
    L2_TIMEOUT = "l2_timeout"
    """L2's route gave no answer in time; L1 stands, unconfirmed."""
    L2_FAILED = "l2_failed"
    """L2's route failed; L1 stands, unconfirmed."""
    L2_MALFORMED = "l2_malformed"
    """L2's answer broke the schema twice; L1 stands, unconfirmed."""
    L2_BUDGET = "l2_budget"
    """A budget ran out before L2; L1 stands, unconfirmed."""
    L2_DEADLINE = "l2_deadline"
    """The deadline passed before L2; L1 stands, unconfirmed."""
    STORE_FAILED = "store_failed"
    """The store could not record the triage: nothing is confirmed (no alert), but the
    reply keeps the policy the triage computed, at least ``restricted``."""

    @property
    def keeps_l1(self) -> bool:
        """Whether the triage keeps L1's assessment (only L2 was lost)."""
        return self.value.startswith("l2_")


def l0_summary(l0: L0Result, *, with_terms: bool) -> dict[str, Any]:
    """The keyword gate's result as JSON.

    Matched terms and dampening cues only when ``with_terms``: both are words of the
    user's text, so records keep only categories, spans and how many cues dampened.
    """
    matches = []
    for m in l0.matches:
        match: dict[str, Any] = {
            "category": str(m.category),
            "weight": m.weight,
            "start": m.start,
            "end": m.end,
        }
        if with_terms:
            match["term"] = m.term
        matches.append(match)
    summary: dict[str, Any] = {
        "escalate": l0.escalate,
        "signals": sorted(str(signal) for signal in l0.signals),
        "score": l0.score,
        "screen_score": None if l0.screen_score is None else round(l0.screen_score, 4),
        "categories": sorted(str(c) for c in l0.categories),
        "matches": matches,
        "dampened": len(l0.dampened_by),
    }
    if with_terms:
        summary["dampened_by"] = sorted(str(d) for d in l0.dampened_by)
    return summary


@dataclass(frozen=True, slots=True)
class TriageResult:
    """The outcome of one triage: what the pipeline acts on and the store records.

    ``level`` is ``None`` exactly when ``status`` is ``unknown`` or ``unscreened``;
    ``confirmed`` is only ever true with two independent critical assessments (see
    :mod:`foureyes.risk.confirm`), and never for a triage that could not be recorded
    (:meth:`unrecorded`).
    """

    conversation_id: str
    """The conversation, as the caller named it (or the fresh id it was given)."""
    purpose: RunPurpose
    """Live, test or calibration."""
    status: RiskStatus
    """``ok``; ``unknown`` when no usable assessment exists; ``unscreened`` when the
    message's language is not covered and no model assessed it."""
    level: RiskLevel | None
    """The level (the higher of L1 and L2), ``None`` when unknown."""
    confirmed: bool
    """Whether double confirmation held."""
    tier: Tier
    """The deepest tier the triage reached (attempted)."""
    policy: GenerationPolicy
    """What the Counselor may do for this message: :func:`~foureyes.risk.confirm.policy_for`
    of the level, or for an unrecorded triage the stricter of that and ``restricted``."""
    reasons: tuple[SuppressReason, ...]
    """Suppress reasons, in the order they arose; empty when nothing failed."""
    locale: Locale
    """The message's language (for resources and fallbacks)."""
    l0: L0Result
    """The keyword gate's result."""
    l1: Assessment | None
    """L1's assessment, when it ran and succeeded."""
    l2: Assessment | None
    """L2's assessment, when it ran and succeeded."""
    confirmation: Confirmation | None
    """The confirmation check, when L1 succeeded."""
    trend: Trend | None
    """The trend shown to L2, when L2 ran."""
    calls: int
    """Model calls that returned (retries included)."""
    cost_usd: float
    """Their cost at the routes' prices."""
    latency_ms: float
    """Wall time of the whole triage."""
    trace_id: str | None = None
    """The trace run, when one was opened."""
    assessment_id: str | None = None
    """The stored assessment, once recorded."""
    tenant: str = LOCAL_TENANT
    """The namespace of ``conversation_id`` (:mod:`foureyes.core.tenancy`)."""
    covered: bool = True
    """Whether the screen covers the message's language; ``False`` makes the status
    ``unscreened`` unless a model assessed the message."""
    path: str | None = None
    """Why the message went to L1 (:class:`~foureyes.risk.triage.ScreenPath`'s value);
    ``None``: it stopped at L0."""
    crisis: bool = False
    """Whether the conversation was in crisis when the message came (an escalated earlier
    turn, recorded or in the request's history): L1 read the conversation, and the policy
    is at least ``restricted`` unless every model assessment said ``low`` unflagged."""

    @property
    def conversation_key(self) -> str:
        """The conversation's key in the store: ``conversation_id`` under ``tenant``."""
        return scoped_conversation(self.tenant, self.conversation_id)

    @property
    def reason(self) -> SuppressReason | None:
        """The first suppress reason, if any."""
        return self.reasons[0] if self.reasons else None

    def with_assessment_id(self, assessment_id: str) -> TriageResult:
        """A copy naming its stored record."""
        return dataclasses.replace(self, assessment_id=assessment_id)

    def unrecorded(self) -> TriageResult:
        """This triage as it stands when the store could not record it (``store_failed``).

        Degradation keeps both directions (docs/design.md 4, invariant 5). Towards no alert: the
        status is ``unknown``, the level ``None`` and nothing is confirmed, so no guardian
        alert can follow an outcome that is not on record. Towards more restriction: the
        policy is the stricter of the one computed and an ``unknown`` triage's, so a
        confirmed crisis stays ``prohibited``. What L1 and L2 said stays, as what was
        computed.
        """
        unknown = policy_for(None, confirmed=False)
        return dataclasses.replace(
            self,
            status=RiskStatus.UNKNOWN,
            level=None,
            confirmed=False,
            policy=self.policy.stricter(unknown),
            reasons=(*self.reasons, SuppressReason.STORE_FAILED),
            assessment_id=None,
        )

    def risk_block(self) -> dict[str, Any]:
        """The ``foureyes.risk`` object of the HTTP response (docs/design.md 5)."""
        return {
            "status": self.status.value,
            "level": None if self.level is None else self.level.value,
            "confirmed": self.confirmed,
            "tier": self.tier.value,
        }

    def as_dict(self, *, with_evidence: bool) -> dict[str, Any]:
        """Everything as JSON.

        Model evidence and matched terms, which may quote the user's words, only when
        ``with_evidence``.
        """
        return self.risk_block() | {
            "conversation_id": self.conversation_id,
            "purpose": self.purpose.value,
            "covered": self.covered,
            "path": self.path,
            "crisis": self.crisis,
            "policy": self.policy.value,
            "reasons": [r.value for r in self.reasons],
            "locale": self.locale.value,
            "l0": l0_summary(self.l0, with_terms=with_evidence),
            "l1": None if self.l1 is None else self.l1.summary(with_evidence=with_evidence),
            "l2": None if self.l2 is None else self.l2.summary(with_evidence=with_evidence),
            "confirmation": None
            if self.confirmation is None
            else sorted(c.value for c in self.confirmation.unmet),
            "trend": None if self.trend is None else self.trend.as_dict(),
            "calls": self.calls,
            "cost_usd": self.cost_usd,
            "latency_ms": self.latency_ms,
            "trace_id": self.trace_id,
            "assessment_id": self.assessment_id,
        }
