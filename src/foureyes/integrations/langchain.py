"""LangChain: guard any chat model with a :class:`~foureyes.Guard`, or reach the gateway.

Needs the ``langchain`` extra (``pip install 'foureyes[langchain]'``). docs/library.md
("LangChain") shows both in use.

- :class:`GuardedChatModel` (build one with :func:`guarded`) is a chat model that wraps
  any other: it calls the inner model, hands its reply (text and tool calls) to
  :meth:`Guard.check <foureyes.Guard.check>` as the draft, and answers an ``AIMessage``
  with what foureyes delivers: the draft, the draft with the code-rendered resources a
  restricted policy requires, or the fallback. Its ``tool_calls`` are the draft's only
  when released (a fallback carries none), and ``response_metadata["foureyes"]`` is the
  decision, the gateway's ``foureyes`` object. A stream is gathered whole and checked
  before its first chunk is emitted, so no unreviewed text leaves; the inner model is
  called without the caller's callbacks, so neither do its tokens through
  ``astream_events`` or a streaming handler. ``invoke``/``stream`` need a
  :class:`~foureyes.SyncGuard`; ``ainvoke``/``astream`` take either.
- :class:`ChatFoureyes` is ``langchain_openai.ChatOpenAI`` for a foureyes gateway: it
  keeps the gateway's ``foureyes`` object, which ``ChatOpenAI`` drops, in
  ``response_metadata["foureyes"]`` (a stream's on its final chunk), or, when a body
  does not carry it (a proxy dropped it), the ``X-Foureyes-*`` headers' decision.

LangChain messages become the messages :class:`~foureyes.Guard` takes: ``SystemMessage``
is ``system``, ``HumanMessage`` ``user``, ``AIMessage`` ``assistant`` (its tool calls in
OpenAI's shape), a ``ChatMessage`` by its role. ``ToolMessage`` results after the last
user message are the draft's ``sources`` (``{"id": tool_call_id, "origin":
"tool:<name>"}``), shown to the Supervisor as data, and the agent's own steps after it
(``AIMessage`` tool calls already checked) are not history; earlier tool results are
not history either (history is user and assistant text). Any other message, and content
that is not text, is a :class:`~foureyes.core.errors.ContractError` (``schema``
``check``, ``reason`` ``invalid_input``), raised before anything runs or is recorded.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

from foureyes.core.errors import ContractError, UsageError
from foureyes.gate import Outcome
from foureyes.guard import INVALID_INPUT, Guard, SyncGuard
from foureyes.integrations._extra import missing_extra
from foureyes.pipeline import SupportOutcome
from foureyes.wire import GATEWAY_MODEL

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForLLMRun,
        CallbackManagerForLLMRun,
    )
    from langchain_core.language_models import BaseChatModel, LanguageModelInput
    from langchain_core.messages import (
        AIMessage,
        AIMessageChunk,
        BaseMessage,
        ChatMessage,
        HumanMessage,
        SystemMessage,
        ToolCall,
        ToolCallChunk,
        ToolMessage,
        UsageMetadata,
    )
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
    from langchain_core.runnables import Runnable, RunnableConfig
    from langchain_core.tools import BaseTool
    from langchain_openai import ChatOpenAI
    from pydantic import ConfigDict, Field
except ImportError as exc:  # pragma: no cover - exercised by a test in a fresh import
    raise missing_extra("langchain", "LangChain", "langchain", exc) from exc

__all__ = ["ChatFoureyes", "GuardedChatModel", "OPTION_KEYS", "guarded"]

OPTION_KEYS = frozenset({"user", "conversation_id", "region", "locale", "sources"})
"""The keys of the per-call ``foureyes={...}`` options (:meth:`Guard.check`'s keywords)."""

_SCHEMA = "check"
_PIECE_CHARS = 48
_ROLES = {
    "system": "system",
    "developer": "developer",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
}
_HEADERS = {
    "decision": "x-foureyes-decision",
    "reason": "x-foureyes-reason",
    "delivered_sha256": "x-foureyes-delivered-sha256",
    "trace_id": "x-foureyes-trace-id",
}


def _refuse(detail: str) -> ContractError:
    return ContractError(_SCHEMA, INVALID_INPUT, detail)


def _content(index: int, message: BaseMessage) -> str | list[dict[str, Any]]:
    """A message's content as Guard takes it: a string, or text parts only."""
    if isinstance(message.content, str):
        return message.content
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, str):
            parts.append({"type": "text", "text": block})
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append({"type": "text", "text": block["text"]})
        else:
            kind = block.get("type", "?")
            raise _refuse(f"messages.{index}.content: only text is taken, not {kind!r}")
    return parts


def _openai_calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """LangChain tool calls in OpenAI's shape (arguments as a JSON string)."""
    return [
        {
            "id": call.get("id"),
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": json.dumps(call["args"], ensure_ascii=False),
            },
        }
        for call in calls
    ]


def guard_input(
    messages: Sequence[BaseMessage],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """LangChain ``messages`` as :meth:`Guard.check` takes them: messages and sources.

    Raises:
        ContractError: a message type or content Guard cannot take.
    """
    users = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    if not users:
        raise _refuse("messages: no HumanMessage (the user's message is what is checked)")
    last_user = users[-1]
    converted: list[dict[str, Any]] = []
    sources: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            if index > last_user and message.text:
                origin = f"tool:{message.name}" if message.name else "tool"
                sources.append({"id": message.tool_call_id, "text": message.text, "origin": origin})
            continue
        if isinstance(message, AIMessage):
            if index > last_user:
                continue  # the agent's own steps of this turn, checked when they were made
            # The service's own earlier reply: its text (tool-use and reasoning blocks
            # are not text; its tool calls ride in OpenAI's shape).
            entry: dict[str, Any] = {"role": "assistant", "content": message.text}
            if message.tool_calls:
                entry["tool_calls"] = _openai_calls(message.tool_calls)
            converted.append(entry)
        elif isinstance(message, HumanMessage):
            converted.append({"role": "user", "content": _content(index, message)})
        elif isinstance(message, SystemMessage):
            converted.append({"role": "system", "content": _content(index, message)})
        elif isinstance(message, ChatMessage) and message.role in _ROLES:
            role = _ROLES[message.role]
            converted.append({"role": role, "content": _content(index, message)})
        else:
            name = type(message).__name__
            raise _refuse(f"messages.{index}: a {name} is not a message foureyes takes")
    return converted, sources


def draft_of(message: BaseMessage) -> dict[str, Any]:
    """The inner model's reply as a draft: its text and tool calls (OpenAI's shape).

    Calls LangChain could not parse (``invalid_tool_calls``) are not part of it, so they
    are never delivered.

    Raises:
        ContractError: the model answered something other than an ``AIMessage``.
    """
    if not isinstance(message, AIMessage):
        raise _refuse(f"draft: the model answered a {type(message).__name__}, not an AIMessage")
    return {"content": message.text or None, "tool_calls": _openai_calls(message.tool_calls)}


def _released(outcome: SupportOutcome) -> list[ToolCall]:
    if outcome.decision is not Outcome.RELEASED:
        return []
    return [
        ToolCall(name=call.name, args=call.arguments, id=call.id, type="tool_call")
        for call in outcome.tool_calls
    ]


def _metadata(outcome: SupportOutcome, calls: Sequence[ToolCall]) -> dict[str, Any]:
    return {
        "foureyes": outcome.response_block(),
        "finish_reason": "tool_calls" if calls else "stop",
    }


def _answer(outcome: SupportOutcome, usage: UsageMetadata | None) -> AIMessage:
    """The delivered message: the outcome's text, its released calls, the decision."""
    calls = _released(outcome)
    return AIMessage(
        content=outcome.text,
        tool_calls=calls,
        response_metadata=_metadata(outcome, calls),
        usage_metadata=usage,
    )


def _chunks(outcome: SupportOutcome, usage: UsageMetadata | None) -> list[ChatGenerationChunk]:
    """The delivered message as chunks: text pieces, one per released call, then the last."""
    text = outcome.text
    calls = _released(outcome)
    pieces = [
        AIMessageChunk(content=text[i : i + _PIECE_CHARS])
        for i in range(0, len(text), _PIECE_CHARS)
    ]
    pieces += [
        AIMessageChunk(
            content="",
            tool_call_chunks=[
                ToolCallChunk(
                    name=call["name"],
                    args=json.dumps(call["args"], ensure_ascii=False),
                    id=call["id"],
                    index=index,
                    type="tool_call_chunk",
                )
            ],
        )
        for index, call in enumerate(calls)
    ]
    pieces.append(
        AIMessageChunk(
            content="",
            response_metadata=_metadata(outcome, calls),
            usage_metadata=usage,
            chunk_position="last",
        )
    )
    return [ChatGenerationChunk(message=piece) for piece in pieces]


def _gathered(pieces: Sequence[BaseMessage]) -> BaseMessage:
    """The inner model's streamed reply as one message.

    A model that cannot stream yields its whole reply once.
    """
    if not pieces:
        return AIMessage(content="")
    whole = pieces[0]
    for piece in pieces[1:]:
        if not isinstance(whole, AIMessageChunk) or not isinstance(piece, AIMessageChunk):
            raise _refuse(f"draft: the model streamed a {type(piece).__name__} after a reply")
        whole = whole + piece
    if isinstance(whole, AIMessageChunk):
        return AIMessage(
            content=whole.content,
            tool_calls=whole.tool_calls,
            invalid_tool_calls=whole.invalid_tool_calls,
            usage_metadata=whole.usage_metadata,
        )
    return whole


# The inner model runs with no callbacks of the caller's: its unreviewed tokens must not
# reach ``astream_events``, a streaming handler or a parent run's token events.
_ISOLATED: RunnableConfig = {"callbacks": []}


class GuardedChatModel(BaseChatModel):
    """A chat model whose every reply is the one foureyes delivers for ``model``'s draft.

    ``guard`` is a :class:`~foureyes.SyncGuard` (all four call styles) or a
    :class:`~foureyes.Guard` (``ainvoke``/``astream`` only: a ``Guard`` belongs to its
    event loop, so ``invoke`` with one is a :class:`~foureyes.core.errors.UsageError`).
    The options of :meth:`Guard.check <foureyes.Guard.check>` are fields here and may be
    given per call as ``foureyes={"conversation_id": ..., ...}`` (keys:
    :data:`OPTION_KEYS`), which take precedence.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: Runnable[LanguageModelInput, BaseMessage] = Field(exclude=True)
    """The inner chat model (or one with tools bound) whose replies are drafts."""
    guard: Guard | SyncGuard = Field(exclude=True)
    """The guard that checks each draft."""
    user: str | None = None
    """The end user: names the conversation when ``conversation_id`` does not."""
    conversation_id: str | None = None
    """The conversation (open unknowns, daily limits, trend)."""
    region: str | None = None
    """The user's region (ISO 3166-1 alpha-2), for crisis resources."""
    locale: str | None = None
    """``en``, ``zh-Hans`` or ``zh-Hant``: the language of code-rendered text."""

    @property
    def _llm_type(self) -> str:
        return "foureyes-guarded"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """The same guard around ``model.bind_tools(tools, ...)``: tool calls are drafts too."""
        bind = getattr(self.model, "bind_tools", None)
        if bind is None:
            raise UsageError(f"the inner model {type(self.model).__name__} cannot bind tools")
        return self.model_copy(update={"model": bind(tools, **kwargs)})

    def _options(self, given: Mapping[str, Any] | None) -> dict[str, Any]:
        if given is not None and not isinstance(given, Mapping):
            raise _refuse("foureyes: an object of options is expected")
        extra = sorted(set(given or {}) - OPTION_KEYS)
        if extra:
            raise _refuse(f"foureyes: unknown option {extra[0]!r}")
        options: dict[str, Any] = {
            "user": self.user,
            "conversation_id": self.conversation_id,
            "region": self.region,
            "locale": self.locale,
        }
        return options | dict(given or {})

    def _request(
        self, messages: list[BaseMessage], kwargs: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Guard's messages and check options; ``kwargs`` keeps what the inner model takes."""
        options = self._options(kwargs.pop("foureyes", None))
        converted, tool_sources = guard_input(messages)
        options["sources"] = [*options.get("sources", ()), *tool_sources]
        return converted, options

    def _blocking_guard(self) -> SyncGuard:
        """The guard of a blocking call, checked before anything runs."""
        if not isinstance(self.guard, SyncGuard):
            raise UsageError(
                "invoke and stream need a SyncGuard (a Guard belongs to its event loop): "
                "await ainvoke/astream instead, or give guarded() a SyncGuard"
            )
        return self.guard

    async def _check_async(
        self, messages: list[dict[str, Any]], reply: BaseMessage, options: dict[str, Any]
    ) -> SupportOutcome:
        draft = draft_of(reply)
        if isinstance(self.guard, SyncGuard):
            # Its own loop, in its own thread: wait for it without blocking this loop.
            return await asyncio.to_thread(self.guard.check, messages, draft, **options)
        return await self.guard.check(messages, draft, **options)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        guard = self._blocking_guard()
        converted, options = self._request(messages, kwargs)
        reply = self.model.invoke(messages, _ISOLATED, stop=stop, **kwargs)
        outcome = guard.check(converted, draft_of(reply), **options)
        answer = _answer(outcome, getattr(reply, "usage_metadata", None))
        return ChatResult(generations=[ChatGeneration(message=answer)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        converted, options = self._request(messages, kwargs)
        reply = await self.model.ainvoke(messages, _ISOLATED, stop=stop, **kwargs)
        outcome = await self._check_async(converted, reply, options)
        answer = _answer(outcome, getattr(reply, "usage_metadata", None))
        return ChatResult(generations=[ChatGeneration(message=answer)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        guard = self._blocking_guard()
        converted, options = self._request(messages, kwargs)
        pieces = list(self.model.stream(messages, _ISOLATED, stop=stop, **kwargs))
        reply = _gathered(pieces)
        outcome = guard.check(converted, draft_of(reply), **options)
        yield from _chunks(outcome, getattr(reply, "usage_metadata", None))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        converted, options = self._request(messages, kwargs)
        pieces = [p async for p in self.model.astream(messages, _ISOLATED, stop=stop, **kwargs)]
        reply = _gathered(pieces)
        outcome = await self._check_async(converted, reply, options)
        for chunk in _chunks(outcome, getattr(reply, "usage_metadata", None)):
            yield chunk


def guarded(
    model: Runnable[LanguageModelInput, BaseMessage],
    guard: Guard | SyncGuard,
    **options: Any,
) -> GuardedChatModel:
    """``model`` behind ``guard``: a :class:`GuardedChatModel` (``options``: its fields)."""
    return GuardedChatModel(model=model, guard=guard, **options)


def _from_headers(headers: Mapping[str, Any]) -> dict[str, Any] | None:
    """The decision the ``X-Foureyes-*`` headers carry, or ``None`` without one."""
    lowered = {str(k).lower(): v for k, v in headers.items()}
    found = {key: lowered[name] for key, name in _HEADERS.items() if name in lowered}
    return found if "decision" in found else None


class ChatFoureyes(ChatOpenAI):
    """``ChatOpenAI`` for a foureyes gateway, keeping its decision in ``response_metadata``.

    ``ChatFoureyes(base_url="http://127.0.0.1:8000/v1", api_key=...)``: the model is
    ``foureyes-support`` unless named. Each reply's ``response_metadata["foureyes"]`` is
    the gateway's ``foureyes`` object (a stream's is on its final chunk, the one with the
    ``finish_reason``, and so on the chunks' sum); when a non-streamed body does not carry
    it, the ``X-Foureyes-Decision``, ``-Reason``, ``-Delivered-Sha256`` and
    ``-Trace-Id`` headers' values (``include_response_headers`` is on by default for
    this). Everything else is ``ChatOpenAI``'s. It extends the two methods that turn a
    response and a stream chunk into LangChain's, as provider packages' ``ChatOpenAI``
    subclasses (langchain-deepseek's ``ChatDeepSeek``) do to read fields OpenAI does not
    define.
    """

    model_name: str = Field(default=GATEWAY_MODEL, alias="model")
    """The gateway's model id."""
    include_response_headers: bool = True
    """Keep the response headers (the decision's fallback when a body lacks it)."""

    def _create_chat_result(
        self,
        response: dict[str, Any] | Any,
        generation_info: dict[str, Any] | None = None,
    ) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        if isinstance(response, dict):
            block = response.get("foureyes")
        else:
            block = (getattr(response, "model_extra", None) or {}).get("foureyes")
        if block is None:
            block = _from_headers((generation_info or {}).get("headers") or {})
        if block is not None:
            for generation in result.generations:
                generation.message.response_metadata["foureyes"] = block
        return result

    def _convert_chunk_to_generation_chunk(
        self,
        chunk: dict[str, Any],
        default_chunk_class: type,
        base_generation_info: dict[str, Any] | None,
    ) -> ChatGenerationChunk | None:
        converted = super()._convert_chunk_to_generation_chunk(
            chunk, default_chunk_class, base_generation_info
        )
        choices = chunk.get("choices") or []
        final = bool(choices) and bool(choices[0].get("finish_reason"))
        # Only on the final chunk: every gateway chunk carries the object, and summing
        # chunks would concatenate its strings.
        if converted is not None and final and "foureyes" in chunk:
            converted.message.response_metadata["foureyes"] = chunk["foureyes"]
        return converted
