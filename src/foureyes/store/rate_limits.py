"""Per-key token buckets in the store, shared by every process on the database.

Each request costs one statement: an ``INSERT ... ON CONFLICT DO UPDATE`` (SQLite and
PostgreSQL alike) that computes the refill, takes a token when there is one and returns
the result. The database runs it atomically on the key's row (PostgreSQL's row lock,
SQLite's write lock), so processes taking tokens at once never take more than the bucket
holds. Times are the store clock's seconds since the epoch; a row's time never moves
backwards, so an instance whose clock lags refills nothing rather than extra.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, case, delete
from sqlalchemy.dialects import sqlite
from sqlalchemy.types import Double

from foureyes.core.errors import UsageError
from foureyes.store._clock import WallClock, require_utc, utc_now
from foureyes.store._database import Database
from foureyes.store.tables import rate_buckets

__all__ = ["BucketTake", "SqlRateBuckets"]


@dataclass(frozen=True, slots=True)
class BucketTake:
    """What one request got from its key's bucket."""

    granted: bool
    """Whether a token was taken."""
    tokens: float
    """Tokens left in the bucket after the request (fractional while it refills)."""


def _refilled(now: Any, rate: Any) -> Any:
    """What a bucket holds at ``now``: its tokens plus the refill since, not yet capped."""
    held, at = rate_buckets.c.tokens, rate_buckets.c.updated_at
    return held + case((now > at, now - at), else_=0.0) * rate


def _take_statement(dialect: str) -> Any:
    now = bindparam("now", type_=Double)
    rate = bindparam("rate", type_=Double)
    burst = bindparam("burst", type_=Double)
    at = rate_buckets.c.updated_at
    refilled = _refilled(now, rate)
    level = case((refilled > burst, burst), else_=refilled)
    insert: Any
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql  # loaded for a PostgreSQL store only

        insert = postgresql.insert(rate_buckets)
    else:
        insert = sqlite.insert(rate_buckets)
    # A new key's bucket starts full, so its first request is always granted.
    insert = insert.values(
        key=bindparam("key"),
        tokens=bindparam("first_tokens", type_=Double),
        updated_at=now,
        granted=True,
    )
    return insert.on_conflict_do_update(
        index_elements=[rate_buckets.c.key],
        set_={
            "tokens": case((level >= 1.0, level - 1.0), else_=level),
            "granted": level >= 1.0,
            "updated_at": case((now > at, now), else_=at),
        },
    ).returning(rate_buckets.c.granted, rate_buckets.c.tokens)


def _check_bucket(rate_per_s: float, burst: int) -> None:
    if not (math.isfinite(rate_per_s) and rate_per_s > 0) or burst < 1:
        raise UsageError("rate_per_s must be positive and finite, burst at least 1")


class SqlRateBuckets:
    """Token buckets per key in ``rate_buckets``; get one from :attr:`Store.rate_buckets`."""

    def __init__(self, db: Database, *, clock: WallClock = utc_now) -> None:
        self._db = db
        self._clock = clock
        self._statement = _take_statement(db.dialect)

    async def take(self, key: str, *, rate_per_s: float, burst: int) -> BucketTake:
        """Take one token from ``key``'s bucket (``burst`` tokens, refilled at ``rate_per_s``).

        Raises:
            UsageError: the rate is not positive and finite, or ``burst`` is below 1.
            StoreError: the store could not be written; the caller must refuse the request.
        """
        _check_bucket(rate_per_s, burst)
        params = {
            "key": key,
            "now": require_utc(self._clock(), "the store clock").timestamp(),
            "rate": rate_per_s,
            "burst": float(burst),
            "first_tokens": float(burst) - 1.0,
        }
        # One statement, atomic on the key's row: a transaction of its own. The update
        # has no condition, so it returns the key's row whether inserted or updated.
        rows = await self._db.run_statement("rate_limit", self._statement, params, write=True)
        return BucketTake(granted=bool(rows[0].granted), tokens=float(rows[0].tokens))

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
        now = require_utc(self._clock(), "the store clock").timestamp()
        statement = delete(rate_buckets).where(_refilled(now, rate_per_s) >= float(burst))

        def work(conn: Connection) -> int:
            return int(conn.execute(statement).rowcount)

        return await self._db.run_write("forget_full_buckets", work)
