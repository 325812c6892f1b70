r"""Text that is not text (unpaired surrogates, NUL) is a 422 naming the field, never a 5xx.

Bodies are sent as raw JSON bytes: ``json.dumps`` spells a lone surrogate as ``\ud83d``
and a NUL as ``\u0000``, exactly what a client can put on the wire.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.config import Config, StoreConfig
from foureyes.core.errors import StoreDataError
from foureyes.core.locale import Locale
from foureyes.risk.resources import render_resources
from foureyes.server.app import create_app
from foureyes.store import Store
from foureyes.wire.text import repair_text, text_problem
from tests.helpers.server import app_client

SURROGATE = "\ud83d"
NUL = "\x00"
BAD = {"surrogate": SURROGATE, "nul": NUL}
CALM = "I had a rough day at work and I can't sleep."
CRISIS = "I want to die"


def raw(document: Any) -> bytes:
    return json.dumps(document).encode()


def chat(content: Any = CALM, **extra: Any) -> dict[str, Any]:
    return {"model": "foureyes-support", "messages": [{"role": "user", "content": content}]} | extra


async def post(client: httpx.AsyncClient, path: str, document: Any, **headers: str) -> Any:
    return await client.post(
        path, content=raw(document), headers={"content-type": "application/json", **headers}
    )


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    return error


async def runs_in(store_url: str) -> int:
    store = await Store.open(StoreConfig(url=store_url), Config().privacy, {})
    try:
        return len(await store.traces.list_runs())
    finally:
        await store.close()


# --- the check itself -----------------------------------------------------------------


def test_the_problem_names_the_code_point_and_position_never_the_text() -> None:
    assert text_problem("fine, 好的 🙂") is None
    assert text_problem("I want to die " + SURROGATE) == (
        "an unpaired surrogate (U+D83D) at position 14"
    )
    assert text_problem("ab" + NUL) == "a NUL character at position 2"
    assert repair_text("a" + SURROGATE + "b" + NUL + "c") == "a\ufffdbc"


@given(st.text(alphabet=st.characters(codec=None)))
def test_a_text_is_refused_exactly_when_utf8_or_postgresql_cannot_hold_it(value: str) -> None:
    try:
        value.encode("utf-8")
        encodable = True
    except UnicodeEncodeError:
        encodable = False
    assert (text_problem(value) is None) == (encodable and NUL not in value)
    repaired = repair_text(value)
    assert text_problem(repaired) is None
    assert len(repaired) == len(value) - value.count(NUL)


# --- every entry point ----------------------------------------------------------------

ENTRY_POINTS: dict[str, tuple[str, Any, str]] = {
    # name: (path, document with {bad} in one field, the field the 422 names)
    "content": ("/v1/chat/completions", chat(CALM + "{bad}"), "messages.0.content"),
    "text part": (
        "/v1/chat/completions",
        chat([{"type": "text", "text": "hello"}, {"type": "text", "text": CALM + "{bad}"}]),
        "messages.0.content.1.text",
    ),
    "user": ("/v1/chat/completions", chat(user="u{bad}1"), "user"),
    "conversation_id": (
        "/v1/chat/completions",
        chat(foureyes={"conversation_id": "c{bad}1"}),
        "foureyes.conversation_id",
    ),
    "assess text": ("/v1/assess", {"text": CALM + "{bad}"}, "text"),
    "assess conversation": (
        "/v1/assess",
        {"text": CALM, "conversation_id": "c{bad}"},
        "conversation_id",
    ),
    "review session id": (
        "/v1/review",
        {"messages": [{"role": "user", "content": "hi"}], "session_id": "s{bad}"},
        "session_id",
    ),
    "review message": (
        "/v1/review",
        {"messages": [{"role": "user", "content": "hi{bad}"}]},
        "messages.0.content",
    ),
}


def _fill(document: Any, bad: str) -> Any:
    if isinstance(document, str):
        return document.replace("{bad}", bad)
    if isinstance(document, dict):
        return {k: _fill(v, bad) for k, v in document.items()}
    if isinstance(document, list):
        return [_fill(v, bad) for v in document]
    return document


@pytest.mark.parametrize("bad", list(BAD))
async def test_bad_text_in_a_body_or_a_query_is_422_naming_the_field(
    store_url: str, bad: str
) -> None:
    app = create_app(Config(store=StoreConfig(url=store_url)), {})
    async with app_client(app) as client:
        answered = {
            entry: await post(client, path, _fill(document, BAD[bad]))
            for entry, (path, document, _) in ENTRY_POINTS.items()
        }
        # A surrogate cannot travel in a URL (its UTF-8 does not exist; percent-escapes
        # of one decode to U+FFFD), a NUL can: %00.
        queried = {
            name: await client.get("/v1/traces", params={name: f"x{NUL}y"})
            for name in ("kind", "reason", "outcome", "conversation_id")
        }

    for entry, response in answered.items():
        assert response.status_code == 422, (entry, response.text)
        error = error_of(response)
        assert error["code"] == "invalid_text", entry
        assert error["param"] == ENTRY_POINTS[entry][2]
        assert set(error) == {"message", "type", "code", "param"}  # calm: no resources
        assert "which is not valid text" in error["message"]
        assert "rough day" not in error["message"]  # the content is never echoed
    for name, response in queried.items():
        assert response.status_code == 422, (name, response.text)
        assert error_of(response)["code"] == "invalid_text"
        assert error_of(response)["param"] == name
    assert await runs_in(store_url) == 0  # nothing half-written


# --- a crisis message still gets its resources ----------------------------------------


@pytest.mark.parametrize("bad", list(BAD))
async def test_a_refused_crisis_message_still_carries_the_crisis_resources(bad: str) -> None:
    async with app_client(create_app(Config(), {})) as client:
        plain = await post(client, "/v1/chat/completions", chat(f"{CRISIS} {BAD[bad]}"))
        part = await post(
            client,
            "/v1/chat/completions",
            chat([{"type": "text", "text": f"{CRISIS}{BAD[bad]}"}], foureyes={"region": "HK"}),
            **{"accept-language": "zh-Hant"},
        )
        assessed = await post(client, "/v1/assess", {"text": f"{CRISIS}{BAD[bad]}", "region": "GB"})

    for response in (plain, part, assessed):
        assert response.status_code == 422, response.text
        assert error_of(response)["code"] == "invalid_text_crisis"
    first = error_of(plain)
    assert first["param"] == "messages.0.content"
    assert "crisis resources are attached in 'resources'" in first["message"]
    assert first["resources"] == render_resources(Locale.EN, None)
    # The region comes from the body; the message's language stays the text's, while
    # the error's own words follow Accept-Language.
    assert error_of(part)["resources"] == render_resources(Locale.EN, "HK")
    assert "危機求助資源" in error_of(part)["message"]
    assert error_of(assessed)["resources"] == render_resources(Locale.EN, "GB")


async def test_a_refused_crisis_message_in_chinese_gets_chinese_resources() -> None:
    async with app_client(create_app(Config(), {})) as client:
        response = await post(client, "/v1/chat/completions", chat("我不想活了" + SURROGATE))

    assert error_of(response)["code"] == "invalid_text_crisis"
    assert error_of(response)["resources"] == render_resources(Locale.ZH_HANS, None)


async def test_an_id_is_never_screened_only_message_text_is() -> None:
    async with app_client(create_app(Config(), {})) as client:
        response = await post(client, "/v1/chat/completions", chat(CALM, user=CRISIS + NUL))

    assert error_of(response)["code"] == "invalid_text" and error_of(response)["param"] == "user"


# --- the store's refusal of a value ---------------------------------------------------


async def test_a_store_refusing_the_data_is_422_not_retry_later() -> None:
    app = create_app(Config(), {})

    @app.get("/refused")
    async def refused() -> None:
        raise StoreDataError("append_event", "SQLSTATE 22021: text the database cannot hold")

    async with app_client(app) as client:
        response = await client.get("/refused")

    assert response.status_code == 422
    assert error_of(response)["code"] == "unstorable_text"
    assert "retry later" not in error_of(response)["message"]
