"""The trace writer over the store: append-only runs and events, privacy-aware input."""

from __future__ import annotations

import datetime as dt
import json
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select, update

from foureyes.config import PrivacyConfig
from foureyes.core.digest import text_fingerprint
from foureyes.core.errors import StoreError, UsageError
from foureyes.core.trace import EventKind, TraceEvent, TraceRecord, TraceRun
from foureyes.store._clock import WallClock, require_utc, utc_now
from foureyes.store._database import Database
from foureyes.store.tables import trace_events, trace_runs
from foureyes.store.trace_list import MAX_LIST, RunFilter, RunSummary, list_query

__all__ = ["SqlTraceWriter", "new_trace_id"]


def new_trace_id(now: dt.datetime) -> str:
    """A fresh trace id: 32 hex characters that sort by start time.

    The first 12 characters are the milliseconds since the Unix epoch, the rest 80 random
    bits, so ids from several instances never collide and list in start order.
    """
    millis = int(require_utc(now, "now").timestamp() * 1000)
    return f"{millis:012x}{secrets.token_hex(10)}"


class SqlTraceWriter:
    """Records runs in the store's ``trace_runs`` and ``trace_events`` tables.

    Events are only ever appended: there is no method to edit or delete one. A run takes
    events from :meth:`start_run` until :meth:`finish_run`; appending to a run that is
    unknown or already finished raises :class:`~foureyes.core.errors.StoreError` and writes
    nothing, because a late event would silently change a record already closed.

    Input text is fingerprinted with an HMAC (DESIGN invariant 10); the raw text itself is
    kept only when ``privacy.store_raw_text`` is on, until ``retention_days`` have passed.
    Get one from :attr:`foureyes.store.Store.traces`.
    """

    def __init__(
        self,
        db: Database,
        *,
        privacy: PrivacyConfig,
        hmac_key: bytes,
        clock: WallClock = utc_now,
    ) -> None:
        self._db = db
        self._privacy = privacy
        self._hmac_key = hmac_key
        self._clock = clock

    def fingerprint(self, text: str) -> str:
        """The HMAC this store records for ``text``, for matching a message to its traces."""
        return text_fingerprint(text, self._hmac_key)

    async def start_run(
        self,
        kind: str,
        *,
        conversation_id: str | None = None,
        input_text: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> str:
        """Open a run and return its trace id.

        Args:
            kind: what runs (``support_message``, ``review``, ...).
            conversation_id: the conversation the run belongs to, if any.
            input_text: the user's text; always fingerprinted, kept raw only if configured.
            meta: JSON-serialisable facts about the run.

        Raises:
            StoreError: the run could not be written.
            UsageError: ``meta`` is not JSON-serialisable.
        """
        now = self._now()
        document = _json_document(meta or {}, "run meta")
        keep_raw = input_text is not None and self._privacy.store_raw_text
        trace_id = new_trace_id(now)
        values = {
            "trace_id": trace_id,
            "kind": kind,
            "conversation_id": conversation_id,
            "started_at": now,
            "input_fingerprint": None if input_text is None else self.fingerprint(input_text),
            "input_text": input_text if keep_raw else None,
            "input_text_expires_at": (
                now + dt.timedelta(days=self._privacy.retention_days) if keep_raw else None
            ),
            "last_seq": 0,
            "meta": document,
        }
        async with self._db.write("start_run") as conn:
            await conn.execute(trace_runs.insert().values(**values))
        return trace_id

    async def append(self, trace_id: str, event: TraceEvent) -> None:
        """Append ``event`` to the run, committed before this returns.

        Raises:
            StoreError: the run is unknown or finished, or the event could not be written;
                nothing is written then.
            UsageError: the event's kind is not an :class:`EventKind`, its time is naive, or
                its data is not JSON-serialisable.
        """
        row = _event_row(event)
        async with self._db.write("append") as conn:
            # Taking the seq is the transaction's first write, so it also locks the run row:
            # concurrent appends to one run queue here and get consecutive numbers.
            seq = (
                await conn.execute(
                    update(trace_runs)
                    .where(trace_runs.c.trace_id == trace_id, trace_runs.c.finished_at.is_(None))
                    .values(last_seq=trace_runs.c.last_seq + 1)
                    .returning(trace_runs.c.last_seq)
                )
            ).scalar_one_or_none()
            if seq is None:
                raise await _closed_run_error(conn, "append", trace_id)
            await conn.execute(trace_events.insert().values(trace_id=trace_id, seq=seq, **row))

    async def append_many(
        self,
        trace_id: str,
        events: Sequence[TraceEvent],
        *,
        outcome: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Append ``events`` in order in one transaction; with ``outcome``, finish the run too.

        The same as :meth:`append` for each event (and :meth:`finish_run`), committed
        together: either every event is recorded (and the run closed), or none is.

        Raises:
            StoreError: the run is unknown or finished, or the write failed; nothing is
                written then.
            UsageError: an event is invalid (see :meth:`append`), or ``reason`` comes
                without ``outcome``.
        """
        if outcome is None and reason is not None:
            raise UsageError("a reason is recorded only when the run is finished with an outcome")
        rows = [_event_row(event) for event in events]
        if not rows and outcome is None:
            return
        now = self._now()
        values: dict[str, Any] = {"last_seq": trace_runs.c.last_seq + len(rows)}
        if outcome is not None:
            values |= {"finished_at": now, "outcome": outcome, "reason": reason}
        async with self._db.write("append_many") as conn:
            last = (
                await conn.execute(
                    update(trace_runs)
                    .where(trace_runs.c.trace_id == trace_id, trace_runs.c.finished_at.is_(None))
                    .values(**values)
                    .returning(trace_runs.c.last_seq)
                )
            ).scalar_one_or_none()
            if last is None:
                raise await _closed_run_error(conn, "append_many", trace_id)
            first = last - len(rows) + 1
            if rows:
                await conn.execute(
                    trace_events.insert(),
                    [{"trace_id": trace_id, "seq": first + n, **row} for n, row in enumerate(rows)],
                )

    async def finish_run(self, trace_id: str, *, outcome: str, reason: str | None) -> None:
        """Close the run with its final outcome; no event can be appended afterwards.

        Raises:
            StoreError: the run is unknown or already finished, or the write failed.
        """
        now = self._now()
        async with self._db.write("finish_run") as conn:
            result = await conn.execute(
                update(trace_runs)
                .where(trace_runs.c.trace_id == trace_id, trace_runs.c.finished_at.is_(None))
                .values(finished_at=now, outcome=outcome, reason=reason)
            )
            if result.rowcount != 1:
                raise await _closed_run_error(conn, "finish_run", trace_id)

    async def get(self, trace_id: str) -> TraceRecord | None:
        """Read a run back with its events in append order, or ``None`` if it is unknown.

        Raw input past its expiry reads as ``None`` even before :meth:`purge_expired` ran.

        Raises:
            StoreError: the store could not be read, or holds an event kind this version
                does not know.
        """
        now = self._now()
        async with self._db.read("get") as conn:
            run = (
                await conn.execute(select(trace_runs).where(trace_runs.c.trace_id == trace_id))
            ).first()
            if run is None:
                return None
            rows = (
                await conn.execute(
                    select(trace_events)
                    .where(trace_events.c.trace_id == trace_id)
                    .order_by(trace_events.c.seq)
                )
            ).all()
        expires = run.input_text_expires_at
        header = TraceRun(
            trace_id=run.trace_id,
            kind=run.kind,
            conversation_id=run.conversation_id,
            started_at=run.started_at,
            finished_at=run.finished_at,
            outcome=run.outcome,
            reason=run.reason,
            input_fingerprint=run.input_fingerprint,
            input_text=run.input_text if expires is None or expires > now else None,
            meta=run.meta,
        )
        return TraceRecord(run=header, events=tuple(_event(trace_id, row) for row in rows))

    async def list_runs(
        self, where: RunFilter | None = None, *, limit: int = 100
    ) -> list[RunSummary]:
        """The most recent runs matching ``where``, newest first, with their triage's outcome.

        Args:
            where: what to narrow the list to (everything by default).
            limit: at most this many (1 to :data:`MAX_LIST`).

        Raises:
            StoreError: the store could not be read.
            UsageError: ``limit`` is out of range, or a date bound is naive.
        """
        if not 1 <= limit <= MAX_LIST:
            raise UsageError(f"limit must be between 1 and {MAX_LIST}, got {limit}")
        query = list_query(where or RunFilter()).limit(limit)
        async with self._db.read("list_runs") as conn:
            rows = (await conn.execute(query)).all()
        return [
            RunSummary(
                trace_id=row.trace_id,
                kind=row.kind,
                conversation_id=row.conversation_id,
                started_at=row.started_at,
                finished_at=row.finished_at,
                outcome=row.outcome,
                reason=row.reason,
                risk_status=row.risk_status,
                risk_level=row.risk_level,
                risk_tier=row.risk_tier,
                risk_confirmed=row.risk_confirmed,
            )
            for row in rows
        ]

    async def purge_expired(self, now: dt.datetime | None = None) -> int:
        """Erase raw input whose retention has run out, and return how many runs lost it.

        Fingerprints stay, so purged runs still match their messages.

        Raises:
            StoreError: the write failed; nothing is erased then.
            UsageError: ``now`` is naive.
        """
        cutoff = self._now() if now is None else require_utc(now, "now")
        async with self._db.write("purge_expired") as conn:
            result = await conn.execute(
                update(trace_runs)
                .where(trace_runs.c.input_text_expires_at <= cutoff)
                .values(input_text=None, input_text_expires_at=None)
            )
        return result.rowcount

    def _now(self) -> dt.datetime:
        return require_utc(self._clock(), "the store clock")


def _event_row(event: TraceEvent) -> dict[str, Any]:
    """The columns of one event, checked (see :meth:`SqlTraceWriter.append`)."""
    try:
        kind = EventKind(event.kind)
    except ValueError:
        raise UsageError(f"unknown trace event kind {event.kind!r}") from None
    return {
        "kind": kind.value,
        "stage": event.stage,
        "at": require_utc(event.at, "event.at"),
        "data": _json_document(event.data, "event data"),
    }


def _json_document(value: Mapping[str, Any], what: str) -> dict[str, Any]:
    document = dict(value)
    try:
        # NaN and infinities are not JSON, and PostgreSQL's jsonb refuses them.
        json.dumps(document, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{what} is not JSON-serialisable: {exc}") from None
    return document


async def _closed_run_error(conn: Any, operation: str, trace_id: str) -> StoreError:
    finished_at = (
        await conn.execute(
            select(trace_runs.c.finished_at).where(trace_runs.c.trace_id == trace_id)
        )
    ).first()
    if finished_at is None:
        return StoreError(operation, f"trace {trace_id!r} is unknown")
    return StoreError(operation, f"trace {trace_id!r} is finished; its record is closed")


def _event(trace_id: str, row: Any) -> TraceEvent:
    try:
        kind = EventKind(row.kind)
    except ValueError:
        raise StoreError("get", f"trace {trace_id!r} has unknown event kind {row.kind!r}") from None
    return TraceEvent(kind=kind, stage=row.stage, data=row.data, at=row.at)
