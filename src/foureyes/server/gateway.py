"""``POST /v1/chat/completions``: the OpenAI-compatible door to the support pipeline.

Point any OpenAI client at foureyes (``base_url=http://host:port/v1``, model
``foureyes-support``) and every message is triaged and every reply passes the release
gate. The request is OpenAI's; the last message must be the user's. Earlier ``user`` and
``assistant`` messages are the conversation's history; ``system`` and ``developer``
messages are accepted and ignored (foureyes' own prompts govern its models). Which
conversation a message belongs to is ``foureyes.conversation_id`` in the body (the
``openai`` SDK sends it with ``extra_body={"foureyes": {"conversation_id": ...}}``), else
``user``; without either the message is a conversation of its own. Conversation ids are
the caller's own: they are kept under the caller's tenant (its API key; ``local`` in
open-loopback mode), so another key using the same id has another conversation.

The response is OpenAI's, with one more object (docs/design.md 5)::

    "foureyes": {"decision": "released" | "fallback", "reason": code,
                 "candidate_sha256": hex | null, "delivered_sha256": hex,
                 "trace_id": str, "policy": "normal" | "restricted" | "prohibited",
                 "risk": {"status", "level", "confirmed", "tier"}}

``stream: true`` answers with server-sent events, but only once the decision is made and
recorded: not a byte (not even the status line) is sent before, so a stream can only
ever carry released text or the fallback. Every chunk carries the ``foureyes`` object.
A store that cannot record the run answers 503 and delivers nothing (invariant 10).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from foureyes.core.locale import Locale
from foureyes.gate import Turn
from foureyes.pipeline import SupportMessage, SupportOutcome, SupportPipeline
from foureyes.server._logging import log_event, server_logger
from foureyes.server.auth import ClientKey
from foureyes.server.errors import (
    ApiError,
    ErrorCode,
    error_responses,
    locale_from_accept_language,
)
from foureyes.server.metrics import Metrics
from foureyes.server.text import MESSAGE_TEXT_CHECK, MessageText, Text

__all__ = [
    "ChatCompletionRequest",
    "FoureyesOptions",
    "GATEWAY_MODEL",
    "InputMessage",
    "StreamOptions",
    "TextContent",
    "completion_body",
    "gateway_router",
    "sse_chunks",
    "support_message",
]

GATEWAY_MODEL = "foureyes-support"
"""The model id clients name to reach the guarded support pipeline."""

_STREAM_PIECE_CHARS = 48
_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The completion; with ``stream: true`` the server-sent events.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    **error_responses(400, 401, 404, 408, 413, 422, 429, 503),
}
_ConversationId = Annotated[Text, StringConstraints(min_length=1, max_length=256)]


class _Lenient(BaseModel):
    # OpenAI clients send many optional parameters (temperature, top_p, metadata, ...);
    # foureyes' own route settings govern its models, so unknown ones are ignored.
    model_config = ConfigDict(extra="ignore", frozen=True, use_attribute_docstrings=True)


class TextContent(_Lenient):
    """A text part of a message's content."""

    type: Literal["text"]
    """Only text parts are taken."""
    text: MessageText
    """The text."""


class InputMessage(_Lenient):
    """One message of the request."""

    role: Literal["system", "developer", "user", "assistant"]
    """Who wrote it; tool and function messages are not taken."""
    content: Annotated[str | list[TextContent] | None, MESSAGE_TEXT_CHECK] = None
    """The text, or text parts."""

    @property
    def text(self) -> str:
        """The message's text (parts joined by newlines)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content)


class FoureyesOptions(BaseModel):
    """The ``foureyes`` object of a request (``extra_body`` in the ``openai`` SDK)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    conversation_id: _ConversationId | None = None
    """The conversation; takes precedence over ``user``."""
    region: str | None = Field(default=None, pattern=r"^[A-Z]{2}$")
    """The user's region (ISO 3166-1 alpha-2) for crisis resources."""
    locale: Locale | None = None
    """Language of code-rendered text (fallbacks, resources); default: the message's."""


class StreamOptions(_Lenient):
    """OpenAI's ``stream_options``."""

    include_usage: bool = False
    """Send a last chunk with the run's token usage."""


class ChatCompletionRequest(_Lenient):
    """The body of ``POST /v1/chat/completions`` (OpenAI's, plus ``foureyes``)."""

    model: Text
    """Must be ``foureyes-support``."""
    messages: list[InputMessage] = Field(min_length=1)
    """The conversation so far; the last message is the user's current one."""
    stream: bool = False
    """Answer with server-sent events (after the decision)."""
    stream_options: StreamOptions | None = None
    """Streaming options."""
    user: _ConversationId | None = None
    """Names the conversation when ``foureyes.conversation_id`` does not."""
    n: int = Field(default=1, ge=1, le=1)
    """Only one choice is produced."""
    foureyes: FoureyesOptions | None = None
    """foureyes' own options."""


def support_message(body: ChatCompletionRequest, *, tenant: str) -> SupportMessage:
    """The pipeline's message for a request from ``tenant`` (the principal's tenant).

    Raises:
        ApiError: 422 when the last message is not a user's with text.
    """
    turns = [m for m in body.messages if m.role in ("user", "assistant")]
    if not turns or body.messages[-1].role != "user" or not body.messages[-1].text.strip():
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            param="messages",
            detail="the last message must be the user's, with text",
        )
    options = body.foureyes or FoureyesOptions()
    history = tuple(
        Turn(role="user" if m.role == "user" else "assistant", text=m.text)
        for m in turns[:-1]
        if m.text.strip()
    )
    return SupportMessage(
        text=body.messages[-1].text,
        history=history,
        conversation_id=options.conversation_id or body.user,
        tenant=tenant,
        region=options.region,
        locale=options.locale,
    )


def completion_body(outcome: SupportOutcome, *, created: int) -> dict[str, Any]:
    """The ``chat.completion`` response for an outcome."""
    return {
        "id": f"chatcmpl-{outcome.trace_id}",
        "object": "chat.completion",
        "created": created,
        "model": GATEWAY_MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": outcome.text},
                "finish_reason": "stop",
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


def sse_chunks(outcome: SupportOutcome, *, created: int, include_usage: bool) -> list[bytes]:
    """The whole event stream of an outcome, decided before the first byte is sent."""
    block = outcome.response_block()
    base = {
        "id": f"chatcmpl-{outcome.trace_id}",
        "object": "chat.completion.chunk",
        "created": created,
        "model": GATEWAY_MODEL,
        "system_fingerprint": None,
    }

    def chunk(delta: dict[str, str], finish: str | None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return base | {"choices": [choice], "foureyes": block}

    text = outcome.text
    pieces = [text[i : i + _STREAM_PIECE_CHARS] for i in range(0, len(text), _STREAM_PIECE_CHARS)]
    documents = [chunk({"role": "assistant", "content": ""}, None)]
    documents += [chunk({"content": piece}, None) for piece in pieces]
    documents.append(chunk({}, "stop"))
    if include_usage:
        documents.append(base | {"choices": [], "usage": _usage(outcome), "foureyes": block})
    events = [f"data: {json.dumps(d, ensure_ascii=False)}\n\n".encode() for d in documents]
    return [*events, b"data: [DONE]\n\n"]


def _report(metrics: Metrics, outcome: SupportOutcome) -> None:
    metrics.record_decision(outcome.reason)
    triage = outcome.triage
    metrics.record_risk(triage.tier.value, triage.level)


_MODEL_NOT_FOUND = {
    Locale.EN: "The model {model!r} does not exist; this service offers {offered!r}.",
    Locale.ZH_HANS: "模型 {model!r} 不存在；本服务提供的模型是 {offered!r}。",
    Locale.ZH_HANT: "模型 {model!r} 不存在；本服務提供的模型是 {offered!r}。",
}


def _model_not_found(request: Request, model: str) -> JSONResponse:
    locale = locale_from_accept_language(request.headers.get("accept-language"))
    message = _MODEL_NOT_FOUND[locale].format(model=model[:100], offered=GATEWAY_MODEL)
    error = {
        "message": message,
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }
    return JSONResponse({"error": error}, status_code=404)


def gateway_router() -> APIRouter:
    """The router serving ``POST /v1/chat/completions`` (``app.state.service.pipeline``)."""
    router = APIRouter(tags=["gateway"])

    @router.post("/v1/chat/completions", response_model=None, responses=_RESPONSES)
    async def chat_completions(
        body: ChatCompletionRequest, request: Request, principal: ClientKey
    ) -> Response:
        """Answer the conversation's last user message through triage and the gate."""
        if body.model != GATEWAY_MODEL:
            return _model_not_found(request, body.model)
        message = support_message(body, tenant=principal.tenant)
        service = request.app.state.service
        pipeline: SupportPipeline = service.pipeline
        outcome = await pipeline.handle(message)
        request.state.trace_id = outcome.trace_id
        _report(service.metrics, outcome)
        created = int(time.time())
        headers = {"x-foureyes-trace-id": outcome.trace_id}
        if not body.stream:
            return JSONResponse(completion_body(outcome, created=created), headers=headers)
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        events = sse_chunks(outcome, created=created, include_usage=include_usage)
        return StreamingResponse(
            _send(events, outcome.trace_id),
            media_type="text/event-stream",
            headers=headers | {"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    return router


async def _send(events: list[bytes], trace_id: str) -> AsyncIterator[bytes]:
    sent = 0
    try:
        for event in events:
            yield event
            sent += 1
    finally:
        if sent < len(events):
            # The client left mid-stream; the run's record is complete already.
            log_event(
                server_logger,
                "stream_interrupted",
                trace_id=trace_id,
                chunks_sent=sent,
                chunks=len(events),
            )
