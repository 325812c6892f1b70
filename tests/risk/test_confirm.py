"""Double confirmation as a truth table, and the generation policy of each outcome."""

from __future__ import annotations

import itertools

import pytest

from foureyes.core.errors import UsageError
from foureyes.core.policy import GenerationPolicy
from foureyes.risk.assess import Assessment, Tier, parse_assessment
from foureyes.risk.confirm import ConfirmationCheck, combined_level, confirm, policy_for
from foureyes.risk.levels import RiskLevel
from tests.helpers.answers import answer

THRESHOLD = 0.85


def assessment(tier: Tier, level: RiskLevel, sure: bool, flagged: bool) -> Assessment:
    confidence = THRESHOLD if sure else 0.84
    flags = ["fiction"] if flagged else []
    return parse_assessment(answer(level.value, confidence, flags=flags), tier)  # type: ignore[arg-type]


SIDE = list(itertools.product([RiskLevel.HIGH, RiskLevel.CRITICAL], [False, True], [False, True]))


@pytest.mark.parametrize("l2_side", [None, *SIDE])
@pytest.mark.parametrize("l1_side", SIDE)
def test_truth_table(
    l1_side: tuple[RiskLevel, bool, bool], l2_side: tuple[RiskLevel, bool, bool] | None
) -> None:
    l1 = assessment(Tier.L1, *l1_side)
    l2 = None if l2_side is None else assessment(Tier.L2, *l2_side)
    # The rule, spelled out from the issue: L1 critical ∧ L2 critical ∧ both confidences
    # ≥ threshold ∧ no context flag on either side.
    expected = (
        l2_side is not None
        and l1_side == (RiskLevel.CRITICAL, True, False)
        and l2_side == (RiskLevel.CRITICAL, True, False)
    )
    outcome = confirm(l1, l2, threshold=THRESHOLD)
    assert outcome.confirmed is expected
    assert (ConfirmationCheck.L2_MISSING in outcome.unmet) is (l2 is None)
    assert (ConfirmationCheck.CONTEXT_FLAG in outcome.unmet) is (
        l1_side[2] or (l2_side is not None and l2_side[2])
    )
    assert (ConfirmationCheck.L1_UNSURE in outcome.unmet) is (not l1_side[1])


def test_exactly_at_the_threshold_confirms_just_below_does_not() -> None:
    l1 = parse_assessment(answer("critical", 0.9), Tier.L1)
    at = parse_assessment(answer("critical", 0.9), Tier.L2)
    below = parse_assessment(answer("critical", 0.8999), Tier.L2)
    assert confirm(l1, at, threshold=0.9).confirmed
    assert confirm(l1, below, threshold=0.9).unmet == {ConfirmationCheck.L2_UNSURE}


def test_a_flag_blocks_confirmation_even_though_the_cap_already_lowered_the_level() -> None:
    l1 = parse_assessment(answer("critical", 1.0, flags=["joke"]), Tier.L1)
    l2 = parse_assessment(answer("critical", 1.0), Tier.L2)
    unmet = confirm(l1, l2, threshold=THRESHOLD).unmet
    assert unmet == {ConfirmationCheck.CONTEXT_FLAG, ConfirmationCheck.L1_NOT_CRITICAL}


def test_the_level_is_the_higher_of_the_two() -> None:
    high = parse_assessment(answer("high"), Tier.L1)
    low = parse_assessment(answer("low"), Tier.L2)
    critical = parse_assessment(answer("critical"), Tier.L2)
    assert combined_level(high, None) is RiskLevel.HIGH
    assert combined_level(high, low) is RiskLevel.HIGH
    assert combined_level(high, critical) is RiskLevel.CRITICAL


@pytest.mark.parametrize(
    ("level", "confirmed", "policy"),
    [
        (None, False, GenerationPolicy.RESTRICTED),
        (RiskLevel.LOW, False, GenerationPolicy.NORMAL),
        (RiskLevel.MEDIUM, False, GenerationPolicy.NORMAL),
        (RiskLevel.HIGH, False, GenerationPolicy.RESTRICTED),
        (RiskLevel.CRITICAL, False, GenerationPolicy.RESTRICTED),
        (RiskLevel.CRITICAL, True, GenerationPolicy.PROHIBITED),
    ],
)
def test_policy_table(level: RiskLevel | None, confirmed: bool, policy: GenerationPolicy) -> None:
    assert policy_for(level, confirmed=confirmed) is policy


@pytest.mark.parametrize("level", [None, RiskLevel.LOW, RiskLevel.HIGH])
def test_confirmed_below_critical_is_a_bug(level: RiskLevel | None) -> None:
    with pytest.raises(UsageError):
        policy_for(level, confirmed=True)
