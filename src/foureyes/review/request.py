"""Review requests: a projection turned into the one chat request a reviewer is sent.

Two modes:

- ``cache-aligned``: the primary's own system prompt and tools (and, chosen by the
  caller, its route), then the native prefix, then the snapshot, then the review
  instruction as the last new user message. The request shares the longest possible
  prefix with the primary's, so a provider's KV cache can serve that prefix.
- ``reviewer-persona``: the reviewer's own system prompt (with
  :data:`~foureyes.llm.prompting.DATA_RULE`), read-only tools if any (and, chosen by the
  caller, perhaps a stronger route), then the same prefix, snapshot and instruction.

Each :class:`ReviewRequest` reports the share of its bytes that is an identical prefix
of the primary's request: both requests are measured as units the way chat templates
lay them out (the tool definitions, then each message as canonical JSON of its wire form)
and the shared prefix is the run of leading units that are byte-identical. For
``cache-aligned`` it equals the theoretical maximum, the bytes before the first masked
event (system, tools and native prefix).

The whole request is held to the reviewer route's token budget: :func:`estimate_tokens`
is the one estimator (bytes of the request's units over the route's ``bytes_per_token``,
rounded up; no tokenizer needed), and a review whose estimate exceeds the route's
``max_request_tokens`` is skipped by the caller, never truncated.

Pure and synchronous: values in, value out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from foureyes.core.digest import canonical_json
from foureyes.core.roles import Role
from foureyes.llm.prompting import DATA_RULE
from foureyes.llm.provider import ChatMessage, ChatRequest
from foureyes.review.projection import Projection, native_messages
from foureyes.review.session import Session

__all__ = [
    "DEFAULT_PERSONA",
    "DEFAULT_PERSONA_WITH_TOOLS",
    "RequestMode",
    "ReviewRequest",
    "build_review_request",
    "estimate_tokens",
    "primary_messages",
    "request_units",
    "shared_prefix_bytes",
]

DEFAULT_PERSONA = (
    "You are an independent reviewer of another AI agent's work session. You take no "
    "actions and call no tools; you read what the agent was asked, what it said and did, "
    "and what its actions returned, and you report only what you can support from that."
)
"""The reviewer's system prompt in ``reviewer-persona`` mode when none is given."""

DEFAULT_PERSONA_WITH_TOOLS = (
    "You are an independent reviewer of another AI agent's work session. You take no "
    "actions; the tools offered only read, and you may call them to check what the agent "
    "did before you answer. You read what the agent was asked, what it said and did, and "
    "what its actions returned, and you report only what you can support from that."
)
"""The default ``reviewer-persona`` system prompt when read-only tools are offered."""


class RequestMode(StrEnum):
    """How a review request is built."""

    CACHE_ALIGNED = "cache-aligned"
    """The primary's system prompt and tools; the longest prefix shared with its request."""
    REVIEWER_PERSONA = "reviewer-persona"
    """The reviewer's own system prompt and read-only tools."""


@dataclass(frozen=True)
class ReviewRequest:
    """A review request and how much of it the primary's request already holds."""

    request: ChatRequest
    """The request to send (role ``reviewer``)."""
    mode: RequestMode
    """How it was built."""
    prefix_share: float
    """``prefix_bytes / total_bytes``: the share a provider's prefix cache can reuse."""
    prefix_bytes: int
    """Bytes of the leading units identical to the primary's request."""
    total_bytes: int
    """Bytes of the whole request (see :func:`request_units`)."""


def build_review_request(
    session: Session,
    projection: Projection,
    mode: RequestMode,
    *,
    instruction: str,
    primary_system: str | None = None,
    primary_tools: Sequence[Mapping[str, Any]] = (),
    persona_system: str | None = None,
    persona_tools: Sequence[Mapping[str, Any]] = (),
) -> ReviewRequest:
    """Build the review request for ``projection`` of ``session``.

    Args:
        session: the projected session (read only; the primary's request is rebuilt from it).
        projection: the projection of ``session`` to review.
        mode: ``cache-aligned`` or ``reviewer-persona``.
        instruction: the review instruction, sent as the last user message.
        primary_system: the primary's system prompt; by default the session's system
            messages.
        primary_tools: the primary's tools; by default the session's.
        persona_system: the reviewer's system prompt (``reviewer-persona``); by default
            :data:`DEFAULT_PERSONA` (:data:`DEFAULT_PERSONA_WITH_TOOLS` with tools).
            :data:`~foureyes.llm.prompting.DATA_RULE` is added when it is not already there.
        persona_tools: read-only tools offered in ``reviewer-persona`` mode.
    """
    primary_tools = tuple(primary_tools) or session.tools
    tail = (*projection.prefix, projection.snapshot, ChatMessage.user(instruction))
    if mode is RequestMode.CACHE_ALIGNED:
        system = _system_messages(session, primary_system)
        tools = primary_tools
    else:
        default = DEFAULT_PERSONA_WITH_TOOLS if persona_tools else DEFAULT_PERSONA
        persona = persona_system or default
        if DATA_RULE not in persona:
            persona = f"{persona}\n\n{DATA_RULE}"
        system = (ChatMessage.system(persona),)
        tools = tuple(persona_tools)
    request = ChatRequest(
        messages=(*system, *tail),
        role=Role.REVIEWER,
        tools=tools,
        subject={"review_snapshot": projection.snapshot.text, "review_instruction": instruction},
    )
    units = request_units(request.messages, request.tools)
    primary = primary_messages(session, primary_system=primary_system)
    shared = shared_prefix_bytes(units, request_units(primary, primary_tools))
    total = sum(len(u) for u in units)
    return ReviewRequest(request, mode, shared / total, shared, total)


def estimate_tokens(request: ReviewRequest, bytes_per_token: float) -> int:
    """Estimated prompt tokens of ``request``: ``total_bytes / bytes_per_token``, rounded up.

    ``total_bytes`` covers the system messages, the tools, the prefix, the snapshot and the
    instruction (see :func:`request_units`).

    Raises:
        ValueError: ``bytes_per_token`` is not positive.
    """
    if not bytes_per_token > 0:
        raise ValueError(f"bytes_per_token must be positive, got {bytes_per_token!r}")
    return math.ceil(request.total_bytes / bytes_per_token)


def primary_messages(
    session: Session, *, primary_system: str | None = None
) -> tuple[ChatMessage, ...]:
    """The primary's context as it stands: its system messages and its whole history.

    This is what the primary model was last sent plus what it answered, rendered the way
    a projection's prefix is, so the two compare byte for byte (with the primary's tools,
    the session's unless given, in :func:`request_units`).
    """
    return (*_system_messages(session, primary_system), *native_messages(session))


def _system_messages(session: Session, primary_system: str | None) -> tuple[ChatMessage, ...]:
    system = (primary_system,) if primary_system is not None else session.system
    return tuple(ChatMessage.system(s) for s in system)


def request_units(
    messages: Sequence[ChatMessage], tools: Sequence[Mapping[str, Any]] = ()
) -> list[bytes]:
    """A request as the units a prefix cache sees, in order: the tools, then each message.

    Each unit is canonical JSON; tools come first because chat templates render tool
    definitions ahead of the conversation.
    """
    units = [canonical_json(list(tools))] if tools else []
    units.extend(canonical_json(m.to_wire()) for m in messages)
    return units


def shared_prefix_bytes(units: Sequence[bytes], other: Sequence[bytes]) -> int:
    """Bytes of the leading units of ``units`` that equal ``other``'s, unit by unit."""
    shared = 0
    for mine, theirs in zip(units, other, strict=False):
        if mine != theirs:
            break
        shared += len(mine)
    return shared
