"""What the gate is asked to answer, and where a conversation's open unknowns are kept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.gate.review_input import Source, Turn

__all__ = ["OpenUnknowns", "ReplyRequest"]


class OpenUnknowns(Protocol):
    """Where a conversation's open unknowns are kept (``foureyes.store`` has one)."""

    async def open(self, conversation_id: str, *, limit: int) -> tuple[str, ...]:
        """The open unknowns of a conversation, most recent first, at most ``limit``."""
        ...

    async def add(self, conversation_id: str, texts: Sequence[str], *, trace_id: str) -> None:
        """Record unknowns raised by the run ``trace_id``; known ones stay open as they are."""
        ...


class ReplyRequest(BaseModel):
    """One user message for the gate to answer."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    message: str
    """The user's current message."""
    history: tuple[Turn, ...] = ()
    """Earlier turns, oldest first."""
    conversation_id: str | None = Field(default=None, min_length=1, max_length=256)
    """The conversation; needed to keep open unknowns across messages."""
    policy: GenerationPolicy = GenerationPolicy.NORMAL
    """What triage allows; no approval lifts a prohibition."""
    sources: tuple[Source, ...] = ()
    """Material the reply may rely on."""
    region: str | None = Field(default=None, pattern=r"^[A-Z]{2}$")
    """The user's region (ISO 3166-1 alpha-2); ``gate.region`` when unset."""
    locale: Locale | None = None
    """Language of code-rendered text; ``gate.locale`` (or the message's) when unset."""
    counselor_summary: str | None = None
    """A Counselor summary of the conversation, shown to the Supervisor as unconfirmed."""
