"""The requests of ``POST /v1/review`` and ``POST /v1/review/deliberate`` (and the Guard's).

A session, as OpenAI chat-format ``messages`` (with ``tools``) or as native ``events``
(with ``system`` and ``tools``): :meth:`ReviewBody.session` reads it through the same
importers as ``foureyes review``, so the endpoint, :meth:`foureyes.Guard.review` and the
command line see the same session. :class:`ReviewBody` adds the window, the mask and the
request mode; :class:`DeliberateBody` an agent's ``deliberate`` call's ``arguments``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from foureyes.review.importers import SessionFormat, parse_session
from foureyes.review.projection import Mask, Window
from foureyes.review.request import RequestMode
from foureyes.review.session import NATIVE_FORMAT, NATIVE_VERSION, Session
from foureyes.wire.text import TEXT_CHECK, JsonObject, Text

__all__ = ["DeliberateBody", "ReviewBody"]


# What Window.parse reads (it strips the spec first).
def _absent(schema: dict[str, Any]) -> None:
    # Left out, not null: the document shows no null default for a field that takes none.
    schema.pop("default", None)


# Checked before the union, so a refused text's location has no branch name in it.
_Session = Annotated[list[JsonObject] | SkipJsonSchema[None], TEXT_CHECK]
# Spaces spelled out: ``\s`` is another set in each of ECMA-262 (the document's), Python
# and pydantic's Rust engine (U+001C, U+0085, U+FEFF), so a window that one engine takes
# another refused.
_WINDOW = (
    r"^[\t\n\v\f\r ]*(current-turn|since-last-mutation|all-turns|recent:0*[1-9][0-9]*)"
    r"[\t\n\v\f\r ]*$"
)


class _SessionBody(BaseModel):
    """One session, as OpenAI chat-format messages or native events (either review body)."""

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        # The document says what the validators below refuse: exactly one of
        # ``messages`` and ``events``, and ``system`` only with ``events``.
        json_schema_extra={
            "oneOf": [
                {
                    "required": ["messages"],
                    "not": {"required": ["events"]},
                    "properties": {"system": {"maxItems": 0}},
                },
                {"required": ["events"], "not": {"required": ["messages"]}},
            ]
        },
    )

    messages: _Session = Field(None, json_schema_extra=_absent)
    """The session as OpenAI chat-format messages (``reasoning_content``, ``tool_calls``,
    ``tool`` messages); give this or ``events``."""
    events: _Session = Field(None, json_schema_extra=_absent)
    """The session as native events (as ``foureyes`` JSONL lines); give this or ``messages``."""
    system: list[Text] = Field(default_factory=list)
    """The primary's system messages, with ``events`` (``messages`` carry their own)."""
    tools: list[JsonObject] = Field(default_factory=list)
    """The primary's tool definitions (OpenAI ``tools`` entries)."""
    session_id: Text | None = Field(default=None, max_length=200)
    """The caller's id of the session, recorded in the trace."""

    @field_validator("messages", "events", mode="before")
    @classmethod
    def _absent_not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("leave the field out rather than null")
        return value

    @model_validator(mode="after")
    def _one_session(self) -> _SessionBody:
        if (self.messages is None) == (self.events is None):
            raise ValueError("give the session as either 'messages' or 'events'")
        if self.messages is not None and self.system:
            raise ValueError("'system' goes with 'events'; put system messages in 'messages'")
        return self

    def session(self) -> Session:
        """The session the body carries.

        Raises:
            SessionFormatError: the messages or events are not a valid session.
        """
        if self.messages is not None:
            body = {"messages": self.messages, "tools": self.tools}
            return parse_session(json.dumps(body), SessionFormat.OPENAI_CHAT)
        header = {
            "format": NATIVE_FORMAT,
            "version": NATIVE_VERSION,
            "system": self.system,
            "tools": self.tools,
        }
        lines = [json.dumps(header), *(json.dumps(event) for event in self.events or [])]
        return parse_session("\n".join(lines) + "\n", SessionFormat.NATIVE)


class ReviewBody(_SessionBody):
    """The body of ``POST /v1/review``: one session and how to review it."""

    window: Text = Field(default="recent:3", pattern=_WINDOW)
    """``recent:K`` (K >= 1), ``since-last-mutation``, ``current-turn`` or ``all-turns``."""
    mask: Mask = Mask.REASONING_ONLY
    """What the reviewer does not see."""
    mode: RequestMode = RequestMode.CACHE_ALIGNED
    """How the review request is built."""
    project_only: bool = False
    """Return the projection and its metadata without calling a model."""

    @model_validator(mode="after")
    def _window(self) -> ReviewBody:
        Window.parse(self.window)
        return self


class DeliberateBody(_SessionBody):
    """The body of ``POST /v1/review/deliberate``: a session and an agent's ``deliberate`` call.

    The session is the agent's as it stands at the call: with ``messages``, ending with
    the assistant message that calls ``deliberate`` (that step stays in flight and is not
    reviewed).
    """

    arguments: Text = Field(max_length=10_000)
    """The ``deliberate`` call's ``arguments`` string, exactly as the model wrote it
    (``{"role": ..., "recentSteps": ...}``); arguments it got wrong are a ``refused``
    result, not an error."""
