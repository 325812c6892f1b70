from __future__ import annotations

import datetime as dt

import pytest

from foureyes.config import PrivacyConfig
from foureyes.core.errors import StoreError, UsageError
from foureyes.store import Store
from foureyes.store.unknowns import OpenUnknown, SqlOpenUnknowns
from tests.helpers.clock import ManualClock
from tests.store._support import OpenStore

KEEP = PrivacyConfig(store_raw_text=True, retention_days=7)


@pytest.fixture
async def store(open_store: OpenStore, store_url: str, clock: ManualClock) -> Store:
    return await open_store(store_url, clock=clock, privacy=KEEP)


@pytest.fixture
def unknowns(store: Store) -> SqlOpenUnknowns:
    return store.unknowns


@pytest.fixture
async def runs(store: Store) -> list[str]:
    return [await store.traces.start_run("gate_reply") for _ in range(3)]


def texts(entries: tuple[OpenUnknown, ...]) -> tuple[str | None, ...]:
    return tuple(entry.text for entry in entries)


async def test_unknowns_stay_open_most_recent_first(
    unknowns: SqlOpenUnknowns, runs: list[str], clock: ManualClock
) -> None:
    await unknowns.add("c1", ["her age", "whether she is safe"], trace_id=runs[0])
    clock.advance(minutes=1)
    await unknowns.add("c1", ["who else knows"], trace_id=runs[1])

    open_now = texts(await unknowns.open("c1", limit=10))
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
    assert unknowns.key("her   AGE") == unknowns.key("Her age")


async def test_only_an_explicit_resolution_closes_one_and_raising_it_again_reopens(
    unknowns: SqlOpenUnknowns, runs: list[str], clock: ManualClock
) -> None:
    await unknowns.add("c1", ["her age", "who else knows"], trace_id=runs[0])

    assert await unknowns.resolve("c1", ["HER AGE"], resolved_by="operator:ana") == 1
    assert texts(await unknowns.open("c1", limit=10)) == ("who else knows",)
    [resolved] = [e for e in await unknowns.entries("c1", include_resolved=True) if e.resolved_at]
    assert resolved.resolved_by == "operator:ana" and resolved.resolved_at == clock.now

    clock.advance(hours=1)
    await unknowns.add("c1", ["her age"], trace_id=runs[2])
    assert set(texts(await unknowns.open("c1", limit=10))) == {"her age", "who else knows"}
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


async def test_a_later_verdict_resolves_the_shown_unknowns_it_no_longer_lists(
    unknowns: SqlOpenUnknowns, runs: list[str], clock: ManualClock
) -> None:
    await unknowns.add("c1", ["her age", "who else knows"], trace_id=runs[0])
    shown = await unknowns.open("c1", limit=10)
    clock.advance(minutes=1)
    # Raised by another run after the review read its unknowns: not shown, not resolved.
    await unknowns.add("c1", ["whether she is safe"], trace_id=runs[1])

    resolved = await unknowns.settle(
        "c1", trace_id=runs[2], shown=[u.id for u in shown], listed=["WHO  else knows"]
    )

    assert resolved == 1
    assert set(texts(await unknowns.open("c1", limit=10))) == {
        "who else knows",
        "whether she is safe",
    }
    [closed] = [e for e in await unknowns.entries("c1", include_resolved=True) if e.resolved_at]
    assert closed.text == "her age" and closed.resolved_by == f"verdict:{runs[2]}"
    # Ids of another conversation resolve nothing there.
    assert await unknowns.settle("c2", trace_id=runs[2], shown=[u.id for u in shown]) == 0


async def test_an_unknown_is_resolved_by_id_once(
    unknowns: SqlOpenUnknowns, runs: list[str]
) -> None:
    await unknowns.add("c1", ["her age"], trace_id=runs[0])
    [entry] = await unknowns.entries("c1")

    assert await unknowns.resolve_id("c2", entry.id, resolved_by="key:k1") is False
    assert await unknowns.resolve_id("c1", entry.id, resolved_by="key:k1") is True
    assert await unknowns.resolve_id("c1", entry.id, resolved_by="key:k1") is False
    assert await unknowns.open("c1", limit=10) == ()


async def test_without_raw_text_an_unknown_is_kept_by_its_hmac_alone(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    run = await store.traces.start_run("gate_reply")
    await store.unknowns.add("c1", ["whether she took the pills"], trace_id=run)
    await store.unknowns.add("c1", ["Whether she took  the pills"], trace_id=run)

    [entry] = await store.unknowns.entries("c1")
    assert entry.text is None
    # Still matched by its text: a verdict listing it again keeps it, one that does not
    # resolves it.
    shown = [entry.id]
    listed = ["whether she took the pills"]
    assert await store.unknowns.settle("c1", trace_id=run, shown=shown, listed=listed) == 0
    assert await store.unknowns.settle("c1", trace_id=run, shown=shown) == 1
