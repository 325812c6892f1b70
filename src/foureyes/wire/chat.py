"""The requests of the gateway's endpoints, and their translation into pipeline calls.

These are the bodies of ``POST /v1/chat/completions`` (:class:`ChatCompletionRequest`),
``POST /v1/check`` (:class:`CheckRequest`) and the first line of ``POST
/v1/check/stream`` (:class:`CheckStreamRequest`): OpenAI's request, plus the ``foureyes``
object (:class:`FoureyesOptions`). Their JSON schemas are the server's OpenAPI document's
(docs/gateway.md says what each field does). The server validates a body against them,
and so does :class:`foureyes.Guard` with the arguments of its calls, so the same input
gets the same decision and the same digests either way.

:func:`support_message` turns a request into the pipeline's
:class:`~foureyes.pipeline.SupportMessage`, :meth:`CheckRequest.given_draft` its draft
into the gate's :class:`~foureyes.gate.GivenDraft`, :func:`guard_request` a guard-mode
chat completion into the request the team's model gets, and :func:`streamed_draft` a
caller's model's stream into a draft. What the schema cannot say is checked there and
refused with :class:`~foureyes.wire.errors.InvalidRequest`.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StringConstraints,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from foureyes.core.fold import TOOL_NAME
from foureyes.core.locale import Locale
from foureyes.core.roles import Role
from foureyes.gate import GivenDraft, Source, ToolCall, ToolCallRefused, Turn
from foureyes.llm.provider import ChatMessage, ChatRequest
from foureyes.llm.provider import ToolCall as RawToolCall
from foureyes.pipeline import SupportMessage
from foureyes.wire.draft_stream import assemble_draft
from foureyes.wire.errors import InvalidRequest
from foureyes.wire.text import (
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
    "guard_request",
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
            InvalidRequest: naming the tool call whose arguments are not strict JSON (or
                whose id repeats another's).
        """
        calls = [call.model_dump() for call in self.draft.tool_calls]
        try:
            return GivenDraft.of_openai(self.draft.content, calls)
        except ToolCallRefused as exc:
            raise _refused_call(type(self).__name__, f"draft.tool_calls.{exc.index}", exc) from None


def _refused_call(schema: str, param: str, exc: ToolCallRefused) -> InvalidRequest:
    return InvalidRequest(schema, param, f"{exc.problem.value}: {exc}")


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
        InvalidRequest: the last message is not a user's with text, a tool turn is given
            where none is taken, a ``tool`` message answers no call of an earlier
            assistant message (``param`` names it, ``problem`` the id), or an earlier
            call's arguments are not strict JSON.
    """
    schema = type(body).__name__
    history = _history(schema, body.messages, tool_turns=tool_turns)
    last = body.messages[-1]
    if last.role != "user" or not last.text.strip():
        raise InvalidRequest(schema, "messages", "the last message must be the user's, with text")
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


def _history(
    schema: str, messages: Sequence[InputMessage], *, tool_turns: bool
) -> tuple[Turn, ...]:
    """The earlier turns of ``messages`` (all but the last), tool turns validated."""
    asked: set[str] = set()
    history: list[Turn] = []
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not tool_turns and (message.role == "tool" or message.tool_calls):
            raise InvalidRequest(
                schema,
                where,
                "support mode takes no tool messages or tool calls (foureyes' "
                "Counselor has no tools); use guard mode or /v1/check",
            )
        if message.tool_calls and message.role != "assistant":
            raise InvalidRequest(
                schema, f"{where}.tool_calls", "only an assistant message makes tool calls"
            )
        if message.role == "tool" and message.tool_call_id not in asked:
            raise InvalidRequest(
                schema,
                f"{where}.tool_call_id",
                f"no earlier assistant message made the tool call "
                f"{message.tool_call_id!r} this message answers",
            )
        calls = _earlier_calls(schema, message, where)
        asked.update(call.id for call in calls)
        if index == len(messages) - 1 or message.role in ("system", "developer"):
            continue
        if message.text.strip() or calls:
            history.append(Turn(role=message.role, text=message.text, tool_calls=calls))
    return tuple(history)


def _earlier_calls(schema: str, message: InputMessage, where: str) -> tuple[ToolCall, ...]:
    if not message.tool_calls:
        return ()
    try:
        calls = [call.model_dump() for call in message.tool_calls]
        return GivenDraft.of_openai(None, calls).tool_calls
    except ToolCallRefused as exc:
        raise _refused_call(schema, f"{where}.tool_calls.{exc.index}", exc) from None


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


async def streamed_draft(chunks: AsyncIterable[object], *, max_chars: int) -> GivenDraft:
    """The draft ``chunks`` stream in, assembled for ``/v1/check/stream`` and ``check_stream``.

    One assembly for both (:mod:`foureyes.wire.draft_stream`), with at most
    :data:`MAX_TOOL_CALLS` tool calls.

    Raises:
        DraftTooLarge: its text and tool-call pieces pass ``max_chars`` characters.
    """
    return await assemble_draft(chunks, max_chars=max_chars, max_tool_calls=MAX_TOOL_CALLS)
