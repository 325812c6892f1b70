"""The request of ``POST /v1/assess`` (and :meth:`foureyes.Guard.triage`), and its triage.

One text, its conversation and earlier turns: :func:`triage_request` turns the body into
the request :class:`~foureyes.risk.triage.Triage` assesses, for the caller's tenant.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from foureyes.core.tenancy import new_conversation_id
from foureyes.risk.assess import Turn as RiskTurn
from foureyes.risk.result import RunPurpose
from foureyes.risk.triage import TriageRequest
from foureyes.wire.text import MessageText, Text

__all__ = ["AssessBody", "HistoryTurn", "triage_request"]


class HistoryTurn(BaseModel):
    """One earlier turn in the body of ``POST /v1/assess``."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    role: Literal["user", "assistant"]
    """Who wrote it: the user, or the service."""
    text: MessageText
    """What was written."""


class AssessBody(BaseModel):
    """The body of ``POST /v1/assess``."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    text: MessageText = Field(min_length=1)
    """The text to triage."""
    conversation_id: Text | None = Field(default=None, min_length=1, max_length=256)
    """The caller's conversation (single flight, daily L1 limit, trend), kept under the
    caller's key; a fresh one when unset (the key's daily L1 limit still counts it)."""
    history: tuple[HistoryTurn, ...] = ()
    """Earlier turns, oldest first (L2 sees the last ``risk.context_turns``)."""
    purpose: Literal["live", "test"] = "live"
    """``test`` triages are kept apart from live ones."""
    region: str | None = Field(default=None, pattern=r"^[A-Z]{2}$")
    """The user's region, for the resources shown."""


def triage_request(body: AssessBody, *, tenant: str) -> TriageRequest:
    """What triage assesses for ``body`` from ``tenant``: a fresh conversation when unset."""
    return TriageRequest(
        text=body.text,
        conversation_id=body.conversation_id or new_conversation_id(),
        tenant=tenant,
        history=[RiskTurn(t.role, t.text) for t in body.history],
        purpose=RunPurpose(body.purpose),
    )
