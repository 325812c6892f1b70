"""``POST /v1/check/stream``: a draft streamed in as NDJSON chunks, over real HTTP.

The app is served by uvicorn on loopback; the client uploads the body as a stream
(``httpx`` with an async generator, so no ``Content-Length``); every model role is a model
of ``foureyes simulate``. Each stream is compared with ``POST /v1/check`` on the same
assembled draft.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx
import pytest

from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode
from foureyes.gate import ReplyMode, fallback_text
from tests.helpers.server import RunningServer
from tests.helpers.simulator import RunningSimulator
from tests.server.test_check import (
    CALM,
    CRISIS,
    SCENARIO,
    TEXT,
    WRITTEN,
    check,
    runs,
    sent_to,
    sim_config,
)

HEAD = {"messages": [{"role": "user", "content": CALM}], "user": "u-stream"}


def chunk(
    content: str | None = None, *, calls: list[dict[str, Any]] | None = None, finish: Any = None
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` as an OpenAI-compatible server streams it."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if calls is not None:
        delta["tool_calls"] = calls
    return {
        "id": "chatcmpl-own",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "own-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def streamed(text: str, arguments: str = WRITTEN, finish: Any = "tool_calls") -> list[Any]:
    """``text`` and one ``book_session`` call, cut into pieces as a model streams them."""
    first = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "book_"}}
    chunks = [chunk(""), *(chunk(p) for p in pieces(text, 7)), chunk(calls=[first])]
    chunks.append(chunk(calls=[{"index": 0, "function": {"name": "session", "arguments": ""}}]))
    chunks += [
        chunk(calls=[{"index": 0, "function": {"arguments": p}}]) for p in pieces(arguments, 5)
    ]
    return [*chunks, chunk(finish=finish)]


async def _body(lines: Iterable[Any], *, fail_after: int | None = None) -> AsyncIterator[bytes]:
    for n, line in enumerate(lines):
        if fail_after is not None and n == fail_after:
            raise ConnectionResetError("the client went away")
        text = line if isinstance(line, str) else json.dumps(line)
        yield (text + "\n").encode()


async def post_stream(server: RunningServer, lines: Iterable[Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        return await client.post(
            "/v1/check/stream",
            content=_body(lines),
            headers={"content-type": "application/x-ndjson"},
        )


def events(response: httpx.Response) -> list[Any]:
    """The SSE events of an answer, ``[DONE]`` as the string."""
    assert response.headers["content-type"].startswith("text/event-stream")
    data = [line[6:] for line in response.text.split("\n\n") if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(d) for d in data[:-1]] + ["[DONE]"]


def delivered(documents: list[Any]) -> tuple[str, list[Any]]:
    text = "".join(d["choices"][0]["delta"].get("content") or "" for d in documents[:-1])
    calls = [c for d in documents[:-1] for c in d["choices"][0]["delta"].get("tool_calls") or ()]
    return text, calls


async def test_a_streamed_draft_gets_the_decision_and_digests_of_the_same_draft_checked_whole(
    simulator: RunningSimulator, start_server: Any
) -> None:
    simulator.load(SCENARIO)
    server = start_server(sim_config(simulator))
    response = await post_stream(server, [HEAD, *streamed(TEXT)])
    assert response.status_code == 200, response.text
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        whole = (await client.post("/v1/check", json=check(user="u-stream"))).json()

    documents = events(response)
    final = documents[-2]
    block = final["foureyes"]
    assert final["choices"][0]["finish_reason"] == "tool_calls"
    for key in ("decision", "reason", "candidate_sha256", "delivered_sha256", "policy"):
        assert block[key] == whole[key], key
    assert (block["decision"], block["reason"]) == ("released", "approved")
    text, calls = delivered(documents)
    assert text == whole["content"] == TEXT
    assert [{k: v for k, v in c.items() if k != "index"} for c in calls] == whole["tool_calls"]
    # The decision is known only at the end: the headers name the trace, not the decision.
    assert response.headers["x-foureyes-trace-id"] == block["trace_id"]
    assert "x-foureyes-decision" not in response.headers
    # Both drafts went to the Supervisor with the tool call shown; none to a Counselor.
    assert len(sent_to(simulator, "supervisor")) == 2 and sent_to(simulator, "counselor") == []
    kinds = {run.trace_id: run.kind for run in await runs()}
    assert kinds[block["trace_id"]] == "draft_check"


@pytest.mark.parametrize(
    "finish",
    [None, "length", "content_filter"],
    ids=["no-finish-reason", "length", "content-filter"],
)
async def test_a_cut_off_stream_falls_back_and_releases_nothing_of_it(
    simulator: RunningSimulator, start_server: Any, finish: Any
) -> None:
    simulator.load(SCENARIO)
    server = start_server(sim_config(simulator))
    lines = [HEAD, chunk("I have asked for a Thursday"), chunk(" session", finish=finish)]
    if finish is None:
        lines.append({"object": "chat.completion.chunk", "choices": [], "usage": None})
    response = await post_stream(server, lines)

    documents = events(response)
    block = documents[-2]["foureyes"]
    text, calls = delivered(documents)
    assert (block["decision"], block["reason"]) == ("fallback", "draft_failed")
    assert (
        text == fallback_text(ReasonCode.DRAFT_FAILED, Locale.EN, mode=ReplyMode.GUARD)
        and calls == []
    )
    assert "Thursday" not in text and block["candidate_sha256"] is None
    assert sent_to(simulator, "supervisor") == []
    [run] = [run for run in await runs() if run.trace_id == block["trace_id"]]
    assert (run.outcome, run.reason) == ("fallback", "draft_failed")


async def test_a_tool_call_streamed_in_pieces_is_assembled_and_gated(
    simulator: RunningSimulator, start_server: Any
) -> None:
    simulator.load(SCENARIO)
    config = sim_config(simulator, gate={"tools_deny": ["book_session"]})
    server = start_server(config)
    # The name itself arrives in two pieces: only the assembled name is denied.
    response = await post_stream(server, [HEAD, *streamed(TEXT)])

    block = events(response)[-2]["foureyes"]
    assert (block["decision"], block["reason"]) == ("fallback", "tool_not_allowed")
    assert sent_to(simulator, "supervisor") == []


async def test_the_supervisor_sees_the_assembled_arguments_as_data(
    simulator: RunningSimulator, start_server: Any
) -> None:
    simulator.load(SCENARIO)
    server = start_server(sim_config(simulator))
    await post_stream(server, [HEAD, *streamed(TEXT)])

    [prompt] = sent_to(simulator, "supervisor")
    assert '"slots":[10,11]' in prompt and '"name":"book_session"' in prompt


@pytest.mark.parametrize(
    ("first", "status", "code", "param"),
    [
        ("{not json", 400, "invalid_json", None),
        ({"messages": []}, 422, "invalid_request", "messages"),
        (HEAD | {"draft": {"content": TEXT}}, 422, "invalid_request", "draft"),
    ],
    ids=["not-json", "no-messages", "a-draft-in-line-1"],
)
async def test_a_bad_first_line_is_a_typed_error_and_nothing_is_recorded(
    simulator: RunningSimulator, start_server: Any, first: Any, status: int, code: str, param: Any
) -> None:
    simulator.load(SCENARIO)
    server = start_server(sim_config(simulator))
    response = await post_stream(server, [first, *streamed(TEXT)])

    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == (code, param)
    assert await runs() == []


@pytest.mark.parametrize(
    "bad",
    [
        "{not json",
        {"object": "chat.completion", "choices": []},
        chunk() | {"choices": [{"index": 1, "delta": {"content": "x"}}]},
        chunk(calls=[{"index": 3, "function": {"arguments": "{}"}}]),
    ],
    ids=["not-json", "not-a-chunk", "a-second-choice", "an-index-out-of-order"],
)
async def test_a_bad_line_mid_draft_falls_back_and_is_recorded(
    simulator: RunningSimulator, start_server: Any, bad: Any
) -> None:
    simulator.load(SCENARIO)
    server = start_server(sim_config(simulator))
    lines = streamed(TEXT)
    response = await post_stream(server, [HEAD, *lines[:3], bad, *lines[3:]])

    block = events(response)[-2]["foureyes"]
    assert (block["decision"], block["reason"]) == ("fallback", "draft_failed")
    assert sent_to(simulator, "supervisor") == []
    [run] = await runs()
    assert (run.trace_id, run.reason) == (block["trace_id"], "draft_failed")


async def test_a_crisis_never_delivers_the_streamed_draft(
    simulator: RunningSimulator, start_server: Any
) -> None:
    simulator.load(SCENARIO)
    server = start_server(sim_config(simulator))
    head = {"messages": [{"role": "user", "content": CRISIS}], "user": "u-crisis"}
    response = await post_stream(server, [head, *streamed(TEXT)])

    documents = events(response)
    block = documents[-2]["foureyes"]
    assert (block["decision"], block["reason"]) == ("fallback", "generation_prohibited")
    assert TEXT not in delivered(documents)[0] and delivered(documents)[1] == []


async def test_a_draft_over_the_body_limit_is_refused_wholly(
    simulator: RunningSimulator, start_server: Any
) -> None:
    simulator.load(SCENARIO)
    server = start_server(sim_config(simulator, server={"max_body_bytes": 4096}))
    lines = [HEAD, *(chunk("x" * 100) for _ in range(60)), chunk(finish="stop")]
    response = await post_stream(server, lines)

    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == "request_too_large"
    assert await runs() == []


async def test_a_client_that_leaves_mid_draft_gets_nothing_decided_or_recorded(
    simulator: RunningSimulator, start_server: Any
) -> None:
    simulator.load(SCENARIO)
    server = start_server(sim_config(simulator))
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        with pytest.raises(ConnectionResetError):
            await client.post(
                "/v1/check/stream", content=_body([HEAD, *streamed(TEXT)], fail_after=4)
            )
    # The service is still there, and the abandoned draft left no run behind.
    response = await post_stream(server, [HEAD, *streamed(TEXT)])
    assert response.status_code == 200
    [run] = await runs()
    assert run.trace_id == events(response)[-2]["foureyes"]["trace_id"]
    assert len(sent_to(simulator, "supervisor")) == 1


async def test_a_stream_that_stalls_past_the_body_deadline_is_refused_wholly(
    simulator: RunningSimulator, start_server: Any
) -> None:
    simulator.load(SCENARIO)
    server = start_server(sim_config(simulator, server={"body_timeout_s": 0.5}))
    first = (json.dumps(HEAD) + "\n" + json.dumps(chunk("I have")) + "\n").encode()

    # A raw connection: the head and one chunk, then the model goes quiet for good.
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(
        b"POST /v1/check/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
        + f"{len(first):x}\r\n".encode()
        + first
        + b"\r\n"
    )
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), timeout=60)  # until the server closes
    writer.close()

    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b'"code":"request_timeout"' in answer
    assert await runs() == [] and sent_to(simulator, "supervisor") == []
