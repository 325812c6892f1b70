"""The spend ledger over the store: daily calls and spend per key, reserved atomically."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Insert,
    String,
    Update,
    bindparam,
    insert,
    literal,
    select,
    update,
)

from foureyes.core.budget import Reservation, SpendLimit, SpendUsage, utc_day
from foureyes.core.errors import BudgetExhausted, StoreError, UsageError
from foureyes.core.ids import random_hex
from foureyes.store._clock import WallClock, require_utc, utc_now
from foureyes.store._database import Database
from foureyes.store.tables import spend_days, spend_reservations

__all__ = ["SqlSpendLedger"]

_NANO = 1_000_000_000

_days = spend_days.c
_reservations = spend_reservations.c


def _nano(usd: float, what: str) -> int:
    if not math.isfinite(usd) or usd < 0:
        raise UsageError(f"{what} must be a finite, non-negative amount of USD, got {usd!r}")
    return round(usd * _NANO)


def _count(calls: int, what: str) -> int:
    if calls < 0:
        raise UsageError(f"{what} must not be negative, got {calls!r}")
    return calls


# The statements are built once, with their values as parameters: building a statement
# per call cost more than running it (benchmarks/README.md, "Daily budgets").
# In an UPDATE a parameter named after a column would set that column: none is.
_DAY = (_days.key == bindparam("ledger_key")) & (_days.day == bindparam("ledger_day"))


def _reserve_statement(calls_limited: bool, usd_limited: bool) -> Update:
    """Add to the day's reserved sums only if every limit that is set still holds."""
    calls = bindparam("add_calls", type_=BigInteger)
    usd = bindparam("add_usd_nano", type_=BigInteger)
    where: list[ColumnElement[bool]] = [_DAY]
    if calls_limited:
        where.append(_days.calls + _days.reserved_calls + calls <= bindparam("max_calls"))
    if usd_limited:
        where.append(_days.usd_nano + _days.reserved_usd_nano + usd <= bindparam("max_usd_nano"))
    return (
        update(spend_days)
        .where(*where)
        .values(
            reserved_calls=_days.reserved_calls + calls,
            reserved_usd_nano=_days.reserved_usd_nano + usd,
        )
    )


_RESERVE = {
    (calls, usd): _reserve_statement(calls, usd) for calls in (False, True) for usd in (False, True)
}
_NEW_RESERVATION = spend_reservations.insert()
_SETTLE = (
    update(spend_reservations)
    .where(_reservations.id == bindparam("reservation"), _reservations.state == "reserved")
    .values(
        state=bindparam("new_state"),
        used_calls=bindparam("settled_calls", type_=BigInteger),
        used_usd_nano=bindparam("settled_usd_nano", type_=BigInteger),
        settled_at=bindparam("settled", type_=_reservations.settled_at.type),
    )
    .returning(_reservations.key, _reservations.day, _reservations.calls, _reservations.usd_nano)
)
_MOVE_TO_USED = (
    update(spend_days)
    .where(_DAY)
    .values(
        calls=_days.calls + bindparam("used_calls", type_=BigInteger),
        usd_nano=_days.usd_nano + bindparam("used_usd", type_=BigInteger),
        reserved_calls=_days.reserved_calls - bindparam("held_calls", type_=BigInteger),
        reserved_usd_nano=_days.reserved_usd_nano - bindparam("held_usd", type_=BigInteger),
    )
)
_USAGE = select(spend_days).where(_DAY)
_STATE = select(_reservations.state).where(_reservations.id == bindparam("reservation"))


# On PostgreSQL a reserve and a settlement are each one statement (a data-modifying
# ``WITH``), run without a transaction around it (``Database.run_statement``): atomic by
# itself, and a transaction of two or three statements cost more than its work.
def _reserve_in_one(take: Update) -> Insert:
    """Take the room and insert the reservation, or do neither: no row when refused."""
    taken = take.returning(_days.key, _days.day).cte("taken")
    chosen = select(
        bindparam("reservation", type_=String),
        taken.c.key,
        taken.c.day,
        bindparam("add_calls", type_=BigInteger),
        bindparam("add_usd_nano", type_=BigInteger),
        literal("reserved", String),
        bindparam("created", type_=_reservations.created_at.type),
    )
    columns = ["id", "key", "day", "calls", "usd_nano", "state", "created_at"]
    return insert(spend_reservations).from_select(columns, chosen).returning(_reservations.id)


_RESERVE_IN_ONE = {limits: _reserve_in_one(take) for limits, take in _RESERVE.items()}
_held = _SETTLE.cte("held")
_SETTLE_IN_ONE = (
    update(spend_days)
    .where(_days.key == _held.c.key, _days.day == _held.c.day)
    .values(
        calls=_days.calls + bindparam("used_calls", type_=BigInteger),
        usd_nano=_days.usd_nano + bindparam("used_usd", type_=BigInteger),
        reserved_calls=_days.reserved_calls - _held.c.calls,
        reserved_usd_nano=_days.reserved_usd_nano - _held.c.usd_nano,
    )
    .returning(_days.key)
)


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
    On SQLite each write is a transaction that joins the group commit with the runs'
    records (:meth:`~foureyes.store._database.Database.run_shared_write`); on PostgreSQL a
    reserve and a settlement are one statement each. Get one from
    :attr:`foureyes.store.Store.ledger`.
    """

    def __init__(self, db: Database, *, clock: WallClock = utc_now) -> None:
        self._db = db
        self._clock = clock
        self._first_of_day = db.insert_ignoring_conflict_of(spend_days, ["key", "day"]).values(
            key=bindparam("ledger_key"),
            day=bindparam("ledger_day"),
            calls=0,
            usd_nano=0,
            reserved_calls=0,
            reserved_usd_nano=0,
        )

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

        If the caller is cancelled meanwhile, the write still runs to its end, and a
        reservation it made is released at once (``Database.run_undoable``).
        """
        calls = _count(calls, "reserved calls")
        usd_nano = _nano(usd, "reserved usd")
        now = require_utc(self._clock(), "the ledger clock")
        day = utc_day(now)
        params: dict[str, Any] = {
            "ledger_key": limit.key,
            "ledger_day": day,
            "add_calls": calls,
            "add_usd_nano": usd_nano,
        }
        if limit.max_calls is not None:
            params["max_calls"] = limit.max_calls
        if limit.max_usd is not None:
            params["max_usd_nano"] = _nano(limit.max_usd, "max_usd")
        limits = (limit.max_calls is not None, limit.max_usd is not None)
        reservation = Reservation(id=random_hex(16), key=limit.key, day=day, calls=calls, usd=usd)
        if self._db.dialect == "postgresql":
            params |= {"reservation": reservation.id, "created": now}
            write = self._reserve_in_one(limit, limits, params)
        else:
            row = {
                "id": reservation.id,
                "key": limit.key,
                "day": day,
                "calls": calls,
                "usd_nano": usd_nano,
                "state": "reserved",
                "created_at": now,
            }
            take = _RESERVE[limits]

            def work(conn: Connection) -> None:
                conn.execute(self._first_of_day, params)
                if conn.execute(take, params).rowcount != 1:
                    raise _exhausted(_day_row(conn, params), limit, calls, usd_nano)
                conn.execute(_NEW_RESERVATION, row)

            write = self._db.run_shared_write("reserve", work)
        # A reservation nobody will settle would hold its room until the day ends.
        await self._db.run_undoable(write, lambda _: self.release(reservation))
        return reservation

    async def _reserve_in_one(
        self, limit: SpendLimit, limits: tuple[bool, bool], params: dict[str, Any]
    ) -> None:
        statement = _RESERVE_IN_ONE[limits]
        if await self._db.run_statement("reserve", statement, params, write=True):
            return
        # No row: the day's first reservation (no day row yet), or a limit refused it.
        await self._db.run_statement("reserve", self._first_of_day, params, write=True)
        if await self._db.run_statement("reserve", statement, params, write=True):
            return
        rows = await self._db.run_statement("reserve", _USAGE, params, write=False)
        raise _exhausted(rows[0], limit, params["add_calls"], params["add_usd_nano"])

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
        rows = await self._db.run_statement(
            "usage", _USAGE, {"ledger_key": key, "ledger_day": day}, write=False
        )
        if not rows:
            return SpendUsage(
                key=key, day=day, calls=0, usd=0.0, reserved_calls=0, reserved_usd=0.0
            )
        row = rows[0]
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
        committing = operation == "commit"
        settle = {
            "reservation": reservation.id,
            "new_state": "committed" if committing else "released",
            "settled_calls": used_calls if committing else None,
            "settled_usd_nano": used_nano if committing else None,
            "settled": now,
        }
        moved = {"used_calls": used_calls, "used_usd": used_nano}
        if self._db.dialect == "postgresql":
            if not await self._db.run_statement(
                operation, _SETTLE_IN_ONE, settle | moved, write=True
            ):
                rows = await self._db.run_statement(operation, _STATE, settle, write=False)
                raise _unsettled_error(operation, reservation.id, rows)
            return

        def work(conn: Connection) -> None:
            # Flipping the state is the first write: of two concurrent settlements of the
            # same reservation exactly one matches ``state = 'reserved'``.
            held = conn.execute(_SETTLE, settle).first()
            if held is None:
                states = conn.execute(_STATE, settle).all()
                raise _unsettled_error(operation, reservation.id, states)
            # The row's own amounts are returned, not the caller's copy: the database is
            # the record of what was reserved.
            conn.execute(
                _MOVE_TO_USED,
                moved
                | {
                    "ledger_key": held.key,
                    "ledger_day": held.day,
                    "held_calls": held.calls,
                    "held_usd": held.usd_nano,
                },
            )

        await self._db.run_shared_write(operation, work)


def _day_row(conn: Connection, params: dict[str, Any]) -> Any:
    return conn.execute(_USAGE, params).one()


def _exhausted(row: Any, limit: SpendLimit, calls: int, usd_nano: int) -> BudgetExhausted:
    """The refusal of a reservation of ``calls`` and ``usd_nano`` against the day's ``row``."""
    calls_after = row.calls + row.reserved_calls + calls
    if limit.max_calls is not None and (limit.max_usd is None or calls_after > limit.max_calls):
        return BudgetExhausted(f"{limit.key} daily calls", calls_after, limit.max_calls)
    # The conditional UPDATE only fails on a limit that is set.
    assert limit.max_usd is not None
    usd_after = (row.usd_nano + row.reserved_usd_nano + usd_nano) / _NANO
    return BudgetExhausted(f"{limit.key} daily usd", usd_after, limit.max_usd)


def _unsettled_error(operation: str, reservation_id: str, states: Sequence[Any]) -> StoreError:
    """Why a settlement matched no reserved row: ``states`` holds the row's state, if any."""
    if not states:
        return StoreError(operation, f"reservation {reservation_id!r} is unknown")
    return StoreError(operation, f"reservation {reservation_id!r} is already {states[0].state}")
