"""What the Supervisor sees: assembled by the orchestrator, never by the Counselor.

The minimisation policy: the user's current message verbatim, at most ``history_turns``
earlier turns (the most recent ones), the candidate with its digest and its tool calls
(each as the canonical JSON its digest covers, :mod:`foureyes.gate.candidate`), the
sources the reply
may rely on (each with its id and origin), and the unknowns still open on the
conversation. A Counselor summary may come along, but only labelled as the Counselor's
own reading: it never replaces the user's words and never confirms anything, and it
cannot close an open unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from foureyes.core.digest import Proposal
from foureyes.gate.candidate import ToolCall

__all__ = ["ReviewInput", "Source", "Turn", "assemble_review_input"]

# Source ids and origins appear as attributes of a data block: no quotes, no line breaks.
_ATTRIBUTE = r'^[^"\r\n]{1,200}$'


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Turn(_Frozen):
    """One earlier turn of the conversation."""

    role: Literal["user", "assistant", "tool"]
    """Who wrote it: the user, the service (a reply that was delivered), or a tool (the
    result of an earlier assistant turn's call; guard mode and ``/v1/check`` only)."""
    text: str
    """What was written."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The calls an assistant turn made (shown to the Supervisor as data, like its text)."""


class Source(_Frozen):
    """A piece of material the reply may rely on."""

    id: str = Field(pattern=_ATTRIBUTE)
    """Stable id, cited in the trace."""
    origin: str = Field(pattern=_ATTRIBUTE)
    """Where it comes from (a catalogue, a document, a tool)."""
    text: str
    """Its content, shown to the Supervisor as data."""


@dataclass(frozen=True, slots=True)
class ReviewInput:
    """Everything one review is based on, and nothing more."""

    message: str
    """The user's current message, verbatim."""
    earlier: tuple[Turn, ...]
    """The earlier turns shown, oldest first (the most recent ``history_turns``)."""
    omitted_turns: int
    """Earlier turns left out by the minimisation policy."""
    candidate: str
    """The candidate reply, exactly as it would be delivered."""
    candidate_sha256: str
    """The SHA-256 of its text and tool calls, which the verdict must name."""
    tool_calls: tuple[ToolCall, ...]
    """The tool calls that come with the candidate (none for a Counselor draft)."""
    sources: tuple[Source, ...]
    """Material the reply may rely on."""
    open_unknowns: tuple[str | None, ...]
    """What earlier reviews said they could not judge, still open (``None``: one whose
    text the store does not keep)."""
    counselor_summary: str | None
    """The Counselor's summary of the conversation, shown as the Counselor's, unconfirmed."""


def assemble_review_input(
    *,
    message: str,
    history: Sequence[Turn],
    candidate: Proposal[str],
    sources: Sequence[Source],
    open_unknowns: Sequence[str | None],
    counselor_summary: str | None,
    history_turns: int,
    tool_calls: Sequence[ToolCall] = (),
) -> ReviewInput:
    """Build the review input for ``candidate`` under the minimisation policy.

    Args:
        message: the user's current message.
        history: earlier turns, oldest first.
        candidate: the Counselor's proposal; its digest is carried as is.
        sources: material the reply may rely on.
        open_unknowns: open unknowns of the conversation; all are passed on, whatever
            the summary says.
        counselor_summary: the Counselor's summary, if any.
        history_turns: how many earlier turns to keep at most.
        tool_calls: the candidate's tool calls (its digest covers them already).
    """
    shown = tuple(history[-history_turns:]) if history_turns else ()
    return ReviewInput(
        message=message,
        earlier=shown,
        omitted_turns=len(history) - len(shown),
        candidate=candidate.content,
        candidate_sha256=candidate.sha256,
        tool_calls=tuple(tool_calls),
        sources=tuple(sources),
        open_unknowns=tuple(open_unknowns),
        counselor_summary=counselor_summary,
    )
