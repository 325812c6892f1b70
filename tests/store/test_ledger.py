from __future__ import annotations

import asyncio
import datetime as dt
import math
import sqlite3
from pathlib import Path

import pytest

from foureyes.core.budget import Reservation, SpendLedger, SpendLimit, SpendUsage
from foureyes.core.errors import BudgetExhausted, StoreError, UsageError
from foureyes.store import SqlSpendLedger
from tests.helpers.clock import ManualClock
from tests.store._support import OpenStore, begin_and_end, cancel_under_way

TODAY = dt.date(2026, 3, 14)


def _usage(calls: int, usd: float, reserved_calls: int, reserved_usd: float) -> SpendUsage:
    return SpendUsage("route:flash", TODAY, calls, usd, reserved_calls, reserved_usd)


async def _outcomes(
    ledger: SqlSpendLedger, limit: SpendLimit, attempts: int
) -> tuple[list[Reservation], list[BaseException]]:
    results = await asyncio.gather(
        *(ledger.reserve(limit, calls=1, usd=0.01) for _ in range(attempts)),
        return_exceptions=True,
    )
    won = [r for r in results if isinstance(r, Reservation)]
    lost = [r for r in results if not isinstance(r, Reservation)]
    return won, lost


async def test_reserve_commit_release_arithmetic(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    store = await open_store(store_url, clock=clock)
    ledger: SpendLedger = store.ledger
    limit = SpendLimit("route:flash", max_calls=10, max_usd=1.0)

    first = await ledger.reserve(limit, calls=1, usd=0.10)
    second = await ledger.reserve(limit, calls=1, usd=0.20)
    assert await ledger.usage("route:flash", TODAY) == _usage(0, 0.0, 2, 0.30)

    await ledger.commit(first, calls=1, usd=0.04)
    assert await ledger.usage("route:flash", TODAY) == _usage(1, 0.04, 1, 0.20)

    await ledger.release(second)
    assert await ledger.usage("route:flash", TODAY) == _usage(1, 0.04, 0, 0.0)
    assert (first.key, first.day, first.calls, first.usd) == ("route:flash", TODAY, 1, 0.10)
    assert first.id != second.id


async def test_unused_key_reads_as_zero(open_store: OpenStore, store_url: str) -> None:
    store = await open_store(store_url)
    assert await store.ledger.usage("route:flash", TODAY) == _usage(0, 0.0, 0, 0.0)


async def test_call_limit_counts_reservations_and_frees_on_release(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    store = await open_store(store_url, clock=clock)
    limit = SpendLimit("route:flash", max_calls=2)
    held = await store.ledger.reserve(limit, calls=1, usd=0)
    done = await store.ledger.reserve(limit, calls=1, usd=0)
    await store.ledger.commit(done, calls=1, usd=0)

    with pytest.raises(BudgetExhausted) as caught:
        await store.ledger.reserve(limit, calls=1, usd=0)
    await store.ledger.release(held)
    await store.ledger.reserve(limit, calls=1, usd=0)

    assert caught.value.limit == "route:flash daily calls"
    assert (caught.value.value, caught.value.maximum) == (3, 2)
    assert await store.ledger.usage("route:flash", TODAY) == _usage(1, 0.0, 1, 0.0)


async def test_usd_limit_is_exact_to_the_cent(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    store = await open_store(store_url, clock=clock)
    limit = SpendLimit("route:flash", max_usd=0.3)
    # 0.1 + 0.1 + 0.1 > 0.3 in floats; the ledger sums whole nano-dollars instead.
    for _ in range(3):
        await store.ledger.reserve(limit, calls=1, usd=0.1)

    with pytest.raises(BudgetExhausted) as caught:
        await store.ledger.reserve(limit, calls=1, usd=0.000000001)

    assert caught.value.limit == "route:flash daily usd"
    assert caught.value.maximum == 0.3
    assert await store.ledger.usage("route:flash", TODAY) == _usage(0, 0.0, 3, 0.3)


async def test_no_limit_means_unlimited_and_zero_means_none(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    store = await open_store(store_url, clock=clock)
    for _ in range(25):
        await store.ledger.reserve(SpendLimit("route:flash"), calls=1, usd=5.0)

    with pytest.raises(BudgetExhausted):
        await store.ledger.reserve(SpendLimit("limit:risk_l1", max_calls=0), calls=1, usd=0)
    with pytest.raises(BudgetExhausted):
        await store.ledger.reserve(SpendLimit("limit:paid", max_usd=0.0), calls=1, usd=0.01)

    assert await store.ledger.usage("route:flash", TODAY) == _usage(0, 0.0, 25, 125.0)
    assert (await store.ledger.usage("limit:risk_l1", TODAY)).reserved_calls == 0


async def test_keys_are_counted_apart(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    store = await open_store(store_url, clock=clock)
    await store.ledger.reserve(SpendLimit("route:flash", max_calls=1), calls=1, usd=0)
    await store.ledger.reserve(SpendLimit("route:pro", max_calls=1), calls=1, usd=0)
    assert (await store.ledger.usage("route:pro", TODAY)).reserved_calls == 1


async def test_a_commit_records_real_use_even_beyond_the_limit(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    store = await open_store(store_url, clock=clock)
    limit = SpendLimit("route:flash", max_usd=0.5)
    reservation = await store.ledger.reserve(limit, calls=1, usd=0.4)

    await store.ledger.commit(reservation, calls=2, usd=0.7)

    assert await store.ledger.usage("route:flash", TODAY) == _usage(2, 0.7, 0, 0.0)
    with pytest.raises(BudgetExhausted):
        await store.ledger.reserve(limit, calls=1, usd=0)


async def test_settling_twice_or_unknown_is_an_error_and_never_counts_twice(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    store = await open_store(store_url, clock=clock)
    limit = SpendLimit("route:flash", max_calls=5)
    committed = await store.ledger.reserve(limit, calls=1, usd=0.1)
    released = await store.ledger.reserve(limit, calls=1, usd=0.1)
    await store.ledger.commit(committed, calls=1, usd=0.1)
    await store.ledger.release(released)
    ghost = Reservation(id="0" * 32, key="route:flash", day=TODAY, calls=1, usd=0.1)

    with pytest.raises(StoreError, match="already committed") as caught:
        await store.ledger.commit(committed, calls=1, usd=0.1)
    with pytest.raises(StoreError, match="already committed"):
        await store.ledger.release(committed)
    with pytest.raises(StoreError, match="already released"):
        await store.ledger.commit(released, calls=1, usd=0.1)
    with pytest.raises(StoreError, match="unknown"):
        await store.ledger.release(ghost)

    assert caught.value.operation == "commit"
    assert await store.ledger.usage("route:flash", TODAY) == _usage(1, 0.1, 0, 0.0)


async def test_concurrent_settlements_of_one_reservation_count_once(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    store = await open_store(store_url, clock=clock)
    reservation = await store.ledger.reserve(SpendLimit("route:flash"), calls=1, usd=0.1)

    results = await asyncio.gather(
        *(store.ledger.commit(reservation, calls=1, usd=0.1) for _ in range(10)),
        return_exceptions=True,
    )

    assert results.count(None) == 1
    assert all(isinstance(r, StoreError) for r in results if r is not None)
    assert await store.ledger.usage("route:flash", TODAY) == _usage(1, 0.1, 0, 0.0)


@pytest.mark.parametrize(("calls", "usd"), [(-1, 0.0), (1, -0.01), (1, math.nan), (1, math.inf)])
async def test_negative_or_non_finite_amounts_are_usage_errors(
    open_store: OpenStore, sqlite_url: str, calls: int, usd: float
) -> None:
    store = await open_store(sqlite_url)
    with pytest.raises(UsageError):
        await store.ledger.reserve(SpendLimit("route:flash"), calls=calls, usd=usd)


async def test_limits_reset_at_the_utc_day_boundary(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    limit = SpendLimit("route:flash", max_calls=1)
    # 07:59 in Taipei is still the previous UTC day.
    taipei = dt.timezone(dt.timedelta(hours=8))
    clock.now = dt.datetime(2026, 3, 15, 7, 59, 59, tzinfo=taipei)
    store = await open_store(store_url, clock=clock)
    late = await store.ledger.reserve(limit, calls=1, usd=0)
    with pytest.raises(BudgetExhausted):
        await store.ledger.reserve(limit, calls=1, usd=0)

    clock.advance(seconds=2)
    early = await store.ledger.reserve(limit, calls=1, usd=0)
    # Settled after midnight, the reservation still counts on the day it was taken.
    await store.ledger.commit(late, calls=1, usd=0.5)

    assert (late.day, early.day) == (TODAY, TODAY + dt.timedelta(days=1))
    assert await store.ledger.usage("route:flash", TODAY) == _usage(1, 0.5, 0, 0.0)
    tomorrow = await store.ledger.usage("route:flash", early.day)
    assert (tomorrow.calls, tomorrow.reserved_calls) == (0, 1)


async def test_a_naive_clock_is_refused(
    open_store: OpenStore, sqlite_url: str, clock: ManualClock
) -> None:
    store = await open_store(sqlite_url, clock=clock)
    clock.now = clock.now.replace(tzinfo=None)
    with pytest.raises(UsageError, match="timezone-aware"):
        await store.ledger.reserve(SpendLimit("route:flash"), calls=1, usd=0)
    with pytest.raises(UsageError, match="timezone-aware"):
        await open_store(sqlite_url, clock=clock)


async def test_usage_and_open_reservations_survive_close_and_reopen(
    open_store: OpenStore, sqlite_url: str, clock: ManualClock
) -> None:
    limit = SpendLimit("route:flash", max_calls=3)
    store = await open_store(sqlite_url, clock=clock)
    done = await store.ledger.reserve(limit, calls=1, usd=0.2)
    await store.ledger.commit(done, calls=1, usd=0.15)
    pending = await store.ledger.reserve(limit, calls=1, usd=0.2)
    await store.close()

    reopened = await open_store(sqlite_url, clock=clock)
    assert await reopened.ledger.usage("route:flash", TODAY) == _usage(1, 0.15, 1, 0.2)
    await reopened.ledger.commit(pending, calls=1, usd=0.1)
    await reopened.ledger.reserve(limit, calls=1, usd=0)
    with pytest.raises(BudgetExhausted):
        await reopened.ledger.reserve(limit, calls=1, usd=0)
    assert await reopened.ledger.usage("route:flash", TODAY) == _usage(2, 0.25, 1, 0.0)


async def test_fifty_concurrent_reservations_against_ten_never_overspend(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    store = await open_store(store_url, clock=clock)
    limit = SpendLimit("route:flash", max_calls=10)

    won, lost = await _outcomes(store.ledger, limit, 50)

    assert len(won) == 10
    assert len(lost) == 40 and all(isinstance(e, BudgetExhausted) for e in lost)
    assert await store.ledger.usage("route:flash", TODAY) == _usage(0, 0.0, 10, 0.10)


async def test_two_stores_on_one_database_never_overspend(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    one, two = await asyncio.gather(
        open_store(store_url, clock=clock), open_store(store_url, clock=clock)
    )
    limit = SpendLimit("route:flash", max_calls=10, max_usd=1.0)

    (won_one, lost_one), (won_two, lost_two) = await asyncio.gather(
        _outcomes(one.ledger, limit, 25), _outcomes(two.ledger, limit, 25)
    )

    assert len(won_one) + len(won_two) == 10
    assert all(isinstance(e, BudgetExhausted) for e in lost_one + lost_two)
    # Each store settles what the other reserved: the rows, not the process, hold state.
    for reservation in won_one:
        await two.ledger.commit(reservation, calls=1, usd=0.01)
    for reservation in won_two:
        await one.ledger.release(reservation)
    assert await one.ledger.usage("route:flash", TODAY) == _usage(
        len(won_one), len(won_one) / 100, 0, 0.0
    )


async def test_a_failed_reserve_leaves_nothing_half_written(
    open_store: OpenStore, sqlite_url: str, sqlite_path: Path, clock: ManualClock
) -> None:
    store = await open_store(sqlite_url, clock=clock)
    limit = SpendLimit("route:flash", max_calls=1)
    # The reservation row fails after the day's reserved sum was already raised.
    with sqlite3.connect(sqlite_path) as conn:
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON spend_reservations "
            "BEGIN SELECT RAISE(ABORT, 'refused by test'); END"
        )
    conn.close()

    with pytest.raises(StoreError, match="refused by test") as caught:
        await store.ledger.reserve(limit, calls=1, usd=0.5)

    with sqlite3.connect(sqlite_path) as conn:
        conn.execute("DROP TRIGGER refuse")
    conn.close()
    assert caught.value.operation == "reserve"
    assert await store.ledger.usage("route:flash", TODAY) == _usage(0, 0.0, 0, 0.0)
    await store.ledger.reserve(limit, calls=1, usd=0.5)


async def test_a_cancelled_reserve_holds_no_room(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    # Cancelled once its write is under way (it runs to its end regardless): the
    # reservation it made is released, so the day's room is not held by nobody. Closing
    # the store waits for that.
    store = await open_store(store_url, clock=clock)
    limit = SpendLimit("route:flash", max_calls=1)
    await cancel_under_way(store.ledger.reserve(limit, calls=1, usd=0.5))
    await store.close()

    reopened = await open_store(store_url, clock=clock)
    assert await reopened.ledger.usage("route:flash", TODAY) == _usage(0, 0.0, 0, 0.0)
    await reopened.ledger.reserve(limit, calls=1, usd=0.5)  # the one call's room is free


async def test_ledger_writes_share_the_group_commit_on_sqlite_only(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    # SQLite admits one writer at a time, so concurrent reservations may share a
    # transaction and its log sync; on PostgreSQL two processes' groups could wait for
    # each other's day rows, so each reservation is a transaction of its own.
    store = await open_store(store_url, clock=clock)
    limit = SpendLimit("route:flash", max_calls=100)
    before = store.group_commits

    won, lost = await _outcomes(store.ledger, limit, 20)

    after = store.group_commits
    assert len(won) == 20 and not lost
    if store_url.startswith("sqlite"):
        assert after.writes - before.writes == 20
        assert after.rounds - before.rounds < 20
    else:
        assert after == before


@pytest.mark.postgres
async def test_on_postgresql_a_reserve_and_a_settlement_are_one_statement_each(
    open_store: OpenStore,
    postgres_url: str,
    statements: list[str],
    postgres_queries: list[str],
    clock: ManualClock,
) -> None:
    # Each is atomic by itself, so no transaction is opened around it (no COMMIT; a ping
    # of an idle pooled connection is a BEGIN and ROLLBACK of its own); the day's first
    # reservation also inserts the day's row, and a refusal reads the day to say why.
    store = await open_store(postgres_url, clock=clock)
    limit = SpendLimit("route:flash", max_calls=3)
    first = await store.ledger.reserve(limit, calls=1, usd=0.01)
    statements.clear()
    postgres_queries.clear()

    second = await store.ledger.reserve(limit, calls=1, usd=0.01)
    await store.ledger.commit(first, calls=1, usd=0.02)
    await store.ledger.release(second)
    sent = list(statements)
    taken = await store.ledger.reserve(limit, calls=1, usd=0.01)
    await store.ledger.reserve(limit, calls=1, usd=0.01)
    with pytest.raises(BudgetExhausted):
        await store.ledger.reserve(limit, calls=1, usd=0.01)

    assert len(sent) == 3, sent
    assert "COMMIT" not in begin_and_end(postgres_queries)
    assert await store.ledger.usage("route:flash", TODAY) == _usage(1, 0.02, 2, 0.02)
    await store.ledger.release(taken)
