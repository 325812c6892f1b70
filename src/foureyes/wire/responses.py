"""The gateway's answers for an outcome: JSON bodies, decision headers, server-sent events.

:func:`completion_body` is a ``chat.completion`` (tool calls only when released),
:func:`check_body` the answer of ``POST /v1/check``, :func:`decision_headers` the
``X-Foureyes-*`` headers of a decided answer that is not streamed. A stream is sent only
once the decision is made and recorded: :func:`sse_chunks` are its events, each the bytes
of one ``data:`` line, ``chat.completion.chunk`` documents carrying the ``foureyes``
object, then ``[DONE]``; in segment release :func:`segment_event` is each approved
segment, sent before the rest (docs/gateway.md, "Segment release").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from foureyes.core.errors import UsageError
from foureyes.gate import Outcome
from foureyes.pipeline import SupportOutcome
from foureyes.wire.chat import GATEWAY_MODEL

__all__ = ["check_body", "completion_body", "decision_headers", "segment_event", "sse_chunks"]

_STREAM_PIECE_CHARS = 48


def decision_headers(outcome: SupportOutcome) -> dict[str, str]:
    """The ``X-Foureyes-*`` headers of a decided, non-streamed answer."""
    return {
        "x-foureyes-trace-id": outcome.trace_id,
        "x-foureyes-decision": outcome.decision.value,
        "x-foureyes-reason": outcome.reason.value,
        "x-foureyes-delivered-sha256": outcome.delivered_sha256,
    }


def check_body(outcome: SupportOutcome) -> dict[str, Any]:
    """The response of ``POST /v1/check`` for an outcome."""
    released = outcome.decision is Outcome.RELEASED
    return {
        "object": "foureyes.check",
        **outcome.response_block(),
        "content": outcome.text or None,
        "tool_calls": [call.openai() for call in outcome.tool_calls] if released else None,
    }


def _released_calls(outcome: SupportOutcome) -> list[dict[str, Any]]:
    if outcome.decision is not Outcome.RELEASED:
        return []
    return [call.openai() for call in outcome.tool_calls]


def completion_body(outcome: SupportOutcome, *, created: int) -> dict[str, Any]:
    """The ``chat.completion`` response for an outcome (tool calls only when released)."""
    calls = _released_calls(outcome)
    message: dict[str, Any] = {"role": "assistant", "content": outcome.text}
    if calls:
        message = {"role": "assistant", "content": outcome.text or None, "tool_calls": calls}
    return {
        "id": f"chatcmpl-{outcome.trace_id}",
        "object": "chat.completion",
        "created": created,
        "model": GATEWAY_MODEL,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": _usage(outcome),
        "system_fingerprint": None,
        "foureyes": outcome.response_block(),
    }


def _usage(outcome: SupportOutcome) -> dict[str, int]:
    prompt, completion = outcome.prompt_tokens, outcome.completion_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _chunk_base(trace_id: str, created: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{trace_id}",
        "object": "chat.completion.chunk",
        "created": created,
        "model": GATEWAY_MODEL,
        "system_fingerprint": None,
    }


def _event(document: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(document, ensure_ascii=False)}\n\n".encode()


def _text_chunk(
    base: Mapping[str, Any], block: Mapping[str, Any], delta: dict[str, Any], finish: str | None
) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
    return {**base, "choices": [choice], "foureyes": block}


def segment_event(trace_id: str, *, created: int, segment: str, index: int) -> bytes:
    """One approved segment of a segment release, as a chunk (the first with the role).

    Its ``foureyes`` object names the trace and the segment's position; the decision comes
    in the final chunk.
    """
    delta: dict[str, Any] = {"content": segment}
    if index == 0:
        delta = {"role": "assistant"} | delta
    block = {"trace_id": trace_id, "segment": index}
    return _event(_text_chunk(_chunk_base(trace_id, created), block, delta, None))


def sse_chunks(
    outcome: SupportOutcome, *, created: int, include_usage: bool, sent: str = ""
) -> list[bytes]:
    """The event stream of an outcome, decided and recorded before its first byte is sent.

    ``sent`` is the text segment release has streamed already (see :func:`segment_event`):
    the events then carry only the rest of the text (the fallback continuation, if any)
    and the final chunk.

    Raises:
        UsageError: the outcome's text does not start with ``sent``.
    """
    if not outcome.text.startswith(sent):
        raise UsageError("the outcome's text does not continue the streamed segments")
    block = outcome.response_block()
    base = _chunk_base(outcome.trace_id, created)
    text = outcome.text[len(sent) :]
    pieces = [text[i : i + _STREAM_PIECE_CHARS] for i in range(0, len(text), _STREAM_PIECE_CHARS)]
    documents = (
        [] if sent else [_text_chunk(base, block, {"role": "assistant", "content": ""}, None)]
    )
    documents += [_text_chunk(base, block, {"content": piece}, None) for piece in pieces]
    calls = _released_calls(outcome)
    documents += [
        _text_chunk(base, block, {"tool_calls": [{"index": i} | call]}, None)
        for i, call in enumerate(calls)
    ]
    documents.append(_text_chunk(base, block, {}, "tool_calls" if calls else "stop"))
    if include_usage:
        documents.append(base | {"choices": [], "usage": _usage(outcome), "foureyes": block})
    return [*(_event(d) for d in documents), b"data: [DONE]\n\n"]
