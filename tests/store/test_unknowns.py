from __future__ import annotations

import datetime as dt

import pytest

from foureyes.core.errors import StoreError, UsageError
from foureyes.store.unknowns import SqlOpenUnknowns, unknown_key
from tests.helpers.clock import ManualClock
from tests.store._support import OpenStore


@pytest.fixture
async def unknowns(open_store: OpenStore, store_url: str, clock: ManualClock) -> SqlOpenUnknowns:
    store = await open_store(store_url, clock=clock)
    return store.unknowns


@pytest.fixture
async def runs(open_store: OpenStore, store_url: str, clock: ManualClock) -> list[str]:
    store = await open_store(store_url, clock=clock)
    return [await store.traces.start_run("gate_reply") for _ in range(3)]


async def test_unknowns_stay_open_most_recent_first(
    unknowns: SqlOpenUnknowns, runs: list[str], clock: ManualClock
) -> None:
    await unknowns.add("c1", ["her age", "whether she is safe"], trace_id=runs[0])
    clock.advance(minutes=1)
    await unknowns.add("c1", ["who else knows"], trace_id=runs[1])

    open_now = await unknowns.open("c1", limit=10)
    assert open_now[0] == "who else knows"
    assert set(open_now) == {"who else knows", "her age", "whether she is safe"}
    assert len(await unknowns.open("c1", limit=2)) == 2
    assert await unknowns.open("c1", limit=0) == ()
    assert await unknowns.open("c2", limit=10) == ()


async def test_the_same_unknown_is_kept_once(unknowns: SqlOpenUnknowns, runs: list[str]) -> None:
    await unknowns.add("c1", ["Her  age", "her age"], trace_id=runs[0])
    await unknowns.add("c1", ["HER AGE "], trace_id=runs[1])

    [entry] = await unknowns.entries("c1")
    assert entry.text == "Her age" and entry.raised_by == runs[0]
    assert unknown_key("her   AGE") == unknown_key("Her age")


async def test_only_an_explicit_resolution_closes_one_and_raising_it_again_reopens(
    unknowns: SqlOpenUnknowns, runs: list[str], clock: ManualClock
) -> None:
    await unknowns.add("c1", ["her age", "who else knows"], trace_id=runs[0])

    assert await unknowns.resolve("c1", ["HER AGE"], resolved_by="operator:ana") == 1
    assert await unknowns.open("c1", limit=10) == ("who else knows",)
    [resolved] = [e for e in await unknowns.entries("c1", include_resolved=True) if e.resolved_at]
    assert resolved.resolved_by == "operator:ana" and resolved.resolved_at == clock.now

    clock.advance(hours=1)
    await unknowns.add("c1", ["her age"], trace_id=runs[2])
    assert set(await unknowns.open("c1", limit=10)) == {"her age", "who else knows"}
    reopened = [e for e in await unknowns.entries("c1") if e.text == "her age"][0]
    assert reopened.raised_by == runs[2] and reopened.resolved_at is None
    assert reopened.raised_at == clock.now.astimezone(dt.UTC)


async def test_bad_input_is_refused(unknowns: SqlOpenUnknowns, runs: list[str]) -> None:
    with pytest.raises(UsageError):
        await unknowns.add("c1", ["  "], trace_id=runs[0])
    with pytest.raises(UsageError):
        await unknowns.resolve("c1", ["x"], resolved_by=" ")
    # An unknown must name the run that raised it.
    with pytest.raises(StoreError):
        await unknowns.add("c1", ["her age"], trace_id="0" * 32)
    assert await unknowns.open("c1", limit=10) == ()
    await unknowns.add("c1", [], trace_id=runs[0])
    assert await unknowns.entries("c1", include_resolved=True) == ()
