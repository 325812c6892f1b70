"""The provider contract: one async chat completion, whatever the endpoint."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from foureyes.core.roles import Role

__all__ = [
    "ChatMessage",
    "ChatRequest",
    "ChatResult",
    "ImagePart",
    "JsonSchemaFormat",
    "Provider",
    "StreamingProvider",
    "TextDelta",
    "TextPart",
    "ToolCall",
    "Usage",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class ToolCall(_Frozen):
    """A tool call requested by the model, arguments kept raw as the model wrote them."""

    id: str
    """The call id that joins it to its ``tool`` result message."""
    name: str
    """Function name."""
    arguments: str
    """Arguments as the model's raw JSON text (not parsed here)."""


class TextPart(_Frozen):
    """A text block of a multi-part message."""

    type: Literal["text"] = "text"
    text: str
    """The text."""


class ImagePart(_Frozen):
    """An image block of a multi-part message, by URL (``https:`` or ``data:``)."""

    type: Literal["image_url"] = "image_url"
    url: str
    """Where the image is; sent as ``image_url.url``."""


class ChatMessage(_Frozen):
    """One message of an OpenAI-format conversation."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    """Who speaks (``developer``: a client's own instructions, passed through as given)."""
    content: str | tuple[TextPart | ImagePart, ...] | None = None
    """Visible text, or text and image blocks (``None`` for a turn that only calls tools)."""
    reasoning_content: str | None = None
    """DeepSeek-style reasoning of an assistant turn; passed back within a tool loop."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tool calls of an assistant turn."""
    tool_call_id: str | None = None
    """For ``tool`` messages: the call this result answers."""
    name: str | None = None
    """Optional participant or tool name."""

    @property
    def text(self) -> str:
        """The visible text: the content, or its text blocks joined by newlines."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))

    def to_wire(self) -> dict[str, Any]:
        """The message as the OpenAI chat-completions API expects it."""
        content: Any = self.content
        if isinstance(content, tuple):
            content = [
                {"type": "text", "text": p.text}
                if isinstance(p, TextPart)
                else {"type": "image_url", "image_url": {"url": p.url}}
                for p in content
            ]
        wire: dict[str, Any] = {"role": self.role, "content": content}
        if self.name is not None:
            wire["name"] = self.name
        if self.tool_call_id is not None:
            wire["tool_call_id"] = self.tool_call_id
        if self.tool_calls:
            wire["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        # DeepSeek thinking mode rejects a tool loop whose assistant turns lost their
        # reasoning, so it is sent back exactly when the turn called tools.
        if self.reasoning_content is not None and self.tool_calls:
            wire["reasoning_content"] = self.reasoning_content
        return wire

    @classmethod
    def system(cls, content: str) -> ChatMessage:
        """A system message."""
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> ChatMessage:
        """A user message."""
        return cls(role="user", content=content)


class JsonSchemaFormat(_Frozen):
    """Ask the endpoint for JSON matching a schema (``response_format: json_schema``)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """Schema name sent to the API."""
    schema_: dict[str, Any] = Field(alias="schema")
    """The JSON schema."""
    strict: bool = False
    """Ask the endpoint to enforce the schema (not all endpoints can); we validate anyway."""


class ChatRequest(_Frozen):
    """One chat-completion call as a capability asks for it."""

    messages: tuple[ChatMessage, ...] = Field(min_length=1)
    """The conversation to complete."""
    role: Role | None = None
    """Which role is calling (for the offline engine, traces and metrics)."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Overrides the route's ``max_tokens`` when set."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    """Overrides the route's temperature when set."""
    response_format: JsonSchemaFormat | Literal["json_object"] | None = None
    """Structured-output request; the parser validates whatever comes back."""
    tools: tuple[Mapping[str, Any], ...] = ()
    """OpenAI tool specs, passed through as given."""
    tool_choice: str | Mapping[str, Any] | None = None
    """OpenAI's ``tool_choice`` (``"auto"``, ``"none"``, ``"required"`` or a named
    function), passed through as given; ``None``: not sent."""
    seed: int | None = None
    """OpenAI's ``seed`` (best-effort determinism, where the route takes one); ``None``:
    not sent."""
    subject: Mapping[str, str] = Field(default_factory=dict)
    """Named inputs the offline engine reads instead of parsing the prompt (``user_message``:
    the user's own words; capabilities add their own keys); never sent to an endpoint."""


class Usage(_Frozen):
    """Token counts reported for one call."""

    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    reasoning_tokens: int | None = Field(default=None, ge=0)
    """Completion tokens spent on reasoning (``completion_tokens_details.reasoning_tokens``);
    ``None`` when the endpoint did not report them (unknown, not zero)."""
    cached_tokens: int | None = Field(default=None, ge=0)
    """Prompt tokens served from the provider's prompt cache
    (``prompt_tokens_details.cached_tokens``, DeepSeek's ``prompt_cache_hit_tokens``);
    ``None`` when not reported."""

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        """The usage of two calls together; a count either call did not report is unknown."""

        def known(a: int | None, b: int | None) -> int | None:
            return None if a is None or b is None else a + b

        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            reasoning_tokens=known(self.reasoning_tokens, other.reasoning_tokens),
            cached_tokens=known(self.cached_tokens, other.cached_tokens),
        )


class ChatResult(_Frozen):
    """What one completed call returned."""

    text: str
    """The visible completion text (empty when the model only called tools)."""
    reasoning_content: str | None = None
    """Reasoning the API returned alongside, when it gives it."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tool calls requested."""
    finish_reason: str | None = None
    """The API's finish reason (``stop``, ``length``, ``tool_calls``, ...)."""
    usage: Usage = Usage()
    """Token usage."""
    latency_s: float = Field(ge=0)
    """Wall time of the call in seconds."""
    route: str
    """Route that served it."""
    model: str
    """Model name the endpoint reported (or was asked for)."""
    offline: bool = False
    """True when the built-in offline engine produced it."""

    def as_assistant_message(self) -> ChatMessage:
        """This result as the assistant turn to append in a tool loop (reasoning kept)."""
        return ChatMessage(
            role="assistant",
            content=self.text or None,
            reasoning_content=self.reasoning_content,
            tool_calls=self.tool_calls,
        )


class Provider(Protocol):
    """An endpoint that completes chats. One instance per route, shared by all callers.

    ``complete`` raises only :class:`~foureyes.core.errors.RouteError` subclasses for
    endpoint failures; the caller turns them into reason codes.
    """

    route: str
    """The route name this provider serves."""

    async def complete(self, request: ChatRequest, *, timeout_s: float) -> ChatResult:
        """Complete ``request`` within ``timeout_s`` seconds.

        Raises:
            RouteTimeout: no complete answer in time.
            RouteConnectionError: the endpoint was unreachable.
            RouteHTTPError: an HTTP error status (``RouteRateLimited`` for 429).
            RouteBadResponse: an answer that is not a usable completion.
        """
        ...

    async def aclose(self) -> None:
        """Release connections; the provider is unusable afterwards."""
        ...


TextDelta = Callable[[str], None]
"""Called with each piece of a streamed completion's visible text, in order."""


@runtime_checkable
class StreamingProvider(Provider, Protocol):
    """A provider that can also stream a completion's text as the endpoint writes it."""

    async def complete_streaming(
        self, request: ChatRequest, *, timeout_s: float, on_text: TextDelta
    ) -> ChatResult:
        """Complete ``request`` as :meth:`complete` does, passing text pieces to ``on_text``.

        The result is the whole completion, as :meth:`complete` returns it; the pieces
        joined are its ``text``. A stream that ends without a finish reason returns a
        result whose ``finish_reason`` is ``None`` (the one finish rule refuses it).

        Raises:
            The errors of :meth:`complete`.
        """
        ...
