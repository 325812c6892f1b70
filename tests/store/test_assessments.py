"""Triage records and the flight lease, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime as dt

from foureyes.store.assessments import NewAssessment
from tests.store._support import OpenStore, cancel_under_way

AT = dt.datetime(2026, 3, 14, 23, 59, tzinfo=dt.UTC)


def row(**change: object) -> NewAssessment:
    values: dict[str, object] = {
        "conversation_id": "c1",
        "purpose": "live",
        "at": AT,
        "status": "ok",
        "level": "high",
        "tier": "L2",
        "confirmed": False,
        "policy": "restricted",
        "reasons": ["l2_timeout"],
        "detail": {"l1": {"level": "high", "confidence": 0.9}, "locale": "zh-Hans"},
    }
    return NewAssessment(**(values | change))  # type: ignore[arg-type]


async def test_a_record_keeps_the_fingerprint_never_the_text(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    log = store.assessments
    assessment_id = await log.record(row(), text="我不想活了")
    stored = await log.get(assessment_id)
    assert stored is not None and stored.day == AT.date() and stored.at == AT
    assert stored.text_fingerprint == store.traces.fingerprint("我不想活了")
    assert stored.confirmed is False and stored.reasons == ("l2_timeout",)
    assert stored.detail["l1"] == {"level": "high", "confidence": 0.9}
    assert await log.get("missing") is None


async def test_trend_levels_count_live_usable_rows_only(
    open_store: OpenStore, store_url: str
) -> None:
    log = (await open_store(store_url)).assessments
    await log.record(row(), text="a")
    await log.record(row(purpose="test"), text="b")
    await log.record(row(purpose="calibration"), text="c")
    await log.record(row(status="unknown", level=None), text="d")
    await log.record(row(at=AT - dt.timedelta(days=10), level="critical"), text="e")
    await log.record(row(conversation_id="c2"), text="f")
    assert await log.levels_since("c1", AT.date() - dt.timedelta(days=6)) == [(AT.date(), "high")]
    assert len(await log.for_conversation("c1")) == 5


async def test_one_flight_per_conversation_across_two_stores(
    open_store: OpenStore, store_url: str
) -> None:
    # Two stores on one database, as two server processes have: still one flight.
    logs = [(await open_store(store_url)).assessments for _ in range(2)]
    tokens = await asyncio.gather(
        *(logs[n % 2].acquire_flight("c1", now=AT, ttl_s=30) for n in range(8))
    )
    assert len([t for t in tokens if t is not None]) == 1


async def test_one_flight_per_conversation(open_store: OpenStore, store_url: str) -> None:
    log = (await open_store(store_url)).assessments
    tokens = await asyncio.gather(*(log.acquire_flight("c1", now=AT, ttl_s=30) for _ in range(5)))
    held = [t for t in tokens if t is not None]
    assert len(held) == 1
    assert await log.acquire_flight("c2", now=AT, ttl_s=30) is not None
    await log.release_flight("c1", held[0])
    assert await log.acquire_flight("c1", now=AT, ttl_s=30) is not None


async def test_an_expired_lease_is_taken_over_and_its_old_holder_cannot_release_it(
    open_store: OpenStore, store_url: str
) -> None:
    log = (await open_store(store_url)).assessments
    old = await log.acquire_flight("c1", now=AT, ttl_s=30)
    assert old is not None
    assert await log.acquire_flight("c1", now=AT + dt.timedelta(seconds=29), ttl_s=30) is None
    new = await log.acquire_flight("c1", now=AT + dt.timedelta(seconds=30), ttl_s=30)
    assert new is not None
    await log.release_flight("c1", old)
    assert await log.acquire_flight("c1", now=AT + dt.timedelta(seconds=31), ttl_s=30) is None


async def test_a_cancelled_acquire_leaves_the_conversation_free(
    open_store: OpenStore, store_url: str
) -> None:
    # Cancelled once its write is under way (it runs to its end regardless): a lease it
    # took is given back, so the conversation's next message is not turned away until
    # the lease expires. Closing the store waits for that.
    store = await open_store(store_url)
    await cancel_under_way(store.assessments.acquire_flight("c1", now=AT, ttl_s=30))
    await store.close()

    reopened = await open_store(store_url)
    assert await reopened.assessments.acquire_flight("c1", now=AT, ttl_s=30) is not None
