"""Consent, contacts and write-ahead alert attempts, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from foureyes.core.errors import StoreError
from foureyes.store.alerts import AttemptLimits, AttemptStart, SqlAlertRecords
from tests.store._support import OpenStore

AT = dt.datetime(2026, 3, 14, 12, tzinfo=dt.UTC)


async def records(open_store: OpenStore, url: str) -> SqlAlertRecords:
    return (await open_store(url)).alerts


async def test_consent_is_recorded_with_its_time_and_revocable(
    open_store: OpenStore, store_url: str
) -> None:
    r = await records(open_store, store_url)
    assert await r.active_opt_in("c1") is None
    first = await r.opt_in("c1", at=AT)
    active = await r.active_opt_in("c1")
    assert active == first and active.opted_in_at == AT
    assert await r.revoke_opt_in("c1", at=AT + dt.timedelta(hours=1)) == 1
    assert await r.active_opt_in("c1") is None
    assert await r.revoke_opt_in("c1", at=AT) == 0


async def test_only_verified_unrevoked_contacts_are_found(
    open_store: OpenStore, store_url: str
) -> None:
    r = await records(open_store, store_url)
    old = await r.add_contact("c1", "+86 138 0000 0000", locale="zh-Hans", at=AT)
    assert await r.verified_contact("c1") is None
    await r.verify_contact(old.id, at=AT)
    new = await r.add_contact("c1", "+852 5555 0100", locale="zh-Hant", at=AT)
    await r.verify_contact(new.id, at=AT + dt.timedelta(minutes=1))
    found = await r.verified_contact("c1")
    assert found is not None and found.id == new.id
    await r.revoke_contact(new.id, at=AT)
    found = await r.verified_contact("c1")
    assert found is not None and found.id == old.id
    with pytest.raises(StoreError):
        await r.verify_contact(new.id, at=AT)  # revoked contacts stay revoked
    with pytest.raises(StoreError):
        await r.revoke_contact("missing", at=AT)


async def begin(
    r: SqlAlertRecords,
    conversation: str,
    contact_id: str,
    episode: str,
    *,
    at: dt.datetime = AT,
    cooldown_h: float = 24,
    daily_cap: int = 100,
) -> AttemptStart:
    """``begin_attempt`` with everything but the identities and the limits fixed."""
    return await r.begin_attempt(
        at=at,
        conversation_id=conversation,
        episode=episode,
        assessment_id=None,
        contact_id=contact_id,
        message_sha256="0" * 64,
        notifier="file",
        limits=AttemptLimits(
            cooldown=dt.timedelta(hours=cooldown_h),
            daily_cap=daily_cap,
            day_start=dt.datetime.combine(AT.date(), dt.time(), tzinfo=dt.UTC),
            cooldown_reason="cooldown",
            cap_reason="daily_cap",
            duplicate_reason="duplicate_episode",
        ),
    )


async def test_racing_attempts_never_exceed_the_daily_cap(
    open_store: OpenStore, store_url: str
) -> None:
    r = await records(open_store, store_url)
    contacts = [await r.add_contact(f"c{n}", "x", locale="en", at=AT) for n in range(6)]

    starts = await asyncio.gather(
        *(begin(r, f"c{n}", contacts[n].id, "e1", daily_cap=2) for n in range(6))
    )
    assert len([s for s in starts if s.attempt_id is not None]) == 2
    assert sorted(str(s.blocked) for s in starts) == ["None"] * 2 + ["daily_cap"] * 4
    assert await r.attempts_since(AT) == 2
    blocked = [d for n in range(6) for d in await r.decisions(f"c{n}") if d["outcome"] == "blocked"]
    assert len(blocked) == 4 and {d["reason"] for d in blocked} == {"daily_cap"}


async def test_racing_attempts_from_two_stores_never_exceed_the_daily_cap(
    open_store: OpenStore, store_url: str
) -> None:
    # Two stores on one database, as two server processes have: the cap is the cap of both.
    one, two = await records(open_store, store_url), await records(open_store, store_url)
    contacts = [await one.add_contact(f"c{n}", "x", locale="en", at=AT) for n in range(8)]

    starts = await asyncio.gather(
        *(begin((one, two)[n % 2], f"c{n}", contacts[n].id, "e1", daily_cap=3) for n in range(8))
    )
    assert len([s for s in starts if s.attempt_id is not None]) == 3
    assert await two.attempts_since(AT) == 3


async def test_racing_attempts_to_one_contact_respect_its_cooldown(
    open_store: OpenStore, store_url: str
) -> None:
    r = await records(open_store, store_url)
    contact = await r.add_contact("c1", "x", locale="en", at=AT)

    starts = await asyncio.gather(
        *(begin(r, "c1", contact.id, f"e{n}", cooldown_h=24) for n in range(5))
    )
    assert len([s for s in starts if s.attempt_id is not None]) == 1
    assert sorted(str(s.blocked) for s in starts) == ["None"] + ["cooldown"] * 4
    assert await r.attempts_since(AT) == 1


async def test_one_attempt_per_episode_even_when_racing(
    open_store: OpenStore, store_url: str
) -> None:
    r = await records(open_store, store_url)
    contact = await r.add_contact("c1", "x", locale="en", at=AT)

    starts = await asyncio.gather(
        *(begin(r, "c1", contact.id, "e1", cooldown_h=0) for _ in range(4))
    )
    ids = [start.attempt_id for start in starts]
    assert len([i for i in ids if i is not None]) == 1
    decisions = await r.decisions("c1")
    assert sorted(d["outcome"] for d in decisions) == ["attempted"] + ["blocked"] * 3
    assert {d["reason"] for d in decisions if d["outcome"] == "blocked"} == {"duplicate_episode"}
    assert await r.episode_attempted("c1", contact.id, "e1")
    assert not await r.episode_attempted("c1", contact.id, "e2")


async def test_tries_settle_once_and_failed_sends_do_not_count_for_the_cooldown(
    open_store: OpenStore, store_url: str
) -> None:
    r = await records(open_store, store_url)
    contact = await r.add_contact("c1", "x", locale="en", at=AT)
    ids = []
    for n, episode in enumerate(("e1", "e2")):
        start = await begin(
            r, "c1", contact.id, episode, at=AT + dt.timedelta(hours=n), cooldown_h=0
        )
        attempt_id = start.attempt_id
        assert attempt_id is not None and start.blocked is None
        ids.append(attempt_id)
    assert await r.last_alert_to(contact.id) == AT + dt.timedelta(hours=1)  # pending counts
    await r.record_try(ids[0], tries=1, error="HTTP 500", state="pending", at=AT)
    await r.record_try(ids[0], tries=2, error=None, state="sent", at=AT)
    await r.record_try(ids[1], tries=1, error="HTTP 503", state="failed", at=AT)
    with pytest.raises(StoreError):
        await r.record_try(ids[1], tries=2, error=None, state="sent", at=AT)
    last = await r.last_alert_to(contact.id)
    assert last == AT and last.tzinfo is not None
    assert await r.attempts_since(AT) == 2
    assert await r.attempts_since(AT + dt.timedelta(minutes=30)) == 1
    assert [a.state for a in await r.attempts()] == ["sent", "failed"]
    assert await r.attempts(state="pending") == []
