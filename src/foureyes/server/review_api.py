"""``POST /v1/review``: a masked review of a session sent as JSON (the manual trigger).

The body carries the session either as OpenAI chat-format ``messages`` (with ``tools``)
or as native ``events`` (with ``system`` and ``tools``), plus the window, the mask and
the request mode. The answer is the review as data: the projection's metadata, the
request's prefix share, the outcome (an accepted packet, or none and why) and the
publication message, if the reviewer's policy publishes the packet. A skipped projection
or a review without a packet is a ``200`` result; only a body that is not a session is
an error (``422``).

``POST /v1/review/deliberate`` is its sibling for an agent's ``deliberate`` tool call
(:mod:`foureyes.review.deliberate`): the same session fields, plus the call's raw
``arguments`` string instead of the window, mask and mode. The answer is the call's result:
its status and reason code, whether it is a tool error, the tool result ``content`` to
give the agent, and the review as data (``null`` when the arguments were refused).
Arguments the model got wrong are a ``200`` result with status ``refused``; only a body
that is not a session is a ``422``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from foureyes.review.deliberate import run_deliberate
from foureyes.review.importers import SessionFormat, parse_session
from foureyes.review.projection import Mask, Window
from foureyes.review.request import RequestMode
from foureyes.review.reviewer import Reviewer, project_session, projection_json
from foureyes.review.session import NATIVE_FORMAT, NATIVE_VERSION, Session, SessionFormatError
from foureyes.server.errors import error_responses
from foureyes.server.text import TEXT_CHECK, JsonObject, Text

__all__ = ["DeliberateBody", "ReviewBody", "review_router"]


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


_SESSION_RULE = (
    "A rule the request schema cannot express: the free-form ``messages`` or ``events`` are "
    "a session of their format (OpenAI chat messages, or native events). A body the schema "
    "allows whose session is not one is a 422 whose ``error.message`` is an object "
    '``{"format", "reason", "detail"}`` (``code`` ``null``). An empty session is not an '
    "error: it is a ``200`` skipped as ``empty_session``."
)


def review_router(reviewer: Callable[[Request], Reviewer]) -> APIRouter:
    """The router serving ``POST /v1/review`` and ``POST /v1/review/deliberate``.

    Args:
        reviewer: returns the :class:`~foureyes.review.reviewer.Reviewer` for a request
            (typically one built at start-up and kept in ``app.state``).
    """
    router = APIRouter()

    async def review(body: ReviewBody, request: Request) -> dict[str, Any]:
        """Review one session through a window and a mask; one reviewer call at most."""
        session = _session(body)
        chosen = reviewer(request)
        window = Window.parse(body.window)
        if body.project_only:
            projection = project_session(
                session, window, body.mask, chosen.config, images=chosen.runner.accepts_images
            )
            return {"ok": True, **projection_json(projection)}
        result = await chosen.review(
            session, window=window, mask=body.mask, mode=body.mode, session_id=body.session_id
        )
        return {"ok": True, **result.as_json()}

    async def deliberate(body: DeliberateBody, request: Request) -> dict[str, Any]:
        """Carry out an agent's ``deliberate`` call on its session; one reviewer call at most."""
        session = _session(body)
        result = await run_deliberate(
            reviewer(request), session, body.arguments, session_id=body.session_id
        )
        return {"ok": True, **result.as_json()}

    responses = error_responses(400, 408, 413, 422)
    responses[422] = responses[422] | {
        "description": f"{responses[422]['description']} {_SESSION_RULE}"
    }
    for path, endpoint in (("/v1/review", review), ("/v1/review/deliberate", deliberate)):
        router.add_api_route(
            path,
            endpoint,
            methods=["POST"],
            tags=["review"],
            responses=responses,
            description=f"{inspect.getdoc(endpoint)}\n\n{_SESSION_RULE}",
        )
    return router


def _session(body: _SessionBody) -> Session:
    try:
        return body.session()
    except SessionFormatError as exc:
        problem = {"format": exc.schema, "reason": exc.reason, "detail": exc.detail}
        raise HTTPException(status_code=422, detail=problem) from None
