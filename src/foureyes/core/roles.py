"""Roles: the jobs a model does; configuration maps each role to a route."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["CRISIS_ROLES", "Role"]


class Role(StrEnum):
    """A job a model does in foureyes. Values are the keys of the ``[roles]`` config table."""

    COUNSELOR = "counselor"
    """Drafts a candidate reply; has no path to the user."""
    SUPERVISOR = "supervisor"
    """Reviews one exact candidate (by digest) and returns a verdict."""
    RISK_L1 = "risk_l1"
    """First structured crisis-risk assessment of the current text."""
    RISK_L2 = "risk_l2"
    """Independent, blind second assessment, run only when L1 says high or critical."""
    REVIEWER = "reviewer"
    """One-shot masked reviewer of an agent session."""
    SELECTOR = "selector"
    """Selects ``(kind, evidence_ref)`` pairs; never writes facts."""
    PRIMARY = "primary"
    """The agent under evaluation in :mod:`foureyes.evals` (the agent loop's model)."""
    INPUT_CHECKER = "input_checker"
    """Judges one input (a message, a source, a tool result) by its digest (``[input]``)."""


CRISIS_ROLES = frozenset({Role.RISK_L1, Role.RISK_L2})
"""The crisis-assessment roles, whose share of a route they share is kept for them."""
