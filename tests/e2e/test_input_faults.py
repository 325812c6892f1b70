r"""Inputs that earned a 500: each is a 4xx naming what is wrong, with resources where due.

A real uvicorn on loopback in guard mode and ``foureyes simulate`` for every model. A lone
surrogate escape (``"\ud800"``) in a tool call's arguments is ASCII JSON that decodes to
text no UTF-8 encoder takes: it must be refused as ``invalid_text`` naming the arguments'
field, on ``/v1/check``, ``/v1/check/stream`` and an earlier tool call of a guard chat,
and a crisis message beside it must still get its resources. A body nested deeper than
the JSON decoder goes is a 400 on the fast JSON route and a typed refusal on the stream.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.test_guard_mode import config, messages
from tests.helpers.answers import APPROVE, answer, by_message
from tests.helpers.server import RunningServer
from tests.helpers.simulator import RunningSimulator
from tests.server.test_check import tool_call
from tests.server.test_check_stream import chunk, post_stream

Start = Callable[..., RunningServer]

CALM = "Can you leave a note for my counsellor about Thursday?"
CRISIS = "I want to die, I have the pills ready."
LONE = '{"body": "Thursday \\ud800 at ten"}'  # ASCII: the escape of a lone surrogate
PAIRED = '{"body": "Thursday \\ud83d\\ude00 at ten"}'  # an escaped pair is an emoji
SCENARIO = {
    "models": {
        "team-sim": [{"content": "Noted."}],
        "supervisor-sim": [{"content": APPROVE}],
        "l1-sim": by_message(answer("critical", 0.97)),
        "l2-sim": [{"content": answer("critical", 0.95)}],
    }
}


def _call(arguments: str) -> dict[str, Any]:
    return tool_call("send_note", arguments)


@pytest.fixture
def server(simulator: RunningSimulator, start_server: Start, tmp_path: Path) -> RunningServer:
    simulator.load(SCENARIO)
    return start_server(config(simulator, tmp_path))


async def _post(server: RunningServer, path: str, body: Any, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        if isinstance(body, bytes):
            return await client.post(path, content=body, headers=headers)
        return await client.post(path, json=body, headers=headers)


def _error(response: httpx.Response) -> dict[str, Any]:
    document = response.json()
    return document["error"] if "error" in document else document


@pytest.mark.parametrize("message", [CALM, CRISIS], ids=["calm", "crisis"])
async def test_a_lone_surrogate_in_check_arguments_is_invalid_text_naming_the_field(
    server: RunningServer, message: str
) -> None:
    body = {
        "messages": [{"role": "user", "content": message}],
        "draft": {"content": "Noted.", "tool_calls": [_call(LONE)]},
    }
    response = await _post(server, "/v1/check", body)
    assert response.status_code == 422, response.text
    error = _error(response)
    crisis = message == CRISIS
    assert error["code"] == ("invalid_text_crisis" if crisis else "invalid_text")
    assert error["param"] == "draft.tool_calls.0.function.arguments"
    assert "U+D800" in json.dumps(error)
    # The person's message was still read: a crisis gets its resources in the refusal.
    assert bool(error.get("resources")) is crisis


async def test_an_escaped_surrogate_pair_is_text_and_is_judged(server: RunningServer) -> None:
    body = {
        "messages": [{"role": "user", "content": CALM}],
        "draft": {"content": "Noted.", "tool_calls": [_call(PAIRED)]},
    }
    response = await _post(server, "/v1/check", body)
    assert response.status_code == 200, response.text
    assert response.json()["decision"] == "released"


@pytest.mark.parametrize("message", [CALM, CRISIS], ids=["calm", "crisis"])
async def test_an_earlier_tool_call_with_a_lone_surrogate_is_refused_in_a_guard_chat(
    server: RunningServer, message: str
) -> None:
    history = [
        *messages("Please leave a note.")[:-1],
        {"role": "user", "content": "Please leave a note."},
        {"role": "assistant", "content": None, "tool_calls": [_call(LONE)]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sent"},
        {"role": "user", "content": message},
    ]
    body = {"model": "foureyes-support", "messages": history}
    response = await _post(server, "/v1/chat/completions", body)
    assert response.status_code == 422, response.text
    error = _error(response)
    crisis = message == CRISIS
    assert error["code"] == ("invalid_text_crisis" if crisis else "invalid_text")
    assert error["param"].endswith("tool_calls.0.function.arguments")
    assert bool(error.get("resources")) is crisis


async def test_a_lone_surrogate_streamed_into_arguments_falls_back_with_nothing_released(
    server: RunningServer,
) -> None:
    first = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "send_note"}}
    lines: list[Any] = [
        {"messages": [{"role": "user", "content": CALM}]},
        chunk("Noted."),
        chunk(calls=[first]),
        *(chunk(calls=[{"index": 0, "function": {"arguments": p}}]) for p in (LONE[:9], LONE[9:])),
        chunk(finish="tool_calls"),
    ]
    response = await post_stream(server, lines)
    # Refused once assembled, as any bad line mid-draft is: a fallback, none of it sent.
    assert response.status_code == 200, response.text
    assert "ud800" not in response.text and "send_note" not in response.text
    final = [
        json.loads(line[len("data: ") :])
        for line in response.text.splitlines()
        if line.startswith("data: {")
    ][-1]
    assert (final["foureyes"]["decision"], final["foureyes"]["reason"]) == (
        "fallback",
        "draft_failed",
    )


def _nested(depth: int) -> bytes:
    return b'{"messages": ' + b"[" * depth + b"]" * depth + b"}"


async def test_a_body_nested_past_the_decoder_is_a_400_on_the_fast_json_route(
    server: RunningServer,
) -> None:
    response = await _post(
        server, "/v1/chat/completions", _nested(200_000), **{"content-type": "application/json"}
    )
    assert response.status_code == 400, response.text


async def test_a_stream_line_nested_past_the_decoder_is_refused_not_a_500(
    server: RunningServer,
) -> None:
    async def body() -> Any:
        yield _nested(200_000) + b"\n"

    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        response = await client.post(
            "/v1/check/stream", content=body(), headers={"content-type": "application/x-ndjson"}
        )
    assert response.status_code == 400, response.text
