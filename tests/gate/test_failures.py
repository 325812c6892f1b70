from __future__ import annotations

import pytest

from foureyes.core.errors import (
    BudgetExhausted,
    ConfigError,
    ContractError,
    DeadlineExceeded,
    FoureyesError,
    RouteBadResponse,
    RouteConnectionError,
    RouteHTTPError,
    RouteRateLimited,
    RouteTimeout,
    StoreError,
)
from foureyes.core.reasons import ReasonCode
from foureyes.gate import STAGE_FAILURES, Stage, reason_for

R = ReasonCode
ERRORS: dict[str, FoureyesError] = {
    "timeout": RouteTimeout("r", 1.0),
    "connection": RouteConnectionError("r"),
    "http": RouteHTTPError("r", 500),
    "rate_limited": RouteRateLimited("r", 2.0),
    "bad_response": RouteBadResponse("r", "no choices"),
    "contract": ContractError("Verdict", "no_json"),
    "deadline": DeadlineExceeded("deadline", 31, 30),
    "budget": BudgetExhausted("calls", 7, 6),
}
EXPECTED = {
    Stage.DRAFT: {
        "timeout": R.DRAFT_FAILED,
        "connection": R.DRAFT_FAILED,
        "http": R.DRAFT_FAILED,
        "rate_limited": R.DRAFT_FAILED,
        "bad_response": R.DRAFT_FAILED,
        "contract": R.DRAFT_FAILED,
        "deadline": R.DEADLINE_EXCEEDED,
        "budget": R.BUDGET_EXHAUSTED,
    },
    Stage.REVIEW: {
        "timeout": R.REVIEW_TIMEOUT,
        "connection": R.REVIEW_FAILED,
        "http": R.REVIEW_FAILED,
        "rate_limited": R.REVIEW_FAILED,
        "bad_response": R.REVIEW_FAILED,
        "contract": R.REVIEW_MALFORMED,
        "deadline": R.DEADLINE_EXCEEDED,
        "budget": R.BUDGET_EXHAUSTED,
    },
}
PAIRS = [(stage, name) for stage in Stage for name in ERRORS]


@pytest.mark.parametrize(("stage", "error"), PAIRS, ids=[f"{s}-{e}" for s, e in PAIRS])
def test_every_stage_and_error_pair(stage: Stage, error: str) -> None:
    assert reason_for(stage, ERRORS[error]) is EXPECTED[stage][error]


@pytest.mark.parametrize("stage", list(Stage))
def test_a_timeout_after_the_deadline_is_the_deadlines(stage: Stage) -> None:
    assert reason_for(stage, ERRORS["timeout"], deadline_passed=True) is R.DEADLINE_EXCEEDED
    assert reason_for(stage, ERRORS["http"], deadline_passed=True) is EXPECTED[stage]["http"]


@pytest.mark.parametrize("stage", list(Stage))
def test_errors_no_stage_expects_propagate(stage: Stage) -> None:
    assert reason_for(stage, StoreError("append")) is None
    assert reason_for(stage, ConfigError(["x"])) is None


def test_the_tables_map_only_to_fallback_reasons() -> None:
    for table in STAGE_FAILURES.values():
        assert all(reason.is_fallback for reason in table.values())
