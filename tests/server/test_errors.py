from __future__ import annotations

import logging
import os
import re
import sqlite3
import string

import httpx
import pytest
from starlette.exceptions import HTTPException

from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale
from foureyes.server._logging import JsonFormatter
from foureyes.server.app import create_app
from foureyes.server.errors import _MESSAGES, ApiError, ErrorCode, locale_from_accept_language
from tests.helpers.server import app_client
from tests.server._support import ADMIN_KEY, CLIENT_KEY, KEYS_ENV, bearer, keyed

SECRET = "my-private-words-4711"


def _error(response: httpx.Response) -> dict[str, object]:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "code", "param"}
    error: dict[str, object] = body["error"]
    return error


# --- codes and messages ---------------------------------------------------------------


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_code_has_one_status_a_type_and_a_message_per_locale(code: ErrorCode) -> None:
    assert code.status in {400, 401, 403, 404, 405, 408, 409, 413, 422, 429, 500, 503}
    assert code.type.endswith("_error")
    placeholders = [
        {name for _, name, _, _ in string.Formatter().parse(_MESSAGES[code][loc]) if name}
        for loc in Locale
    ]
    assert all(p == placeholders[0] for p in placeholders), "locales disagree on placeholders"
    for locale in Locale:
        filled = code.message(locale, **{name: "7" for name in placeholders[0]})
        assert "{" not in filled and filled.strip()


def test_messages_are_written_in_each_locale() -> None:
    assert ErrorCode.REQUEST_TOO_LARGE.message(Locale.EN, limit=10) == (
        "The request body is larger than the limit of 10 bytes."
    )
    assert ErrorCode.REQUEST_TOO_LARGE.message(Locale.ZH_HANS, limit=10) == (
        "请求体超过了 10 字节的上限。"
    )
    assert ErrorCode.REQUEST_TOO_LARGE.message(Locale.ZH_HANT, limit=10) == (
        "請求內容超過了 10 位元組的上限。"
    )


def test_a_wrong_placeholder_is_a_bug_caught_where_the_error_is_raised() -> None:
    with pytest.raises(UsageError, match="request_too_large takes"):
        ApiError(ErrorCode.REQUEST_TOO_LARGE)
    with pytest.raises(UsageError):
        ApiError(ErrorCode.NOT_FOUND, detail="x")


@pytest.mark.parametrize(
    ("header", "locale"),
    [
        (None, Locale.EN),
        ("", Locale.EN),
        ("fr-FR, de", Locale.EN),
        ("zh-CN,zh;q=0.9,en;q=0.8", Locale.ZH_HANS),
        ("zh-TW", Locale.ZH_HANT),
        ("zh-Hant-HK", Locale.ZH_HANT),
        ("zh-HK;q=0.5, en;q=0.9", Locale.EN),
        ("en;q=0, zh", Locale.ZH_HANS),
        ("zh;q=bad, en-GB", Locale.EN),
        ("fr, zh-hans-sg;q=0.3", Locale.ZH_HANS),
    ],
)
def test_the_locale_follows_accept_language(header: str | None, locale: Locale) -> None:
    assert locale_from_accept_language(header) is locale


async def test_errors_speak_the_callers_language() -> None:
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        hans = await client.get("/v1/models", headers={"accept-language": "zh-CN"})
        hant = await client.get("/v1/models", headers={"accept-language": "zh-TW,zh;q=0.8"})
    assert _error(hans)["message"] == (
        "请求未携带 API 密钥。请在请求头中发送 'Authorization: Bearer <密钥>'。"
    )
    assert str(_error(hant)["message"]).startswith("請求未附帶 API 金鑰")
    assert _error(hans)["code"] == _error(hant)["code"] == "missing_api_key"


# --- what the handlers turn into JSON -------------------------------------------------


async def test_unknown_paths_and_methods_are_json() -> None:
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        missing = await client.get(f"/v1/{SECRET}")
        method = await client.put("/v1/models", headers=bearer(CLIENT_KEY))
    assert missing.status_code == 404 and _error(missing)["code"] == "not_found"
    assert SECRET not in missing.text
    assert method.status_code == 405
    assert _error(method)["message"] == "This endpoint does not accept the PUT method."


async def test_malformed_json_is_400_naming_the_position_never_the_content() -> None:
    headers = bearer(ADMIN_KEY) | {"content-type": "application/json"}
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        response = await client.post("/v1/keys", content=f'{{"name": "{SECRET}"', headers=headers)
    assert response.status_code == 400
    error = _error(response)
    assert error["code"] == "invalid_json" and error["type"] == "invalid_request_error"
    assert "at position" in str(error["message"])
    assert SECRET not in response.text


async def test_invalid_requests_are_422_naming_the_field_never_the_value() -> None:
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        wrong_type = await client.post(
            "/v1/keys", json={"name": [SECRET]}, headers=bearer(ADMIN_KEY)
        )
        extra = await client.post(
            "/v1/keys", json={"scope": "client", "colour": SECRET}, headers=bearer(ADMIN_KEY)
        )
        not_object = await client.post("/v1/keys", json=[SECRET], headers=bearer(ADMIN_KEY))
    for response, param in ((wrong_type, "name"), (extra, "colour"), (not_object, None)):
        assert response.status_code == 422
        error = _error(response)
        assert error["code"] == "invalid_request"
        assert error["param"] == param
        assert SECRET not in response.text


async def test_http_errors_of_other_code_are_json_too() -> None:
    app = create_app(keyed(), KEYS_ENV)

    @app.get("/conflict")
    async def conflict() -> None:
        raise HTTPException(409, detail="already there")

    async with app_client(app) as client:
        response = await client.get("/conflict")
    assert response.status_code == 409
    assert _error(response) == {
        "message": "already there",
        "type": "invalid_request_error",
        "code": None,
        "param": None,
    }


async def test_an_unexpected_failure_is_500_json_and_logged_without_its_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = create_app(keyed(), KEYS_ENV)

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError(SECRET)

    caplog.set_level(logging.ERROR, logger="foureyes.server")
    # uvicorn would log the re-raised exception; here the transport must not raise it.
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            response = await client.get("/boom")

    assert response.status_code == 500
    assert _error(response)["code"] == "internal_error"
    assert _error(response)["type"] == "server_error"
    assert SECRET not in response.text
    (record,) = [r for r in caplog.records if r.getMessage() == "request_failed"]
    line = JsonFormatter().format(record)
    assert '"type":"builtins.RuntimeError"' in line
    assert SECRET not in line


async def test_a_store_failure_is_503_and_nothing_is_served() -> None:
    path = os.environ["FOUREYES_STORE__URL"].removeprefix("sqlite+aiosqlite:///")
    async with app_client(create_app(keyed(key_cache_s=0), KEYS_ENV)) as client:
        assert (await client.get("/v1/models", headers=bearer(CLIENT_KEY))).status_code == 200
        with sqlite3.connect(path) as conn:
            conn.execute("DROP TABLE api_keys")
        conn.close()
        response = await client.get("/v1/models", headers=bearer(CLIENT_KEY))
        health = await client.get("/healthz")

    # The key cannot be checked, so the request is not served: 503, not 200 and not 401.
    assert response.status_code == 503
    assert _error(response) == {
        "message": "The service's store is unavailable, so nothing was done or delivered; "
        "retry later.",
        "type": "service_unavailable_error",
        "code": "store_unavailable",
        "param": None,
    }
    assert health.status_code == 503 and health.json()["status"] == "unavailable"


_LATIN = re.compile(r"[A-Za-z]{3,}")


@pytest.mark.parametrize("language", ["zh-CN", "zh-TW"])
async def test_chinese_validation_errors_embed_no_english_validation_text(language: str) -> None:
    headers = bearer(ADMIN_KEY) | {"accept-language": language}
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        wrong = await client.post(
            "/v1/keys", json={"name": [SECRET], "scope": "boss", "x": 1}, headers=headers
        )
        broken = await client.post(
            "/v1/keys",
            content='{"name": "a"',
            headers=headers | {"content-type": "application/json"},
        )
        english = await client.post("/v1/keys", json={"name": [SECRET]}, headers=bearer(ADMIN_KEY))
    for response in (wrong, broken):
        message = str(_error(response)["message"])
        # Field names are the request's own (name, scope, x); no word of pydantic's or
        # the JSON decoder's English is left.
        leftover = set(_LATIN.findall(message)) - {"name", "scope", "JSON"}
        assert leftover == set(), message
        assert SECRET not in response.text
    assert "name" in str(_error(wrong)["message"]) and "scope" in str(_error(wrong)["message"])
    assert "位置" in str(_error(broken)["message"])
    assert "name: expected a string, got a list" in str(_error(english)["message"])


async def test_a_bad_image_part_or_region_is_one_readable_problem_naming_the_field() -> None:
    part = {"type": "image_url", "image_url": {"url": "https://example.org/x.png"}}
    body = {"model": "foureyes-support", "messages": [{"role": "user", "content": [part]}]}
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        image = await client.post("/v1/chat/completions", json=body, headers=bearer(CLIENT_KEY))
        region = await client.post(
            "/v1/chat/completions",
            json=body
            | {
                "messages": [{"role": "user", "content": "hi"}],
                "foureyes": {"regoin": "CN", "region": SECRET},
            },
            headers=bearer(CLIENT_KEY),
        )
    assert image.status_code == 422
    assert _error(image) == {
        "message": "The request is not valid: messages.0.content.0.type: expected 'text', "
        "got a string.",
        "type": "invalid_request_error",
        "code": "invalid_request",
        "param": "messages.0.content.0.type",
    }
    message = str(_error(region)["message"])
    assert "foureyes.region: expected a region code: two capital letters" in message
    assert "unknown key 'foureyes.regoin'; did you mean 'region'?" in message
    assert SECRET not in region.text
    for response in (image, region):
        assert not any(
            word in response.text
            for word in ("Value error,", "valid tuple", "Input should", "[A-Z]", "list[Text")
        )
