from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable

import httpx
import pytest

from foureyes.config import PrivacyConfig, ServerConfig, StoreConfig
from foureyes.core.errors import ConfigError, StoreError
from foureyes.server import auth
from foureyes.server.app import create_app
from foureyes.server.auth import AuthMode, KeyAuthenticator, env_api_keys, is_loopback
from foureyes.server.errors import ApiError, ErrorCode
from foureyes.store import Store
from foureyes.store.api_keys import (
    ApiKeyRecord,
    KeyCensus,
    KeyScope,
    SqlApiKeys,
    api_key_digest,
)
from tests.helpers.server import app_client
from tests.server._support import ADMIN_KEY, CLIENT_KEY, KEYS_ENV, bearer, config, keyed

REMOTE = "203.0.113.9"


def _error(response: httpx.Response) -> dict[str, object]:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "code", "param"}
    error: dict[str, object] = body["error"]
    return error


async def _open_keys() -> tuple[Store, SqlApiKeys]:
    store = await Store.open(
        StoreConfig(url=os.environ["FOUREYES_STORE__URL"]), PrivacyConfig(), {}
    )
    return store, store.api_keys


# --- keys from the environment --------------------------------------------------------


def test_env_keys_get_the_scope_of_their_variable() -> None:
    server = ServerConfig(api_keys_env="C", admin_keys_env="A")
    keys = env_api_keys(server, {"C": f" {CLIENT_KEY} ,, other-key-0123456789 ", "A": ADMIN_KEY})
    assert [(k.scope, k.variable) for k in keys] == [
        (KeyScope.CLIENT, "C"),
        (KeyScope.CLIENT, "C"),
        (KeyScope.ADMIN, "A"),
    ]
    assert keys[0].digest == api_key_digest(CLIENT_KEY)
    assert env_api_keys(ServerConfig(), {"C": CLIENT_KEY}) == []


@pytest.mark.parametrize(
    ("environ", "problem"),
    [
        ({}, "environment variable C is not set"),
        ({"C": "  "}, "environment variable C is not set"),
        ({"C": "short-secret"}, "environment variable C: key #1 is shorter than 16 characters"),
        ({"C": "x" * 20 + " y" * 5}, "key #1 has characters other than printable ASCII"),
        ({"C": "ok-key-0123456789,clé-secrète-0123456789"}, "key #2 has characters other"),
        ({"C": "dup-key-0123456789,dup-key-0123456789"}, "key #2 is listed more than once"),
    ],
)
def test_malformed_env_keys_are_config_errors_that_never_show_the_key(
    environ: dict[str, str], problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        env_api_keys(ServerConfig(api_keys_env="C"), environ)
    assert any(problem in p for p in caught.value.problems)
    for value in environ.values():
        for key in value.split(","):
            if key.strip():
                assert key.strip() not in str(caught.value)


def test_a_key_in_both_variables_is_refused() -> None:
    server = ServerConfig(api_keys_env="C", admin_keys_env="A")
    with pytest.raises(ConfigError, match="A: key #1 is listed more than once"):
        env_api_keys(server, {"C": CLIENT_KEY, "A": CLIENT_KEY})


async def test_the_service_does_not_start_with_a_malformed_env_key() -> None:
    app = create_app(keyed(), {"CLIENT_KEYS": "too-short", "ADMIN_KEYS": ADMIN_KEY})
    with pytest.raises(ConfigError, match="CLIENT_KEYS: key #1"):
        async with app_client(app):
            pass


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("example.com", False),
        ("0000:0000:0000:0000:0000:0000:0000:0001", True),
        ("localhost" + "." * 200, False),
        (None, False),
    ],
)
def test_loopback_hosts(host: str | None, expected: bool) -> None:
    remembered = auth._names_loopback.cache_info().currsize
    assert is_loopback(host) is expected
    assert is_loopback(host) is expected  # the remembered answer is the same
    if host is not None and len(host) > auth._names_loopback.longest:
        assert auth._names_loopback.cache_info().currsize == remembered  # not remembered


# --- the three modes ------------------------------------------------------------------


async def test_without_any_key_loopback_callers_are_served_with_every_scope(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="foureyes.server")
    async with app_client(create_app(config(), {})) as client:
        health = await client.get("/healthz")
        plain = await client.get("/v1/models")
        # The openai SDK always sends some key; with none configured it is ignored.
        any_key = await client.get("/v1/models", headers=bearer("sk-anything"))
        metrics = await client.get("/metrics")

    assert health.json()["auth"] == AuthMode.OPEN_LOOPBACK
    assert [r.status_code for r in (plain, any_key, metrics)] == [200, 200, 200]
    started = [
        r for r in caplog.records if getattr(r, "foureyes_fields", {}).get("event") == "auth_mode"
    ]
    assert started and started[0].levelno == logging.WARNING
    assert "this machine only" in started[0].getMessage()


async def test_without_any_key_remote_callers_are_refused() -> None:
    async with app_client(create_app(config(), {}), client_host=REMOTE) as client:
        response = await client.get("/v1/models", headers=bearer("sk-anything"))
        health = await client.get("/healthz")

    assert response.status_code == 401
    assert _error(response)["code"] == "loopback_only"
    assert response.headers["www-authenticate"] == "Bearer"
    assert health.status_code == 200  # liveness stays open


async def test_a_public_host_without_keys_refuses_everyone() -> None:
    async with app_client(create_app(config(host="0.0.0.0"), {})) as client:
        response = await client.get("/v1/models")
        health = await client.get("/healthz")

    assert response.status_code == 401
    assert _error(response)["code"] == "no_api_keys"
    assert health.json()["auth"] == AuthMode.CLOSED


async def test_revoking_every_key_closes_the_service_rather_than_opening_it() -> None:
    store, keys = await _open_keys()
    new = await keys.create(scope=KeyScope.CLIENT)
    await keys.revoke(new.record.prefix)
    await store.close()

    async with app_client(create_app(config(), {})) as client:
        response = await client.get("/v1/models")

    assert _error(response)["code"] == "no_api_keys"


async def test_with_keys_every_request_needs_a_valid_one() -> None:
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        missing = await client.get("/v1/models")
        wrong = await client.get("/v1/models", headers=bearer(CLIENT_KEY + "x"))
        basic = await client.get("/v1/models", headers={"authorization": f"Basic {CLIENT_KEY}"})
        empty = await client.get("/v1/models", headers={"authorization": "Bearer "})
        client_ok = await client.get("/v1/models", headers=bearer(CLIENT_KEY))
        admin_ok = await client.get("/v1/models", headers=bearer(ADMIN_KEY))
        health = await client.get("/healthz")

    assert _error(missing) == {
        "message": "No API key was sent. Send one in the header 'Authorization: Bearer <key>'.",
        "type": "authentication_error",
        "code": "missing_api_key",
        "param": None,
    }
    for refused in (wrong, basic, empty):
        assert refused.status_code == 401
        assert _error(refused)["code"] == "invalid_api_key"
        assert CLIENT_KEY not in refused.text
    assert client_ok.status_code == admin_ok.status_code == 200
    assert health.json()["auth"] == AuthMode.KEYS


async def test_a_client_key_cannot_reach_admin_endpoints() -> None:
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        as_client = await client.get("/metrics", headers=bearer(CLIENT_KEY))
        as_admin = await client.get("/metrics", headers=bearer(ADMIN_KEY))
        keys_as_client = await client.get("/v1/keys", headers=bearer(CLIENT_KEY))

    assert as_client.status_code == keys_as_client.status_code == 403
    assert _error(as_client) == {
        "message": "This endpoint needs a key with the 'admin' scope.",
        "type": "permission_error",
        "code": "insufficient_scope",
        "param": None,
    }
    assert as_admin.status_code == 200


async def test_a_key_dropped_from_the_environment_stops_working_at_restart() -> None:
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        assert (await client.get("/v1/models", headers=bearer(CLIENT_KEY))).status_code == 200

    other = "replacement-key-0123456789"
    environ = {"CLIENT_KEYS": other, "ADMIN_KEYS": ADMIN_KEY}
    async with app_client(create_app(keyed(), environ)) as client:
        dropped = await client.get("/v1/models", headers=bearer(CLIENT_KEY))
        replacement = await client.get("/v1/models", headers=bearer(other))

    assert dropped.status_code == 401 and replacement.status_code == 200


async def test_a_key_created_or_revoked_in_the_store_reaches_a_running_service() -> None:
    async with app_client(create_app(keyed(key_cache_s=0), KEYS_ENV)) as client:
        store, keys = await _open_keys()
        new = await keys.create(scope=KeyScope.CLIENT, name="cli")
        before = await client.get("/v1/models", headers=bearer(new.key))
        await keys.revoke(new.record.prefix)
        await store.close()
        after = await client.get("/v1/models", headers=bearer(new.key))

    assert before.status_code == 200
    assert after.status_code == 401 and _error(after)["code"] == "invalid_api_key"


async def test_a_verified_key_is_trusted_for_the_cache_time() -> None:
    async with app_client(create_app(keyed(key_cache_s=300), KEYS_ENV)) as client:
        store, keys = await _open_keys()
        new = await keys.create(scope=KeyScope.CLIENT)
        assert (await client.get("/v1/models", headers=bearer(new.key))).status_code == 200
        await keys.revoke(new.record.prefix)
        await store.close()
        cached = await client.get("/v1/models", headers=bearer(new.key))

    # Documented: a revocation outside this process waits for server.key_cache_s.
    assert cached.status_code == 200


# --- keys over HTTP -------------------------------------------------------------------


async def test_admins_create_list_and_revoke_keys_over_http() -> None:
    async with app_client(create_app(keyed(key_cache_s=300), KEYS_ENV)) as client:
        admin = bearer(ADMIN_KEY)
        created = await client.post(
            "/v1/keys", json={"name": "web", "scope": "client"}, headers=admin
        )
        key = created.json()["key"]
        works = await client.get("/v1/models", headers=bearer(key))
        listed = await client.get("/v1/keys", headers=admin)
        revoked = await client.delete(f"/v1/keys/{created.json()['prefix']}", headers=admin)
        # Revoked over HTTP: refused at once on this instance, whatever the cache time.
        refused = await client.get("/v1/models", headers=bearer(key))
        unknown = await client.delete("/v1/keys/fy_00000000", headers=admin)
        bad_scope = await client.post("/v1/keys", json={"scope": "root"}, headers=admin)

    assert created.status_code == 201
    assert created.json()["scope"] == "client" and created.json()["name"] == "web"
    assert works.status_code == 200
    assert listed.status_code == 200 and key not in listed.text
    assert {k["source"] for k in listed.json()["data"]} == {"env", "created"}
    assert revoked.json()["outcome"] == "revoked" and revoked.json()["active"] is False
    assert refused.status_code == 401
    assert unknown.status_code == 404 and _error(unknown)["code"] == "not_found"
    assert bad_scope.status_code == 422 and _error(bad_scope)["param"] == "scope"


@pytest.mark.parametrize(("name", "kept"), [(" ", None), ("\r\x1c", None), (" web ", "web")])
async def test_a_key_name_is_kept_stripped_and_a_blank_one_is_no_name(
    name: str, kept: str | None
) -> None:
    # The schema takes any 1-128 characters; the store keeps names stripped, none blank
    # (a blank one was a 500 from the store's own check).
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        created = await client.post("/v1/keys", json={"name": name}, headers=bearer(ADMIN_KEY))

    assert created.status_code == 201, created.text
    assert created.json()["name"] == kept


# --- one store read per expired cache entry ---------------------------------------------


class _HeldKeys(SqlApiKeys):
    """The store's keys, with their reads counted and held until the test lets them go.

    A census waits at ``census_gate``, a key's read at ``find_gate``, once it has read the
    store, so a test can make callers arrive while a read is under way; ``failures`` makes
    that many census reads fail as an unreachable store would.
    """

    def __init__(self, keys: SqlApiKeys) -> None:
        self._keys = keys
        self.census_gate = asyncio.Event()
        self.find_gate = asyncio.Event()
        self.census_gate.set()
        self.find_gate.set()
        self.census_reads = 0
        self.find_reads = 0
        self.failures = 0

    async def census(self) -> KeyCensus:
        self.census_reads += 1
        census = await self._keys.census()
        await self.census_gate.wait()
        if self.failures:
            self.failures -= 1
            raise StoreError("count_api_keys", "unreachable")
        return census

    async def find(self, digest: str) -> ApiKeyRecord | None:
        self.find_reads += 1
        record = await self._keys.find(digest)
        await self.find_gate.wait()
        return record


async def _settle() -> None:
    """Let every task run until it waits (each step of a task is one turn of the loop)."""
    for _ in range(8):
        await asyncio.sleep(0)


async def _held_auth(
    cache_s: float = 300,
) -> tuple[Store, str, _HeldKeys, KeyAuthenticator, list[float]]:
    store, keys = await _open_keys()
    new = await keys.create(scope=KeyScope.CLIENT)
    held = _HeldKeys(keys)
    now = [0.0]
    auth = KeyAuthenticator(held, loopback_host=False, cache_s=cache_s, clock=lambda: now[0])
    return store, f"Bearer {new.key}", held, auth, now


async def test_requests_after_an_entry_expires_share_one_read_of_the_store() -> None:
    store, header, held, auth, now = await _held_auth(cache_s=5)
    try:
        for round_ in (1, 2):
            held.census_gate.clear()
            held.find_gate.clear()
            callers = [asyncio.ensure_future(auth.authenticate(header, REMOTE)) for _ in range(16)]
            await _settle()  # all sixteen wait for the one census
            assert held.census_reads == round_ and held.find_reads == round_ - 1
            held.census_gate.set()
            await _settle()  # and then for the one read of their key
            assert held.census_reads == round_ and held.find_reads == round_
            held.find_gate.set()
            principals = await asyncio.gather(*callers)
            assert {p.scope for p in principals} == {KeyScope.CLIENT}
            assert held.census_reads == round_ and held.find_reads == round_
            now[0] += 6  # both entries expire
    finally:
        await store.close()


async def test_a_failed_read_fails_every_caller_waiting_for_it_and_the_next_reads_again() -> None:
    store, header, held, auth, _ = await _held_auth()
    try:
        held.census_gate.clear()
        held.failures = 1
        callers = [asyncio.ensure_future(auth.authenticate(header, REMOTE)) for _ in range(8)]
        await _settle()
        held.census_gate.set()
        outcomes = await asyncio.gather(*callers, return_exceptions=True)
        assert all(isinstance(o, StoreError) for o in outcomes)
        assert held.census_reads == 1
        # Nothing of the failure is kept: the next request reads again, and is served.
        assert (await auth.authenticate(header, REMOTE)).scope is KeyScope.CLIENT
        assert held.census_reads == 2
    finally:
        await store.close()


async def test_a_caller_cancelled_while_waiting_leaves_the_read_to_the_others() -> None:
    store, header, held, auth, _ = await _held_auth()
    try:
        held.census_gate.clear()
        first = asyncio.ensure_future(auth.authenticate(header, REMOTE))
        second = asyncio.ensure_future(auth.authenticate(header, REMOTE))
        await _settle()
        first.cancel()  # the caller that started the read
        await _settle()
        held.census_gate.set()
        assert (await second).scope is KeyScope.CLIENT
        assert first.cancelled()
        # The read finished and filled the cache: another request reads nothing.
        await auth.authenticate(header, REMOTE)
        assert held.census_reads == 1 and held.find_reads == 1
    finally:
        await store.close()


async def _revoke(store: Store, header: str, auth: KeyAuthenticator) -> None:
    """Revoke the key ``header`` sends (another stays active), as ``DELETE /v1/keys`` does."""
    keys = store.api_keys
    await keys.create(scope=KeyScope.CLIENT)
    token = header.removeprefix("Bearer ")
    (record,) = [r for r in await keys.list() if token.startswith(r.prefix + "_")]
    await keys.revoke(record.prefix)
    auth.forget()


async def _refused(request: Awaitable[object]) -> ErrorCode:
    with pytest.raises(ApiError) as refused:
        await request
    return refused.value.code


async def test_a_key_read_before_a_revocation_is_not_cached() -> None:
    store, header, held, auth, _ = await _held_auth()
    try:
        await auth.authenticate(header, REMOTE)  # the mode and the key are cached
        auth.forget()
        held.find_gate.clear()
        before = asyncio.ensure_future(auth.authenticate(header, REMOTE))
        await _settle()  # it has read the key, still active, and waits
        await _revoke(store, header, auth)
        held.find_gate.set()
        # The request under way when the key was revoked is served; what it read is
        # not kept, so the next request reads the store and is refused.
        assert (await before).scope is KeyScope.CLIENT
        assert await _refused(auth.authenticate(header, REMOTE)) is ErrorCode.INVALID_API_KEY
    finally:
        await store.close()


async def test_a_request_after_a_revocation_does_not_join_a_read_begun_before_it() -> None:
    store, header, held, auth, _ = await _held_auth()
    try:
        held.find_gate.clear()
        before = asyncio.ensure_future(auth.authenticate(header, REMOTE))
        await _settle()
        await _revoke(store, header, auth)
        after = asyncio.ensure_future(auth.authenticate(header, REMOTE))
        await _settle()
        held.find_gate.set()
        assert (await before).scope is KeyScope.CLIENT
        assert await _refused(after) is ErrorCode.INVALID_API_KEY
        assert held.find_reads == 2
    finally:
        await store.close()


async def test_a_census_read_before_the_first_key_was_created_is_not_cached() -> None:
    store, keys = await _open_keys()
    held = _HeldKeys(keys)
    auth = KeyAuthenticator(held, loopback_host=True, cache_s=300)
    try:
        held.census_gate.clear()
        before = asyncio.ensure_future(auth.authenticate(None, "127.0.0.1"))
        await _settle()  # it has counted no key, and waits
        await keys.create(scope=KeyScope.CLIENT)
        auth.forget()  # what POST /v1/keys does on this instance
        held.census_gate.set()
        # Served as the store was when it asked; the next request finds the service keyed.
        assert (await before).scope is KeyScope.ADMIN
        assert await _refused(auth.authenticate(None, "127.0.0.1")) is ErrorCode.MISSING_API_KEY
        assert held.census_reads == 2
    finally:
        await store.close()
