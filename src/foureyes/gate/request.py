"""What the gate is asked to answer, and where a conversation's open unknowns are kept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.gate.review_input import Source, Turn

__all__ = ["KeptUnknown", "OpenUnknowns", "ReplyRequest"]


class KeptUnknown(Protocol):
    """One open unknown as the store gives it back."""

    @property
    def id(self) -> str:
        """Its id in the store."""
        ...

    @property
    def words(self) -> str | None:
        """What a Supervisor said it lacked, for the next prompts; ``None`` when gone.

        The store keeps them (sealed at rest) while the unknown is open, whatever
        ``privacy.store_raw_text`` says, until ``privacy.unknown_retention_days`` after
        it was last raised; they are gone past it, or when they no longer open (the key
        changed), and the prompts then say that its wording is not kept.
        """
        ...


class OpenUnknowns(Protocol):
    """Where a conversation's open unknowns are kept (``foureyes.store`` has one)."""

    async def open(self, conversation_id: str, *, limit: int) -> Sequence[KeptUnknown]:
        """The open unknowns of a conversation, most recent first, at most ``limit``."""
        ...

    async def settle(
        self,
        conversation_id: str,
        *,
        trace_id: str,
        raised: Sequence[str] = (),
        shown: Sequence[str] = (),
        listed: Sequence[str] = (),
    ) -> int:
        """Record what run ``trace_id``'s verdict said, in one write; how many it resolved.

        ``raised`` texts are kept open (known ones stay open as they are); each unknown
        of ``shown`` (ids) is resolved unless ``listed`` (texts) names it again.
        """
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
