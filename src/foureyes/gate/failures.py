"""Which reason code each failure becomes, one table per stage of the gate.

The same exception means different things in different stages: a ``RouteTimeout`` while
drafting leaves nothing to review (``draft_failed``), while reviewing it leaves a draft
nobody judged (``review_timeout``). Each stage therefore has its own table, looked up by
the error's class from the most specific to the most general. An error no table names
(``StoreError``, ``ConfigError``, a ``UsageError`` bug) is not an expected failure of the
gate and propagates.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from foureyes.core.errors import (
    BudgetExhausted,
    ContractError,
    DeadlineExceeded,
    FoureyesError,
    RouteError,
    RouteTimeout,
)
from foureyes.core.reasons import ReasonCode

__all__ = ["STAGE_FAILURES", "Stage", "reason_for"]


class Stage(StrEnum):
    """A stage of the gate that calls a model."""

    DRAFT = "draft"
    """The Counselor writes (or revises) the candidate."""
    REVIEW = "review"
    """The Supervisor judges the candidate."""


STAGE_FAILURES: Mapping[Stage, Mapping[type[FoureyesError], ReasonCode]] = MappingProxyType(
    {
        Stage.DRAFT: MappingProxyType(
            {
                DeadlineExceeded: ReasonCode.DEADLINE_EXCEEDED,
                BudgetExhausted: ReasonCode.BUDGET_EXHAUSTED,
                RouteError: ReasonCode.DRAFT_FAILED,
                ContractError: ReasonCode.DRAFT_FAILED,
            }
        ),
        Stage.REVIEW: MappingProxyType(
            {
                DeadlineExceeded: ReasonCode.DEADLINE_EXCEEDED,
                BudgetExhausted: ReasonCode.BUDGET_EXHAUSTED,
                RouteTimeout: ReasonCode.REVIEW_TIMEOUT,
                RouteError: ReasonCode.REVIEW_FAILED,
                ContractError: ReasonCode.REVIEW_MALFORMED,
            }
        ),
    }
)
"""Per stage, the error classes it expects and the reason code each becomes."""


def reason_for(
    stage: Stage, error: FoureyesError, *, deadline_passed: bool = False
) -> ReasonCode | None:
    """The reason ``error`` becomes in ``stage``; ``None`` when the stage does not expect it.

    Args:
        stage: where the error happened.
        error: what was raised.
        deadline_passed: whether the run's deadline ended the call. A call's timeout is
            cut to the time the run has left, so a ``RouteTimeout`` the deadline caused
            is ``deadline_exceeded``, in every stage.
    """
    if deadline_passed and isinstance(error, RouteTimeout):
        return ReasonCode.DEADLINE_EXCEEDED
    table = STAGE_FAILURES[stage]
    for cls in type(error).__mro__:
        if cls in table:
            return table[cls]
    return None
