"""The open-unknowns endpoints in process: list a conversation's, resolve one by id."""

from __future__ import annotations

import os

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.tenancy import key_tenant, scoped_conversation
from foureyes.server import create_app
from foureyes.store import Store
from tests.helpers.server import app_client
from tests.server._support import ADMIN_KEY, CLIENT_KEY, KEYS_ENV, bearer, keyed

ALONE = "whether the user is alone tonight"
RAW_TEXT = PrivacyConfig(store_raw_text=True)


async def _raise(
    conversation: str,
    *texts: str,
    key: str = CLIENT_KEY,
    privacy: PrivacyConfig = RAW_TEXT,
) -> str:
    """Open unknowns in ``key``'s conversation as an insufficient verdict would.

    Returns the run's trace id. The app must have started (it records the env's keys).
    """
    async with await Store.open(
        StoreConfig(url=os.environ["FOUREYES_STORE__URL"]), privacy, {}
    ) as store:
        record = await store.api_keys.find(sha256_hex(key))
        assert record is not None
        scoped = scoped_conversation(key_tenant(record.id), conversation)
        trace_id = await store.traces.start_run("gate_reply", conversation_id=scoped)
        await store.unknowns.add(scoped, texts, trace_id=trace_id)
        return trace_id


async def test_under_default_privacy_the_listing_shows_no_words_though_prompts_get_them() -> None:
    app = create_app(keyed(), KEYS_ENV)
    async with app_client(app) as client:
        trace_id = await _raise("c1", ALONE, privacy=PrivacyConfig())
        response = await client.get("/v1/conversations/c1/unknowns", headers=bearer(CLIENT_KEY))
        [listed] = response.json()["data"]
        # The gate's own read of the same store opens the sealed words.
        store = app.state.service.store
        record = await store.traces.get(trace_id)
        assert record is not None and record.run.conversation_id is not None
        kept = await store.unknowns.open(record.run.conversation_id, limit=5)

    assert response.status_code == 200 and listed["text"] is None
    assert ALONE not in response.text
    assert [u.words for u in kept] == [ALONE]


async def test_a_client_lists_and_resolves_an_unknown_by_id() -> None:
    app = create_app(keyed(), KEYS_ENV)
    async with app_client(app) as client:
        await _raise("c1", ALONE, "her age")
        await _raise("c2", ALONE)
        listed = (
            await client.get("/v1/conversations/c1/unknowns", headers=bearer(CLIENT_KEY))
        ).json()
        [alone] = [u for u in listed["data"] if u["text"] == ALONE]

        first = await client.post(
            f"/v1/conversations/c1/unknowns/{alone['id']}/resolve", headers=bearer(CLIENT_KEY)
        )
        again = await client.post(
            f"/v1/conversations/c1/unknowns/{alone['id']}/resolve", headers=bearer(CLIENT_KEY)
        )
        still_open = (
            await client.get("/v1/conversations/c1/unknowns", headers=bearer(CLIENT_KEY))
        ).json()
        other = (
            await client.get("/v1/conversations/c2/unknowns", headers=bearer(CLIENT_KEY))
        ).json()

    assert first.status_code == 200 and first.json()["resolved"] is True
    resolved = first.json()["unknown"]
    assert resolved["resolved_by"].startswith("key:") and resolved["resolved_at"] is not None
    assert again.status_code == 200 and again.json()["resolved"] is False
    assert [u["text"] for u in still_open["data"]] == ["her age"]
    # The same text in another conversation is another unknown, still open.
    assert [u["text"] for u in other["data"]] == [ALONE]


async def test_an_unknown_of_another_conversation_or_no_key_is_refused() -> None:
    app = create_app(keyed(), KEYS_ENV)
    async with app_client(app) as client:
        await _raise("c1", ALONE)
        [alone] = (
            await client.get("/v1/conversations/c1/unknowns", headers=bearer(CLIENT_KEY))
        ).json()["data"]
        elsewhere = await client.post(
            f"/v1/conversations/c2/unknowns/{alone['id']}/resolve", headers=bearer(CLIENT_KEY)
        )
        malformed = await client.post(
            "/v1/conversations/c1/unknowns/not-an-id/resolve", headers=bearer(CLIENT_KEY)
        )
        keyless = await client.post(f"/v1/conversations/c1/unknowns/{alone['id']}/resolve")
        # Another key naming the same conversation id names a conversation of its own.
        other_key_list = (
            await client.get("/v1/conversations/c1/unknowns", headers=bearer(ADMIN_KEY))
        ).json()
        other_key_resolve = await client.post(
            f"/v1/conversations/c1/unknowns/{alone['id']}/resolve", headers=bearer(ADMIN_KEY)
        )
        listed = (
            await client.get("/v1/conversations/c1/unknowns", headers=bearer(CLIENT_KEY))
        ).json()

    assert elsewhere.status_code == 404 and elsewhere.json()["error"]["code"] == "not_found"
    assert malformed.status_code == 422
    assert keyless.status_code == 401
    assert other_key_list["data"] == []
    assert other_key_resolve.status_code == 404
    assert [u["resolved_at"] for u in listed["data"]] == [None]
