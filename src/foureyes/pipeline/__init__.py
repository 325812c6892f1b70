"""The support-message pipeline: triage and the release gate composed for each message.

Start with :class:`SupportPipeline` (``await pipeline.handle(SupportMessage(...))``, or
``await pipeline.check(message, GivenDraft.of(...))`` for a draft the caller has); its
:class:`SupportOutcome` says what went out, why, under which policy and risk, and where
the time went. :func:`trace_view` reads a recorded run back for people. :class:`Runtime` opens the
routes, the store, the pipeline and the reviewer a process runs on (the server and
:class:`foureyes.Guard` both).
"""

from foureyes.pipeline._buffer import EventObserver
from foureyes.pipeline.floor import AppliedPolicy, PolicyFloor, apply_floor, has_strong_term
from foureyes.pipeline.outcome import (
    DELIVERY_SCHEMA,
    CallRecord,
    PipelineTimings,
    SupportMessage,
    SupportOutcome,
    delivery_record,
)
from foureyes.pipeline.runtime import Runtime
from foureyes.pipeline.support import CHECK_RUN_KIND, GUARD_RUN_KIND, RUN_KIND, SupportPipeline
from foureyes.pipeline.view import trace_view

__all__ = [
    "AppliedPolicy",
    "CHECK_RUN_KIND",
    "CallRecord",
    "DELIVERY_SCHEMA",
    "EventObserver",
    "GUARD_RUN_KIND",
    "PipelineTimings",
    "PolicyFloor",
    "RUN_KIND",
    "Runtime",
    "SupportMessage",
    "SupportOutcome",
    "SupportPipeline",
    "apply_floor",
    "delivery_record",
    "has_strong_term",
    "trace_view",
]
