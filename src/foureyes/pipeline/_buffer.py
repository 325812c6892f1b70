"""A trace writer that holds a pipeline run's events and commits them in one transaction.

A support message's run collects a dozen events (L0, L1, L2, triage, every model call,
the gate's decision record, the delivery record). Writing each as it happens costs a
transaction apiece; :class:`HeldTraces` keeps them in memory instead and
:meth:`HeldTraces.commit` writes them all, and closes the run, in one. A run may also be
only reserved, its header written by the first transaction that names it (the pipeline's
triage records its assessment in it), so a message costs two transactions, not three. The
pipeline commits before it returns, so the whole record is durable before the reply leaves
the process (docs/design.md 4, invariant 10); if the commit fails, nothing is delivered.

Only runs opened with :meth:`HeldTraces.start_held_run` are held; other runs (a triage's
own, when it runs alone), and events appended after a held run is committed, go straight
to the store, which refuses events for a closed run.

An observer (the server's metrics) sees each event as it is appended; what it raises is
logged and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from foureyes.core.trace import TraceEvent, TraceRecord
from foureyes.store.traces import SqlTraceWriter

__all__ = ["EventObserver", "HeldTraces"]

EventObserver = Callable[[TraceEvent], None]
"""Called with each event of a run as it is appended."""

_log = logging.getLogger(__name__)


class HeldTraces:
    """The pipeline's trace writer (a :class:`~foureyes.core.trace.TraceWriter`)."""

    def __init__(self, store: SqlTraceWriter, *, observer: EventObserver | None = None) -> None:
        self._store = store
        self._observer = observer
        self._held: dict[str, list[TraceEvent]] = {}
        self._written: dict[str, list[TraceEvent]] = {}

    async def start_run(
        self,
        kind: str,
        *,
        conversation_id: str | None = None,
        input_text: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> str:
        """Open a run written event by event (a component's own run, e.g. a lone triage)."""
        return await self._store.start_run(
            kind, conversation_id=conversation_id, input_text=input_text, meta=meta
        )

    async def start_held_run(
        self,
        kind: str,
        *,
        conversation_id: str | None = None,
        input_text: str | None = None,
        meta: Mapping[str, Any] | None = None,
        reserve: bool = False,
    ) -> str:
        """Open a run whose events are held until :meth:`commit`.

        By default the run's header is written at once. With ``reserve`` it is only
        reserved (:meth:`SqlTraceWriter.reserve_run
        <foureyes.store.traces.SqlTraceWriter.reserve_run>`): the first store write that
        names the run (a triage's assessment, an open unknown, or the commit itself)
        writes it in its own transaction, which saves the pipeline a transaction per
        message. The caller must end the run with :meth:`commit` or :meth:`drop`.
        """
        if reserve:
            trace_id = self._store.reserve_run(
                kind, conversation_id=conversation_id, input_text=input_text, meta=meta
            )
        else:
            trace_id = await self._store.start_run(
                kind, conversation_id=conversation_id, input_text=input_text, meta=meta
            )
        self._held[trace_id] = []
        return trace_id

    async def append(self, trace_id: str, event: TraceEvent) -> None:
        """Hold ``event`` until the run is committed (a run not held: write it now)."""
        if self._observer is not None:
            try:
                self._observer(event)
            except Exception as exc:  # an observer never alters a run
                _log.warning("trace observer failed on a %s event: %r", event.kind.value, exc)
        held = self._held.get(trace_id)
        if held is None:
            await self._store.append(trace_id, event)
        else:
            held.append(event)

    async def finish_run(self, trace_id: str, *, outcome: str, reason: str | None) -> None:
        """Close the run, committing what is held for it first."""
        if trace_id in self._held:
            await self.commit(trace_id, outcome=outcome, reason=reason)
        else:
            await self._store.finish_run(trace_id, outcome=outcome, reason=reason)

    async def get(self, trace_id: str) -> TraceRecord | None:
        """The run as committed (held events are not in the store yet)."""
        return await self._store.get(trace_id)

    def held(self, trace_id: str) -> tuple[TraceEvent, ...]:
        """The events of a held run so far, in append order (those :meth:`flush` wrote too)."""
        return (*self._written.get(trace_id, ()), *self._held.get(trace_id, ()))

    async def flush(self, trace_id: str) -> None:
        """Write what is held for a run now, in one transaction, and keep the run open.

        Segment release calls it before each segment leaves, so the segment's record is
        durable first (invariant 10); :meth:`commit` writes the rest later.

        Raises:
            StoreError: the write failed; the events stay held, and nothing may be sent.
        """
        held = self._held.get(trace_id)
        if not held:
            return
        # What is held now; an event appended while the write runs (the streamed draft's
        # model call ending meanwhile) stays held for the next write, not cleared unwritten.
        batch = list(held)
        await self._store.append_many(trace_id, batch)
        self._written.setdefault(trace_id, []).extend(batch)
        del held[: len(batch)]

    async def commit(
        self, trace_id: str, *last: TraceEvent, outcome: str, reason: str | None
    ) -> None:
        """Write the held events, then ``last``, and close the run, in one transaction.

        A reserved run's header is written in that transaction too. The events are
        released whether the write succeeds or not: a failed commit leaves the run open
        and empty (or, reserved and never written, forgotten), and the caller delivers
        nothing.

        Raises:
            StoreError: the write failed; nothing of the run's events was written.
        """
        self._written.pop(trace_id, None)
        events = [*self._held.pop(trace_id, ()), *last]
        try:
            await self._store.append_many(trace_id, events, outcome=outcome, reason=reason)
        finally:
            self._store.abandon_reserved(trace_id)

    def drop(self, trace_id: str) -> tuple[TraceEvent, ...]:
        """Release a run's held events without writing them, and return them.

        A reserved run never written is forgotten; one already written stays open.
        """
        self._store.abandon_reserved(trace_id)
        self._written.pop(trace_id, None)
        return tuple(self._held.pop(trace_id, ()))
