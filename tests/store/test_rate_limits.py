"""The store's token buckets: refill computed in SQL, exact across stores on one database."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.core.errors import StoreError, UsageError
from foureyes.store import Store
from tests.helpers.clock import ManualClock
from tests.store._support import OpenStore


async def test_a_bucket_allows_the_burst_then_refills_at_the_rate(
    store_url: str, open_store: OpenStore, clock: ManualClock
) -> None:
    store = await open_store(store_url, clock=clock)
    buckets = store.rate_buckets

    first = [await buckets.take("a", rate_per_s=1.0, burst=3) for _ in range(3)]
    denied = await buckets.take("a", rate_per_s=1.0, burst=3)

    assert [t.granted for t in first] == [True, True, True]
    assert [t.tokens for t in first] == [2.0, 1.0, 0.0]
    assert not denied.granted and denied.tokens == 0.0
    assert (await buckets.take("b", rate_per_s=1.0, burst=3)).granted  # per key
    clock.advance(seconds=0.5)
    half = await buckets.take("a", rate_per_s=1.0, burst=3)
    assert not half.granted and half.tokens == pytest.approx(0.5)
    clock.advance(seconds=0.5)
    assert (await buckets.take("a", rate_per_s=1.0, burst=3)).granted
    clock.advance(hours=1)  # refills to the burst, never beyond
    taken = [(await buckets.take("a", rate_per_s=1.0, burst=3)).granted for _ in range(4)]
    assert taken == [True, True, True, False]


async def test_a_clock_running_behind_refills_nothing(
    store_url: str, open_store: OpenStore, clock: ManualClock
) -> None:
    ahead = await open_store(store_url, clock=clock)
    lagging_clock = ManualClock(clock.now - dt.timedelta(minutes=5))
    lagging = await open_store(store_url, clock=lagging_clock)

    assert (await ahead.rate_buckets.take("k", rate_per_s=1.0, burst=1)).granted
    # Five minutes "before" the last take: no time has passed for the bucket.
    assert not (await lagging.rate_buckets.take("k", rate_per_s=1.0, burst=1)).granted
    lagging_clock.advance(minutes=4)
    assert not (await lagging.rate_buckets.take("k", rate_per_s=1.0, burst=1)).granted
    clock.advance(seconds=1)
    assert (await ahead.rate_buckets.take("k", rate_per_s=1.0, burst=1)).granted


@pytest.mark.parametrize(("rate", "burst"), [(0.0, 1), (-1.0, 1), (float("nan"), 1), (1.0, 0)])
async def test_a_bucket_needs_a_positive_rate_and_burst(
    sqlite_url: str, open_store: OpenStore, rate: float, burst: int
) -> None:
    store = await open_store(sqlite_url)
    with pytest.raises(UsageError):
        await store.rate_buckets.take("a", rate_per_s=rate, burst=burst)


async def test_only_buckets_refilled_to_the_burst_are_forgotten(
    store_url: str, open_store: OpenStore, clock: ManualClock
) -> None:
    store = await open_store(store_url, clock=clock)
    buckets = store.rate_buckets
    for key, takes in (("drained", 3), ("half", 1), ("old", 3)):
        for _ in range(takes):
            await buckets.take(key, rate_per_s=1.0, burst=3)
    clock.advance(seconds=1)
    await buckets.take("drained", rate_per_s=1.0, burst=3)  # 0 + 1 refilled - 1 taken
    clock.advance(seconds=2.5)
    # Now: "old" 0 + 3.5 refilled (capped at 3: full), "half" 2 + 3.5 (full), "drained"
    # 0 + 2.5 (not full).
    assert await buckets.forget_full(rate_per_s=1.0, burst=3) == 2
    assert await buckets.forget_full(rate_per_s=1.0, burst=3) == 0
    # A forgotten key starts full again, which it was; the kept one kept its level.
    assert (await buckets.take("old", rate_per_s=1.0, burst=3)).tokens == 2.0
    kept = await buckets.take("drained", rate_per_s=1.0, burst=3)
    assert kept.granted and kept.tokens == pytest.approx(1.5)
    with pytest.raises(UsageError):
        await buckets.forget_full(rate_per_s=0.0, burst=3)


async def test_a_closed_or_unreachable_store_raises_rather_than_granting(
    sqlite_url: str, open_store: OpenStore, tmp_path: Path
) -> None:
    store = await open_store(sqlite_url)
    await store.close()
    with pytest.raises(UsageError):
        await store.rate_buckets.take("a", rate_per_s=1.0, burst=1)
    unreachable = await open_store(sqlite_url)
    Path(sqlite_url.removeprefix("sqlite+aiosqlite:///")).unlink()
    (tmp_path / "store.db").mkdir()  # the path is now a directory: nothing can open it
    with pytest.raises(StoreError):
        await unreachable.rate_buckets.take("a", rate_per_s=1.0, burst=1)


async def test_concurrent_takes_from_two_stores_grant_exactly_the_burst(
    store_url: str, open_store: OpenStore, clock: ManualClock
) -> None:
    one = await open_store(store_url, clock=clock)
    two = await open_store(store_url, clock=clock)

    takes = await asyncio.gather(
        *(store.rate_buckets.take("k", rate_per_s=1e-6, burst=7) for store in [one, two] * 20)
    )

    assert sum(t.granted for t in takes) == 7


@pytest.fixture(scope="module")
def interleaving_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("interleaving") / "store.db"


_step = st.tuples(st.sampled_from([0, 1]), st.floats(min_value=0, max_value=3))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rate=st.floats(min_value=0.1, max_value=5),
    burst=st.integers(min_value=1, max_value=5),
    steps=st.lists(_step, min_size=1, max_size=30),
)
def test_any_interleaving_of_two_limiters_grants_at_most_burst_plus_refill(
    interleaving_db: Path, rate: float, burst: int, steps: list[tuple[int, float]]
) -> None:
    # Two stores (as two processes would have) on one file, taking in the order drawn:
    # within any span of time, no more than the burst plus what the rate refilled.
    key = uuid.uuid4().hex  # a bucket of its own: the file is shared by the examples

    async def run() -> list[float]:
        clock = ManualClock()
        url = f"sqlite+aiosqlite:///{interleaving_db}"
        stores = [await Store.open(StoreConfig(url=url), PrivacyConfig(), {}, clock=clock)]
        stores.append(await Store.open(StoreConfig(url=url), PrivacyConfig(), {}, clock=clock))
        granted_at: list[float] = []
        try:
            for which, gap in steps:
                clock.advance(seconds=gap)
                take = await stores[which].rate_buckets.take(key, rate_per_s=rate, burst=burst)
                if take.granted:
                    granted_at.append(clock.now.timestamp())
        finally:
            for store in stores:
                await store.close()
        return granted_at

    granted_at = asyncio.run(run())
    for i, start in enumerate(granted_at):
        for j in range(i, len(granted_at)):
            span = granted_at[j] - start
            assert j - i + 1 <= burst + span * rate + 1e-6
    # And the bucket is not stingy: the first `burst` requests are always granted.
    assert len(granted_at) >= min(burst, len(steps))
