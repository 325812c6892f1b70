"""The spend ledger over the store: daily calls and spend per key, reserved atomically."""

from __future__ import annotations

import datetime as dt
import math
import uuid
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from foureyes.core.budget import Reservation, SpendLimit, SpendUsage, utc_day
from foureyes.core.errors import BudgetExhausted, StoreError, UsageError
from foureyes.store._clock import WallClock, require_utc, utc_now
from foureyes.store._database import Database
from foureyes.store.tables import spend_days, spend_reservations

__all__ = ["SqlSpendLedger"]

_NANO = 1_000_000_000


def _nano(usd: float, what: str) -> int:
    if not math.isfinite(usd) or usd < 0:
        raise UsageError(f"{what} must be a finite, non-negative amount of USD, got {usd!r}")
    return round(usd * _NANO)


def _count(calls: int, what: str) -> int:
    if calls < 0:
        raise UsageError(f"{what} must not be negative, got {calls!r}")
    return calls


class SqlSpendLedger:
    """Daily calls and spend per ledger key in the store's ``spend_*`` tables.

    Each reservation is a row, and the day's sums are one row per key and UTC day, so
    use and open reservations survive restarts and are shared by every process on the
    database. :meth:`reserve` takes its room with one conditional ``UPDATE`` that checks
    the limit and adds to the reserved sums in the same statement: the database
    serialises it, so concurrent workers, in one process or many, can never overspend.

    :meth:`commit` and :meth:`release` settle a reservation exactly once; settling one
    that is unknown or already settled raises :class:`~foureyes.core.errors.StoreError`
    and changes nothing, so a retry can never count a call twice. A commit records what
    the call really used even beyond the limit (the call has happened); limits bind the
    next reservation. Amounts are kept in whole nano-dollars, so sums are exact.
    Get one from :attr:`foureyes.store.Store.ledger`.
    """

    def __init__(self, db: Database, *, clock: WallClock = utc_now) -> None:
        self._db = db
        self._clock = clock

    async def reserve(self, limit: SpendLimit, *, calls: int, usd: float) -> Reservation:
        """Reserve room for a call against ``limit`` on the current UTC day.

        Args:
            limit: the key and its daily limits (``None`` means no limit on that dimension).
            calls: calls to reserve, usually 1.
            usd: the call's worst-case cost in USD.

        Raises:
            BudgetExhausted: the call would exceed a daily limit; nothing is reserved.
            StoreError: the ledger cannot be read or written; nothing is reserved.
            UsageError: ``calls`` or ``usd`` is negative or not finite.
        """
        calls = _count(calls, "reserved calls")
        usd_nano = _nano(usd, "reserved usd")
        now = require_utc(self._clock(), "the ledger clock")
        day = utc_day(now)
        where = [spend_days.c.key == limit.key, spend_days.c.day == day]
        if limit.max_calls is not None:
            where.append(
                spend_days.c.calls + spend_days.c.reserved_calls + calls <= limit.max_calls
            )
        if limit.max_usd is not None:
            where.append(
                spend_days.c.usd_nano + spend_days.c.reserved_usd_nano + usd_nano
                <= _nano(limit.max_usd, "max_usd")
            )
        reservation = Reservation(id=uuid.uuid4().hex, key=limit.key, day=day, calls=calls, usd=usd)
        async with self._db.write("reserve") as conn:
            await conn.execute(
                self._db.insert_ignoring_conflict(
                    spend_days,
                    {
                        "key": limit.key,
                        "day": day,
                        "calls": 0,
                        "usd_nano": 0,
                        "reserved_calls": 0,
                        "reserved_usd_nano": 0,
                    },
                    ["key", "day"],
                )
            )
            taken = await conn.execute(
                update(spend_days)
                .where(*where)
                .values(
                    reserved_calls=spend_days.c.reserved_calls + calls,
                    reserved_usd_nano=spend_days.c.reserved_usd_nano + usd_nano,
                )
            )
            if taken.rowcount != 1:
                raise await _exhausted(conn, limit, day, calls, usd_nano)
            await conn.execute(
                spend_reservations.insert().values(
                    id=reservation.id,
                    key=limit.key,
                    day=day,
                    calls=calls,
                    usd_nano=usd_nano,
                    state="reserved",
                    created_at=now,
                )
            )
        return reservation

    async def commit(self, reservation: Reservation, *, calls: int, usd: float) -> None:
        """Record what the reserved call used and drop the reservation, in one transaction.

        Raises:
            StoreError: the reservation is unknown or already settled, or the write failed;
                nothing changes then.
            UsageError: ``calls`` or ``usd`` is negative or not finite.
        """
        used_calls = _count(calls, "committed calls")
        used_nano = _nano(usd, "committed usd")
        await self._settle("commit", reservation, used_calls, used_nano)

    async def release(self, reservation: Reservation) -> None:
        """Drop the reservation without recording use (the call never started).

        Raises:
            StoreError: the reservation is unknown or already settled, or the write failed;
                nothing changes then.
        """
        await self._settle("release", reservation, 0, 0)

    async def usage(self, key: str, day: dt.date) -> SpendUsage:
        """Committed and reserved use of ``key`` on the UTC ``day`` (zeros if none).

        Raises:
            StoreError: the ledger cannot be read.
        """
        async with self._db.read("usage") as conn:
            row = (
                await conn.execute(
                    select(spend_days).where(spend_days.c.key == key, spend_days.c.day == day)
                )
            ).first()
        if row is None:
            return SpendUsage(
                key=key, day=day, calls=0, usd=0.0, reserved_calls=0, reserved_usd=0.0
            )
        return SpendUsage(
            key=key,
            day=day,
            calls=row.calls,
            usd=row.usd_nano / _NANO,
            reserved_calls=row.reserved_calls,
            reserved_usd=row.reserved_usd_nano / _NANO,
        )

    async def _settle(
        self, operation: str, reservation: Reservation, used_calls: int, used_nano: int
    ) -> None:
        now = require_utc(self._clock(), "the ledger clock")
        state = "committed" if operation == "commit" else "released"
        async with self._db.write(operation) as conn:
            # Flipping the state is the first write: of two concurrent settlements of the
            # same reservation exactly one matches ``state = 'reserved'``.
            held = (
                await conn.execute(
                    update(spend_reservations)
                    .where(
                        spend_reservations.c.id == reservation.id,
                        spend_reservations.c.state == "reserved",
                    )
                    .values(
                        state=state,
                        used_calls=used_calls if operation == "commit" else None,
                        used_usd_nano=used_nano if operation == "commit" else None,
                        settled_at=now,
                    )
                    .returning(
                        spend_reservations.c.key,
                        spend_reservations.c.day,
                        spend_reservations.c.calls,
                        spend_reservations.c.usd_nano,
                    )
                )
            ).first()
            if held is None:
                raise await _unsettled_error(conn, operation, reservation.id)
            # The row's own amounts are returned, not the caller's copy: the database is
            # the record of what was reserved.
            await conn.execute(
                update(spend_days)
                .where(spend_days.c.key == held.key, spend_days.c.day == held.day)
                .values(
                    calls=spend_days.c.calls + used_calls,
                    usd_nano=spend_days.c.usd_nano + used_nano,
                    reserved_calls=spend_days.c.reserved_calls - held.calls,
                    reserved_usd_nano=spend_days.c.reserved_usd_nano - held.usd_nano,
                )
            )


async def _exhausted(
    conn: AsyncConnection, limit: SpendLimit, day: dt.date, calls: int, usd_nano: int
) -> BudgetExhausted:
    row: Any = (
        await conn.execute(
            select(spend_days).where(spend_days.c.key == limit.key, spend_days.c.day == day)
        )
    ).one()
    calls_after = row.calls + row.reserved_calls + calls
    if limit.max_calls is not None and (limit.max_usd is None or calls_after > limit.max_calls):
        return BudgetExhausted(f"{limit.key} daily calls", calls_after, limit.max_calls)
    # The conditional UPDATE only fails on a limit that is set.
    assert limit.max_usd is not None
    usd_after = (row.usd_nano + row.reserved_usd_nano + usd_nano) / _NANO
    return BudgetExhausted(f"{limit.key} daily usd", usd_after, limit.max_usd)


async def _unsettled_error(
    conn: AsyncConnection, operation: str, reservation_id: str
) -> StoreError:
    state = (
        await conn.execute(
            select(spend_reservations.c.state).where(spend_reservations.c.id == reservation_id)
        )
    ).scalar_one_or_none()
    if state is None:
        return StoreError(operation, f"reservation {reservation_id!r} is unknown")
    return StoreError(operation, f"reservation {reservation_id!r} is already {state}")
