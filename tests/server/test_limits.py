from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fastapi import Request
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.config import PrivacyConfig, ServerConfig, StoreConfig, load_config
from foureyes.core.errors import ConfigError, UsageError
from foureyes.server import limits
from foureyes.server.app import create_app
from foureyes.server.auth import ClientKey
from foureyes.server.limits import RateLimiter, StoreRateLimiter, read_json
from foureyes.store import Store
from tests.helpers.clock import ManualClock
from tests.helpers.server import app_client
from tests.server._support import ADMIN_KEY, CLIENT_KEY, KEYS_ENV, bearer, config, keyed


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- rate limits ----------------------------------------------------------------------


def test_a_bucket_allows_the_burst_then_refills_at_the_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_minute=60, burst=3, clock=clock)

    first = [limiter.take("a") for _ in range(3)]
    denied = limiter.take("a")

    assert [d.allowed for d in first] == [True, True, True]
    assert [d.remaining for d in first] == [2, 1, 0]
    assert not denied.allowed
    assert denied.retry_after_s == pytest.approx(1.0)
    assert denied.retry_after_header == "1"
    assert limiter.take("b").allowed  # buckets are per key
    clock.now += 0.5
    assert not limiter.take("a").allowed
    clock.now += 0.5
    assert limiter.take("a").allowed
    clock.now += 3600
    assert [limiter.take("a").allowed for _ in range(4)] == [True, True, True, False]


def test_retry_after_rounds_up_to_whole_seconds() -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_minute=0.5, burst=1, clock=clock)
    limiter.take("a")
    denied = limiter.take("a")
    assert denied.retry_after_s == pytest.approx(120.0)
    assert denied.retry_after_header == "120"


@pytest.mark.parametrize(("rate", "burst"), [(0.0, 1), (-1.0, 1), (float("inf"), 1), (60.0, 0)])
def test_a_limiter_needs_a_positive_rate_and_burst(rate: float, burst: int) -> None:
    with pytest.raises(UsageError):
        RateLimiter(rate_per_minute=rate, burst=burst)


@settings(max_examples=200, deadline=None)
@given(
    rate=st.floats(min_value=1, max_value=6000),
    burst=st.integers(min_value=1, max_value=20),
    gaps=st.lists(st.floats(min_value=0, max_value=2), min_size=1, max_size=80),
)
def test_no_window_admits_more_than_burst_plus_refill(
    rate: float, burst: int, gaps: list[float]
) -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_minute=rate, burst=burst, clock=clock)
    allowed_at: list[float] = []
    for gap in gaps:
        clock.now += gap
        decision = limiter.take("k")
        if decision.allowed:
            allowed_at.append(clock.now)
        else:
            assert decision.retry_after_s > 0
    for i, start in enumerate(allowed_at):
        for j in range(i, len(allowed_at)):
            admitted = j - i + 1
            assert admitted <= burst + (allowed_at[j] - start) * rate / 60 + 1e-6


@settings(max_examples=100, deadline=None)
@given(rate=st.floats(min_value=1, max_value=6000), burst=st.integers(min_value=1, max_value=10))
def test_waiting_the_retry_after_is_always_enough(rate: float, burst: int) -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_minute=rate, burst=burst, clock=clock)
    for _ in range(burst):
        assert limiter.take("k").allowed
    denied = limiter.take("k")
    assert not denied.allowed
    clock.now += denied.retry_after_s * (1 + 1e-9)
    assert limiter.take("k").allowed


async def test_over_the_burst_a_key_gets_429_with_retry_after() -> None:
    app = create_app(keyed(rate_per_minute=6, burst=2), KEYS_ENV)
    async with app_client(app) as client:
        statuses = [
            (await client.get("/v1/models", headers=bearer(CLIENT_KEY))).status_code
            for _ in range(2)
        ]
        limited = await client.get("/v1/models", headers=bearer(CLIENT_KEY))
        other_key = await client.get("/v1/models", headers=bearer(ADMIN_KEY))
        # Unauthenticated requests never reach a bucket, so they cannot drain one.
        anonymous = await client.get("/v1/models")

    assert statuses == [200, 200]
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "10"
    assert limited.json()["error"] == {
        "message": "Rate limit reached for this key; retry in 10 s.",
        "type": "rate_limit_error",
        "code": "rate_limit_exceeded",
        "param": None,
    }
    assert other_key.status_code == 200
    assert anonymous.status_code == 401


async def test_without_keys_each_loopback_client_has_a_bucket() -> None:
    app = create_app(config(rate_per_minute=1, burst=1), {})
    async with app_client(app) as client:
        first = await client.get("/v1/models")
        second = await client.get("/v1/models")
    async with app_client(app, client_host="127.0.0.2") as client:
        other = await client.get("/v1/models")
    assert (first.status_code, second.status_code, other.status_code) == (200, 429, 200)


async def test_apps_with_the_store_backend_share_each_keys_bucket() -> None:
    # Two apps on one store, as two workers would be: the burst is the burst of both.
    limits = {"rate_per_minute": 0.001, "burst": 3, "rate_limit_backend": "store"}
    one = create_app(keyed(**limits), KEYS_ENV)
    two = create_app(keyed(**limits), KEYS_ENV)
    async with app_client(one) as first, app_client(two) as second:
        statuses = [
            (await client.get("/v1/models", headers=bearer(CLIENT_KEY))).status_code
            for client in (first, second, first, second, first, second)
        ]
        limited = await second.get("/v1/models", headers=bearer(CLIENT_KEY))

    assert statuses == [200, 200, 200, 429, 429, 429]
    # A whole token at 0.001 per minute is 60,000 s, less the time the requests took (the
    # store's clock is the wall clock, so a loaded machine can take a second or more).
    assert 59_000 < int(limited.headers["retry-after"]) <= 60_000
    assert limited.json()["error"]["code"] == "rate_limit_exceeded"


def _refuse_rate_writes(path: str) -> None:
    with sqlite3.connect(path) as conn:
        for event in ("INSERT", "UPDATE"):
            conn.execute(
                f"CREATE TRIGGER refuse_{event.lower()} BEFORE {event} ON rate_buckets "
                "BEGIN SELECT RAISE(ABORT, 'disk hiccup'); END"
            )
    conn.close()


@pytest.mark.parametrize("lease", [1, 4])
async def test_a_store_limiter_that_cannot_answer_refuses_the_request(lease: int) -> None:
    # The store is asked once per lease: requests the lease taken before the failure still
    # covers go ahead (at most the lease; its last token fades as soon as time passes, the
    # bucket having been full), and from the first that needs a new lease on, every one
    # is refused.
    reached: list[str] = []
    limits = {"rate_limit_backend": "store", "rate_per_minute": 0.001, "rate_lease_tokens": lease}
    app = create_app(keyed(**limits), KEYS_ENV)

    @app.get("/probe")
    async def probe(_: ClientKey) -> dict[str, str]:
        reached.append("probe")
        return {}

    async with app_client(app) as client:
        assert (await client.get("/probe", headers=bearer(CLIENT_KEY))).status_code == 200
        _refuse_rate_writes(os.environ["FOUREYES_STORE__URL"].removeprefix("sqlite+aiosqlite:///"))
        statuses = [
            (await client.get("/probe", headers=bearer(CLIENT_KEY))).status_code
            for _ in range(2 * lease)
        ]
        refused = await client.get(
            "/probe", headers=bearer(CLIENT_KEY) | {"accept-language": "zh-CN"}
        )

    # Fail closed: never admitted unlimited; the handler ran for the leased requests only.
    covered = statuses.index(503)
    assert covered < lease and statuses == [200] * covered + [503] * (2 * lease - covered)
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "store_unavailable"
    assert refused.json()["error"]["message"].startswith("服务的存储暂时不可用")
    assert reached == ["probe"] * (1 + covered)


def test_the_backend_defaults_to_the_store_with_workers_and_memory_with_them_is_refused() -> None:
    assert not ServerConfig().shared_rate_limits
    assert ServerConfig(workers=2).shared_rate_limits
    assert ServerConfig(rate_limit_backend="store").shared_rate_limits
    assert not ServerConfig(workers=1, rate_limit_backend="memory").shared_rate_limits
    with pytest.raises(ConfigError, match="rate_limit_backend = 'memory' with server.workers"):
        load_config(
            None,
            environ={
                "FOUREYES_SERVER__WORKERS": "2",
                "FOUREYES_SERVER__RATE_LIMIT_BACKEND": "memory",
            },
        )


@pytest.mark.parametrize("workers", ["0", "-1", "two", "1.5"])
def test_workers_must_be_a_positive_whole_number(workers: str) -> None:
    with pytest.raises(ConfigError, match=r"server\.workers"):
        load_config(None, environ={"FOUREYES_SERVER__WORKERS": workers})


# --- request bodies -------------------------------------------------------------------


async def _key_count(client: object) -> int:
    from httpx import AsyncClient

    assert isinstance(client, AsyncClient)
    listed = await client.get("/v1/keys", headers=bearer(ADMIN_KEY))
    return len(listed.json()["data"])


async def test_a_declared_body_over_the_limit_is_refused_before_anything_runs() -> None:
    app = create_app(keyed(max_body_bytes=1024), KEYS_ENV)
    big = json.dumps({"name": "x" * 2000}).encode()
    async with app_client(app) as client:
        before = await _key_count(client)
        anonymous = await client.post("/v1/keys", content=big)
        admin = await client.post(
            "/v1/keys",
            content=big,
            headers=bearer(ADMIN_KEY) | {"content-type": "application/json"},
        )
        after = await _key_count(client)

    # 413 even without a key: the size check runs before authentication.
    for response in (anonymous, admin):
        assert response.status_code == 413
        assert response.json()["error"] == {
            "message": "The request body is larger than the limit of 1024 bytes.",
            "type": "invalid_request_error",
            "code": "request_too_large",
            "param": None,
        }
    assert after == before


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_a_streamed_body_is_cut_off_at_the_limit() -> None:
    app = create_app(keyed(max_body_bytes=1024), KEYS_ENV)
    headers = bearer(ADMIN_KEY) | {"content-type": "application/json"}
    async with app_client(app) as client:
        before = await _key_count(client)
        response = await client.post(
            "/v1/keys",
            content=_chunks(b'{"name": "', b"x" * 700, b"y" * 700, b'"}'),
            headers=headers,
        )
        after = await _key_count(client)

    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert after == before


async def test_a_body_exactly_at_the_limit_is_read() -> None:
    body = b'{"name": "' + b"n" * 100 + b'"}'
    app = create_app(keyed(max_body_bytes=1024), KEYS_ENV)
    headers = bearer(ADMIN_KEY) | {"content-type": "application/json"}
    padded = body + b" " * (1024 - len(body))
    async with app_client(app) as client:
        response = await client.post("/v1/keys", content=padded, headers=headers)
    assert response.status_code == 201


@pytest.mark.parametrize(
    "body",
    [
        b'{"name": "caf\xe9"}',  # Latin-1, not UTF-8
        b'{"name": "\xed\xa0\x80"}',  # an encoded surrogate
        b'{"name": "ok"}\x00',
        '{"name": "ok"}'.encode("utf-16-le"),
        '{"name": "ok"}'.encode("utf-32"),
    ],
)
async def test_json_bodies_must_be_utf8(body: bytes) -> None:
    headers = bearer(ADMIN_KEY) | {"content-type": "application/json"}
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        response = await client.post("/v1/keys", content=body, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": "The request body is not valid UTF-8 JSON text.",
        "type": "invalid_request_error",
        "code": "invalid_encoding",
        "param": None,
    }


async def test_utf8_split_across_chunks_is_accepted() -> None:
    name = "心情不好".encode()
    parts = (b'{"name": "', name[:2], name[2:7], name[7:], b'"}')
    headers = bearer(ADMIN_KEY) | {"content-type": "application/json; charset=utf-8"}
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        response = await client.post("/v1/keys", content=_chunks(*parts), headers=headers)
    assert response.status_code == 201
    assert response.json()["name"] == "心情不好"


async def test_a_body_truncated_inside_a_character_is_refused() -> None:
    headers = bearer(ADMIN_KEY) | {"content-type": "application/json"}
    body = b'{"name": "' + "情".encode()[:2]
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        response = await client.post("/v1/keys", content=body, headers=headers)
    assert response.json()["error"]["code"] == "invalid_encoding"


@pytest.mark.parametrize(
    ("content_type", "checked"),
    [
        ("application/json", True),
        ("application/problem+json; charset=utf-8", True),
        ("application/json; note=" + "x" * 400, True),  # long: judged, not remembered
        ("application/octet-stream; note=" + "x" * 400, False),
        ("text/plain", False),
    ],
)
async def test_a_content_type_is_judged_the_same_whatever_its_length(
    content_type: str, checked: bool
) -> None:
    remembered = limits._media_is_json.cache_info().currsize
    headers = bearer(ADMIN_KEY) | {"content-type": content_type}
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        response = await client.post("/v1/keys", content=b"\xff\xfe\x00", headers=headers)
    code = response.json()["error"]["code"]
    assert code == ("invalid_encoding" if checked else "invalid_request")
    grown = limits._media_is_json.cache_info().currsize - remembered
    assert grown <= (1 if len(content_type) <= limits._media_is_json.longest else 0)


async def test_bodies_that_are_not_json_are_not_checked_for_utf8() -> None:
    headers = bearer(ADMIN_KEY) | {"content-type": "application/octet-stream"}
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        response = await client.post("/v1/keys", content=b"\xff\xfe\x00", headers=headers)
    # Refused for what it is (not a JSON object), not for its encoding.
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"


# --- CORS -----------------------------------------------------------------------------


async def test_cors_is_off_by_default() -> None:
    origin = {"origin": "https://app.example"}
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        simple = await client.get("/v1/models", headers=bearer(CLIENT_KEY) | origin)
        preflight = await client.options(
            "/v1/models", headers=origin | {"access-control-request-method": "GET"}
        )
    assert "access-control-allow-origin" not in simple.headers
    assert preflight.status_code == 405
    assert "access-control-allow-origin" not in preflight.headers
    assert preflight.json()["error"]["code"] == "method_not_allowed"


async def test_configured_origins_and_only_those_get_cors_headers() -> None:
    app = create_app(keyed(cors_origins=("https://app.example",)), KEYS_ENV)
    allowed = {"origin": "https://app.example"}
    async with app_client(app) as client:
        ok = await client.get("/v1/models", headers=bearer(CLIENT_KEY) | allowed)
        refused = await client.get("/v1/models", headers=allowed)
        preflight = await client.options(
            "/v1/models",
            headers=allowed
            | {
                "access-control-request-method": "GET",
                "access-control-request-headers": "authorization",
            },
        )
        stranger = await client.get(
            "/v1/models", headers=bearer(CLIENT_KEY) | {"origin": "https://evil.example"}
        )

    assert ok.headers["access-control-allow-origin"] == "https://app.example"
    # Errors carry the header too, so a browser app can read why it was refused.
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == "https://app.example"
    assert preflight.status_code == 200
    assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
    assert "access-control-allow-credentials" not in preflight.headers
    assert "access-control-allow-origin" not in stranger.headers


def test_cors_origins_come_from_a_comma_separated_variable() -> None:
    cfg = load_config(
        environ={"FOUREYES_SERVER__CORS_ORIGINS": "https://a.example, http://b.example:8080"}
    )
    assert cfg.server.cors_origins == ("https://a.example", "http://b.example:8080")


@pytest.mark.parametrize("origin", ["https://a.example/", "a.example", "ftp://a.example"])
def test_an_origin_must_be_scheme_host_and_port(origin: str) -> None:
    with pytest.raises(ConfigError, match="server.cors_origins"):
        load_config(environ={"FOUREYES_SERVER__CORS_ORIGINS": origin})


def test_limits_have_bounds_and_defaults() -> None:
    server = ServerConfig()
    assert (server.max_body_bytes, server.cors_origins) == (1_048_576, ())
    assert (server.body_timeout_s, server.max_connections) == (30.0, 1000)
    for bad in (
        {"burst": 0},
        {"rate_per_minute": 0},
        {"max_body_bytes": 10},
        {"body_timeout_s": 0},
        {"max_connections": 0},
    ):
        with pytest.raises(ValueError):
            ServerConfig(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must differ"):
        ServerConfig(api_keys_env="K", admin_keys_env="K")


async def test_read_json_gives_handlers_the_same_errors_as_body_parameters() -> None:
    app = create_app(keyed(), KEYS_ENV)

    @app.post("/v1/raw")
    async def raw(request: Request, _: ClientKey) -> dict[str, object]:
        return {"type": type(await read_json(request)).__name__}

    headers = bearer(CLIENT_KEY) | {"content-type": "application/json"}
    async with app_client(app) as client:
        ok = await client.post("/v1/raw", content=b'["any", "shape"]', headers=headers)
        broken = await client.post("/v1/raw", content=b'{"a": 1,}', headers=headers)
        latin = await client.post("/v1/raw", content=b'"caf\xe9"', headers=headers)

    assert ok.json() == {"type": "list"}
    assert broken.status_code == 400
    assert broken.json()["error"]["code"] == "invalid_json"
    assert "at position 8" in broken.json()["error"]["message"]
    assert latin.json()["error"]["code"] == "invalid_encoding"


async def test_the_store_limiter_forgets_full_buckets_every_n_admits(tmp_path: Path) -> None:
    clock = ManualClock(dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC))
    path = tmp_path / "buckets.db"
    store = await Store.open(
        StoreConfig(url=f"sqlite+aiosqlite:///{path}"), PrivacyConfig(), {}, clock=clock
    )
    try:
        limiter = StoreRateLimiter(store.rate_buckets, rate_per_minute=60, burst=1, sweep_every=3)
        for key in ("a", "b"):
            assert (await limiter.admit(key)).allowed
        assert limiter.sweeping is None  # not before the third admit
        assert (await limiter.admit("c")).allowed
        sweep = limiter.sweeping
        assert sweep is not None
        clock.advance(seconds=1)  # a token per second: every bucket is full again
        assert await sweep == 3 and limiter.sweeping is None

        # A sweep the store refuses is logged and changes nothing; admits go on.
        with sqlite3.connect(path) as conn:
            conn.execute(
                "CREATE TRIGGER refuse_delete BEFORE DELETE ON rate_buckets "
                "BEGIN SELECT RAISE(ABORT, 'disk hiccup'); END"
            )
        conn.close()
        for key in ("d", "e", "f"):
            assert (await limiter.admit(key)).allowed
        clock.advance(seconds=1)
        assert limiter.sweeping is not None and await limiter.sweeping == 0
        with sqlite3.connect(path) as conn:
            kept = conn.execute("SELECT key FROM rate_buckets ORDER BY key").fetchall()
        conn.close()
        assert kept == [("d",), ("e",), ("f",)]
        await limiter.aclose()
    finally:
        await store.close()
    with pytest.raises(UsageError):
        StoreRateLimiter(store.rate_buckets, rate_per_minute=60, burst=1, sweep_every=0)
