"""Paired statistics against known values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.evals.stats import (
    NO_SIGNIFICANT_DIFFERENCE,
    bootstrap_ci,
    cohen_kappa,
    compare_paired,
    mcnemar_exact,
    pearson,
)


def test_mcnemar_exact_matches_the_binomial_tail_of_a_textbook_table() -> None:
    # Discordant pairs b = 2, c = 10 (n = 12): P(X <= 2) = (1 + 12 + 66) / 4096.
    assert mcnemar_exact(2, 10) == pytest.approx(2 * 79 / 4096)
    assert mcnemar_exact(10, 2) == pytest.approx(0.03857421875)


def test_mcnemar_known_values() -> None:
    # Agresti's presidential-approval table has discordant 150 and 86; the exact test
    # gives p ~ 3.7e-5 (its chi-square without correction is 17.36, p ~ 3.1e-5).
    assert mcnemar_exact(150, 86) == pytest.approx(3.716e-5, rel=0.01)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32)


def test_mcnemar_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="negative"):
        mcnemar_exact(-1, 3)


@given(st.integers(0, 60), st.integers(0, 60))
def test_mcnemar_is_a_symmetric_probability(b: int, c: int) -> None:
    p = mcnemar_exact(b, c)
    assert 0 < p <= 1
    assert p == mcnemar_exact(c, b)


def test_bootstrap_is_reproducible_with_a_seed_and_brackets_the_estimate() -> None:
    values = [1.0] * 30 + [0.0] * 70
    first = bootstrap_ci(values, seed=7)
    assert first == bootstrap_ci(values, seed=7)
    assert first.estimate == pytest.approx(0.3)
    # The normal approximation gives 0.3 +- 1.96 * sqrt(0.3 * 0.7 / 100) = [0.21, 0.39].
    assert first.low == pytest.approx(0.21, abs=0.03)
    assert first.high == pytest.approx(0.39, abs=0.03)
    assert first.low <= first.estimate <= first.high


def test_bootstrap_of_constant_values_is_a_point_and_empty_input_is_refused() -> None:
    interval = bootstrap_ci([0.5] * 10, seed=1)
    assert (interval.low, interval.estimate, interval.high) == (0.5, 0.5, 0.5)
    with pytest.raises(ValueError):
        bootstrap_ci([], seed=1)
    with pytest.raises(ValueError):
        bootstrap_ci([1.0], seed=1, level=1.5)


def test_cohen_kappa_textbook_example() -> None:
    # 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15 -> po 0.7, pe 0.5, kappa 0.4.
    first = ["y"] * 25 + ["n"] * 25
    second = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(first, second) == pytest.approx(0.4)
    assert cohen_kappa(["a", "b"], ["a", "b"]) == pytest.approx(1.0)
    assert cohen_kappa(["a", "a"], ["a", "a"]) is None
    assert cohen_kappa([], []) is None
    with pytest.raises(ValueError):
        cohen_kappa(["a"], [])


def test_pearson_of_errors() -> None:
    assert pearson([0, 1, 0, 1], [0, 1, 0, 1]) == pytest.approx(1.0)
    assert pearson([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
    assert pearson([1, 1, 1], [0, 1, 0]) is None
    # sxy = 3.5, sxx = 5, syy = 4.75 by hand.
    assert math.isclose(pearson([1, 2, 3, 4], [2, 4, 5, 4]) or 0, 3.5 / math.sqrt(23.75))


def test_compare_paired_says_no_significant_difference_when_the_data_says_so() -> None:
    baseline = [True, False, True, False, True, True]
    arm = [True, True, False, False, True, True]
    result = compare_paired(baseline, arm, seed=0)
    assert (result.baseline_only, result.arm_only) == (1, 1)
    assert not result.significant
    assert result.statement.startswith(NO_SIGNIFICANT_DIFFERENCE)
    assert result.difference.estimate == 0


def test_compare_paired_names_the_better_arm_when_significant() -> None:
    baseline = [False] * 12 + [True] * 8
    arm = [True] * 12 + [True] * 8
    result = compare_paired(baseline, arm, seed=0)
    assert result.significant
    assert result.p_value == pytest.approx(2 / 2**12)
    assert result.statement.startswith("arm better")
    assert result.difference.low > 0
    with pytest.raises(ValueError):
        compare_paired([True], [True, False], seed=0)
