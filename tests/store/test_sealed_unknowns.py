"""Open unknowns keep their words sealed at rest, for the next prompts, under any privacy.

Real stores (an SQLite file, and a fresh PostgreSQL database where the test takes
``store_url``); what the database holds is read past the store, and the SQLite file's
bytes are read as they are on disk.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from foureyes.config import PrivacyConfig
from foureyes.core.errors import ConfigError, UsageError
from foureyes.store import Store
from foureyes.store._sealing import UnknownSeal
from tests.helpers.clock import ManualClock
from tests.store._support import OpenStore

WORDS = "whether she still has the pills she mentioned"
CJK = "她今晚身边是否有人陪着"
KEY_ENV = "FOUREYES_TEST_UNKNOWNS_KEY"
SEALED = PrivacyConfig(unknowns_key_env=KEY_ENV)


def _key() -> str:
    return secrets.token_bytes(32).hex()


def _db_bytes(path: Path) -> bytes:
    # The WAL holds recent writes until a checkpoint, so every file of the store is read.
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


async def _rows(url: str, query: str) -> list[tuple[object, ...]]:
    """What the database itself holds, read past the store."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return [tuple(row) for row in (await conn.execute(text(query))).all()]
    finally:
        await engine.dispose()


async def _execute(url: str, query: str, **params: object) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(query), params)
    finally:
        await engine.dispose()


async def _sealed_count(url: str) -> int:
    [(count,)] = await _rows(
        url, "SELECT count(*) FROM gate_open_unknowns WHERE sealed_text IS NOT NULL"
    )
    assert isinstance(count, int)
    return count


async def _raise(store: Store, conversation: str, *texts: str) -> str:
    run = await store.traces.start_run("gate_reply", conversation_id=conversation)
    await store.unknowns.add(conversation, list(texts), trace_id=run)
    return run


async def _words(store: Store, conversation: str) -> list[str | None]:
    return [u.words for u in await store.unknowns.open(conversation, limit=10)]


# --- the words reach the next prompts, and only them -------------------------------------


async def test_under_default_privacy_the_words_are_kept_for_prompts_alone(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    await _raise(store, "c1", WORDS)

    [entry] = await store.unknowns.open("c1", limit=10)
    assert entry.words == WORDS
    # What operators and traces are shown stays as store_raw_text says: nothing.
    assert entry.text is None
    assert entry.as_json()["text"] is None and WORDS not in str(entry.as_json())
    assert WORDS not in repr(entry)
    [listed] = await store.unknowns.entries("c1")
    assert listed.text is None and listed.id == entry.id
    assert await _rows(store_url, "SELECT text FROM gate_open_unknowns") == [(None,)]
    assert await _sealed_count(store_url) == 1
    # The HMAC still identifies it: listed again it stays open, not listed it is resolved.
    shown = [entry.id]
    listed_again = [WORDS.upper()]
    run = await store.traces.start_run("gate_reply", conversation_id="c1")
    assert await store.unknowns.settle("c1", trace_id=run, shown=shown, listed=listed_again) == 0
    assert await _words(store, "c1") == [WORDS]


async def test_the_sqlite_file_never_holds_the_words_in_clear(
    open_store: OpenStore, sqlite_url: str, sqlite_path: Path
) -> None:
    for privacy, environ in ((PrivacyConfig(), {}), (SEALED, {KEY_ENV: _key()})):
        store = await open_store(sqlite_url, privacy=privacy, environ=environ)
        await _raise(store, f"c-{privacy.unknowns_key_env}", WORDS, CJK)
        assert set(await _words(store, f"c-{privacy.unknowns_key_env}")) == {WORDS, CJK}
        await store.close()

        on_disk = _db_bytes(sqlite_path)
        for words in (WORDS, CJK):
            for form in (words, words.casefold(), words.upper()):
                assert form.encode("utf-8") not in on_disk
                assert form.encode("utf-16-le") not in on_disk
        assert b"pills" not in on_disk
    # They are there, sealed: one ciphertext per unknown.
    assert len(await _rows(sqlite_url, "SELECT sealed_text FROM gate_open_unknowns")) == 4


async def test_raising_an_unknown_again_seals_its_last_wording_with_a_fresh_expiry(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    privacy = PrivacyConfig(unknown_retention_days=10)
    store = await open_store(store_url, privacy=privacy, clock=clock)
    await _raise(store, "c1", WORDS)
    clock.advance(days=9)
    await _raise(store, "c1", WORDS.upper())

    clock.advance(days=9)  # 18 days after the first raise, 9 after the last
    assert await _words(store, "c1") == [WORDS.upper()]
    assert len(await store.unknowns.entries("c1", include_resolved=True)) == 1
    clock.advance(days=1)
    assert await _words(store, "c1") == [None]


# --- a key that does not open them -------------------------------------------------------


async def test_words_sealed_under_another_key_read_as_not_kept_and_the_unknown_stays_open(
    open_store: OpenStore, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    first_key = _key()
    first = await open_store(store_url, privacy=SEALED, environ={KEY_ENV: first_key})
    await _raise(first, "c1", WORDS)
    await first.close()

    other = await open_store(store_url, privacy=SEALED, environ={KEY_ENV: _key()})
    with caplog.at_level(logging.WARNING, logger="foureyes.store.unknowns"):
        [entry] = await other.unknowns.open("c1", limit=10)
    assert entry.words is None and entry.resolved_at is None
    assert other.unknowns.unopenable == 1
    assert "do not open" in caplog.text and WORDS not in caplog.text
    # The store's own key (no variable) is another key too.
    stored = await open_store(store_url)
    assert await _words(stored, "c1") == [None]
    assert stored.unknowns.unopenable == 1
    # Nothing was erased: under the first key the words open again ...
    again = await open_store(store_url, privacy=SEALED, environ={KEY_ENV: first_key})
    assert await _words(again, "c1") == [WORDS]
    assert again.unknowns.unopenable == 0
    # ... and a verdict raising it again under the new key seals it anew.
    await _raise(other, "c1", WORDS)
    assert await _words(other, "c1") == [WORDS]


async def test_a_sealed_text_copied_to_another_row_does_not_open(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    await _raise(store, "c1", WORDS, "her age")
    await _raise(store, "c2", "who else knows")
    [[source]] = await _rows(
        store_url, "SELECT id FROM gate_open_unknowns WHERE conversation_id = 'c1' LIMIT 1"
    )
    # Into a row of the same conversation, and into a row of another.
    for target in ("c1", "c2"):
        await _execute(
            store_url,
            "UPDATE gate_open_unknowns SET sealed_text ="
            " (SELECT sealed_text FROM gate_open_unknowns WHERE id = :source)"
            " WHERE conversation_id = :target AND id <> :source",
            source=source,
            target=target,
        )

    c1 = {u.id: u.words for u in await store.unknowns.open("c1", limit=10)}
    c2 = await _words(store, "c2")
    assert c1[str(source)] in (WORDS, "her age")
    assert [words for row, words in c1.items() if row != source] == [None]
    assert c2 == [None]
    assert store.unknowns.unopenable == 2


async def test_altered_or_truncated_sealed_text_does_not_open(
    open_store: OpenStore, sqlite_url: str
) -> None:
    store = await open_store(sqlite_url)
    await _raise(store, "c1", WORDS)
    [(sealed,)] = await _rows(sqlite_url, "SELECT sealed_text FROM gate_open_unknowns")
    assert isinstance(sealed, bytes)
    flipped = sealed[:-1] + bytes([sealed[-1] ^ 1])
    for broken in (flipped, sealed[:20], b"", b"\x02" + sealed[1:]):
        await _execute(sqlite_url, "UPDATE gate_open_unknowns SET sealed_text = :s", s=broken)
        assert await _words(store, "c1") == [None]
    assert store.unknowns.unopenable == 4


# --- erased at resolution and at retention -----------------------------------------------


async def test_every_resolution_erases_the_sealed_words(
    open_store: OpenStore, store_url: str
) -> None:
    store = await open_store(store_url)
    run = await _raise(store, "c1", "by verdict", "by text", "by id", "still open")
    assert await _sealed_count(store_url) == 4
    entries = {u.words: u.id for u in await store.unknowns.open("c1", limit=10)}

    settled = await store.unknowns.settle(
        "c1", trace_id=run, shown=[entries["by verdict"]], listed=["still open"]
    )
    assert settled == 1 and await _sealed_count(store_url) == 3
    assert await store.unknowns.resolve("c1", ["BY TEXT"], resolved_by="operator:ana") == 1
    assert await _sealed_count(store_url) == 2
    assert await store.unknowns.resolve_id("c1", entries["by id"], resolved_by="key:k1")
    assert await _sealed_count(store_url) == 1
    assert await _words(store, "c1") == ["still open"]
    assert await _rows(
        store_url,
        "SELECT count(*) FROM gate_open_unknowns"
        " WHERE resolved_at IS NOT NULL AND (sealed_text IS NOT NULL"
        " OR sealed_expires_at IS NOT NULL)",
    ) == [(0,)]
    # Raised again after its resolution, it opens again with its words sealed again.
    await _raise(store, "c1", "by id")
    assert set(await _words(store, "c1")) == {"by id", "still open"}
    assert await _sealed_count(store_url) == 2


async def test_retention_erases_the_sealed_words_and_keeps_the_unknown_open(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    # Plain text kept 2 days, sealed words 5: the purge erases each at its own time.
    privacy = PrivacyConfig(store_raw_text=True, retention_days=2, unknown_retention_days=5)
    store = await open_store(store_url, privacy=privacy, clock=clock)
    await _raise(store, "c1", WORDS)

    clock.advance(days=2)
    purged = await store.traces.purge_expired()
    assert purged.unknowns == 1
    [entry] = await store.unknowns.open("c1", limit=10)
    assert (entry.text, entry.words) == (None, WORDS)
    assert await _sealed_count(store_url) == 1

    clock.advance(days=3)
    # Past its retention the words read as gone before any purge ...
    assert await _words(store, "c1") == [None]
    purged = await store.traces.purge_expired()
    assert (purged.unknowns, (await store.traces.purge_expired()).total) == (1, 0)
    # ... the purge erases them, and the unknown stays open by its HMAC.
    assert await _sealed_count(store_url) == 0
    assert await _rows(
        store_url, "SELECT text, sealed_expires_at, resolved_at FROM gate_open_unknowns"
    ) == [(None, None, None)]
    [entry] = await store.unknowns.open("c1", limit=10)
    run = await store.traces.start_run("gate_reply", conversation_id="c1")
    kept = await store.unknowns.settle("c1", trace_id=run, shown=[entry.id], listed=[WORDS])
    assert kept == 0 and len(await store.unknowns.open("c1", limit=10)) == 1


async def test_the_purge_erases_words_and_text_expiring_together_once(
    open_store: OpenStore, store_url: str, clock: ManualClock
) -> None:
    privacy = PrivacyConfig(store_raw_text=True, retention_days=3, unknown_retention_days=3)
    store = await open_store(store_url, privacy=privacy, clock=clock)
    for n in range(5):
        await _raise(store, f"c{n}", WORDS)
    clock.advance(days=3)

    purged = await store.traces.purge_expired(batch_size=2)

    assert purged.unknowns == 5
    assert await _rows(
        store_url,
        "SELECT count(*) FROM gate_open_unknowns WHERE text IS NOT NULL OR sealed_text IS NOT NULL",
    ) == [(0,)]


# --- the key -----------------------------------------------------------------------------


def _b64(key: bytes, *, padded: bool = True) -> str:
    encoded = base64.urlsafe_b64encode(key).decode()
    return encoded if padded else encoded.rstrip("=")


async def test_the_key_is_read_as_hex_or_url_safe_base64(
    open_store: OpenStore, sqlite_url: str
) -> None:
    key = secrets.token_bytes(32)
    while b"\xfb" not in key and b"\xff" not in key:  # a key whose base64 has - or _
        key = secrets.token_bytes(32)
    first = await open_store(sqlite_url, privacy=SEALED, environ={KEY_ENV: key.hex().upper()})
    await _raise(first, "c1", WORDS)
    for form in (key.hex(), _b64(key), _b64(key, padded=False), f"  {key.hex()}\n"):
        store = await open_store(sqlite_url, privacy=SEALED, environ={KEY_ENV: form})
        assert await _words(store, "c1") == [WORDS]
        await store.close()


@pytest.mark.parametrize(
    ("value", "why"),
    [
        pytest.param(None, "is not set", id="unset"),
        pytest.param("", "is not set", id="empty"),
        pytest.param("   ", "is not set", id="blank"),
        pytest.param("ab" * 31, "holds 62 hex characters", id="hex-too-short"),
        pytest.param("ab" * 33, "holds 66 hex characters", id="hex-too-long"),
        pytest.param("zz" * 32, "holds 64 characters of base64, 48 bytes", id="not-hex"),
        pytest.param(_b64(b"k" * 16), "of base64, 16 bytes", id="base64-16-bytes"),
        pytest.param(_b64(b"k" * 48), "of base64, 48 bytes", id="base64-48-bytes"),
        pytest.param("a secret with spaces", "holds 20 characters, neither hex nor", id="prose"),
        pytest.param("ключ" * 11, "holds 44 characters, neither hex nor", id="not-ascii"),
        pytest.param("A", "holds 1 character, neither", id="one-char"),
    ],
)
async def test_a_bad_key_is_a_config_error_naming_the_variable_not_its_value(
    open_store: OpenStore, sqlite_url: str, sqlite_path: Path, value: str | None, why: str
) -> None:
    environ = {} if value is None else {KEY_ENV: value}

    with pytest.raises(ConfigError) as caught:
        await open_store(sqlite_url, privacy=SEALED, environ=environ)

    [problem] = caught.value.problems
    assert KEY_ENV in problem and why in problem
    if value is not None and len(value.strip()) >= 8:
        assert value.strip() not in str(caught.value)
    # Refused before the store is touched.
    assert not sqlite_path.exists()


@pytest.mark.parametrize("name", ["1KEY", "MY-KEY", "", "key with space"])
def test_a_bad_variable_name_is_refused_by_the_config(name: str) -> None:
    with pytest.raises(ValidationError, match="unknowns_key_env"):
        PrivacyConfig(unknowns_key_env=name)


@pytest.mark.parametrize("days", [0, -1, 3651])
def test_unknown_retention_is_bounded(days: int) -> None:
    with pytest.raises(ValidationError, match="unknown_retention_days"):
        PrivacyConfig(unknown_retention_days=days)


async def test_stores_opening_a_fresh_database_together_share_one_stored_key(
    open_store: OpenStore, store_url: str
) -> None:
    first, *others = await asyncio.gather(*(open_store(store_url) for _ in range(3)))
    await _raise(first, "c1", WORDS)
    for other in others:
        assert await _words(other, "c1") == [WORDS]
    # The stored unknowns key does not depend on where the HMAC key comes from.
    hmac_env = await open_store(
        store_url, privacy=PrivacyConfig(hmac_key_env="H"), environ={"H": "h"}
    )
    assert await _words(hmac_env, "c1") == [WORDS]
    assert await _rows(
        store_url, "SELECT count(*) FROM store_secrets WHERE name = 'unknowns_seal_key'"
    ) == [(1,)]


# --- the seal itself ---------------------------------------------------------------------


def test_a_seal_needs_a_32_byte_key() -> None:
    for size in (0, 16, 31, 33, 64):
        with pytest.raises(UsageError):
            UnknownSeal(b"k" * size)
    assert "k" * 32 not in repr(UnknownSeal(b"k" * 32))


_SEALS = (UnknownSeal(b"a" * 32), UnknownSeal(b"b" * 32))


@settings(max_examples=60, deadline=None)
@given(
    words=st.text(min_size=1, max_size=200),
    conversation=st.text(min_size=1, max_size=40),
    other=st.text(min_size=1, max_size=40),
    unknown_id=st.text(alphabet="0123456789abcdef", min_size=32, max_size=32),
)
def test_sealed_words_open_only_in_their_own_row_under_their_own_key(
    words: str, conversation: str, other: str, unknown_id: str
) -> None:
    seal, wrong = _SEALS
    sealed = seal.seal(words, conversation_id=conversation, unknown_id=unknown_id)

    assert seal.open(sealed, conversation_id=conversation, unknown_id=unknown_id) == words
    assert words.encode("utf-8") not in sealed or len(words.encode("utf-8")) < 4
    assert wrong.open(sealed, conversation_id=conversation, unknown_id=unknown_id) is None
    assert seal.open(sealed, conversation_id=conversation, unknown_id="f" * 32) is None or (
        unknown_id == "f" * 32
    )
    if other != conversation:
        assert seal.open(sealed, conversation_id=other, unknown_id=unknown_id) is None
    # Sealed twice, never the same bytes (a fresh nonce each time).
    assert seal.seal(words, conversation_id=conversation, unknown_id=unknown_id) != sealed
