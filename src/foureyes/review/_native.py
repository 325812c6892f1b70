"""Native rendering: session events as the chat messages the primary model was sent."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from foureyes.llm.provider import ChatMessage, ImagePart, TextPart
from foureyes.llm.provider import ToolCall as WireToolCall
from foureyes.review._events import (
    AssistantMessage,
    Event,
    ImageBlock,
    ToolCall,
    ToolResult,
    UserMessage,
)
from foureyes.review.session import Session

__all__ = ["NativePrefix", "NativeRendering", "native_rendering"]


def _native_content(
    text: str | None, images: tuple[ImageBlock, ...]
) -> str | tuple[TextPart | ImagePart, ...] | None:
    if not images:
        return text
    head = () if text is None else (TextPart(text=text),)
    return (*head, *(ImagePart(url=i.ref) for i in images))


@dataclass(frozen=True, slots=True)
class NativePrefix:
    """The native rendering of the events before a cut."""

    messages: tuple[ChatMessage, ...]
    """The chat messages."""
    images: int
    """Images among them."""
    balanced: bool
    """Whether every tool call is answered and every result matches a call."""


def native_rendering(session: Session) -> NativeRendering:
    """The session's native rendering, computed once per session."""
    return session.memo(("native_rendering",), lambda s: NativeRendering(s.events))


class NativeRendering:
    """Events rendered as native chat messages, checking that calls and results pair up.

    One pass over the whole log; :meth:`prefix` then serves the prefix before any turn
    start or step start. That slice is exact: a :class:`ToolCall` event only ever joins an
    assistant message of its own step, and no turn or step starts inside a step.
    """

    def __init__(self, events: tuple[Event, ...]) -> None:
        self.messages: list[ChatMessage] = []
        self.images = 0
        self._marks: dict[int, NativePrefix | tuple[int, int, bool]] = {}
        open_calls: Counter[str] = Counter()
        open_total = 0
        orphan = False
        pending: int | None = None  # this step's assistant message, for ToolCall events
        pending_ids: set[str] = set()
        for index, event in enumerate(events):
            if event.type in ("turn_start", "step_start"):
                self._marks[index] = (
                    len(self.messages),
                    self.images,
                    not orphan and not open_total,
                )
                pending, pending_ids = None, set()
            elif isinstance(event, UserMessage):
                content = self._content(event.content, event.images)
                self.messages.append(ChatMessage(role="user", content=content))
            elif isinstance(event, AssistantMessage):
                message = self._assistant(event)
                pending, pending_ids = len(self.messages), {c.id for c in message.tool_calls}
                open_calls.update(c.id for c in message.tool_calls)
                open_total += len(message.tool_calls)
                self.messages.append(message)
            elif isinstance(event, ToolCall):
                if event.call_id in pending_ids:
                    continue  # the execution record of a call the model requested
                call = WireToolCall(id=event.call_id, name=event.name, arguments=event.arguments)
                if pending is None:
                    pending = len(self.messages)
                    self.messages.append(ChatMessage(role="assistant", tool_calls=(call,)))
                else:
                    calls = (*self.messages[pending].tool_calls, call)
                    update = {
                        "tool_calls": calls,
                        "content": self.messages[pending].content or None,
                    }
                    self.messages[pending] = self.messages[pending].model_copy(update=update)
                pending_ids.add(event.call_id)
                open_calls[event.call_id] += 1
                open_total += 1
            elif isinstance(event, ToolResult):
                if open_calls[event.call_id] > 0:
                    open_calls[event.call_id] -= 1
                    open_total -= 1
                else:
                    orphan = True
                self.messages.append(self._result(event))
        self.balanced = not orphan and not open_total

    def prefix(self, cut: int) -> NativePrefix:
        """The rendering of the events before ``cut``, the index of a turn or step start."""
        mark = self._marks[cut]
        if isinstance(mark, tuple):
            count, images, balanced = mark
            mark = self._marks[cut] = NativePrefix(tuple(self.messages[:count]), images, balanced)
        return mark

    def _content(
        self, text: str | None, images: tuple[ImageBlock, ...]
    ) -> str | tuple[TextPart | ImagePart, ...] | None:
        self.images += len(images)
        return _native_content(text, images)

    def _assistant(self, event: AssistantMessage) -> ChatMessage:
        texts: list[str] = []
        reasoning: list[str] = []
        images: list[ImageBlock] = []
        calls: list[WireToolCall] = []
        for block in event.blocks:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "reasoning":
                reasoning.append(block.text)
            elif block.type == "image":
                images.append(block)
            else:
                calls.append(
                    WireToolCall(id=block.call_id, name=block.name, arguments=block.arguments)
                )
        text = "\n".join(texts) if texts else None
        content = self._content(text, tuple(images))
        if content is None and not calls:
            content = ""  # an assistant message needs content or tool calls
        return ChatMessage(
            role="assistant",
            content=content,
            reasoning_content="\n".join(reasoning) if reasoning else None,
            tool_calls=tuple(calls),
        )

    def _result(self, event: ToolResult) -> ChatMessage:
        content: str | tuple[TextPart | ImagePart, ...] | None = event.content
        if event.reasoning or event.images:
            text = "\n".join([event.content, *(r.text for r in event.reasoning)])
            content = self._content(text, event.images)
        return ChatMessage(role="tool", tool_call_id=event.call_id, content=content)
