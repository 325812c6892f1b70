"""VCR cassettes (vcrpy ``.yaml``) of OpenAI-compatible chat calls, as sessions.

A cassette records HTTP exchanges. Its session is the last ``/chat/completions``
exchange: the request's messages (and ``tools``), then the reply the response holds,
read as an OpenAI chat body by :mod:`.openai_chat`, so DeepSeek's ``reasoning_content``
stays the step's reasoning. A streamed reply (server-sent events) is added up chunk by
chunk: its content, its reasoning and its tool calls. Nothing is guessed: a cassette with
no chat exchange, or one whose request or reply is not there, is an error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from foureyes.review.importers import openai_chat
from foureyes.review.importers._yaml import YamlSubsetError, load_yaml
from foureyes.review.session import FormatProblem, Session, SessionFormatError

__all__ = ["FORMAT", "chat_body", "from_text", "interactions", "is_cassette"]

FORMAT = "vcr"
"""The format's name (:class:`~foureyes.review.importers.SessionFormat` value)."""
_CHAT_PATH = "/chat/completions"
_MESSAGE_KEYS = ("role", "content", "reasoning_content", "reasoning", "tool_calls", "name")


def is_cassette(text: str) -> bool:
    """Whether ``text`` looks like a VCR cassette (a YAML mapping of ``interactions``)."""
    return text.lstrip().startswith("interactions:")


def interactions(text: str) -> list[dict[str, Any]]:
    """The recorded exchanges of the cassette ``text``, each ``{"request", "response"}``.

    Raises:
        SessionFormatError: ``text`` is not a cassette (``not_json`` when it is not YAML
            of the cassette subset, ``wrong_shape`` when it has no list of interactions).
    """
    try:
        data = load_yaml(text)
    except YamlSubsetError as exc:
        raise SessionFormatError(FORMAT, FormatProblem.NOT_JSON, str(exc)) from None
    found = data.get("interactions") if isinstance(data, dict) else None
    if not isinstance(found, list) or not all(isinstance(i, dict) for i in found):
        raise SessionFormatError(FORMAT, FormatProblem.WRONG_SHAPE, "no list of interactions")
    return found


def chat_body(exchanges: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The OpenAI chat body of the last chat exchange: its messages, the reply, its tools.

    Raises:
        SessionFormatError: there is no chat exchange, or its request or reply is missing.
    """
    chats = [
        i
        for i in exchanges
        if str(_get(i, "request", "uri") or "").rstrip("/").endswith(_CHAT_PATH)
    ]
    if not chats:
        raise SessionFormatError(FORMAT, FormatProblem.WRONG_SHAPE, "no chat completions call")
    last = chats[-1]
    request = _get(last, "request", "parsed_body")
    if request is None:
        request = _json_body(_get(last, "request", "body"))
    if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        raise SessionFormatError(FORMAT, FormatProblem.WRONG_SHAPE, "the request has no messages")
    answer = _reply(last.get("response"))
    return {"messages": [*request["messages"], answer], "tools": request.get("tools") or []}


def from_text(text: str) -> Session:
    """The session of the cassette ``text`` (see the module).

    Raises:
        SessionFormatError: ``text`` is no cassette of a chat call, or its chat body is not
            a valid OpenAI chat session.
    """
    return openai_chat.from_json(chat_body(interactions(text)))


def _get(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _json_body(body: Any) -> Any:
    text = body.get("string") if isinstance(body, dict) else body
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _reply(response: Any) -> dict[str, Any]:
    parsed = _get(response, "parsed_body")
    if parsed is None:
        raw = _get(response, "body", "string")
        if isinstance(raw, str) and raw.lstrip().startswith("data:"):
            return _streamed(raw)
        parsed = _json_body(_get(response, "body"))
    choices = parsed.get("choices") if isinstance(parsed, dict) else None
    message = _get(choices[0], "message") if isinstance(choices, list) and choices else None
    if not isinstance(message, dict):
        raise SessionFormatError(FORMAT, FormatProblem.WRONG_SHAPE, "the reply has no message")
    return {key: message[key] for key in _MESSAGE_KEYS if message.get(key) is not None}


def _streamed(sse: str) -> dict[str, Any]:
    """The assistant message a stream of chat-completion chunks adds up to."""
    text = {"content": "", "reasoning_content": ""}
    seen: set[str] = set()
    calls: dict[int, dict[str, Any]] = {}
    for line in sse.splitlines():
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            continue
        try:
            chunk = json.loads(line[5:])
        except ValueError:
            raise SessionFormatError(FORMAT, FormatProblem.NOT_JSON, "a stream chunk") from None
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        for choice in choices if isinstance(choices, list) else []:
            delta = _get(choice, "delta") or {}
            for key in text:
                if key in delta:
                    seen.add(key)
                    text[key] += delta[key] or ""
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(
                    int(call.get("index", len(calls))),
                    {"type": "function", "function": {"name": "", "arguments": ""}},
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                function = call.get("function") or {}
                slot["function"]["name"] += function.get("name") or ""
                slot["function"]["arguments"] += function.get("arguments") or ""
    message: dict[str, Any] = {"role": "assistant", "content": text["content"]}
    if "reasoning_content" in seen:  # kept even when empty, as the API sent it
        message["reasoning_content"] = text["reasoning_content"]
    if calls:
        message["tool_calls"] = [calls[n] for n in sorted(calls)]
    return message
