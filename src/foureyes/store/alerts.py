"""Guardian-alert records in the store: decisions and send attempts (plus consent).

Times are passed in by the caller (the alert service owns its clock), so a cooldown or a
daily cap is measured on the same clock that stamps the records.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import func, select, update

from foureyes.core.errors import StoreError
from foureyes.store._clock import require_utc
from foureyes.store.consent import SqlConsentRecords, new_record_id
from foureyes.store.tables import alert_attempts, alert_decisions

__all__ = ["AttemptLimits", "AttemptStart", "AttemptState", "PendingAttempt", "SqlAlertRecords"]

AttemptState = Literal["pending", "sent", "failed"]
"""A send attempt: recorded ``pending`` before the notifier runs, then ``sent`` or ``failed``."""

_MAX_ERROR = 500
# PostgreSQL: every transaction that starts an attempt takes this transaction-scoped lock
# first, so the cooldown and the daily cap are checked and taken by one writer at a time
# across every instance (SQLite's BEGIN IMMEDIATE already serialises writers).
_ATTEMPT_LOCK_KEY = 0x46_6F_75_72_41_6C_72_74  # "FourAlrt"


def _last_reaching(contact_id: str) -> Any:
    # pending counts (its outcome is unknown, so it may have been delivered); failed does not.
    return select(func.max(alert_attempts.c.created_at)).where(
        alert_attempts.c.contact_id == contact_id,
        alert_attempts.c.state.in_(("pending", "sent")),
    )


def _attempts_since(since: dt.datetime) -> Any:
    return select(func.count()).where(alert_attempts.c.created_at >= require_utc(since, "since"))


@dataclass(frozen=True, slots=True)
class AttemptLimits:
    """The rate limits an attempt must still meet when it is recorded, with their reasons."""

    cooldown: dt.timedelta
    """No attempt that may have reached the contact within this long before."""
    daily_cap: int
    """At most this many attempts since ``day_start``, every conversation counted."""
    day_start: dt.datetime
    """The start of the current UTC day."""
    cooldown_reason: str
    """The decision's reason when the cooldown holds it back."""
    cap_reason: str
    """The decision's reason when the daily cap holds it back."""
    duplicate_reason: str
    """The decision's reason when the episode was attempted already."""


@dataclass(frozen=True, slots=True)
class AttemptStart:
    """What :meth:`SqlAlertRecords.begin_attempt` recorded."""

    attempt_id: str | None
    """The ``pending`` attempt's id; ``None``: nothing may be sent."""
    blocked: str | None
    """Why not (a reason from :class:`AttemptLimits`); ``None`` when the attempt began."""


@dataclass(frozen=True, slots=True)
class PendingAttempt:
    """A send attempt as recorded."""

    id: str
    decision_id: str
    contact_id: str
    created_at: dt.datetime
    state: str
    tries: int
    last_error: str | None


class SqlAlertRecords(SqlConsentRecords):
    """The alert tables of the store, consent and contacts included.

    Reach it as :attr:`Store.alerts <foureyes.store.Store.alerts>`.
    """

    async def last_alert_to(self, contact_id: str) -> dt.datetime | None:
        """When the newest attempt to the contact that may have reached it was recorded.

        ``pending`` counts (its outcome is unknown, so it may have been delivered);
        ``failed`` does not (nothing reached the contact).

        Raises:
            StoreError: the read failed.
        """
        async with self._db.read("last_alert_to") as conn:
            value = (await conn.execute(_last_reaching(contact_id))).scalar_one()
        return None if value is None else _utc(value)

    async def attempts_since(self, since: dt.datetime) -> int:
        """Live send attempts recorded at or after ``since``, whatever their state.

        Raises:
            StoreError: the read failed.
        """
        async with self._db.read("attempts_since") as conn:
            value = (await conn.execute(_attempts_since(since))).scalar_one()
        return int(value)

    async def episode_attempted(self, conversation_id: str, contact_id: str, episode: str) -> bool:
        """Whether an attempt exists for this conversation, contact and episode.

        Raises:
            StoreError: the read failed.
        """
        async with self._db.read("episode_attempted") as conn:
            value = (
                await conn.execute(
                    select(func.count()).where(
                        alert_attempts.c.conversation_id == conversation_id,
                        alert_attempts.c.contact_id == contact_id,
                        alert_attempts.c.episode == episode,
                    )
                )
            ).scalar_one()
        return int(value) > 0

    async def record_blocked(
        self,
        *,
        at: dt.datetime,
        purpose: str,
        conversation_id: str,
        episode: str,
        assessment_id: str | None,
        contact_id: str | None,
        reason: str,
    ) -> str:
        """Record an alert evaluation that sent nothing, with the precondition that failed.

        Raises:
            StoreError: the write failed.
        """
        decision_id = new_record_id()
        async with self._db.write("record_blocked") as conn:
            await conn.execute(
                alert_decisions.insert().values(
                    id=decision_id,
                    at=require_utc(at, "at"),
                    purpose=purpose,
                    conversation_id=conversation_id,
                    episode=episode,
                    assessment_id=assessment_id,
                    contact_id=contact_id,
                    outcome="blocked",
                    reason=reason,
                )
            )
        return decision_id

    async def begin_attempt(
        self,
        *,
        at: dt.datetime,
        conversation_id: str,
        episode: str,
        assessment_id: str | None,
        contact_id: str,
        message_sha256: str,
        notifier: str,
        limits: AttemptLimits,
    ) -> AttemptStart:
        """Record a live evaluation and its ``pending`` attempt, before anything is sent.

        Both rows are written in one transaction, which first checks ``limits`` again
        (the cooldown of the contact and the daily cap): writers take turns here (SQLite's
        write lock; a transaction-scoped advisory lock on PostgreSQL), so concurrent
        evaluations that each read the limits as free cannot together exceed them. When
        a limit holds the attempt back, or an attempt for the same conversation, contact
        and episode already exists (the database refuses it), the evaluation is recorded
        as blocked with that reason instead.

        Raises:
            StoreError: the write failed; nothing may be sent then.
        """
        at = require_utc(at, "at")
        decision_id, attempt_id = new_record_id(), new_record_id()
        decision = {
            "id": decision_id,
            "at": at,
            "purpose": "live",
            "conversation_id": conversation_id,
            "episode": episode,
            "assessment_id": assessment_id,
            "contact_id": contact_id,
            "outcome": "attempted",
            "reason": "attempted",
        }
        attempt = {
            "id": attempt_id,
            "decision_id": decision_id,
            "conversation_id": conversation_id,
            "contact_id": contact_id,
            "episode": episode,
            "created_at": at,
            "state": "pending",
            "tries": 0,
            "last_error": None,
            "settled_at": None,
            "message_sha256": message_sha256,
            "notifier": notifier,
        }
        async with self._db.write("begin_attempt") as conn:
            if self._db.dialect == "postgresql":
                await conn.execute(select(func.pg_advisory_xact_lock(_ATTEMPT_LOCK_KEY)))
            held = await _held_back(conn, contact_id, at, limits)
            if held is not None:
                await conn.execute(
                    alert_decisions.insert().values(
                        **(decision | {"outcome": "blocked", "reason": held})
                    )
                )
                return AttemptStart(None, held)
            await conn.execute(alert_decisions.insert().values(**decision))
            taken = await conn.execute(
                self._db.insert_ignoring_conflict(
                    alert_attempts, attempt, ["conversation_id", "contact_id", "episode"]
                )
            )
            if taken.rowcount == 1:
                return AttemptStart(attempt_id, None)
            await conn.execute(
                update(alert_decisions)
                .where(alert_decisions.c.id == decision_id)
                .values(outcome="blocked", reason=limits.duplicate_reason)
            )
        return AttemptStart(None, limits.duplicate_reason)

    async def record_try(
        self,
        attempt_id: str,
        *,
        tries: int,
        error: str | None,
        state: AttemptState,
        at: dt.datetime,
    ) -> None:
        """Record the outcome of a try: ``pending`` (a retry follows), ``sent`` or ``failed``.

        Raises:
            StoreError: the attempt is unknown or already settled, or the write failed.
        """
        values: dict[str, Any] = {
            "tries": tries,
            "last_error": None if error is None else error[:_MAX_ERROR],
            "state": state,
        }
        if state != "pending":
            values["settled_at"] = require_utc(at, "at")
        async with self._db.write("record_try") as conn:
            result = await conn.execute(
                update(alert_attempts)
                .where(alert_attempts.c.id == attempt_id, alert_attempts.c.state == "pending")
                .values(**values)
            )
            if result.rowcount != 1:
                raise StoreError("record_try", f"attempt {attempt_id!r} is unknown or settled")

    async def attempts(self, *, state: AttemptState | None = None) -> list[PendingAttempt]:
        """Recorded attempts, oldest first.

        ``state="pending"`` lists the unsettled ones: a process that stopped mid-send
        leaves them for an operator to see.

        Raises:
            StoreError: the read failed.
        """
        query = select(alert_attempts).order_by(alert_attempts.c.created_at)
        if state is not None:
            query = query.where(alert_attempts.c.state == state)
        async with self._db.read("list_attempts") as conn:
            rows = (await conn.execute(query)).all()
        return [
            PendingAttempt(
                id=r.id,
                decision_id=r.decision_id,
                contact_id=r.contact_id,
                created_at=r.created_at,
                state=r.state,
                tries=r.tries,
                last_error=r.last_error,
            )
            for r in rows
        ]

    async def decisions(self, conversation_id: str) -> list[dict[str, Any]]:
        """The alert evaluations of a conversation, oldest first, as plain rows.

        Raises:
            StoreError: the read failed.
        """
        async with self._db.read("list_alert_decisions") as conn:
            rows = (
                await conn.execute(
                    select(alert_decisions)
                    .where(alert_decisions.c.conversation_id == conversation_id)
                    .order_by(alert_decisions.c.at, alert_decisions.c.id)
                )
            ).all()
        return [dict(r._mapping) for r in rows]


async def _held_back(
    conn: Any, contact_id: str, at: dt.datetime, limits: AttemptLimits
) -> str | None:
    """The reason a limit holds an attempt back, read inside the attempt's transaction."""
    last = (await conn.execute(_last_reaching(contact_id))).scalar_one()
    if last is not None and at - _utc(last) < limits.cooldown:
        return limits.cooldown_reason
    if (await conn.execute(_attempts_since(limits.day_start))).scalar_one() >= limits.daily_cap:
        return limits.cap_reason
    return None


def _utc(value: dt.datetime) -> dt.datetime:
    # Aggregates bypass the column type, so SQLite hands back a naive UTC value.
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
