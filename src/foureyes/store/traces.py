"""The trace writer over the store: append-only runs and events, privacy-aware input."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Connection,
    Integer,
    Select,
    and_,
    bindparam,
    delete,
    select,
    tuple_,
    update,
)

from foureyes.config import PrivacyConfig
from foureyes.core import strict_json
from foureyes.core.digest import text_fingerprint
from foureyes.core.errors import StoreError, UsageError
from foureyes.core.ids import random_hex
from foureyes.core.trace import EventKind, PrivateText, TraceEvent, TraceRecord, TraceRun
from foureyes.store._clock import WallClock, require_utc, utc_now
from foureyes.store._database import Database, DriverInsert, EncodedJSON
from foureyes.store._pending import Opening, PendingRuns
from foureyes.store.tables import gate_open_unknowns, trace_events, trace_runs, trace_texts
from foureyes.store.trace_list import MAX_LIST, RunFilter, RunSummary, list_query, run_tenant
from foureyes.store.unknowns import expired_unknown_erasure

__all__ = ["PRIVATE_TEXT_KEY", "PurgeCounts", "SqlTraceWriter", "new_trace_id"]

PRIVATE_TEXT_KEY = "private_text"
"""An event stores ``{"private_text": <hmac>}`` where its data held a :class:`PrivateText`."""

PURGE_BATCH = 500
"""Rows one purge transaction changes at most, per kind of text."""

# The hot statements are built once: building and keying a statement per call costs more
# Python than executing a cached one with fresh parameters.
_ID_PREFIX = re.compile(r"[0-9a-f]{1,32}")
_RUN = bindparam("run", type_=trace_runs.c.trace_id.type)
_OPEN = and_(trace_runs.c.trace_id == _RUN, trace_runs.c.finished_at.is_(None))
_NEXT = trace_runs.c.last_seq + bindparam("count", type_=Integer)
# Taking the seq is the transaction's first write, so it also locks the run row:
# concurrent appends to one run queue on it and get consecutive numbers.
_TAKE_SEQ = update(trace_runs).where(_OPEN).values(last_seq=_NEXT).returning(trace_runs.c.last_seq)
_TAKE_SEQ_AND_FINISH = (
    update(trace_runs)
    .where(_OPEN)
    .values(
        last_seq=_NEXT,
        finished_at=bindparam("now", type_=trace_runs.c.finished_at.type),
        outcome=bindparam("outcome", type_=trace_runs.c.outcome.type),
        reason=bindparam("reason", type_=trace_runs.c.reason.type),
    )
    .returning(trace_runs.c.last_seq)
)
_INSERT_RUN = trace_runs.insert()
_INSERT_EVENT = DriverInsert(trace_events.insert())


@dataclass(frozen=True, slots=True)
class PurgeCounts:
    """What one :meth:`SqlTraceWriter.purge_expired` erased."""

    inputs: int
    """Runs whose raw input text was erased."""
    texts: int
    """Model-written event texts (verdict notes, missing items, open unknowns) erased."""
    unknowns: int
    """Open unknowns whose text or sealed words were erased (their HMAC stays)."""
    batches: int
    """Transactions it took."""

    @property
    def total(self) -> int:
        """Everything erased."""
        return self.inputs + self.texts + self.unknowns

    def as_json(self) -> dict[str, int]:
        """The counts as JSON."""
        return {
            "inputs": self.inputs,
            "texts": self.texts,
            "unknowns": self.unknowns,
            "batches": self.batches,
            "total": self.total,
        }


def new_trace_id(now: dt.datetime) -> str:
    """A fresh trace id: 32 hex characters that sort by start time.

    The first 12 characters are the milliseconds since the Unix epoch, the rest 80 random
    bits, so ids from several instances never collide and list in start order.
    """
    millis = int(require_utc(now, "now").timestamp() * 1000)
    return f"{millis:012x}{random_hex(10)}"


class SqlTraceWriter:
    """Records runs in the store's ``trace_runs`` and ``trace_events`` tables.

    Events are only ever appended: there is no method to edit or delete one. A run takes
    events from :meth:`start_run` until :meth:`finish_run`; appending to a run that is
    unknown or already finished raises :class:`~foureyes.core.errors.StoreError` and writes
    nothing, because a late event would silently change a record already closed.

    Input text is fingerprinted with an HMAC (docs/design.md 4, invariant 10); the raw text
    itself is kept only when ``privacy.store_raw_text`` is on, until ``retention_days`` have passed.
    Model-written text an event holds as :class:`~foureyes.core.trace.PrivateText` is
    treated the same way: the event keeps its HMAC, the text goes to ``trace_texts`` (only
    when kept) with the same expiry, and :meth:`purge_expired` erases both.
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
        self._pending = PendingRuns(db)
        # A run holding the same text twice keeps it once.
        self._insert_text = DriverInsert(
            db.insert_ignoring_conflict_of(trace_texts, ["trace_id", "fingerprint"])
        )

    @property
    def privacy(self) -> PrivacyConfig:
        """What of the user's text is kept, and for how long."""
        return self._privacy

    def fingerprint(self, text: str) -> str:
        """The HMAC this store records for ``text``, for matching a message to its traces."""
        return text_fingerprint(text, self._hmac_key)

    @property
    def pending(self) -> PendingRuns:
        """The runs reserved with :meth:`reserve_run` and not written yet."""
        return self._pending

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
            meta: JSON-serialisable facts about the run. Its ``tenant``, when it names
                one, is whose run it is (:func:`~foureyes.store.trace_list.run_tenant`):
                the run list shows and filters runs by it; ``local`` otherwise.

        Raises:
            StoreError: the run could not be written.
            UsageError: ``meta`` is not JSON-serialisable, or names a tenant that is not
                a string of 1 to 128 characters.
        """
        values = self._run_row(kind, conversation_id, input_text, meta)
        await self._db.run_statement("start_run", _INSERT_RUN, values, write=True)
        return str(values["trace_id"])

    def reserve_run(
        self,
        kind: str,
        *,
        conversation_id: str | None = None,
        input_text: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> str:
        """Open a run whose header is written with the first write that names it.

        The same as :meth:`start_run` (same arguments, same header), without a transaction
        of its own: the header is inserted in the transaction of the first event, finish,
        assessment or open unknown recorded for the run, so it is durable exactly when
        the first record that names it is. Until then :meth:`get` does not know the run.
        A run that ends up never written must be given up with :meth:`abandon_reserved`.

        Raises:
            UsageError: ``meta`` is not JSON-serialisable, or names a tenant that is not
                a string of 1 to 128 characters.
        """
        values = self._run_row(kind, conversation_id, input_text, meta)
        self._pending.reserve(values)
        return str(values["trace_id"])

    def abandon_reserved(self, trace_id: str) -> bool:
        """Forget a run from :meth:`reserve_run` never written; whether it was still unwritten.

        A run already written is left as it is (open, if nothing finished it).
        """
        return self._pending.discard(trace_id)

    def _run_row(
        self,
        kind: str,
        conversation_id: str | None,
        input_text: str | None,
        meta: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        now = self._now()
        document = _json_document(meta or {}, "run meta")
        keep_raw = input_text is not None and self._privacy.store_raw_text
        return {
            "trace_id": new_trace_id(now),
            "kind": kind,
            "tenant": run_tenant(meta),
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

    async def append(self, trace_id: str, event: TraceEvent) -> None:
        """Append ``event`` to the run, committed before this returns.

        Raises:
            StoreError: the run is unknown or finished, or the event could not be written;
                nothing is written then.
            UsageError: the event's kind is not an :class:`EventKind`, its time is naive, or
                its data is not JSON-serialisable.
        """
        await self._append_rows("append", trace_id, [event], {})

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
        if not events and outcome is None:
            return
        finish = (
            {} if outcome is None else {"now": self._now(), "outcome": outcome, "reason": reason}
        )
        await self._append_rows("append_many", trace_id, events, finish)

    async def _append_rows(
        self,
        operation: str,
        trace_id: str,
        events: Sequence[TraceEvent],
        finish: dict[str, Any],
    ) -> None:
        """Number ``events`` after the run's last event and insert them, in one transaction.

        With ``finish`` (``now``, ``outcome``, ``reason``) the statement that takes the
        numbers also closes the run. The private texts they hold are inserted in the same
        transaction when they are kept.
        """
        texts: dict[str, str] = {}
        rows = [self._event_row(event, texts) for event in events]
        kept = self._kept_texts(trace_id, texts)
        params: dict[str, Any] = {"run": trace_id, "count": len(rows), **finish}
        statement = _TAKE_SEQ_AND_FINISH if finish else _TAKE_SEQ

        def insert(conn: Connection, first: int) -> None:
            if rows:
                _INSERT_EVENT.run(
                    conn,
                    [{"trace_id": trace_id, "seq": first + n, **row} for n, row in enumerate(rows)],
                )
            if kept:
                self._insert_text.run(conn, kept)

        def work(conn: Connection) -> None:
            last = conn.execute(statement, params).scalar_one_or_none()
            if last is None:
                raise _closed_run_error(conn, operation, trace_id)
            insert(conn, last - len(rows) + 1)

        # A header this transaction inserts is inserted numbered (and finished) as the
        # UPDATE above would leave it: its events are 1..n.
        header: dict[str, Any] = {"last_seq": len(rows)}
        if finish:
            header |= {
                "finished_at": finish["now"],
                "outcome": finish["outcome"],
                "reason": finish["reason"],
            }
        opening = Opening(header, lambda conn: insert(conn, 1))
        await self._pending.run(operation, trace_id, work, opening=opening)

    def _event_row(self, event: TraceEvent, texts: dict[str, str]) -> dict[str, Any]:
        """The columns of one event, checked (see :meth:`append`).

        Each :class:`PrivateText` in its data is replaced by ``{"private_text": <hmac>}``
        and its text added to ``texts`` under that HMAC.
        """
        try:
            kind = EventKind(event.kind)
        except ValueError:
            raise UsageError(f"unknown trace event kind {event.kind!r}") from None
        return {
            "kind": kind.value,
            "stage": event.stage,
            "at": require_utc(event.at, "event.at"),
            "data": _json_document(event.data, "event data", private=self._hide(texts)),
        }

    def _hide(self, texts: dict[str, str]) -> _Hide:
        def hide(value: PrivateText) -> dict[str, str]:
            fingerprint = self.fingerprint(value.text)
            texts[fingerprint] = value.text
            return {PRIVATE_TEXT_KEY: fingerprint}

        return hide

    def _kept_texts(self, trace_id: str, texts: Mapping[str, str]) -> list[dict[str, Any]]:
        """The ``trace_texts`` rows of ``texts``: none unless raw text is kept."""
        if not texts or not self._privacy.store_raw_text:
            return []
        expires = self._now() + dt.timedelta(days=self._privacy.retention_days)
        return [
            {"trace_id": trace_id, "fingerprint": fp, "text": text, "expires_at": expires}
            for fp, text in texts.items()
        ]

    async def finish_run(self, trace_id: str, *, outcome: str, reason: str | None) -> None:
        """Close the run with its final outcome; no event can be appended afterwards.

        Raises:
            StoreError: the run is unknown or already finished, or the write failed.
        """
        finish = {"now": self._now(), "outcome": outcome, "reason": reason}
        await self._append_rows("finish_run", trace_id, [], finish)

    async def get(self, trace_id: str) -> TraceRecord | None:
        """Read a run back with its events in append order, or ``None`` if it is unknown.

        Raw input past its expiry reads as ``None`` even before :meth:`purge_expired` ran,
        and so does each private text of an event (``{"private_text": <hmac>}`` in the
        store) that is not kept or past its expiry; a kept one reads as its text.

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
            texts = await conn.execute(
                select(trace_texts.c.fingerprint, trace_texts.c.text).where(
                    trace_texts.c.trace_id == trace_id, trace_texts.c.expires_at > now
                )
            )
            kept = {fingerprint: text for fingerprint, text in texts}
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
        return TraceRecord(run=header, events=tuple(_event(trace_id, row, kept) for row in rows))

    async def recent_events(
        self, tenant: str, conversation_id: str, kind: EventKind, *, runs: int
    ) -> list[tuple[str, dict[str, Any]]]:
        """The ``kind`` events of the conversation's ``runs`` latest finished runs.

        As ``(trace_id, data)``, newest run first: what a conversation's state is read from
        (the input stage's flag). Only events whose data holds no private text are meant
        to be read this way; their data is returned as stored.

        Raises:
            StoreError: the store could not be read.
            UsageError: ``runs`` is out of range.
        """
        if not 1 <= runs <= MAX_LIST:
            raise UsageError(f"runs must be between 1 and {MAX_LIST}, got {runs}")
        latest = (
            select(trace_runs.c.trace_id, trace_runs.c.started_at)
            .where(
                trace_runs.c.tenant == tenant,
                trace_runs.c.conversation_id == conversation_id,
                trace_runs.c.finished_at.is_not(None),
            )
            .order_by(trace_runs.c.started_at.desc(), trace_runs.c.trace_id.desc())
            .limit(runs)
            .subquery()
        )
        query = (
            select(trace_events.c.trace_id, trace_events.c.data)
            .join(latest, latest.c.trace_id == trace_events.c.trace_id)
            .where(trace_events.c.kind == kind.value)
            .order_by(latest.c.started_at.desc(), trace_events.c.trace_id.desc())
        )
        async with self._db.read("recent_events") as conn:
            rows = (await conn.execute(query)).all()
        return [(row.trace_id, dict(row.data)) for row in rows]

    async def ids_with_prefix(self, prefix: str, *, limit: int = 2) -> list[str]:
        """The ids of runs whose id starts with ``prefix`` (lowercase hex), at most ``limit``.

        ``foureyes trace show`` takes a short id: one match is the run, two are ambiguous.

        Raises:
            StoreError: the store could not be read.
            UsageError: ``prefix`` is empty, longer than an id or not lowercase hex, or
                ``limit`` is out of range.
        """
        if not _ID_PREFIX.fullmatch(prefix):
            raise UsageError(f"a trace id prefix is 1 to 32 lowercase hex digits, got {prefix!r}")
        if not 1 <= limit <= MAX_LIST:
            raise UsageError(f"limit must be between 1 and {MAX_LIST}, got {limit}")
        # Ids are fixed-length hex, so the prefix range is [prefix, prefix + "g").
        query = (
            select(trace_runs.c.trace_id)
            .where(trace_runs.c.trace_id >= prefix, trace_runs.c.trace_id < prefix + "g")
            .order_by(trace_runs.c.trace_id)
            .limit(limit)
        )
        async with self._db.read("ids_with_prefix") as conn:
            return list((await conn.execute(query)).scalars())

    async def list_runs(
        self, where: RunFilter | None = None, *, limit: int = 100
    ) -> list[RunSummary]:
        """The most recent runs matching ``where``, newest first, with their triage's outcome.

        Args:
            where: what to narrow the list to (everything by default).
            limit: at most this many (1 to :data:`MAX_LIST`).

        Raises:
            StoreError: the store could not be read.
            UsageError: ``limit`` is out of range, a date bound is naive, the purpose
                is not one of :data:`~foureyes.store.trace_list.RUN_PURPOSES`, or the
                tenant is not a string of 1 to 128 characters.
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
                purpose=row.purpose,
                tenant=row.tenant,
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

    async def purge_expired(
        self, now: dt.datetime | None = None, *, batch_size: int = PURGE_BATCH
    ) -> PurgeCounts:
        """Erase the text whose retention has run out; how much was erased.

        Raw input of runs, the private texts of events (``trace_texts``), and the text and
        sealed words of open unknowns, each when its expiry is at or before ``now``. Open
        unknowns recorded before expiries were kept (revision 0010) are judged by the
        privacy settings in force. HMACs stay, so purged runs still match their messages
        and purged unknowns still match a verdict that lists them again.

        Work goes in transactions of at most ``batch_size`` rows per kind, until a batch
        finds nothing left: everything written later expires after ``now`` (retention is
        at least a day), so the loop ends. Stores sharing one PostgreSQL database may
        purge at the same time: rows another purge holds are skipped (``SKIP LOCKED``) and
        each row is counted by the purge that erased it. Running it again finds nothing.

        Raises:
            StoreError: a write failed; the batches committed before it stay erased.
            UsageError: ``now`` is naive, or ``batch_size`` is below 1.
        """
        if batch_size < 1:
            raise UsageError(f"batch_size must be at least 1, got {batch_size}")
        cutoff = self._now() if now is None else require_utc(now, "now")
        inputs = texts = unknowns = batches = 0
        while True:
            counts = await self._db.run_write(
                "purge_expired", lambda conn: _purge_batch(conn, cutoff, batch_size, self._privacy)
            )
            batches += 1
            inputs, texts, unknowns = inputs + counts[0], texts + counts[1], unknowns + counts[2]
            if max(counts) < batch_size:
                return PurgeCounts(inputs=inputs, texts=texts, unknowns=unknowns, batches=batches)

    def _now(self) -> dt.datetime:
        return require_utc(self._clock(), "the store clock")


_Hide = Callable[[PrivateText], dict[str, str]]


def _json_document(
    value: Mapping[str, Any], what: str, *, private: _Hide | None = None
) -> EncodedJSON:
    """``value`` encoded, checked to be JSON; with ``private``, each PrivateText replaced by it.

    The text is what the column stores: encoding it once here both checks the document and
    is the value written (see :class:`EncodedJSON`).
    """

    def default(item: object) -> Any:
        if private is not None and isinstance(item, PrivateText):
            return private(item)
        raise TypeError(f"Object of type {type(item).__name__} is not JSON serializable")

    try:
        # NaN and infinities are not JSON, and PostgreSQL's jsonb refuses them.
        document = value if type(value) is dict else dict(value)
        return EncodedJSON(strict_json.dumps(document, allow_nan=False, default=default))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{what} is not JSON-serialisable: {exc}") from None


def _reveal(value: Any, kept: Mapping[str, str]) -> Any:
    """``value`` with each ``{"private_text": <hmac>}`` read as its kept text, or ``None``."""
    if isinstance(value, dict):
        if len(value) == 1 and PRIVATE_TEXT_KEY in value:
            return kept.get(value[PRIVATE_TEXT_KEY])
        return {key: _reveal(item, kept) for key, item in value.items()}
    if isinstance(value, list):
        return [_reveal(item, kept) for item in value]
    return value


def _purge_batch(
    conn: Connection, cutoff: dt.datetime, limit: int, privacy: PrivacyConfig
) -> tuple[int, int, int]:
    """One purge transaction: at most ``limit`` rows of each kind; the rows erased."""
    runs = trace_runs.c
    expired_input = runs.input_text_expires_at <= cutoff
    inputs = conn.execute(
        update(trace_runs)
        # The condition is repeated outside the batch's select: a row another purge erased
        # meanwhile no longer meets it, so it is neither changed nor counted twice.
        .where(
            expired_input,
            runs.trace_id.in_(_batch(select(runs.trace_id).where(expired_input), limit)),
        )
        .values(input_text=None, input_text_expires_at=None)
    ).rowcount
    texts_c = trace_texts.c
    expired_text = texts_c.expires_at <= cutoff
    texts = conn.execute(
        delete(trace_texts).where(
            tuple_(texts_c.trace_id, texts_c.fingerprint).in_(
                _batch(select(texts_c.trace_id, texts_c.fingerprint).where(expired_text), limit)
            )
        )
    ).rowcount
    unknowns_c = gate_open_unknowns.c
    expired_unknown, erased = expired_unknown_erasure(cutoff, privacy)
    unknowns = conn.execute(
        update(gate_open_unknowns)
        .where(
            expired_unknown,
            unknowns_c.id.in_(_batch(select(unknowns_c.id).where(expired_unknown), limit)),
        )
        .values(**erased)
    ).rowcount
    return inputs, texts, unknowns


def _batch(query: Select[Any], limit: int) -> Select[Any]:
    # Rows a concurrent purge has locked are its to erase (PostgreSQL; SQLite has one writer).
    return query.limit(limit).with_for_update(skip_locked=True)


def _closed_run_error(conn: Connection, operation: str, trace_id: str) -> StoreError:
    finished_at = conn.execute(
        select(trace_runs.c.finished_at).where(trace_runs.c.trace_id == trace_id)
    ).first()
    if finished_at is None:
        return StoreError(operation, f"trace {trace_id!r} is unknown")
    return StoreError(operation, f"trace {trace_id!r} is finished; its record is closed")


def _event(trace_id: str, row: Any, kept: Mapping[str, str]) -> TraceEvent:
    try:
        kind = EventKind(row.kind)
    except ValueError:
        raise StoreError("get", f"trace {trace_id!r} has unknown event kind {row.kind!r}") from None
    return TraceEvent(kind=kind, stage=row.stage, data=_reveal(row.data, kept), at=row.at)
