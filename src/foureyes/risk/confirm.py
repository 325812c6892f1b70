"""Double confirmation and the generation policy: pure decisions over parsed assessments.

confirmed = L1 critical ∧ L2 critical ∧ both confidences ≥ ``risk.confirm_confidence``
∧ no context flag on either side. One model's word never confirms (docs/design.md 4,
invariant 5): without an L2 assessment nothing is confirmed, whatever L1 said.

The generation policy a triage sets for the Counselor:

==========================================  =========================================
triage outcome                              policy
==========================================  =========================================
``unknown`` (any failure, limit or drop)    ``restricted``
``unscreened`` (language not covered)       ``restricted``
``low`` or ``medium``                       ``normal``
``high``                                    ``restricted``
``critical``, not confirmed                 ``restricted``
``critical``, confirmed                     ``prohibited``
``unknown``: the store failed to record it  the one computed, at least ``restricted``
==========================================  =========================================

``restricted`` lets a reviewed reply through with code-rendered crisis resources;
``prohibited`` sends the code-rendered crisis reply only. An ``unknown`` triage happens
only after the keyword gate escalated (or the store failed), so it is never read as low:
resources are shown, and nothing is confirmed. A triage whose record failed keeps what it
computed for the reply (a confirmed crisis stays ``prohibited``) while it confirms nothing
(:meth:`~foureyes.risk.result.TriageResult.unrecorded`): degradation goes towards fewer
alerts and towards more restriction.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from foureyes.core.errors import UsageError
from foureyes.core.policy import GenerationPolicy
from foureyes.risk.assess import Assessment
from foureyes.risk.levels import RiskLevel

__all__ = ["Confirmation", "ConfirmationCheck", "combined_level", "confirm", "policy_for"]


class ConfirmationCheck(StrEnum):
    """A condition of double confirmation that did not hold."""

    L1_NOT_CRITICAL = "l1_not_critical"
    """L1's effective level is below critical."""
    L2_MISSING = "l2_missing"
    """There is no L2 assessment (not run, or it failed)."""
    L2_NOT_CRITICAL = "l2_not_critical"
    """L2's effective level is below critical."""
    L1_UNSURE = "l1_unsure"
    """L1's confidence is below the threshold."""
    L2_UNSURE = "l2_unsure"
    """L2's confidence is below the threshold."""
    CONTEXT_FLAG = "context_flag"
    """L1 or L2 set a context flag (fiction, quote, third party, joke)."""


@dataclass(frozen=True, slots=True)
class Confirmation:
    """The outcome of double confirmation: confirmed exactly when nothing is unmet."""

    unmet: frozenset[ConfirmationCheck]
    """The conditions that failed; empty when confirmed."""

    @property
    def confirmed(self) -> bool:
        """Whether every condition held."""
        return not self.unmet


def confirm(l1: Assessment, l2: Assessment | None, *, threshold: float) -> Confirmation:
    """Double confirmation of a crisis by two independent assessments.

    Args:
        l1: the L1 assessment.
        l2: the L2 assessment, or ``None`` when L2 did not run or failed.
        threshold: ``risk.confirm_confidence``; both confidences must reach it.
    """
    unmet: set[ConfirmationCheck] = set()
    if l1.level is not RiskLevel.CRITICAL:
        unmet.add(ConfirmationCheck.L1_NOT_CRITICAL)
    if l1.confidence < threshold:
        unmet.add(ConfirmationCheck.L1_UNSURE)
    if l2 is None:
        # Invariant 5: one model alone never confirms, so a missing L2 is a failed check.
        unmet.add(ConfirmationCheck.L2_MISSING)
    else:
        if l2.level is not RiskLevel.CRITICAL:
            unmet.add(ConfirmationCheck.L2_NOT_CRITICAL)
        if l2.confidence < threshold:
            unmet.add(ConfirmationCheck.L2_UNSURE)
    if l1.flagged or (l2 is not None and l2.flagged):
        unmet.add(ConfirmationCheck.CONTEXT_FLAG)
    return Confirmation(unmet=frozenset(unmet))


def combined_level(l1: Assessment, l2: Assessment | None) -> RiskLevel:
    """The triage's level: the higher of the two effective levels (L1's alone without L2).

    Taking the higher one only decides how much help is shown; alerting needs
    confirmation, which needs both to say critical.
    """
    return l1.level if l2 is None else max(l1.level, l2.level)


def policy_for(level: RiskLevel | None, *, confirmed: bool) -> GenerationPolicy:
    """The generation policy of a triage outcome (see the module's table).

    Args:
        level: the triage's level, or ``None`` when its status is ``unknown`` or
            ``unscreened``.
        confirmed: whether double confirmation held.

    Raises:
        UsageError: ``confirmed`` with a level other than critical (a bug upstream).
    """
    if confirmed and level is not RiskLevel.CRITICAL:
        raise UsageError(f"a confirmed triage must be critical, got {level}")
    if confirmed:
        return GenerationPolicy.PROHIBITED
    if level is None or level.is_elevated:
        return GenerationPolicy.RESTRICTED
    return GenerationPolicy.NORMAL
