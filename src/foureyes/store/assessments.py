"""Triage records in the store: every assessment, and the per-conversation flight lease.

Rows hold the HMAC fingerprint of the assessed text, never the text (docs/design.md 4,
invariant 10): the raw text is kept only in the triage's trace run, and only when
``privacy.store_raw_text`` is on, with its retention period.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, delete, select

from foureyes.core.budget import utc_day
from foureyes.core.errors import UsageError
from foureyes.store._clock import require_utc
from foureyes.store._database import Database, DriverInsert
from foureyes.store._pending import PendingRuns
from foureyes.store.tables import risk_assessments, risk_flights
from foureyes.store.traces import new_trace_id

__all__ = ["NewAssessment", "SqlAssessmentLog", "StoredAssessment"]

# Built once: every message's triage records one row (see store/traces.py).
_INSERT = DriverInsert(risk_assessments.insert())


# The lease's statements, built once (the conversation's row is the lease).
_EXPIRED_FLIGHT = delete(risk_flights).where(
    risk_flights.c.conversation_id == bindparam("flight_conversation"),
    risk_flights.c.expires_at <= bindparam("flight_now", type_=risk_flights.c.expires_at.type),
)
_OWN_FLIGHT = delete(risk_flights).where(
    risk_flights.c.conversation_id == bindparam("flight_conversation"),
    risk_flights.c.token == bindparam("flight_token"),
)


@dataclass(frozen=True, slots=True)
class NewAssessment:
    """One triage outcome to record (plain values; the risk capability builds it)."""

    conversation_id: str
    """The conversation it belongs to."""
    purpose: str
    """``live``, ``test`` or ``calibration``; only live rows feed trends (the others are
    kept apart)."""
    at: dt.datetime
    """When the triage finished (aware UTC)."""
    status: str
    """``ok`` or ``unknown``."""
    level: str | None
    """The level, ``None`` when unknown."""
    tier: str
    """``L0``, ``L1`` or ``L2``."""
    confirmed: bool
    """Whether double confirmation held."""
    policy: str
    """The generation policy set."""
    reasons: Sequence[str]
    """Suppress reasons, in the order they arose."""
    detail: Mapping[str, Any]
    """JSON facts per tier (keyword categories, parsed assessments without evidence)."""
    trace_id: str | None = None
    """The trace run of the triage, when one was opened."""


@dataclass(frozen=True, slots=True)
class StoredAssessment:
    """A recorded triage as read back."""

    id: str
    trace_id: str | None
    conversation_id: str
    purpose: str
    at: dt.datetime
    day: dt.date
    """UTC day of ``at``; trends count by it."""
    text_fingerprint: str
    status: str
    level: str | None
    tier: str
    confirmed: bool
    policy: str
    reasons: tuple[str, ...]
    detail: Mapping[str, Any]


class SqlAssessmentLog:
    """Records triages in ``risk_assessments`` and leases ``risk_flights``.

    Reach it as ``Store.assessments``.
    """

    def __init__(
        self,
        db: Database,
        *,
        fingerprint: Callable[[str], str],
        pending: PendingRuns | None = None,
    ) -> None:
        """Use ``db``; ``fingerprint`` is the store's HMAC of a text.

        With ``pending`` (the trace writer's reserved runs), recording an assessment of a
        reserved run writes the run's header in the same transaction.
        """
        self._db = db
        self._fingerprint = fingerprint
        self._pending = pending if pending is not None else PendingRuns(db)
        self._take_flight = db.insert_ignoring_conflict_of(risk_flights, ["conversation_id"])

    def fingerprint(self, text: str) -> str:
        """The HMAC recorded for ``text``."""
        return self._fingerprint(text)

    async def record(self, row: NewAssessment, *, text: str) -> str:
        """Record one triage of ``text`` (only its fingerprint is written) and return its id.

        Raises:
            StoreError: the row could not be written.
            UsageError: ``row.at`` is naive.
        """
        values = self._values(row, text)

        def work(conn: Connection) -> None:
            _INSERT.run(conn, [values])

        if row.trace_id is None:
            await self._db.run_write("record_assessment", work)
        else:
            await self._pending.run("record_assessment", row.trace_id, work)
        return str(values["id"])

    def hold(self, row: NewAssessment, *, text: str) -> str:
        """Hold one triage's record for the next write of its run, and return its id.

        For a record nothing acts on outside the run before that write commits: the
        pipeline's triage of a message that made no model call (it cannot alert, and
        its run's commit, which the reply waits for, carries it). A run that is dropped
        drops the record with it.

        Raises:
            UsageError: ``row.at`` is naive, or ``row.trace_id`` is ``None`` (a record
                held for no run would never be written).
        """
        if row.trace_id is None:
            raise UsageError("an assessment can be held only for a run (trace_id)")
        values = self._values(row, text)
        self._pending.hold(row.trace_id, _INSERT, values)
        return str(values["id"])

    def _values(self, row: NewAssessment, text: str) -> dict[str, Any]:
        at = require_utc(row.at, "row.at")
        return {
            "id": new_trace_id(at),
            "trace_id": row.trace_id,
            "conversation_id": row.conversation_id,
            "purpose": row.purpose,
            "at": at,
            "day": utc_day(at),
            "text_fingerprint": self._fingerprint(text),
            "status": row.status,
            "level": row.level,
            "tier": row.tier,
            "confirmed": row.confirmed,
            "policy": row.policy,
            "reasons": list(row.reasons),
            "detail": dict(row.detail),
        }

    async def get(self, assessment_id: str) -> StoredAssessment | None:
        """One recorded triage, or ``None``.

        Raises:
            StoreError: the store could not be read.
        """
        async with self._db.read("get_assessment") as conn:
            row = (
                await conn.execute(
                    select(risk_assessments).where(risk_assessments.c.id == assessment_id)
                )
            ).first()
        return None if row is None else _stored(row)

    async def for_conversation(self, conversation_id: str) -> list[StoredAssessment]:
        """Every recorded triage of a conversation, oldest first.

        Raises:
            StoreError: the store could not be read.
        """
        async with self._db.read("list_assessments") as conn:
            rows = (
                await conn.execute(
                    select(risk_assessments)
                    .where(risk_assessments.c.conversation_id == conversation_id)
                    .order_by(risk_assessments.c.at, risk_assessments.c.id)
                )
            ).all()
        return [_stored(row) for row in rows]

    async def levels_since(
        self, conversation_id: str, first_day: dt.date
    ) -> list[tuple[dt.date, str]]:
        """``(day, level)`` of the live, usable triages of a conversation since ``first_day``.

        Test and calibration rows never count, and neither do ``unknown`` ones.

        Raises:
            StoreError: the store could not be read.
        """
        async with self._db.read("assessment_levels") as conn:
            rows = (
                await conn.execute(
                    select(risk_assessments.c.day, risk_assessments.c.level).where(
                        risk_assessments.c.conversation_id == conversation_id,
                        risk_assessments.c.purpose == "live",
                        risk_assessments.c.status == "ok",
                        risk_assessments.c.day >= first_day,
                    )
                )
            ).all()
        return [(row.day, row.level) for row in rows if row.level is not None]

    async def recent(
        self, conversation_id: str, *, purpose: str, since: dt.datetime, limit: int
    ) -> list[StoredAssessment]:
        """The triages of a conversation of ``purpose`` at or after ``since``, newest first.

        At most ``limit`` of them: what a conversation's crisis state is read from.

        Raises:
            StoreError: the store could not be read.
            UsageError: ``since`` is naive.
        """
        since = require_utc(since, "since")
        table = risk_assessments.c
        async with self._db.read("recent_assessments") as conn:
            rows = (
                await conn.execute(
                    select(risk_assessments)
                    .where(
                        table.conversation_id == conversation_id,
                        table.purpose == purpose,
                        table.day >= utc_day(since),  # the index's column
                        table.at >= since,
                    )
                    .order_by(table.at.desc(), table.id.desc())
                    .limit(limit)
                )
            ).all()
        return [_stored(row) for row in rows]

    async def acquire_flight(
        self, conversation_id: str, *, now: dt.datetime, ttl_s: float
    ) -> str | None:
        """Take the conversation's analysis lease, or ``None`` when another one holds it.

        A lease past its expiry (its holder crashed) is taken over. Works across every
        process on the database, since the lease is a row with the conversation as key.

        Returns:
            The token that :meth:`release_flight` needs, or ``None``.

        Raises:
            StoreError: the store could not be written.
        """
        now = require_utc(now, "now")
        token = secrets.token_hex(16)
        expired = {"flight_conversation": conversation_id, "flight_now": now}
        lease = {
            "conversation_id": conversation_id,
            "token": token,
            "started_at": now,
            "expires_at": now + dt.timedelta(seconds=ttl_s),
        }

        def work(conn: Connection) -> bool:
            conn.execute(_EXPIRED_FLIGHT, expired)
            return conn.execute(self._take_flight, lease).rowcount == 1

        async def give_back(taken: bool) -> None:
            if taken:
                await self.release_flight(conversation_id, token)

        # A lease nobody will give back would hold the conversation until it expires.
        write = self._db.run_shared_write("acquire_flight", work)
        return token if await self._db.run_undoable(write, give_back) else None

    async def release_flight(self, conversation_id: str, token: str) -> None:
        """Give the lease back; a lease taken over since (after expiry) is left alone.

        Raises:
            StoreError: the store could not be written.
        """
        params = {"flight_conversation": conversation_id, "flight_token": token}
        await self._db.run_statement("release_flight", _OWN_FLIGHT, params, write=True)


def _stored(row: Any) -> StoredAssessment:
    return StoredAssessment(
        id=row.id,
        trace_id=row.trace_id,
        conversation_id=row.conversation_id,
        purpose=row.purpose,
        at=row.at,
        day=row.day,
        text_fingerprint=row.text_fingerprint,
        status=row.status,
        level=row.level,
        tier=row.tier,
        confirmed=bool(row.confirmed),
        policy=row.policy,
        reasons=tuple(row.reasons),
        detail=row.detail,
    )
