"""Leased store rate limits: exact across processes, short by at most one lease each.

The arithmetic (the store statement's :func:`bucket_lease` and a process's
:class:`TokenLease`) is checked over interleavings of several lessees; the SQL against the
arithmetic on SQLite and PostgreSQL; the limiter on a real store; and two OS processes,
each with its own store, hammering one key.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import multiprocessing
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, event

from foureyes.config import PrivacyConfig, ServerConfig, StoreConfig, load_config
from foureyes.core.errors import ConfigError, StoreError, UsageError
from foureyes.server.limits import RateDecision, StoreRateLimiter, TokenLease, key_limiter
from foureyes.store import BucketLease, Store
from foureyes.store.rate_limits import bucket_lease
from tests.helpers.clock import ManualClock

# --- the arithmetic ------------------------------------------------------------------


def _simulate(
    *, rate: float, burst: int, size: int, lessees: int, steps: list[tuple[int, float]]
) -> tuple[list[float], int]:
    """Requests at the drawn times, each to the drawn lessee: (times admitted, refusals).

    The store's row follows :func:`bucket_lease`; each lessee spends its lease as
    :class:`StoreRateLimiter` does, asking the store for a new one when it decides nothing.
    """
    row: tuple[float, float] | None = None
    leases: list[TokenLease | None] = [None] * lessees
    now, admitted, refused = 1_000.0, [], 0
    for who, gap in steps:
        now += gap
        lease = leases[who]
        decision = None if lease is None else lease.decide(now, rate)
        if decision is None:
            taken, tokens, at = bucket_lease(row, now=now, want=size, rate_per_s=rate, burst=burst)
            row = (tokens, at)
            lease = leases[who] = TokenLease(BucketLease(taken, tokens, now), burst=burst)
            decision = lease.decide(now, rate)
            assert decision is not None  # a fresh lease always decides
        if decision.allowed:
            admitted.append(now)
        else:
            refused += 1
    return admitted, refused


_steps = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=3),
        st.one_of(st.just(0.0), st.floats(min_value=0, max_value=3)),
    ),
    min_size=1,
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(
    rate=st.floats(min_value=0.05, max_value=5),
    burst=st.integers(min_value=1, max_value=12),
    size_fraction=st.floats(min_value=0, max_value=1),
    lessees=st.integers(min_value=1, max_value=4),
    steps=_steps,
)
def test_no_span_admits_more_than_burst_plus_refill_across_lessees(
    rate: float, burst: int, size_fraction: float, lessees: int, steps: list[tuple[int, float]]
) -> None:
    size = max(1, round(size_fraction * burst))
    steps = [(who % lessees, gap) for who, gap in steps]
    admitted, _ = _simulate(rate=rate, burst=burst, size=size, lessees=lessees, steps=steps)
    # Every span, not only from the start: the lessees together are one bucket.
    for i, start in enumerate(admitted):
        for j in range(i, len(admitted)):
            assert j - i + 1 <= burst + (admitted[j] - start) * rate + 1e-9


@settings(max_examples=300, deadline=None)
@given(
    burst=st.integers(min_value=1, max_value=30),
    size_fraction=st.floats(min_value=0, max_value=1),
    lessees=st.integers(min_value=1, max_value=4),
    steps=_steps,
)
def test_without_refill_the_lessees_fall_short_by_at_most_one_lease_each(
    burst: int, size_fraction: float, lessees: int, steps: list[tuple[int, float]]
) -> None:
    size = max(1, round(size_fraction * burst))
    steps = [(who % lessees, gap) for who, gap in steps]
    admitted, refused = _simulate(rate=1e-12, burst=burst, size=size, lessees=lessees, steps=steps)
    assert len(admitted) <= burst
    if refused:  # someone was turned away: only tokens leased and unspent are missing
        assert len(admitted) >= burst - lessees * size
    else:
        assert len(admitted) == len(steps)
    if size == 1:  # one token a statement: exactly one bucket
        assert len(admitted) == min(burst, len(steps))


def test_a_lease_fades_only_once_the_bucket_refills_over_it() -> None:
    # Burst 10, rate 1/s: a lease of 4 leaving 2 in the bucket has 4 s of headroom.
    lease = TokenLease(BucketLease(taken=4, tokens=2.0, at=100.0), burst=10)
    assert lease.headroom == 4.0
    assert lease.usable(104.0, 1.0) == 4.0
    assert lease.usable(105.5, 1.0) == 2.5
    for _ in range(2):
        decision = lease.decide(105.5, 1.0)
        assert decision is not None and decision.allowed
    assert lease.decide(105.5, 1.0) is None  # half a token left: ask the store
    assert not lease.live(105.5, 1.0)
    # A refusal stands until the bucket's next whole token.
    refusal = TokenLease(BucketLease(taken=0, tokens=0.25, at=100.0), burst=10)
    assert refusal.decide(100.5, 1.0) == RateDecision(
        allowed=False, retry_after_s=0.25, remaining=0
    )
    assert refusal.live(100.5, 1.0) and not refusal.live(100.75, 1.0)
    assert refusal.decide(100.75, 1.0) is None


# --- the SQL -------------------------------------------------------------------------


async def test_the_lease_statement_computes_what_bucket_lease_computes(
    store_url: str, clock: ManualClock
) -> None:
    store = await Store.open(StoreConfig(url=store_url), PrivacyConfig(), {}, clock=clock)
    try:
        row: tuple[float, float] | None = None
        # (seconds to advance, tokens wanted): new key, full leases, a partial one, a
        # refusal, fractional refills, and the cap.
        plan = [(0, 4), (0, 4), (0, 4), (0, 3), (0.5, 1), (1.75, 5), (0.3, 1), (3600, 20)]
        for gap, want in plan:
            clock.advance(seconds=gap)
            now = clock.now.timestamp()
            lease = await store.rate_buckets.lease("k", want=want, rate_per_s=2.0, burst=10)
            taken, tokens, at = bucket_lease(row, now=now, want=want, rate_per_s=2.0, burst=10)
            row = (tokens, at)
            assert (lease.taken, lease.at) == (taken, now)
            assert lease.tokens == pytest.approx(tokens)
        with pytest.raises(UsageError):
            await store.rate_buckets.lease("k", want=0, rate_per_s=2.0, burst=10)
    finally:
        await store.close()


@pytest.fixture(scope="module")
def leases_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("leases") / "store.db"


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rate=st.floats(min_value=0.01, max_value=5),
    burst=st.integers(min_value=1, max_value=20),
    plan=st.lists(
        st.tuples(st.floats(min_value=0, max_value=5), st.integers(min_value=1, max_value=25)),
        min_size=1,
        max_size=15,
    ),
)
def test_any_sequence_of_leases_in_sql_is_the_arithmetic(
    leases_db: Path, rate: float, burst: int, plan: list[tuple[float, int]]
) -> None:
    key = uuid.uuid4().hex  # a bucket of its own: the file is shared by the examples

    async def run() -> None:
        clock = ManualClock()
        url = f"sqlite+aiosqlite:///{leases_db}"
        store = await Store.open(StoreConfig(url=url), PrivacyConfig(), {}, clock=clock)
        row: tuple[float, float] | None = None
        try:
            for gap, want in plan:
                clock.advance(seconds=gap)
                now = clock.now.timestamp()
                lease = await store.rate_buckets.lease(key, want=want, rate_per_s=rate, burst=burst)
                taken, tokens, at = bucket_lease(
                    row, now=now, want=want, rate_per_s=rate, burst=burst
                )
                row = (tokens, at)
                assert lease.taken == taken and lease.tokens == pytest.approx(tokens)
        finally:
            await store.close()

    asyncio.run(run())


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC))


# --- the limiter on a store ----------------------------------------------------------


@pytest.fixture
def lease_statements() -> Iterator[list[str]]:
    """Every statement on ``rate_buckets`` any engine sends meanwhile."""
    sent: list[str] = []

    def note(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        if "rate_buckets" in statement and "INSERT" in statement:
            sent.append(statement)

    event.listen(Engine, "before_cursor_execute", note)
    try:
        yield sent
    finally:
        event.remove(Engine, "before_cursor_execute", note)


async def test_one_statement_serves_a_lease_of_requests(
    sqlite_url: str, clock: ManualClock, lease_statements: list[str]
) -> None:
    store = await Store.open(StoreConfig(url=sqlite_url), PrivacyConfig(), {}, clock=clock)
    try:
        limiter = StoreRateLimiter(store.rate_buckets, rate_per_minute=60, burst=10, lease_tokens=4)
        allowed = [(await limiter.admit("k")).allowed for _ in range(10)]
        assert allowed == [True] * 10
        assert len(lease_statements) == 3  # 4 + 4 + 2
        refused = await limiter.admit("k")
        assert not refused.allowed and refused.retry_after_s == pytest.approx(1.0)
        again = await limiter.admit("k")  # the refusal stands: the store is not asked
        assert not again.allowed and len(lease_statements) == 4
        clock.advance(seconds=1)
        assert (await limiter.admit("k")).allowed and len(lease_statements) == 5
        # Requests at once for a spent lease wait for one statement together.
        clock.advance(seconds=10)
        decisions = await asyncio.gather(*(limiter.admit("k") for _ in range(8)))
        assert [d.allowed for d in decisions] == [True] * 8
        assert len(lease_statements) == 7
        await limiter.aclose()
    finally:
        await store.close()


async def test_a_lease_the_refill_overtakes_is_renewed(
    sqlite_url: str, clock: ManualClock, lease_statements: list[str]
) -> None:
    store = await Store.open(StoreConfig(url=sqlite_url), PrivacyConfig(), {}, clock=clock)
    try:
        limiter = StoreRateLimiter(store.rate_buckets, rate_per_minute=60, burst=10, lease_tokens=4)
        assert (await limiter.admit("k")).allowed  # a full bucket: no headroom
        clock.advance(seconds=2.5)  # 4 - 1 spent - 2.5 faded: half a token
        assert (await limiter.admit("k")).allowed
        assert len(lease_statements) == 2
    finally:
        await store.close()


async def test_a_store_that_fails_a_lease_refuses_every_request_waiting_on_it(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = tmp_path / "leases.db"
    store = await Store.open(
        StoreConfig(url=f"sqlite+aiosqlite:///{path}"), PrivacyConfig(), {}, clock=clock
    )
    try:
        limiter = StoreRateLimiter(store.rate_buckets, rate_per_minute=60, burst=10, lease_tokens=2)
        assert (await limiter.admit("k")).allowed
        assert (await limiter.admit("k")).allowed
        with sqlite3.connect(path) as conn:
            conn.execute(
                "CREATE TRIGGER refuse_update BEFORE UPDATE ON rate_buckets "
                "BEGIN SELECT RAISE(ABORT, 'disk hiccup'); END"
            )
        conn.close()
        failed = await asyncio.gather(
            *(limiter.admit("k") for _ in range(3)), return_exceptions=True
        )
        assert [type(f) for f in failed] == [StoreError] * 3
        with pytest.raises(StoreError):  # nothing left stuck: the next request asks again
            await limiter.admit("k")
        await limiter.aclose()
    finally:
        await store.close()


def test_the_lease_size_is_checked() -> None:
    buckets: Any = object()  # rejected before the buckets are used
    for bad in (0, 11):
        with pytest.raises(UsageError, match="lease_tokens"):
            StoreRateLimiter(buckets, rate_per_minute=60, burst=10, lease_tokens=bad)


def test_the_configured_lease_is_checked_and_defaults_from_rate_and_burst() -> None:
    assert ServerConfig().lease_tokens == 6  # a tenth of the burst of 60
    assert ServerConfig(burst=1000, rate_per_minute=120).lease_tokens == 2  # 1 s of rate
    assert ServerConfig(burst=5).lease_tokens == 1
    assert ServerConfig(burst=5, rate_lease_tokens=5).lease_tokens == 5
    with pytest.raises(ValueError, match="rate_lease_tokens = 6 is more than server.burst"):
        ServerConfig(burst=5, rate_lease_tokens=6)
    for bad in ("0", "-1", "1.5", "many", "2000000"):
        with pytest.raises(ConfigError, match="rate_lease_tokens"):
            load_config(None, environ={"FOUREYES_SERVER__RATE_LEASE_TOKENS": bad})


async def test_the_configured_store_limiter_leases_the_configured_size(
    sqlite_url: str,
) -> None:
    store = await Store.open(StoreConfig(url=sqlite_url), PrivacyConfig(), {})
    try:
        server = ServerConfig(rate_limit_backend="store", burst=40, rate_lease_tokens=3)
        limiter = key_limiter(server, store.rate_buckets)
        assert isinstance(limiter, StoreRateLimiter) and limiter.lease_tokens == 3
    finally:
        await store.close()


# --- two processes -------------------------------------------------------------------

_BURST = 40
_ATTEMPTS = 70  # per process: together well over the burst


def _hammer(url: str, size: int, start: Any, results: Any) -> None:
    """One process: its own store and limiter, ``_ATTEMPTS`` requests on one key."""

    async def run() -> tuple[int, int]:
        store = await Store.open(StoreConfig(url=url), PrivacyConfig(), {})
        try:
            # A rate that refills nothing in the test's time: the bucket is the burst.
            limiter = StoreRateLimiter(
                store.rate_buckets, rate_per_minute=1e-9, burst=_BURST, lease_tokens=size
            )
            attempts = iter(range(_ATTEMPTS))
            admitted = refused = 0

            async def client() -> None:
                nonlocal admitted, refused
                for _ in attempts:
                    if (await limiter.admit("shared")).allowed:
                        admitted += 1
                    else:
                        refused += 1

            start.wait(timeout=120)
            await asyncio.gather(*(client() for _ in range(4)))
            await limiter.aclose()
            return admitted, refused
        finally:
            await store.close()

    results.put(asyncio.run(run()))


@pytest.mark.parametrize("size", [1, 5])
async def test_two_processes_on_one_store_admit_the_burst_less_at_most_a_lease_each(
    store_url: str, size: int
) -> None:
    # Migrated once here, so the processes do not race to create the tables.
    await (await Store.open(StoreConfig(url=store_url), PrivacyConfig(), {})).close()
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(2), context.Queue()
    processes = [
        context.Process(target=_hammer, args=(store_url, size, start, results)) for _ in range(2)
    ]
    for process in processes:
        process.start()
    counts = [await asyncio.to_thread(results.get, timeout=180) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    admitted = sum(a for a, _ in counts)
    assert all(a + r == _ATTEMPTS for a, r in counts)
    assert admitted <= _BURST  # never over, whatever the interleaving
    assert admitted >= _BURST - 2 * size  # short by at most one lease per process
    if size == 1:
        assert admitted == _BURST
