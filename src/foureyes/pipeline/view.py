"""A recorded run, read back for people: its header, its events, and a summary of each stage.

:func:`trace_view` is the JSON that ``GET /v1/traces/{id}`` answers and the web console
draws: ``run`` (the header), ``events`` (every event in order) and ``summary``, which
lifts out of the events what someone looking at a decision wants first:

- ``triage``: status, level, confirmation, tier, policy, reasons, the L0 categories and
  spans (never the matched words), L1 and L2 (without their evidence) and the unmet
  confirmation checks;
- ``gate``: the gate's decision record (``foureyes.gate.decision/1``): the candidate's
  digest, every attempt with its verdict and the rules fired, the delivered parts, usage
  and timings;
- ``delivery``: the pipeline's record (``foureyes.pipeline.delivery/1``): decision,
  reason, digests, the policy applied and why, the alert, and every model call placed on
  the run's timeline (``calls``: role, stage, ``start_ms``, ``duration_ms``, outcome).

A block is ``None`` when the run has no such event (a gate run has no triage; a run that
failed has no delivery).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from foureyes.core.trace import EventKind, TraceRecord
from foureyes.gate import RECORD_SCHEMA
from foureyes.pipeline.outcome import DELIVERY_SCHEMA

__all__ = ["trace_view"]


def _last(record: TraceRecord, kind: EventKind, stage: str, schema: str | None) -> Any:
    for event in reversed(record.events):
        if event.kind is kind and event.stage == stage:
            data: Mapping[str, Any] = event.data
            if schema is None or data.get("schema") == schema:
                return dict(data)
    return None


def trace_view(record: TraceRecord) -> dict[str, Any]:
    """A run as JSON for people and the console (see the module docstring)."""
    return record.as_json() | {
        "summary": {
            "triage": _last(record, EventKind.RISK, "triage", None),
            "gate": _last(record, EventKind.DECISION, "gate", RECORD_SCHEMA),
            "delivery": _last(record, EventKind.DELIVERY, "pipeline", DELIVERY_SCHEMA),
        },
    }
