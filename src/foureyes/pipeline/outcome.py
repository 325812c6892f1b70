"""What the support pipeline takes and returns, and the record it keeps of each message.

:class:`SupportMessage` is one user message with what the pipeline needs to know about
it; :class:`SupportOutcome` is what it did: the delivered text, the gate's decision and
reason, the digests, the triage, the policy applied, every model call with its place on
the run's timeline, and the trace id. :meth:`SupportOutcome.response_block` is the
``foureyes`` object of the gateway's response (docs/design.md 5). :func:`delivery_record` is
the pipeline's own trace event, written with the rest of the run before the reply leaves.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode
from foureyes.core.tenancy import LOCAL_TENANT
from foureyes.core.trace import EventKind, TraceEvent
from foureyes.gate import GateOutcome, Outcome, Source, ToolCall, Turn
from foureyes.pipeline.floor import AppliedPolicy
from foureyes.risk.result import RunPurpose, TriageResult

__all__ = [
    "CallRecord",
    "DELIVERY_SCHEMA",
    "PipelineTimings",
    "SupportMessage",
    "SupportOutcome",
    "delivery_record",
]

DELIVERY_SCHEMA = "foureyes.pipeline.delivery/1"
"""The ``schema`` of the pipeline's delivery record; readers check it first."""


class SupportMessage(BaseModel):
    """One user message for the support pipeline."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    text: str = Field(min_length=1)
    """The user's current message."""
    history: tuple[Turn, ...] = ()
    """Earlier turns of the conversation, oldest first (the Counselor, the Supervisor and
    L2 each see their configured number of the most recent)."""
    conversation_id: str | None = Field(default=None, min_length=1, max_length=256)
    """The conversation, as the caller names it within its tenant. Without one, the
    message is a conversation of its own: no open unknowns carry over and its
    per-conversation limits start afresh (the tenant's daily L1 limit still counts it)."""
    tenant: str = Field(default=LOCAL_TENANT, min_length=1, max_length=64, pattern=r"^[^/#]+$")
    """Whose conversation it is (:mod:`foureyes.core.tenancy`): ``key:<key id>`` for an
    API key's; ``local`` (the default) for callers without one. Limits, trend, open
    unknowns and alerts are kept per tenant."""
    region: str | None = Field(default=None, pattern=r"^[A-Z]{2}$")
    """The user's region (ISO 3166-1 alpha-2), for crisis resources; ``gate.region`` if unset."""
    locale: Locale | None = None
    """Language of code-rendered text; ``gate.locale`` (or the message's) when unset."""
    purpose: RunPurpose = RunPurpose.LIVE
    """Live traffic, or a test (a test triage is kept apart and never alerts)."""
    sources: tuple[Source, ...] = ()
    """Material the reply may rely on (retrieved documents, records), shown to the
    Supervisor as data; the record keeps their ids, origins and digests."""


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One model call of a run, placed on the run's timeline."""

    role: str
    """The role that called."""
    route: str
    """The route that served it."""
    stage: str
    """The stage (``draft``, ``review``, ``l1``, ``l2``)."""
    start_ms: float
    """When it started, in milliseconds after the run started."""
    duration_ms: float
    """How long it took."""
    outcome: str
    """``ok``, or the error's class name, or ``cancelled``."""
    prompt_tokens: int
    """Prompt tokens reported (0 for a failed call)."""
    completion_tokens: int
    """Completion tokens reported."""

    @classmethod
    def of_event(cls, event: TraceEvent, started: dt.datetime) -> CallRecord:
        """The call a ``model_call`` event records; ``started`` is the run's start."""
        data = event.data
        duration = float(data["latency_ms"])
        end = (event.at - started).total_seconds() * 1000
        return cls(
            role=str(data["role"]),
            route=str(data["route"]),
            stage=event.stage,
            start_ms=round(max(0.0, end - duration), 3),
            duration_ms=duration,
            outcome=str(data["outcome"]),
            prompt_tokens=int(data.get("prompt_tokens", 0)),
            completion_tokens=int(data.get("completion_tokens", 0)),
        )

    def as_json(self) -> dict[str, Any]:
        """The call as the delivery record keeps it."""
        return {
            "role": self.role,
            "route": self.route,
            "stage": self.stage,
            "start_ms": self.start_ms,
            "duration_ms": self.duration_ms,
            "outcome": self.outcome,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


def _covered_ms(calls: Iterable[CallRecord]) -> float:
    """Wall time during which at least one call was under way (parallel calls count once)."""
    covered, reach = 0.0, 0.0
    for call in sorted(calls, key=lambda c: c.start_ms):
        end = call.start_ms + call.duration_ms
        if end > reach:
            covered += end - max(call.start_ms, reach)
            reach = end
    return covered


@dataclass(frozen=True, slots=True)
class PipelineTimings:
    """Where one message's time went, in milliseconds."""

    total_ms: float
    """From the run's start to its record being ready (the final commit excluded)."""
    triage_ms: float
    """The triage, L0 to its result."""
    gate_ms: float
    """The gate, from its first draft (speculative: at the start) to its decision."""
    model_ms: float
    """Wall time during which some model call was under way."""
    overhead_ms: float
    """``total_ms - model_ms``: the pipeline's own work and waits (store, scheduling)."""

    @classmethod
    def of(
        cls, *, total_ms: float, triage_ms: float, gate_ms: float, calls: Sequence[CallRecord]
    ) -> PipelineTimings:
        """The timings of a run whose calls are ``calls``."""
        model_ms = min(total_ms, _covered_ms(calls))
        return cls(
            total_ms=round(total_ms, 3),
            triage_ms=round(triage_ms, 3),
            gate_ms=round(gate_ms, 3),
            model_ms=round(model_ms, 3),
            overhead_ms=round(total_ms - model_ms, 3),
        )

    def as_json(self) -> dict[str, float]:
        """The timings as recorded."""
        return {
            "total_ms": self.total_ms,
            "triage_ms": self.triage_ms,
            "gate_ms": self.gate_ms,
            "model_ms": self.model_ms,
            "overhead_ms": self.overhead_ms,
        }


@dataclass(frozen=True, slots=True)
class SupportOutcome:
    """What the pipeline did with one message. The record is committed already."""

    decision: Outcome
    """``released`` or ``fallback``."""
    reason: ReasonCode
    """``approved``, or why the fallback went out."""
    candidate_sha256: str | None
    """Digest of the released candidate; ``None`` for a fallback."""
    delivered_sha256: str
    """Digest of the delivered text."""
    text: str
    """The text to deliver."""
    tool_calls: tuple[ToolCall, ...]
    """The tool calls to deliver: a released given draft's, exactly as digested; none
    for a fallback or a Counselor's reply."""
    trace_id: str
    """The run's trace."""
    conversation_id: str
    """The conversation as the caller named it (a generated one when the message named
    none); kept under the message's tenant."""
    triage: TriageResult
    """The triage of the message."""
    policy: AppliedPolicy
    """The generation policy applied, and why if stricter than triage's."""
    gate: GateOutcome
    """The gate's outcome: verdict, rules fired, attempts, usage per role."""
    alert: dict[str, Any] | None
    """What became of a guardian-alert evaluation (only after a confirmed triage)."""
    calls: tuple[CallRecord, ...]
    """Every model call of the run, triage and gate, in the order they ended."""
    timings: PipelineTimings
    """Where the time went."""
    speculative: bool
    """Whether the first draft started before triage finished (``gate.speculative_draft``
    on and L0 did not escalate the message)."""

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens of every call of the run."""
        return sum(c.prompt_tokens for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        """Completion tokens of every call of the run."""
        return sum(c.completion_tokens for c in self.calls)

    def response_block(self) -> dict[str, Any]:
        """The ``foureyes`` object of the gateway's response (docs/design.md 5), plus ``policy``."""
        return {
            "decision": self.decision.value,
            "reason": self.reason.value,
            "candidate_sha256": self.candidate_sha256,
            "delivered_sha256": self.delivered_sha256,
            "trace_id": self.trace_id,
            "risk": self.triage.risk_block(),
            "policy": self.policy.policy.value,
        }


def delivery_record(outcome: SupportOutcome, *, conversation_named: bool) -> TraceEvent:
    """The pipeline's record of a message (a ``delivery`` event), built before the commit."""
    gate = outcome.gate
    data: dict[str, Any] = {
        "schema": DELIVERY_SCHEMA,
        "decision": outcome.decision.value,
        "reason": outcome.reason.value,
        "candidate_sha256": outcome.candidate_sha256,
        "delivered_sha256": outcome.delivered_sha256,
        "delivered_chars": len(outcome.text),
        "tool_calls_delivered": [call.name for call in outcome.tool_calls],
        "risk": outcome.triage.risk_block(),
        "policy": outcome.policy.as_json(),
        "locale": gate.locale.value,
        "region": gate.region,
        "speculative_draft": outcome.speculative,
        "conversation_named": conversation_named,
        "alert": outcome.alert,
        "timings": outcome.timings.as_json(),
        "calls": [call.as_json() for call in outcome.calls],
        "usage": {
            "prompt_tokens": outcome.prompt_tokens,
            "completion_tokens": outcome.completion_tokens,
        },
    }
    return TraceEvent(EventKind.DELIVERY, "pipeline", data)
