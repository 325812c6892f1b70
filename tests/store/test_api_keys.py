from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from foureyes.core.errors import UsageError
from foureyes.store.api_keys import (
    EnvKey,
    KeyScope,
    KeySource,
    RevokeOutcome,
    api_key_digest,
)
from tests.helpers.clock import ManualClock
from tests.store._support import OpenStore

CLIENT_KEY = "client-key-0123456789abcdef"
ADMIN_KEY = "admin-key-0123456789abcdef"


async def test_created_keys_are_stored_only_as_digests(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    keys = (await open_store(store_url, clock=clock)).api_keys

    new = await keys.create(scope=KeyScope.ADMIN, name=" ops ")

    assert re.fullmatch(r"fy_[0-9a-f]{8}_[A-Za-z0-9_-]{43}", new.key)
    assert new.key not in repr(new)
    assert new.record.prefix == new.key[:11]
    assert (new.record.scope, new.record.source, new.record.name) == (
        KeyScope.ADMIN,
        KeySource.CREATED,
        "ops",
    )
    assert new.record.created_at == clock.now
    assert await keys.find(api_key_digest(new.key)) == new.record
    assert await keys.find(api_key_digest(new.key + "x")) is None
    assert await keys.list() == [new.record]


async def test_the_database_file_never_holds_a_key(open_store: OpenStore, tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    store = await open_store(f"sqlite+aiosqlite:///{path}")
    keys = store.api_keys
    new = await keys.create(scope=KeyScope.CLIENT)
    await keys.sync_env([EnvKey.of(CLIENT_KEY, KeyScope.CLIENT, "KEYS")])
    await store.close()

    raw = b"".join(p.read_bytes() for p in tmp_path.glob("keys.db*"))
    assert new.key.encode() not in raw
    assert CLIENT_KEY.encode() not in raw
    assert api_key_digest(new.key).encode() in raw


async def test_names_must_be_short_and_not_blank(open_store: OpenStore, sqlite_url: str) -> None:
    keys = (await open_store(sqlite_url)).api_keys
    for name in ("", "   ", "x" * 129):
        with pytest.raises(UsageError):
            await keys.create(scope=KeyScope.CLIENT, name=name)
    assert await keys.list() == []


async def test_revoke_by_prefix_or_id_is_final(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    keys = (await open_store(store_url, clock=clock)).api_keys
    first = await keys.create(scope=KeyScope.CLIENT)
    second = await keys.create(scope=KeyScope.CLIENT)

    clock.advance(minutes=5)
    by_prefix = await keys.revoke(first.record.prefix)
    by_id = await keys.revoke(second.record.id)
    again = await keys.revoke(first.record.prefix)
    unknown = await keys.revoke("fy_00000000")

    assert by_prefix.outcome is RevokeOutcome.REVOKED
    assert by_prefix.keys[0].revoked_at == clock.now
    assert by_id.outcome is RevokeOutcome.REVOKED
    assert again.outcome is RevokeOutcome.ALREADY_REVOKED
    assert (unknown.outcome, unknown.keys) == (RevokeOutcome.UNKNOWN, ())
    found = await keys.find(api_key_digest(first.key))
    assert found is not None and not found.active
    census = await keys.census()
    assert (census.active, census.total) == (0, 2)


async def test_a_shared_prefix_is_ambiguous_and_changes_nothing(
    open_store: OpenStore, sqlite_url: str
) -> None:
    keys = (await open_store(sqlite_url)).api_keys
    # Two env keys whose digests start alike would share a prefix; build that directly.
    twins = [EnvKey(digest="ab" * 32, scope=KeyScope.CLIENT, variable="K")]
    twins.append(EnvKey(digest="ab" * 4 + "cd" * 28, scope=KeyScope.CLIENT, variable="K"))
    await keys.sync_env(twins)

    revocation = await keys.revoke("env-abababab")

    assert revocation.outcome is RevokeOutcome.AMBIGUOUS
    assert len(revocation.keys) == 2
    assert (await keys.census()).active == 2


async def test_env_sync_adds_moves_retires_and_refuses(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    keys = (await open_store(store_url, clock=clock)).api_keys
    created = await keys.create(scope=KeyScope.CLIENT)
    client = EnvKey.of(CLIENT_KEY, KeyScope.CLIENT, "CLIENT_KEYS")
    admin = EnvKey.of(ADMIN_KEY, KeyScope.ADMIN, "ADMIN_KEYS")

    first = await keys.sync_env([client, admin])
    again = await keys.sync_env([client, admin])
    assert len(first.added) == 2 and first.retired == () and first.refused == ()
    assert again.added == again.retired == again.refused == ()

    # The client key moves to the admin variable; the admin key is dropped.
    moved = await keys.sync_env([EnvKey.of(CLIENT_KEY, KeyScope.ADMIN, "ADMIN_KEYS")])
    record = await keys.find(client.digest)
    assert record is not None and record.scope is KeyScope.ADMIN and record.active
    assert moved.retired == (f"env-{admin.digest[:8]}",)
    dropped = await keys.find(admin.digest)
    assert dropped is not None and dropped.revoked_at == clock.now

    # Listing a revoked key again does not bring it back.
    back = await keys.sync_env([client, admin])
    assert back.refused == (f"env-{admin.digest[:8]}",)
    dropped = await keys.find(admin.digest)
    assert dropped is not None and not dropped.active

    # Created keys are never touched by the sync, even with no env keys at all.
    await keys.sync_env([])
    kept = await keys.find(api_key_digest(created.key))
    assert kept is not None and kept.active


async def test_env_sync_refuses_a_key_listed_twice(open_store: OpenStore, sqlite_url: str) -> None:
    keys = (await open_store(sqlite_url)).api_keys
    key = EnvKey.of(CLIENT_KEY, KeyScope.CLIENT, "K")
    with pytest.raises(UsageError):
        await keys.sync_env([key, key])
    assert await keys.list() == []


async def test_instances_syncing_together_record_each_key_once(
    open_store: OpenStore, store_url: str
) -> None:
    stores = [await open_store(store_url) for _ in range(3)]
    listed = [
        EnvKey.of(CLIENT_KEY, KeyScope.CLIENT, "K"),
        EnvKey.of(ADMIN_KEY, KeyScope.ADMIN, "A"),
    ]

    await asyncio.gather(*(s.api_keys.sync_env(listed) for s in stores))

    records = await stores[0].api_keys.list()
    assert sorted(r.prefix for r in records) == sorted(f"env-{k.digest[:8]}" for k in listed)
