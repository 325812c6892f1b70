"""Per-key token buckets in the store, shared by every process on the database.

Each statement is one ``INSERT ... ON CONFLICT DO UPDATE`` (SQLite and PostgreSQL alike)
that computes the refill, takes what it may and returns the result: :meth:`SqlRateBuckets.take`
one token per request, :meth:`SqlRateBuckets.lease` up to ``want`` tokens at once (as many
whole tokens as the bucket holds, at most ``want``), which a process then spends itself
(:class:`foureyes.server.limits.StoreRateLimiter`), so one statement serves several requests.
The database runs it atomically on the key's row (PostgreSQL's row lock, SQLite's write
lock), so processes taking tokens at once never take more than the bucket holds. Times are
the store clock's seconds since the epoch; a row's time never moves backwards, so an
instance whose clock lags refills nothing rather than extra. :func:`bucket_lease` is the
same arithmetic in Python, for the tests and the proofs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Integer, bindparam, case, cast, delete, func
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.types import Double

from foureyes.core.errors import UsageError
from foureyes.store._clock import WallClock, require_utc, utc_now
from foureyes.store._database import Database
from foureyes.store.tables import rate_buckets

__all__ = ["BucketLease", "BucketTake", "SqlRateBuckets", "bucket_lease"]


@dataclass(frozen=True, slots=True)
class BucketTake:
    """What one request got from its key's bucket."""

    granted: bool
    """Whether a token was taken."""
    tokens: float
    """Tokens left in the bucket after the request (fractional while it refills)."""


@dataclass(frozen=True, slots=True)
class BucketLease:
    """What one lease got from its key's bucket."""

    taken: int
    """Whole tokens taken: as many as the bucket held, at most the ``want`` asked for."""
    tokens: float
    """Tokens left in the bucket after the lease (fractional while it refills)."""
    at: float
    """The store clock's time of the lease (seconds since the epoch), as the statement used it."""


def bucket_lease(
    held: tuple[float, float] | None, *, now: float, want: int, rate_per_s: float, burst: int
) -> tuple[int, float, float]:
    """The lease statement's arithmetic: ``(taken, tokens after, time after)``.

    ``held`` is the row (tokens, time) or ``None`` for a key without one (a full bucket).
    The bucket refills by the time since the row's, capped at ``burst``; the lease takes
    ``min(want, floor(level))``; the row's time becomes ``max(time, now)``.
    """
    if held is None:
        level, at = float(burst), now
    else:
        tokens, at = held
        level = min(float(burst), tokens + (now - at if now > at else 0.0) * rate_per_s)
    taken = min(want, math.floor(level))
    return taken, level - taken, max(at, now)


def _refilled(now: Any, rate: Any) -> Any:
    """What a bucket holds at ``now``: its tokens plus the refill since, not yet capped."""
    held, at = rate_buckets.c.tokens, rate_buckets.c.updated_at
    return held + case((now > at, now - at), else_=0.0) * rate


def _lease_statement(dialect: str) -> Any:
    now = bindparam("now", type_=Double)
    rate = bindparam("rate", type_=Double)
    burst = bindparam("burst", type_=Double)
    want = bindparam("want", type_=Integer)
    at = rate_buckets.c.updated_at
    refilled = _refilled(now, rate)
    level = case((refilled > burst, burst), else_=refilled)
    # floor: PostgreSQL's CAST to integer rounds, SQLite's truncates (the level is >= 0).
    whole = func.floor(level) if dialect == "postgresql" else cast(level, Integer)
    taken = cast(case((whole >= want, want), else_=whole), Integer)
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(rate_buckets)
    # A new key's bucket starts full, so its first lease gets min(want, burst) tokens.
    insert = insert.values(
        key=bindparam("key"),
        tokens=bindparam("first_tokens", type_=Double),
        updated_at=now,
        granted=True,
        taken=bindparam("first_taken", type_=Integer),
    )
    return insert.on_conflict_do_update(
        index_elements=[rate_buckets.c.key],
        set_={
            "tokens": level - taken,
            "granted": taken >= 1,
            "taken": taken,
            "updated_at": case((now > at, now), else_=at),
        },
    ).returning(rate_buckets.c.taken, rate_buckets.c.tokens)


def _check_bucket(rate_per_s: float, burst: int) -> None:
    if not (math.isfinite(rate_per_s) and rate_per_s > 0) or burst < 1:
        raise UsageError("rate_per_s must be positive and finite, burst at least 1")


class SqlRateBuckets:
    """Token buckets per key in ``rate_buckets``; get one from :attr:`Store.rate_buckets`."""

    def __init__(self, db: Database, *, clock: WallClock = utc_now) -> None:
        self._db = db
        self._clock = clock
        self._statement = _lease_statement(db.dialect)

    def now(self) -> float:
        """The store clock's time, in seconds since the epoch (the buckets' time)."""
        return require_utc(self._clock(), "the store clock").timestamp()

    async def take(self, key: str, *, rate_per_s: float, burst: int) -> BucketTake:
        """Take one token from ``key``'s bucket (``burst`` tokens, refilled at ``rate_per_s``).

        Raises:
            UsageError: the rate is not positive and finite, or ``burst`` is below 1.
            StoreError: the store could not be written; the caller must refuse the request.
        """
        lease = await self.lease(key, want=1, rate_per_s=rate_per_s, burst=burst)
        return BucketTake(granted=lease.taken == 1, tokens=lease.tokens)

    async def lease(self, key: str, *, want: int, rate_per_s: float, burst: int) -> BucketLease:
        """Take up to ``want`` whole tokens from ``key``'s bucket at once (:func:`bucket_lease`).

        Raises:
            UsageError: the rate is not positive and finite, ``burst`` is below 1, or
                ``want`` is below 1.
            StoreError: the store could not be written; the caller must refuse the request.
        """
        _check_bucket(rate_per_s, burst)
        if want < 1:
            raise UsageError("a lease must want at least 1 token")
        now = self.now()
        first = min(want, burst)
        params = {
            "key": key,
            "now": now,
            "rate": rate_per_s,
            "burst": float(burst),
            "want": want,
            "first_taken": first,
            "first_tokens": float(burst - first),
        }
        # One statement, atomic on the key's row: a transaction of its own. The update
        # has no condition, so it returns the key's row whether inserted or updated.
        rows = await self._db.run_statement("rate_limit", self._statement, params, write=True)
        return BucketLease(taken=int(rows[0].taken), tokens=float(rows[0].tokens), at=now)

    async def forget_full(self, *, rate_per_s: float, burst: int) -> int:
        """Delete every bucket that has refilled to ``burst``; the number deleted.

        A full bucket is the same as none (a key's first request finds its bucket full),
        so this changes no decision; it keeps the table to the keys seen within one
        refill of the burst. A request taking from a bucket meanwhile is not lost: the
        database orders the two on the row, and a bucket it took from is no longer full.

        Raises:
            UsageError: the rate is not positive and finite, or ``burst`` is below 1.
            StoreError: the store could not be written.
        """
        _check_bucket(rate_per_s, burst)
        now = self.now()
        statement = delete(rate_buckets).where(_refilled(now, rate_per_s) >= float(burst))

        def work(conn: Connection) -> int:
            return int(conn.execute(statement).rowcount)

        return await self._db.run_write("forget_full_buckets", work)
