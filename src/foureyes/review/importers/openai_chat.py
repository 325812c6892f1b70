"""OpenAI chat-format message lists (with DeepSeek ``reasoning_content``) as sessions.

Input: a JSON list of messages, or a request body ``{"messages": [...], "tools": [...]}``.

- Leading ``system`` (or ``developer``) messages become the session's system messages; a
  system message after the conversation started is an error (there is no event for it,
  and silently turning it into a user message would change what the primary saw).
- A ``user`` message opens a turn when none is open, else joins the open one.
- Each ``assistant`` message is one step: ``reasoning_content`` (or ``reasoning``) becomes
  a reasoning block, ``content`` text and image blocks, ``tool_calls`` tool-call blocks
  with their ids and raw arguments. An assistant message without tool calls is the
  turn's answer: its step and its turn end (``completed``).
- Each ``tool`` message is the result of the call its ``tool_call_id`` names.
- A step ends at the next non-tool message. The last step ends at the end of the input
  when every call it made has a result; otherwise it is still in flight.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from foureyes.review.importers._builder import (
    SessionBuilder,
    raw_arguments,
    shape_error,
    text_of,
)
from foureyes.review.session import (
    AssistantBlock,
    AssistantMessage,
    EndReason,
    ImageBlock,
    MessageSource,
    ReasoningBlock,
    Session,
    TextBlock,
    ToolCallBlock,
    ToolResult,
    UserMessage,
)

__all__ = ["FORMAT", "from_json"]

FORMAT = "openai-chat"
"""The format's name in :class:`~foureyes.review.importers.SessionFormat` and errors."""

_SYSTEM_ROLES = ("system", "developer")


def from_json(data: Any) -> Session:
    """The session of a decoded message list or request body.

    Raises:
        SessionFormatError: the input is not shaped like OpenAI chat messages.
    """
    if isinstance(data, Mapping):
        messages, tools = data.get("messages"), data.get("tools", [])
    else:
        messages, tools = data, []
    if not isinstance(messages, list):
        raise shape_error(FORMAT, "input", "expected a list of messages or {'messages': [...]}")
    if not isinstance(tools, list) or not all(isinstance(t, Mapping) for t in tools):
        raise shape_error(FORMAT, "tools", "expected a list of tool objects")
    system: list[str] = []
    builder = SessionBuilder()
    for n, message in enumerate(messages):
        where = f"message {n}"
        if not isinstance(message, Mapping):
            raise shape_error(FORMAT, where, "expected an object")
        role = message.get("role")
        if role in _SYSTEM_ROLES:
            if builder.events:
                raise shape_error(FORMAT, where, f"a {role} message after the conversation began")
            system.append(_content(message.get("content"), where)[0])
        elif role == "user":
            builder.end_step()
            text, images = _content(message.get("content"), where)
            builder.add(UserMessage(content=text, source=MessageSource.USER, images=images))
        elif role == "assistant":
            builder.start_step()
            blocks = _assistant_blocks(message, where)
            builder.add(AssistantMessage(blocks=blocks))
            if not any(b.type == "tool_call" for b in blocks):
                builder.end_turn(EndReason.COMPLETED)
        elif role == "tool":
            call_id = text_of(message.get("tool_call_id"), FORMAT, f"{where}.tool_call_id")
            text, images = _content(message.get("content"), where)
            builder.add(ToolResult(call_id=call_id, content=text, images=images))
        else:
            raise shape_error(FORMAT, where, f"unknown role {role!r}")
    return builder.finish(system=system, tools=tools)


def _content(value: Any, where: str) -> tuple[str, tuple[ImageBlock, ...]]:
    """Text and images of a ``content`` field (a string, ``null`` or a list of parts)."""
    if value is None:
        return "", ()
    if isinstance(value, str):
        return value, ()
    if not isinstance(value, list):
        raise shape_error(FORMAT, f"{where}.content", "expected text, null or a list of parts")
    texts: list[str] = []
    images: list[ImageBlock] = []
    for n, part in enumerate(value):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text":
            texts.append(text_of(part.get("text"), FORMAT, f"{where}.content[{n}].text"))
        elif kind == "image_url":
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, Mapping) else url
            images.append(ImageBlock(ref=text_of(url, FORMAT, f"{where}.content[{n}].image_url")))
        else:
            raise shape_error(FORMAT, f"{where}.content[{n}]", f"unsupported part type {kind!r}")
    return "\n".join(texts), tuple(images)


def _assistant_blocks(message: Mapping[str, Any], where: str) -> tuple[AssistantBlock, ...]:
    blocks: list[AssistantBlock] = []
    for key in ("reasoning_content", "reasoning"):
        if message.get(key) is not None:
            blocks.append(ReasoningBlock(text=text_of(message[key], FORMAT, f"{where}.{key}")))
            break
    if message.get("content") is not None:
        text, images = _content(message["content"], where)
        blocks.append(TextBlock(text=text))
        blocks.extend(images)
    calls = message.get("tool_calls")
    calls = [] if calls is None else calls
    if not isinstance(calls, list):
        raise shape_error(FORMAT, f"{where}.tool_calls", "expected a list")
    for n, call in enumerate(calls):
        at = f"{where}.tool_calls[{n}]"
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            raise shape_error(FORMAT, at, "expected {'id': ..., 'function': {...}}")
        blocks.append(
            ToolCallBlock(
                call_id=text_of(call.get("id"), FORMAT, f"{at}.id"),
                name=text_of(function.get("name"), FORMAT, f"{at}.function.name"),
                arguments=raw_arguments(function.get("arguments"), FORMAT, f"{at}.arguments"),
            )
        )
    return tuple(blocks)
