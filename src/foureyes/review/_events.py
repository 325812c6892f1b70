"""The event vocabulary of a session: blocks, events, end reasons, sources, format errors.

Public through :mod:`foureyes.review.session`; see there for how events form a session.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from foureyes.core.errors import ContractError

__all__ = [
    "AssistantBlock",
    "AssistantMessage",
    "EndReason",
    "Event",
    "FormatProblem",
    "ImageBlock",
    "MessageSource",
    "ReasoningBlock",
    "SessionFormatError",
    "StepEnd",
    "StepStart",
    "TextBlock",
    "ToolCall",
    "ToolCallBlock",
    "ToolResult",
    "TurnEnd",
    "TurnStart",
    "UserMessage",
]


class FormatProblem(StrEnum):
    """What is wrong with a session input (the ``reason`` of :class:`SessionFormatError`)."""

    NOT_JSON = "not_json"
    """The input is not valid JSON (or a JSONL line is not)."""
    UNKNOWN_FORMAT = "unknown_format"
    """The input matches none of the formats foureyes reads."""
    WRONG_SHAPE = "wrong_shape"
    """Valid JSON, but not shaped like the named format (a missing or mistyped field)."""
    INVALID_EVENT = "invalid_event"
    """A native event line that is not a valid event."""
    BROKEN_STRUCTURE = "broken_structure"
    """Events that cannot form a session (see :class:`Session` for the rules)."""


class SessionFormatError(ContractError):
    """Raised when a session input breaks its format's contract or the session structure.

    It is a :class:`~foureyes.core.errors.ContractError` because a session file is a
    contract in the same sense as a model's structured output (most of it was written by
    a model): ``schema`` names the format (``native``, ``openai-chat``, ``swe-agent``,
    ``openhands`` or ``session`` for the structure rules), ``reason`` is a
    :class:`FormatProblem` value and ``detail`` says where (message, line or event
    index), never quoting more than a short excerpt.
    """

    def __init__(self, format_name: str, reason: FormatProblem, detail: str = "") -> None:
        super().__init__(format_name, reason.value, detail)
        self.problem = reason
        """The problem as its enum member."""


class EndReason(StrEnum):
    """Why a turn ended."""

    COMPLETED = "completed"
    """The agent finished its answer or task."""
    ABORTED = "aborted"
    """The agent or the host gave up (forfeit, early exit, stop)."""
    BLOCKED = "blocked"
    """A policy, a permission or a refusal stopped the turn."""
    ERROR = "error"
    """An error ended the turn (including an end reason foureyes does not know)."""
    MAX_TOKENS = "max-tokens"
    """A token, context or cost limit ended the turn."""
    INTERRUPTED = "interrupted"
    """The user or the host interrupted the turn while it was running."""


class MessageSource(StrEnum):
    """Who wrote a user-role message."""

    USER = "user"
    """The human user."""
    TOOL = "tool"
    """A tool's output delivered as a user message."""
    MODEL = "model"
    """Another model (a sub-agent, a summariser)."""
    PLUGIN = "plugin"
    """The host or a plugin (harness templates, demonstrations, published reviews)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True
    )


_Id = Annotated[str, Field(min_length=1)]


class TextBlock(_Frozen):
    """Visible text the model wrote."""

    type: Literal["text"] = "text"
    text: str
    """The text."""


class ReasoningBlock(_Frozen):
    """Reasoning the model wrote besides its visible text (``reasoning_content``, thoughts)."""

    type: Literal["reasoning"] = "reasoning"
    text: str
    """The reasoning."""


class ImageBlock(_Frozen):
    """An image, by reference (an ``https:`` or ``data:`` URL)."""

    type: Literal["image"] = "image"
    ref: str
    """Where the image is."""


class ToolCallBlock(_Frozen):
    """A tool call the model requested in its message."""

    type: Literal["tool_call"] = "tool_call"
    call_id: _Id
    """The id that joins the call to its result."""
    name: str
    """The tool's name."""
    arguments: str
    """The arguments exactly as the model wrote them (raw JSON text, not parsed)."""


AssistantBlock = Annotated[
    TextBlock | ReasoningBlock | ImageBlock | ToolCallBlock, Field(discriminator="type")
]
"""One block of an assistant message."""


class TurnStart(_Frozen):
    """A turn begins (usually with the user's message)."""

    type: Literal["turn_start"] = "turn_start"
    turn_id: _Id
    """The turn's id, unique in the session."""


class TurnEnd(_Frozen):
    """A turn ends."""

    type: Literal["turn_end"] = "turn_end"
    turn_id: _Id
    """The turn that ends; it must be open."""
    reason: EndReason
    """Why it ended."""


class StepStart(_Frozen):
    """A step begins: the model is called."""

    type: Literal["step_start"] = "step_start"
    step_id: _Id
    """The step's id, unique in the session."""
    turn_id: _Id
    """The open turn the step belongs to."""


class StepEnd(_Frozen):
    """A step ends: the model call and every tool execution it requested are done."""

    type: Literal["step_end"] = "step_end"
    step_id: _Id
    """The step that ends; it must be the running step."""


class UserMessage(_Frozen):
    """A user-role message."""

    type: Literal["user_message"] = "user_message"
    content: str
    """The message text."""
    source: MessageSource = MessageSource.USER
    """Who wrote it."""
    images: tuple[ImageBlock, ...] = ()
    """Images attached to it."""


class AssistantMessage(_Frozen):
    """What one model call returned, block by block."""

    type: Literal["assistant_message"] = "assistant_message"
    blocks: tuple[AssistantBlock, ...]
    """Text, reasoning, image and tool-call blocks in the order the model produced them."""


class ToolCall(_Frozen):
    """A call the host executed that is not a structured block of the model's message.

    Importers use it for actions parsed from text (SWE-agent's ``action``). A
    :class:`ToolCall` with the ``call_id`` of a :class:`ToolCallBlock` of the same step
    records the execution of that requested call; it is the same action, not a second one.
    """

    type: Literal["tool_call"] = "tool_call"
    call_id: _Id
    """The id that joins the call to its result."""
    name: str
    """The tool's name."""
    arguments: str
    """The raw arguments."""


class ToolResult(_Frozen):
    """What a tool call returned."""

    type: Literal["tool_result"] = "tool_result"
    call_id: _Id
    """The call it answers."""
    content: str
    """The result text."""
    error: bool = False
    """Whether the tool reported a failure."""
    images: tuple[ImageBlock, ...] = ()
    """Images the tool returned."""
    reasoning: tuple[ReasoningBlock, ...] = ()
    """Reasoning nested in the result (a sub-agent's thoughts); masked like the agent's own."""


Event = Annotated[
    TurnStart
    | TurnEnd
    | StepStart
    | StepEnd
    | UserMessage
    | AssistantMessage
    | ToolCall
    | ToolResult,
    Field(discriminator="type"),
]
"""One event of a session, discriminated by its ``type``."""
