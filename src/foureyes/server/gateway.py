"""``POST /v1/chat/completions``: the OpenAI-compatible door to the support pipeline.

Point any OpenAI client at foureyes (``base_url=http://host:port/v1``, model
``foureyes-support``) and every message is triaged and every reply passes the release
gate. The request is OpenAI's; the last message must be the user's. Earlier ``user`` and
``assistant`` messages are the conversation's history. What drafts the reply is
``[server] mode``:

- ``support`` (the default): foureyes' Counselor, from its own prompt. ``system`` and
  ``developer`` messages and ``tools`` are accepted and ignored; the answer names what
  was ignored in ``X-Foureyes-Ignored`` (``system``, ``developer``, ``tools``).
- ``guard``: the request as it is (every message in order, ``tools``, ``tool_choice``)
  goes to the route the ``counselor`` role names, the team's own model, through the
  metered caller (route limits, budgets, the run's deadline, telemetry and trace); that
  model's reply, text and tool calls, is judged like a ``/v1/check`` draft (triage of the
  last user message, the Supervisor, one commit). A message L0 escalates reaches the
  team's model only once triage allows generation, so a confirmed crisis never does.
  The answer's ``message.tool_calls`` (``finish_reason: "tool_calls"``) are the draft's,
  only when released; a fallback carries none. The route's own ``max_tokens`` and
  ``temperature`` apply, not the request's. A second turn's ``tool`` messages (each
  answering an earlier assistant message's ``tool_calls`` id) are taken and forwarded;
  the Supervisor sees them, and the earlier calls, as data. Support mode refuses them.

Which
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

The decision is also in the headers of a non-streamed answer: ``X-Foureyes-Decision``,
``X-Foureyes-Reason`` and ``X-Foureyes-Delivered-Sha256`` (with ``X-Foureyes-Trace-Id``),
so a client that drops unknown body fields can still read it.

``stream: true`` answers with server-sent events, but only once the decision is made and
recorded: not a byte (not even the status line) is sent before, so a stream can only
ever carry released text (and, in guard mode, released tool calls: one delta each, after
the text) or the fallback. Every chunk carries the ``foureyes`` object (in whole release;
in segment release, below, only the chunks after the last segment do); a stream's
headers carry only ``X-Foureyes-Trace-Id`` (and ``X-Foureyes-Ignored``; read the decision
from the final chunk's ``foureyes`` object). A store that cannot record the run answers 503 and
delivers nothing (invariant 10).

With ``[gate] release = "segments"`` a support-mode stream whose policy is ``normal`` is the
exception: each segment is sent once it is approved and its record committed
(:class:`_SegmentStream`, :func:`segment_event`), then the fallback continuation if the
gate stopped, then the final chunk with the decision (docs/gateway.md, "Segment release").

``foureyes.sources`` (at most :data:`MAX_SOURCES`, each ``{"id", "text", "origin"?}``
with at most :data:`MAX_SOURCE_CHARS` characters of text) is the material a reply may
rely on (retrieved documents, records): the Supervisor sees it as data.

``POST /v1/check`` takes the same ``messages``, ``user`` and ``foureyes`` options plus
the caller's own ``draft`` (``{"content": str | null, "tool_calls": [...]}``, OpenAI's
assistant-message fields) and answers the decision on that draft, under the same key,
rate limit, triage (single flight and daily limits per conversation, kept under the
key's tenant) and record as a chat completion; nothing is drafted::

    {"object": "foureyes.check", "decision", "reason", "content", "tool_calls",
     "candidate_sha256", "delivered_sha256", "trace_id", "policy", "risk"}

``content`` is what to deliver: the draft as released (with the code-rendered resources
a restricted policy requires) or the fallback; ``tool_calls`` are the draft's calls,
arguments re-serialised canonically, only when released (else ``null``).
``candidate_sha256`` covers the draft's text and tool calls
(:func:`foureyes.gate.candidate_bytes`). A tool call whose arguments are not strict JSON
is a 422 naming the call, before anything runs.

``POST /v1/check/stream`` is its twin for a draft the caller streams in: an NDJSON body
whose first line is a :class:`CheckStreamRequest` (the check request without ``draft``)
and whose further lines are the caller's model's ``chat.completion.chunk`` objects,
assembled by :func:`streamed_draft` (:mod:`foureyes.server.draft_stream`) and judged by the
same ``SupportPipeline.check``. A bad first line is a 400/422 before anything runs; a
stream cut off, or a later line that is no chunk, is decided and recorded as a fallback
(``draft_failed``). The answer is an event stream as for ``stream: true``, sent after
the decision, its headers naming only the trace.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import json
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema
from starlette.requests import ClientDisconnect

from foureyes.core.errors import UsageError
from foureyes.core.fold import TOOL_NAME
from foureyes.core.locale import Locale
from foureyes.core.roles import Role
from foureyes.gate import GivenDraft, Outcome, Source, ToolCall, ToolCallRefused, Turn
from foureyes.llm.provider import ChatMessage, ChatRequest
from foureyes.llm.provider import ToolCall as RawToolCall
from foureyes.pipeline import SupportMessage, SupportOutcome, SupportPipeline
from foureyes.server._fast_route import FastJsonRoute
from foureyes.server._logging import log_event, server_logger
from foureyes.server.auth import ClientKey
from foureyes.server.draft_stream import (
    DraftTooLarge,
    assemble_draft,
    line_problem,
    ndjson_lines,
)
from foureyes.server.errors import (
    ApiError,
    ErrorCode,
    error_responses,
    locale_from_accept_language,
)
from foureyes.server.metrics import Metrics
from foureyes.server.text import (
    MESSAGE_TEXT_CHECK,
    TEXT_CHECK,
    TEXT_PATTERN,
    JsonText,
    MessageText,
    Text,
    text_members,
)

__all__ = [
    "ChatCompletionRequest",
    "CheckRequest",
    "CheckStreamRequest",
    "DraftBody",
    "DraftFunction",
    "DraftToolCall",
    "FoureyesOptions",
    "GATEWAY_MODEL",
    "InputMessage",
    "MAX_SOURCES",
    "MAX_SOURCE_CHARS",
    "MAX_TOOLS",
    "MAX_TOOL_CALLS",
    "RequestSource",
    "StreamOptions",
    "TextContent",
    "check_body",
    "completion_body",
    "decision_headers",
    "gateway_router",
    "guard_request",
    "segment_event",
    "sse_chunks",
    "stream_head",
    "streamed_draft",
    "support_message",
]

MAX_SOURCES = 20
"""Most sources one request may give."""
MAX_SOURCE_CHARS = 20_000
"""Longest source text, in characters."""
MAX_TOOL_CALLS = 32
"""Most tool calls one draft may carry."""
MAX_TOOLS = 128
"""Most tool specs one chat completion may offer (guard mode)."""

GATEWAY_MODEL = "foureyes-support"
"""The model id clients name to reach the guarded support pipeline."""

_STREAM_PIECE_CHARS = 48


def _header(description: str) -> dict[str, Any]:
    return {"description": description, "schema": {"type": "string"}}


_TRACE_HEADER = {
    "X-Foureyes-Trace-Id": _header("The recorded run (``GET /v1/traces/{trace_id}``).")
}
_DECISION_HEADERS = _TRACE_HEADER | {
    "X-Foureyes-Decision": _header(
        "``released`` or ``fallback``, as the body's ``foureyes.decision``; not sent on a "
        "stream (read the final chunk's ``foureyes`` object)."
    ),
    "X-Foureyes-Reason": _header(
        "The reason code, as ``foureyes.reason`` (``approved`` or the fallback's reason); "
        "not sent on a stream."
    ),
    "X-Foureyes-Delivered-Sha256": _header(
        "SHA-256 of the delivered text, as ``foureyes.delivered_sha256``; not sent on a stream."
    ),
}
# What a JSON schema cannot say (a rule across messages, or on a string's JSON), in each
# operation's description and its 422: a request the schema allows is refused only so.
_RULES_LAST = "the last message is the user's, with text (``messages``)"


def _tool_rules(*drafts: str) -> str:
    calls = ", ".join(f"``{param}``" for param in ("messages.<i>.tool_calls.<j>", *drafts))
    return (
        "only an assistant message makes tool calls (``messages.<i>.tool_calls``); a ``tool`` "
        "message answers a call that an earlier assistant message made "
        "(``messages.<i>.tool_call_id``): a tool result without its call is refused, never "
        "passed on as if it had been called; a call's ``arguments`` are strict JSON and no "
        f"call id repeats ({calls})"
    )


def _rules(*rules: str) -> str:
    return (
        "Rules the request schema cannot express, each a 422 ``invalid_request`` whose "
        "``param`` names the field: " + "; ".join(rules) + "."
    )


_CHAT_RULES = _rules(
    _RULES_LAST,
    "in ``support`` mode no ``tool`` message and no ``tool_calls`` (``messages.<i>``); in "
    "``guard`` mode " + _tool_rules(),
)
_CHECK_RULES = _rules(_RULES_LAST, _tool_rules("draft.tool_calls.<j>"))
_STREAM_RULES = _rules(
    "on the first line, " + _RULES_LAST,
    _tool_rules() + "; a later line that is no chunk, or a draft that is not whole, is a "
    "fallback (``draft_failed``), not an error",
)
_RULES_422 = (
    " Also `invalid_request` for a request the schema allows that breaks a rule the "
    "operation's description lists (e.g. a ``tool`` message that answers no earlier call: "
    "``param`` ``messages.<i>.tool_call_id``)."
)


def _with_rules(responses: dict[int | str, dict[str, Any]]) -> dict[int | str, dict[str, Any]]:
    refused = responses[422] | {"description": responses[422]["description"] + _RULES_422}
    return responses | {422: refused}


_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The completion; with ``stream: true`` the server-sent events.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
        "headers": _DECISION_HEADERS
        | {
            "X-Foureyes-Ignored": _header(
                "Support mode only: what of the request was ignored, comma-separated "
                "(``system``, ``developer``, ``tools``)."
            )
        },
    },
    **error_responses(400, 401, 404, 408, 413, 422, 429, 503),
}
_CHECK_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The decision on the draft, and what to deliver.",
        "headers": _DECISION_HEADERS,
    },
    **error_responses(400, 401, 408, 413, 422, 429, 503),
}
_CHECK_STREAM_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "Server-sent events in chat-completion chunk format, sent once the decision is "
            "made and recorded: the text to deliver, the released tool calls, a final chunk "
            "(each chunk carries the ``foureyes`` decision object), then ``[DONE]``."
        ),
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
        "headers": _TRACE_HEADER,
    },
    **error_responses(400, 401, 408, 413, 422, 429, 503),
}
_RESPONSES = _with_rules(_RESPONSES)
_CHECK_RESPONSES = _with_rules(_CHECK_RESPONSES)
_CHECK_STREAM_RESPONSES = _with_rules(_CHECK_STREAM_RESPONSES)
_TAGS: list[str | enum.Enum] = ["gateway"]
_NDJSON_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": (
            "Newline-delimited JSON, read as it arrives. Line 1: a CheckStreamRequest "
            "(``messages``, ``user``, ``foureyes``, as for /v1/check without ``draft``). "
            "Every further line: an OpenAI ``chat.completion.chunk`` of the caller's model. "
            "The end of the body is the end of the draft."
        ),
        "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
    }
}
_ConversationId = Annotated[Text, StringConstraints(min_length=1, max_length=256)]
# Source ids and origins are attributes of the Supervisor's data block: 1-200 characters,
# no quotes or line breaks (the gate's Source takes no other). The constraints come before
# the text check, which still runs first: after it, pydantic would validate the pattern
# but leave it out of the document.
_Attribute = Annotated[
    str, StringConstraints(min_length=1, max_length=200, pattern=r'^[^"\r\n]*$'), TEXT_CHECK
]
_Field = Annotated[Text, StringConstraints(min_length=1, max_length=256)]


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

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # The content's check reads every key and value of a part, the ignored ones too.
        return text_members(handler(core_schema), handler)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class DraftFunction(_Strict):
    """The function a tool call of a draft calls."""

    # Checked where the draft is built (a 422 naming the call); the document says it.
    name: _Field = Field(json_schema_extra={"pattern": f"^{TOOL_NAME.pattern}$"})
    """The function's name (``[gate] tools_allow`` / ``tools_deny`` name these): 1 to 64
    ASCII letters, digits, ``_`` or ``-``, as OpenAI takes them."""
    arguments: JsonText
    """The arguments as a JSON string (OpenAI's format); parsed strictly. A string in it
    that holds an unpaired surrogate (``"\\ud800"``) is ``invalid_text``, naming this
    field."""


class DraftToolCall(_Strict):
    """One tool call of a draft, in OpenAI's format."""

    id: _Field
    """The call's id."""
    type: Literal["function"] = "function"
    """Only function calls."""
    function: DraftFunction
    """What it calls, with which arguments."""


class InputMessage(_Lenient):
    """One message of the request."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    """Who wrote it. ``tool`` messages (and an assistant's ``tool_calls``) are taken in
    guard mode and by ``/v1/check``, never in support mode; ``function`` messages never."""
    content: Annotated[str | list[TextContent] | None, MESSAGE_TEXT_CHECK] = None
    """The text, or text parts."""
    tool_calls: tuple[DraftToolCall, ...] = Field(default=(), max_length=MAX_TOOL_CALLS)
    """An assistant message's tool calls (OpenAI's format)."""
    tool_call_id: _Field | None = None
    """A ``tool`` message's answer to: the id of an earlier assistant message's call."""

    @property
    def text(self) -> str:
        """The message's text (parts joined by newlines)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content)


class RequestSource(_Strict):
    """One piece of material a reply may rely on (``foureyes.sources``)."""

    id: _Attribute
    """Its stable id (the record cites it)."""
    text: Annotated[Text, StringConstraints(min_length=1, max_length=MAX_SOURCE_CHARS)]
    """Its content, shown to the Supervisor as data."""
    origin: _Attribute = "request"
    """Where it comes from (a document store, a record system, a tool)."""


class FoureyesOptions(_Strict):
    """The ``foureyes`` object of a request (``extra_body`` in the ``openai`` SDK)."""

    conversation_id: _ConversationId | None = None
    """The conversation; takes precedence over ``user``."""
    region: str | None = Field(default=None, pattern=r"^[A-Z]{2}$")
    """The user's region (ISO 3166-1 alpha-2) for crisis resources."""
    locale: Locale | None = None
    """Language of code-rendered text (fallbacks, resources); default: the message's."""
    sources: tuple[RequestSource, ...] = Field(default=(), max_length=MAX_SOURCES)
    """Material the reply may rely on, shown to the Supervisor as data."""


class StreamOptions(_Lenient):
    """OpenAI's ``stream_options``."""

    include_usage: bool = False
    """Send a last chunk with the run's token usage."""


class ChatCompletionRequest(_Lenient):
    """The body of ``POST /v1/chat/completions`` (OpenAI's, plus ``foureyes``)."""

    # The document names the one model (an OpenAI client may send any: it is a 404).
    model: Text = Field(json_schema_extra={"enum": [GATEWAY_MODEL]})
    """Must be ``foureyes-support`` (another is a 404 ``model_not_found``)."""
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
    tools: list[dict[str, Any]] | None = Field(default=None, max_length=MAX_TOOLS)
    """OpenAI tool specs: passed to the team's model in guard mode, ignored in support mode."""
    tool_choice: str | dict[str, Any] | None = None
    """OpenAI's ``tool_choice``: passed on in guard mode, ignored in support mode."""
    foureyes: FoureyesOptions | None = None
    """foureyes' own options."""

    def ignored(self) -> list[str]:
        """What support mode ignores of this request: ``system``, ``developer``, ``tools``."""
        roles = {m.role for m in self.messages}
        dropped = [role for role in ("system", "developer") if role in roles]
        return dropped + (["tools"] if self.tools else [])


class DraftBody(_Strict):
    """The caller's own draft: an assistant message's ``content`` and ``tool_calls``."""

    # The document says what the validator below refuses: neither text nor a tool call.
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {
                    "required": ["content"],
                    "properties": {
                        "content": {"type": "string", "minLength": 1, "pattern": TEXT_PATTERN}
                    },
                },
                {"required": ["tool_calls"], "properties": {"tool_calls": {"minItems": 1}}},
            ]
        }
    )

    content: Annotated[Text | None, TEXT_CHECK] = None
    """The draft's text; ``null`` (or empty) for a draft of tool calls only."""
    tool_calls: tuple[DraftToolCall, ...] = Field(default=(), max_length=MAX_TOOL_CALLS)
    """The draft's tool calls, in order."""

    @model_validator(mode="after")
    def _something(self) -> DraftBody:
        if not self.content and not self.tool_calls:
            raise ValueError("a draft has content or tool calls")
        return self


class CheckStreamRequest(_Strict):
    """The first line of ``POST /v1/check/stream``: a check request without its draft."""

    messages: list[InputMessage] = Field(min_length=1)
    """The conversation so far; the last message is the user's current one."""
    user: _ConversationId | None = None
    """The end user: names the conversation when ``foureyes.conversation_id`` does not."""
    foureyes: FoureyesOptions | None = None
    """foureyes' own options, as for chat completions."""


def _text_as_draft(value: Any) -> Any:
    # A draft of text alone, sent as its string: the draft whose content it is.
    return {"content": value} if isinstance(value, str) else value


def _draft_or_text(schema: dict[str, Any]) -> None:
    # The document says the string form too (as text: no NUL, not empty).
    draft = {key: schema.pop(key) for key in ("$ref", "allOf") if key in schema}
    schema["anyOf"] = [draft, {"type": "string", "minLength": 1, "pattern": TEXT_PATTERN}]


class CheckRequest(CheckStreamRequest):
    """The body of ``POST /v1/check``."""

    draft: Annotated[DraftBody, BeforeValidator(_text_as_draft)] = Field(
        json_schema_extra=_draft_or_text
    )
    """The reply the caller would send, to be checked: an assistant message's ``content``
    and ``tool_calls``, or, for a reply of text alone, that text (as ``Guard.check`` takes
    it)."""

    def given_draft(self) -> GivenDraft:
        """The draft as the gate judges it.

        Raises:
            ApiError: 422 naming the tool call whose arguments are not strict JSON (or
                whose id repeats another's).
        """
        calls = [call.model_dump() for call in self.draft.tool_calls]
        try:
            return GivenDraft.of_openai(self.draft.content, calls)
        except ToolCallRefused as exc:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                param=f"draft.tool_calls.{exc.index}",
                detail=f"{exc.problem.value}: {exc}",
            ) from None


def support_message(
    body: ChatCompletionRequest | CheckStreamRequest, *, tenant: str, tool_turns: bool
) -> SupportMessage:
    """The pipeline's message for a request from ``tenant`` (the principal's tenant).

    Args:
        body: the request.
        tenant: the principal's tenant.
        tool_turns: whether the history may hold ``tool`` messages and an assistant's
            ``tool_calls`` (guard mode and ``/v1/check``); support mode's Counselor has
            no tools, so there they are refused.

    Raises:
        ApiError: 422 when the last message is not a user's with text, a tool turn is
            given where none is taken, a ``tool`` message answers no call of an earlier
            assistant message (``param`` names it, ``detail`` the id), or an earlier
            call's arguments are not strict JSON.
    """
    history = _history(body.messages, tool_turns=tool_turns)
    last = body.messages[-1]
    if last.role != "user" or not last.text.strip():
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            param="messages",
            detail="the last message must be the user's, with text",
        )
    options = body.foureyes or FoureyesOptions()
    return SupportMessage(
        text=last.text,
        history=history,
        conversation_id=options.conversation_id or body.user,
        tenant=tenant,
        region=options.region,
        locale=options.locale,
        sources=tuple(Source(id=s.id, origin=s.origin, text=s.text) for s in options.sources),
    )


def _history(messages: Sequence[InputMessage], *, tool_turns: bool) -> tuple[Turn, ...]:
    """The earlier turns of ``messages`` (all but the last), tool turns validated."""
    asked: set[str] = set()
    history: list[Turn] = []
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not tool_turns and (message.role == "tool" or message.tool_calls):
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                param=where,
                detail="support mode takes no tool messages or tool calls (foureyes' "
                "Counselor has no tools); use guard mode or /v1/check",
            )
        if message.tool_calls and message.role != "assistant":
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                param=f"{where}.tool_calls",
                detail="only an assistant message makes tool calls",
            )
        if message.role == "tool" and message.tool_call_id not in asked:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                param=f"{where}.tool_call_id",
                detail=f"no earlier assistant message made the tool call "
                f"{message.tool_call_id!r} this message answers",
            )
        calls = _earlier_calls(message, where)
        asked.update(call.id for call in calls)
        if index == len(messages) - 1 or message.role in ("system", "developer"):
            continue
        if message.text.strip() or calls:
            history.append(Turn(role=message.role, text=message.text, tool_calls=calls))
    return tuple(history)


def _earlier_calls(message: InputMessage, where: str) -> tuple[ToolCall, ...]:
    if not message.tool_calls:
        return ()
    try:
        calls = [call.model_dump() for call in message.tool_calls]
        return GivenDraft.of_openai(None, calls).tool_calls
    except ToolCallRefused as exc:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            param=f"{where}.tool_calls.{exc.index}",
            detail=f"{exc.problem.value}: {exc}",
        ) from None


def _forwarded(message: InputMessage) -> ChatMessage:
    """A client's message as guard mode passes it on: role, text, tool calls, call id."""
    calls = tuple(
        RawToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
        for c in message.tool_calls
    )
    return ChatMessage(
        role=message.role,
        content=(message.text or None) if calls else message.text,
        tool_calls=calls,
        tool_call_id=message.tool_call_id if message.role == "tool" else None,
    )


def guard_request(body: ChatCompletionRequest, message: SupportMessage) -> ChatRequest:
    """The client's request as guard mode sends it to the team's model (role ``counselor``).

    Every message in order with its role and text (an assistant's ``tool_calls`` and a
    tool message's ``tool_call_id`` with it), the ``tools`` and ``tool_choice`` as given;
    the user's words ride along in ``subject`` for the offline engine only.
    """
    return ChatRequest(
        messages=tuple(_forwarded(m) for m in body.messages),
        role=Role.COUNSELOR,
        tools=tuple(body.tools or ()),
        tool_choice=body.tool_choice,
        subject={"user_message": message.text},
    )


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


async def streamed_draft(chunks: AsyncIterable[object], *, max_chars: int) -> GivenDraft:
    """The draft ``chunks`` stream in, assembled for ``/v1/check/stream`` and ``check_stream``.

    One assembly for both (:mod:`foureyes.server.draft_stream`), with at most
    :data:`MAX_TOOL_CALLS` tool calls.

    Raises:
        DraftTooLarge: its text and tool-call pieces pass ``max_chars`` characters.
    """
    return await assemble_draft(chunks, max_chars=max_chars, max_tool_calls=MAX_TOOL_CALLS)


def stream_head(line: object) -> CheckStreamRequest:
    """The first line of a ``POST /v1/check/stream`` body (from :func:`ndjson_lines`).

    Raises:
        ApiError: 400 ``invalid_json`` when the body is empty or its first line is not JSON.
        RequestValidationError: the line is not a :class:`CheckStreamRequest` (422, in the
            shape every request body's validation error has).
    """
    if line is None:
        raise ApiError(ErrorCode.INVALID_JSON, detail="the body has no first line")
    if (problem := line_problem(line)) is not None:
        raise ApiError(ErrorCode.INVALID_JSON, detail=f"line 1: {problem}")
    try:
        return CheckStreamRequest.model_validate(line)
    except ValidationError as exc:
        errors = [error | {"loc": ("body", *error["loc"])} for error in exc.errors()]
        raise RequestValidationError(errors, body=line) from None


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


class _SegmentStream:
    """A support message answered in segment release.

    The pipeline runs as a task; each approved segment, recorded durably before it is
    passed on, waits in a queue until the response sends it. A client that leaves does
    not stop the run: it finishes and is recorded.
    """

    def __init__(self, pipeline: SupportPipeline, message: SupportMessage) -> None:
        self._segments: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.trace_id = ""
        self.task = asyncio.ensure_future(pipeline.handle(message, on_segment=self._put))
        _running.add(self.task)
        self.task.add_done_callback(_running.discard)

    async def _put(self, trace_id: str, segment: str) -> None:
        self._segments.put_nowait((trace_id, segment))

    async def next(self) -> str | None:
        """The next approved segment, or ``None`` once the run has ended without one.

        Raises:
            StoreError: the run could not be recorded (from the task, before a first
                segment); nothing more may be sent.
        """
        if self._segments.empty() and not self.task.done():
            getter = asyncio.ensure_future(self._segments.get())
            try:
                await asyncio.wait([getter, self.task], return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():
                    getter.cancel()
            if getter.done() and not getter.cancelled():
                self._segments.put_nowait(getter.result())
        if self._segments.empty():
            self.task.result()  # a failed run raises here; nothing more is sent
            return None
        self.trace_id, segment = self._segments.get_nowait()
        return segment

    async def events(
        self, first: str, *, created: int, include_usage: bool
    ) -> AsyncIterator[bytes]:
        """The segments as they are approved, then the rest of the outcome's stream."""
        sent: list[str] = []
        segment: str | None = first
        ended = False
        try:
            while segment is not None:
                yield segment_event(
                    self.trace_id, created=created, segment=segment, index=len(sent)
                )
                sent.append(segment)
                segment = await self.next()
            outcome = self.task.result()
            for event in sse_chunks(
                outcome, created=created, include_usage=include_usage, sent="".join(sent)
            ):
                yield event
            ended = True
        finally:
            if not ended:
                # The client left (or the run failed) mid-stream; the run goes on and is
                # recorded, and what was sent was recorded before it was sent.
                log_event(
                    server_logger,
                    "stream_interrupted",
                    trace_id=self.trace_id,
                    segments_sent=len(sent),
                )


_running: set[asyncio.Future[SupportOutcome]] = set()


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


def _recorded(request: Request, outcome: SupportOutcome) -> None:
    """What every decided request reports: its trace for the request log, its metrics."""
    request.state.trace_id = outcome.trace_id
    _report(request.app.state.service.metrics, outcome)


def gateway_router(router: APIRouter | None = None) -> APIRouter:
    """The routes of ``POST /v1/chat/completions``, ``/v1/check`` and ``/v1/check/stream``.

    All run through ``app.state.service.pipeline``: the same triage, gate and record.
    They are added to ``router`` when one is given, else to a new router, which is returned
    either way. ``create_app`` gives the app's own router (see there), and on a given
    router ``/v1/chat/completions``' well-formed requests skip FastAPI's solving
    (``_fast_route``): give no router that is later included with dependencies of its
    own, which that would not run. A new router's routes are FastAPI's alone.
    """
    fast = FastJsonRoute if router is not None else None
    router = APIRouter() if router is None else router

    async def chat_completions(
        body: ChatCompletionRequest, request: Request, principal: ClientKey
    ) -> Response:
        """Answer the conversation's last user message through triage and the gate."""
        if body.model != GATEWAY_MODEL:
            return _model_not_found(request, body.model)
        service = request.app.state.service
        guard_mode = service.config.server.mode == "guard"
        message = support_message(body, tenant=principal.tenant, tool_turns=guard_mode)
        pipeline: SupportPipeline = service.pipeline
        dropped = [] if guard_mode else body.ignored()
        ignored = {"x-foureyes-ignored": ",".join(dropped)} if dropped else {}
        segmented = body.stream and service.config.gate.release == "segments"
        if segmented and not guard_mode:
            # Segment release: segments are sent as they are approved and recorded.
            streaming = _SegmentStream(pipeline, message)
            first = await streaming.next()
            if first is not None:
                return _segment_response(request, streaming, first, body, ignored)
            outcome = streaming.task.result()
        elif guard_mode:
            outcome = await pipeline.guard(message, guard_request(body, message))
        else:
            outcome = await pipeline.handle(message)
        _recorded(request, outcome)
        created = int(time.time())
        if not body.stream:
            return JSONResponse(
                completion_body(outcome, created=created),
                headers=decision_headers(outcome) | ignored,
            )
        # A stream names only its trace in headers: a stream of text still arriving (a
        # draft streamed in) sends them before its decision exists, so every stream's
        # decision is read from its final chunk's ``foureyes`` object.
        headers = {"x-foureyes-trace-id": outcome.trace_id} | ignored
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        events = sse_chunks(outcome, created=created, include_usage=include_usage)
        return StreamingResponse(
            _send(events, outcome.trace_id),
            media_type="text/event-stream",
            headers=headers | {"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    router.add_api_route(
        "/v1/chat/completions",
        chat_completions,
        methods=["POST"],
        response_model=None,
        responses=_RESPONSES,
        description=_described(chat_completions, _CHAT_RULES),
        tags=_TAGS,
        route_class_override=fast,
    )

    async def check(body: CheckRequest, request: Request, principal: ClientKey) -> Response:
        """Triage the conversation's last user message and judge the caller's own draft."""
        message = support_message(body, tenant=principal.tenant, tool_turns=True)
        draft = body.given_draft()
        pipeline: SupportPipeline = request.app.state.service.pipeline
        outcome = await pipeline.check(message, draft)
        _recorded(request, outcome)
        return JSONResponse(check_body(outcome), headers=decision_headers(outcome))

    router.add_api_route(
        "/v1/check",
        check,
        methods=["POST"],
        response_model=None,
        responses=_CHECK_RESPONSES,
        description=_described(check, _CHECK_RULES),
        tags=_TAGS,
    )

    async def check_stream(request: Request, principal: ClientKey) -> Response:
        """Judge a draft the caller streams in (NDJSON: the request, then its chunks)."""
        lines = ndjson_lines(request.stream())
        service = request.app.state.service
        limit = service.config.server.max_body_bytes
        try:
            head = stream_head(await anext(lines, None))
            message = support_message(head, tenant=principal.tenant, tool_turns=True)
            draft = await streamed_draft(lines, max_chars=limit)
        except DraftTooLarge:
            raise ApiError(ErrorCode.REQUEST_TOO_LARGE, limit=limit) from None
        except ClientDisconnect:
            # Nothing was decided, so nothing is recorded and nothing can be sent.
            log_event(server_logger, "check_stream_abandoned")
            raise ApiError(ErrorCode.BAD_REQUEST, detail="the client left mid-draft") from None
        pipeline: SupportPipeline = service.pipeline
        outcome = await pipeline.check(message, draft)
        _recorded(request, outcome)
        # As every stream: the decision is in the chunks' ``foureyes`` object (the
        # final one included), the headers name only the trace.
        events = sse_chunks(outcome, created=int(time.time()), include_usage=False)
        return StreamingResponse(
            _send(events, outcome.trace_id),
            media_type="text/event-stream",
            headers={
                "x-foureyes-trace-id": outcome.trace_id,
                "cache-control": "no-cache",
                "x-accel-buffering": "no",
            },
        )

    router.add_api_route(
        "/v1/check/stream",
        check_stream,
        methods=["POST"],
        response_model=None,
        responses=_CHECK_STREAM_RESPONSES,
        openapi_extra=_NDJSON_BODY,
        description=_described(check_stream, _STREAM_RULES),
        tags=_TAGS,
    )
    return router


def _described(endpoint: Callable[..., Any], rules: str) -> str:
    """An operation's description: its docstring, then the rules its schema cannot express."""
    return f"{inspect.getdoc(endpoint)}\n\n{rules}"


def _segment_response(
    request: Request,
    streaming: _SegmentStream,
    first: str,
    body: ChatCompletionRequest,
    ignored: dict[str, str],
) -> StreamingResponse:
    request.state.trace_id = streaming.trace_id
    metrics = request.app.state.service.metrics

    def report(task: asyncio.Future[SupportOutcome]) -> None:
        if not task.cancelled() and task.exception() is None:
            _report(metrics, task.result())

    streaming.task.add_done_callback(report)
    include_usage = body.stream_options is not None and body.stream_options.include_usage
    events = streaming.events(first, created=int(time.time()), include_usage=include_usage)
    headers = {"x-foureyes-trace-id": streaming.trace_id, "cache-control": "no-cache"}
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers=headers | {"x-accel-buffering": "no"} | ignored,
    )


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
