"""The trace: an append-only record of one pipeline run, and the contract of its writer."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

__all__ = ["EventKind", "PrivateText", "TraceEvent", "TraceRecord", "TraceRun", "TraceWriter"]


class EventKind(StrEnum):
    """What a trace event records."""

    MODEL_CALL = "model_call"
    """One call to a route: role, route, timing, tokens, cost, and its outcome or error."""
    PROPOSAL = "proposal"
    """A model's proposal, recorded by digest."""
    VERDICT = "verdict"
    """A check's result, naming the digest it judged."""
    RULES = "rules"
    """Findings of deterministic rules."""
    RISK = "risk"
    """A risk assessment or triage result."""
    DECISION = "decision"
    """The outcome code computed: release or fallback with its reason."""
    DELIVERY = "delivery"
    """What was handed over, by digest (written after the decision)."""
    ERROR = "error"
    """An expected failure turned into data, with its class and reason."""
    INPUT = "input"
    """The input checks of a run: each input's digest, findings and action (no text)."""


@dataclass(frozen=True, slots=True)
class PrivateText:
    """Model-written text in an event's data that may restate the user's words.

    A verdict's notes and missing items, open unknowns: the trace writer treats such text
    like the raw input (docs/design.md 4, invariant 10). It stores the HMAC of the text in
    its place, and the text itself only when ``privacy.store_raw_text`` is on, until
    ``retention_days`` have passed; read back, the value is the text while it is kept and
    ``None`` otherwise. It is not JSON by itself: only a writer that knows the privacy
    settings can store an event holding one.
    """

    text: str
    """The text."""


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One entry in a run's trace. ``data`` must be JSON-serialisable."""

    kind: EventKind
    """What the event records."""
    stage: str
    """The pipeline stage that wrote it (``draft``, ``review``, ``gate``, ``l1``, ...)."""
    data: Mapping[str, Any] = field(default_factory=dict)
    """Event payload (digests, codes, timings); never raw user text unless configured.

    Model-written text that may restate the user's words goes in as :class:`PrivateText`.
    """
    at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    """When it happened, timezone-aware UTC."""

    def as_json(self) -> dict[str, Any]:
        """The event as JSON."""
        return {
            "kind": self.kind.value,
            "stage": self.stage,
            "at": self.at.isoformat(),
            "data": dict(self.data),
        }


@dataclass(frozen=True, slots=True)
class TraceRun:
    """The header of one run as stored."""

    trace_id: str
    kind: str
    """What ran: ``support_message``, ``review``, ``facts``, ..."""
    conversation_id: str | None
    started_at: dt.datetime
    finished_at: dt.datetime | None
    outcome: str | None
    """Final outcome (e.g. ``released`` or ``fallback``), once finished."""
    reason: str | None
    """Final reason code, once finished."""
    input_fingerprint: str | None
    """HMAC of the input text (always, when there was input)."""
    input_text: str | None
    """Raw input, only when ``privacy.store_raw_text`` is on."""
    meta: Mapping[str, Any]

    def as_json(self) -> dict[str, Any]:
        """The run header as JSON."""
        return {
            "trace_id": self.trace_id,
            "kind": self.kind,
            "conversation_id": self.conversation_id,
            "started_at": self.started_at.isoformat(),
            "finished_at": None if self.finished_at is None else self.finished_at.isoformat(),
            "outcome": self.outcome,
            "reason": self.reason,
            "input_fingerprint": self.input_fingerprint,
            "input_text": self.input_text,
            "meta": dict(self.meta),
        }


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """A whole run: its header and its events in append order."""

    run: TraceRun
    events: tuple[TraceEvent, ...]

    def as_json(self) -> dict[str, Any]:
        """The run header and every event, in order, as JSON."""
        return {"run": self.run.as_json(), "events": [e.as_json() for e in self.events]}


class TraceWriter(Protocol):
    """Where runs are recorded. Events are only ever appended, never edited."""

    async def start_run(
        self,
        kind: str,
        *,
        conversation_id: str | None = None,
        input_text: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> str:
        """Open a run and return its trace id. Raw input is kept only if configured."""
        ...

    async def append(self, trace_id: str, event: TraceEvent) -> None:
        """Append one event to the run (durably, before the call returns)."""
        ...

    async def finish_run(self, trace_id: str, *, outcome: str, reason: str | None) -> None:
        """Close the run with its final outcome."""
        ...

    async def get(self, trace_id: str) -> TraceRecord | None:
        """Read a run back with all its events, or ``None`` if unknown."""
        ...
