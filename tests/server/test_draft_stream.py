"""The assembly of a streamed draft: as the ``openai`` SDK joins chunks, under any split.

The reference is the SDK's own stream accumulator (``ChatCompletionStreamState``, what
``client.chat.completions.stream`` uses), fed the same chunks as SDK objects.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from foureyes.gate import GivenDraft
from foureyes.wire.chat import MAX_TOOL_CALLS
from foureyes.wire.draft_stream import DraftAssembler, DraftTooLarge

TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=60)
ARGUMENTS = st.dictionaries(st.sampled_from(["day", "note", "slots"]), st.integers() | TEXT).map(
    json.dumps
)
NAME = st.from_regex(r"[a-z_]{1,20}", fullmatch=True)


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-own",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "own-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


@st.composite
def split(draw: st.DrawFn, text: str) -> list[str]:
    """``text`` cut at any points (empty pieces included)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=6)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@st.composite
def streams(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """A draft (text, OpenAI tool calls) and one way a model might stream it."""
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate(draw(st.lists(st.tuples(NAME, ARGUMENTS), max_size=3)))
    ]
    text = draw(TEXT if calls else TEXT.filter(bool))
    chunks = [chunk({"role": "assistant", "content": p}) for p in draw(split(text))]
    for index, call in enumerate(calls):
        function = call["function"]
        names = draw(split(function["name"]))
        first = {"index": index, "id": call["id"], "type": "function"}
        chunks.append(chunk({"tool_calls": [first | {"function": {"name": names[0]}}]}))
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"name": n}}]}) for n in names[1:]
        ]
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": a}}]})
            for a in draw(split(function["arguments"]))
        ]
    chunks.append(chunk({}, "tool_calls" if calls else "stop"))
    return text, calls, chunks


def assembled(chunks: list[Any]) -> GivenDraft:
    assembler = DraftAssembler(max_chars=100_000, max_tool_calls=MAX_TOOL_CALLS)
    for item in chunks:
        assembler.add(item)
    return assembler.draft()


@settings(max_examples=200, deadline=None)
@given(streams())
def test_any_split_assembles_the_unsplit_draft_as_the_sdk_does(
    stream: tuple[str, list[dict[str, Any]], list[dict[str, Any]]],
) -> None:
    text, calls, chunks = stream
    draft = assembled(chunks)
    assert draft.unusable is None
    assert draft == GivenDraft.of_openai(text, calls)
    # SDK objects are taken as they are, and the SDK's own accumulator agrees.
    objects = [ChatCompletionChunk.model_validate(c) for c in chunks]
    assert assembled(objects) == draft
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for item in objects:
        state.handle_chunk(item)
    message = state.current_completion_snapshot.choices[0].message
    assert (message.content or "") == text
    sdk_calls = [
        GivenDraft.of_openai(None, [c.model_dump()]).tool_calls[0] for c in message.tool_calls or ()
    ]
    assert tuple(sdk_calls) == draft.tool_calls


@pytest.mark.parametrize(
    ("finish", "why"),
    [(None, "unfinished"), ("length", "truncated"), ("content_filter", "content_filtered")],
)
def test_a_stream_cut_off_is_unusable_by_the_one_finish_rule(finish: Any, why: str) -> None:
    draft = assembled([chunk({"content": "A reply that"}), chunk({"content": " stops"}, finish)])
    assert draft.unusable is not None and why in draft.unusable
    assert (draft.text, draft.tool_calls) == ("", ())


@pytest.mark.parametrize(
    ("chunks", "why"),
    [
        ([chunk({"content": "x"}, "stop"), chunk({"content": "more"})], "after its finish"),
        ([chunk({"tool_calls": [{"index": 1, "function": {"name": "f"}}]})], "out of order"),
        ([chunk({"content": "x"}) | {"object": "chat.completion"}], "not a chat.completion.chunk"),
        ([chunk({"content": "\ud800"}, "stop")], "content"),
        ([chunk({}, "stop")], "neither text nor tool calls"),
        (
            [
                chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f"}}]}),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{nope"}}]}, "stop"),
            ],
            "tool_calls.0",
        ),
    ],
    ids=["text-after-finish", "index-skipped", "not-a-chunk", "surrogate", "empty", "bad-args"],
)
def test_a_broken_stream_is_unusable_and_says_why(chunks: list[Any], why: str) -> None:
    draft = assembled([*chunks, chunk({}, "stop")])
    assert draft.unusable is not None and why in draft.unusable, draft


def test_more_than_the_bound_is_refused_while_it_is_read() -> None:
    assembler = DraftAssembler(max_chars=10, max_tool_calls=MAX_TOOL_CALLS)
    assembler.add(chunk({"content": "0123456789"}))
    with pytest.raises(DraftTooLarge):
        assembler.add(chunk({"content": "x"}))
