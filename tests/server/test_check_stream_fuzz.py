"""``POST /v1/check/stream`` under any stream of chunks: a decision or a declared refusal.

The body is NDJSON that the OpenAPI document describes in words, so no schema-driven
fuzzer draws it: hypothesis does here. A valid first line, then
``chat.completion.chunk``-shaped lines (text deltas, tool-call deltas, finish reasons)
mixed with what a broken model or proxy sends: a line that is not JSON, a truncated line,
one nested past any decoder, a lone surrogate escape, a line that is no chunk, an
oversized line. Whatever the stream, the answer is a decision (200: events ending with a
final chunk that carries the ``foureyes`` decision, then ``[DONE]``), or 413 for a body
over ``server.max_body_bytes``; never a 5xx. A stream with a broken line is decided as a
fallback: nothing of it is released.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from foureyes.server.app import create_app
from tests.helpers.server import AppCaller, app_caller
from tests.server._support import CLIENT_KEY, KEYS_ENV, bearer, keyed
from tests.server.test_check_stream import chunk, events

LIMIT = 16_384
"""The app's ``server.max_body_bytes``: an oversized line is easy to draw."""


@pytest.fixture
def caller() -> Iterator[AppCaller]:
    """The real app (offline routes), started once for every example."""
    config = keyed(rate_per_minute=10_000_000, burst=1_000_000, max_body_bytes=LIMIT)
    with app_caller(create_app(config, KEYS_ENV)) as started:
        yield started


_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_WORDS = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=40)
HEADS = st.fixed_dictionaries(
    {"messages": st.lists(_WORDS.filter(str.strip), min_size=1, max_size=2)},
    optional={"user": st.sampled_from(["u-fuzz", "u-other"])},
).map(
    lambda head: (
        head | {"messages": [{"role": "user", "content": text} for text in head["messages"]]}
    )
)
"""A valid first line: the user's messages (a check request without its draft)."""

_CALL_PIECES = st.fixed_dictionaries(
    {"index": st.integers(0, 2)},
    optional={
        "id": st.sampled_from(["call_1", "call_2", ""]),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {},
            optional={
                "name": st.sampled_from(["book_", "session", "lookup", ""]),
                "arguments": st.sampled_from(['{"', 'slot": 1', "}", "{}", "", "[1,"]),
            },
        ),
    },
)
GOOD_LINES: st.SearchStrategy[Any] = st.one_of(
    _TEXT.map(lambda text: chunk(text)),
    st.lists(_CALL_PIECES, min_size=1, max_size=2).map(lambda calls: chunk(calls=calls)),
    st.sampled_from(["stop", "tool_calls", "length", "content_filter", "other"]).map(
        lambda finish: chunk(finish=finish)
    ),
    st.just(chunk() | {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
    st.just({"object": "chat.completion.chunk", "choices": [], "usage": None}),
    st.just(""),  # a blank line is skipped
)
"""Lines a model's stream may hold: each a chunk (or a blank line)."""


def _nested(depth: int) -> str:
    content = "[" * depth + "]" * depth
    return f'{{"object": "chat.completion.chunk", "choices": [{{"index": 0, "delta": {content}}}]}}'


BROKEN_LINES: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(["{not json", "data: [DONE]", "nul\x00l", "\ufeff{}"]),
    _TEXT.map(lambda text: json.dumps(chunk(text))[: max(1, len(text))]),  # cut short
    st.integers(1_100, 8_000).map(lambda depth: "[" * depth),  # deeper than a decoder goes
    st.integers(1_100, 3_000).map(_nested),
    st.sampled_from(["\ud800", "a\udfff", "\ud83d"]).map(lambda lone: chunk(lone)),
    st.sampled_from([None, [], {}, 1, "chunk", {"object": "chat.completion"}]),
    st.just(chunk() | {"choices": [{"index": 1, "delta": {"content": "x"}}]}),
    st.just(chunk(calls=[{"index": 7, "function": {"arguments": "{}"}}])),
)
"""Lines that break a draft: none of them is a chunk the draft may take."""

OVERSIZED = st.integers(LIMIT, 2 * LIMIT).map(lambda size: chunk("x" * size))


@st.composite
def drafts(draw: st.DrawFn) -> list[Any]:
    """A whole draft as a model streams it: text pieces, then calls in pieces, a finish."""
    lines: list[Any] = [chunk("")]
    lines += [chunk(piece) for piece in draw(st.lists(_TEXT, max_size=4))]
    calls = draw(st.lists(st.sampled_from(['{"slot": 1}', "{}", '{"a": [1, "b"]}']), max_size=2))
    for index, arguments in enumerate(calls):
        first = {"index": index, "id": f"call_{index}", "type": "function"}
        lines.append(chunk(calls=[first | {"function": {"name": "book_", "arguments": ""}}]))
        lines.append(chunk(calls=[{"index": index, "function": {"name": "session"}}]))
        cut = draw(st.integers(0, len(arguments)))
        for part in (arguments[:cut], arguments[cut:]):
            lines.append(chunk(calls=[{"index": index, "function": {"arguments": part}}]))
    lines.append(chunk(finish="tool_calls" if calls else "stop"))
    return lines


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[str], bool]:
    """A body's lines, and whether one of them breaks the draft."""
    lines: list[Any] = draw(drafts() | st.lists(GOOD_LINES, max_size=8))
    broken = draw(st.lists(BROKEN_LINES, max_size=2))
    for line in broken:
        lines.insert(draw(st.integers(0, len(lines))), line)
    if draw(st.sampled_from(["fits", "fits", "fits", "fits", "oversized"])) == "oversized":
        lines.insert(draw(st.integers(0, len(lines))), draw(OVERSIZED))
    head = draw(HEADS)
    text = [line if isinstance(line, str) else json.dumps(line) for line in [head, *lines]]
    return text, bool(broken)


async def _pieces(body: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(stream=streams(), piece=st.sampled_from([None, 7, 64, 4096]))
def test_any_chunk_stream_is_decided_or_refused_as_declared(
    caller: AppCaller, stream: tuple[list[str], bool], piece: int | None
) -> None:
    lines, broken = stream
    body = "\n".join(lines).encode()
    # Whole (with a Content-Length) or streamed in pieces (chunked, as a proxy relays it).
    content = body if piece is None else _pieces(body, piece)
    headers = bearer(CLIENT_KEY) | {"content-type": "application/x-ndjson"}

    response = caller.call("POST", "/v1/check/stream", content=content, headers=headers)
    event(f"status {response.status_code}")

    if len(body) > LIMIT:
        assert response.status_code == 413, response.text
        assert response.json()["error"]["code"] == "request_too_large"
        return
    assert response.status_code == 200, response.text
    documents = events(response)  # ends with [DONE]
    final = documents[-2]
    block = final["foureyes"]
    assert final["choices"][0]["finish_reason"] in ("stop", "tool_calls")
    assert block["decision"] in ("released", "fallback")
    event(f"{block['decision']} ({block['reason']})")
    assert {d["foureyes"]["trace_id"] for d in documents[:-1]} == {block["trace_id"]}
    assert response.headers["x-foureyes-trace-id"] == block["trace_id"]
    if broken:  # nothing of it is judged, let alone released (unless triage forbids it all)
        assert block["decision"] == "fallback", block
        assert block["reason"] == "draft_failed" or block["policy"] == "prohibited", block
