"""Paired statistics against known values."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.evals import stats
from foureyes.evals.stats import (
    NO_SIGNIFICANT_DIFFERENCE,
    RATE_BOOTSTRAP_MIN_COUNT,
    RATE_BOOTSTRAP_MIN_N,
    Interval,
    PowerStatement,
    bootstrap_ci,
    clopper_pearson_interval,
    cohen_kappa,
    compare_paired,
    mcnemar_exact,
    mcnemar_power,
    min_discordant_for_significance,
    minimum_detectable_effect,
    pearson,
    power_statement,
    rate_interval,
    wilson_interval,
)

Z95 = 1.959963984540054
"""The two-sided normal quantile at 95%."""


def _upper_tail(n: int, k: int, p: float) -> float:
    """P(Binomial(n, p) >= k), summed exactly in rationals from math.comb."""
    q = Fraction(p)
    return float(sum(math.comb(n, j) * q**j * (1 - q) ** (n - j) for j in range(k, n + 1)))


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


def test_all_is_sorted() -> None:
    assert stats.__all__ == sorted(stats.__all__)


def test_intervals_built_as_before_are_bootstrap_intervals() -> None:
    assert Interval(0.5, 0.4, 0.6, 0.95).method == "bootstrap"
    assert bootstrap_ci([0.0, 1.0], seed=0).method == "bootstrap"


def test_mcnemar_exact_does_not_overflow_past_1023_discordant_pairs() -> None:
    assert mcnemar_exact(600, 600) == 1.0
    # 100 more one way out of 1300: z = 100 / sqrt(1300) = 2.77, p ~ 0.0056.
    assert 0 < mcnemar_exact(600, 700) < 0.01


def test_wilson_known_values() -> None:
    # By hand from centre +- half with z = 1.959964 (z^2 = 3.841459): 0/10 gives centre
    # = half = 0.19207 / 1.38415 = 0.13877, so [0, 0.2775]; 5/10 gives 0.5 +- 0.2634.
    # The same values are tabulated by Brown, Cai & DasGupta (2001) and R's prop.test
    # without continuity correction.
    zero = wilson_interval(0, 10)
    half = wilson_interval(5, 10)
    full = wilson_interval(10, 10)
    assert zero is not None and half is not None and full is not None
    assert (zero.estimate, zero.low, zero.method) == (0.0, 0.0, "wilson")
    assert zero.high == pytest.approx(0.2775, abs=1e-4)
    assert half.low == pytest.approx(0.2366, abs=1e-4)
    assert half.high == pytest.approx(0.7634, abs=1e-4)
    assert full.low == pytest.approx(0.7225, abs=1e-4)
    assert full.high == 1.0
    assert full.level == 0.95
    assert wilson_interval(0, 0) is None


def test_clopper_pearson_known_values() -> None:
    zero = clopper_pearson_interval(0, 10)
    half = clopper_pearson_interval(5, 10)
    full = clopper_pearson_interval(10, 10)
    assert zero is not None and half is not None and full is not None
    # P(X = 0) = (1 - p)^10 = 0.025 and P(X = 10) = p^10 = 0.025.
    assert (zero.low, zero.method) == (0.0, "clopper-pearson")
    assert zero.high == pytest.approx(1 - 0.025 ** (1 / 10), abs=1e-12)
    assert zero.high == pytest.approx(0.3085, abs=1e-4)
    assert full.low == pytest.approx(0.025 ** (1 / 10), abs=1e-12)
    assert full.high == 1.0
    assert half.low == pytest.approx(0.1871, abs=1e-4)
    assert half.high == pytest.approx(0.8129, abs=1e-4)
    # R: binom.test(1, 1000)$conf.int = [2.5317e-05, 0.0055589].
    rare = clopper_pearson_interval(1, 1000)
    assert rare is not None
    assert rare.low == pytest.approx(2.5317e-5, rel=1e-4)
    assert rare.high == pytest.approx(0.0055589, rel=1e-4)
    assert clopper_pearson_interval(0, 0) is None


@pytest.mark.parametrize("interval", [wilson_interval, clopper_pearson_interval])
def test_rate_intervals_refuse_invalid_input(interval: object) -> None:
    assert callable(interval)
    for hits, n, confidence in [(-1, 5, 0.95), (6, 5, 0.95), (0, -1, 0.95), (1, 2, 1.0)]:
        with pytest.raises(ValueError):
            interval(hits, n, confidence=confidence)


@settings(deadline=None)
@given(st.data())
def test_clopper_pearson_bounds_solve_the_binomial_tail_equations(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 60))
    hits = data.draw(st.integers(0, n))
    confidence = data.draw(st.sampled_from([0.8, 0.9, 0.95, 0.99]))
    interval = clopper_pearson_interval(hits, n, confidence=confidence)
    assert interval is not None
    tail = (1 - confidence) / 2
    if hits > 0:
        assert _upper_tail(n, hits, interval.low) == pytest.approx(tail, rel=1e-9)
    if hits < n:
        # P(X <= hits) at the upper bound.
        assert 1 - _upper_tail(n, hits + 1, interval.high) == pytest.approx(tail, rel=1e-9)
    mirror = clopper_pearson_interval(n - hits, n, confidence=confidence)
    assert mirror is not None
    assert interval.low == pytest.approx(1 - mirror.high, abs=1e-15)


@given(st.integers(1, 10_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_bounds_solve_the_score_equation(case: tuple[int, int]) -> None:
    hits, n = case
    interval = wilson_interval(hits, n)
    assert interval is not None
    p = hits / n
    for bound in (interval.low, interval.high):
        # (p - bound)^2 = z^2 bound (1 - bound) / n at both ends.
        assert (p - bound) ** 2 == pytest.approx(Z95**2 * bound * (1 - bound) / n, abs=1e-12)


@settings(deadline=None)
@given(
    st.integers(1, 1000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.floats(0.5, 0.999),
)
def test_rate_intervals_lie_in_the_unit_interval_and_contain_the_estimate(
    case: tuple[int, int], confidence: float
) -> None:
    hits, n = case
    wilson = wilson_interval(hits, n, confidence=confidence)
    exact = clopper_pearson_interval(hits, n, confidence=confidence)
    report = rate_interval(hits, n, seed=3, confidence=confidence, resamples=100)
    for interval in (wilson, exact, report):
        assert interval is not None
        assert interval.estimate == hits / n
        assert 0.0 <= interval.low <= interval.estimate <= interval.high <= 1.0
        assert interval.level == confidence
    assert wilson is not None and exact is not None
    if 0 < hits < n:
        assert exact.low < exact.estimate < exact.high
        assert wilson.low < wilson.estimate < wilson.high


@pytest.mark.parametrize("n", [1, 10, 29, 30, 100, 1000])
def test_rate_interval_is_exact_where_the_bootstrap_collapses(n: int) -> None:
    for hits in (0, n):
        interval = rate_interval(hits, n, seed=0)
        assert interval == clopper_pearson_interval(hits, n)
        assert interval is not None and interval.method == "clopper-pearson"
        assert interval.low < interval.high


def test_rate_interval_bootstraps_only_enough_cases_with_enough_of_each_outcome() -> None:
    n, k = RATE_BOOTSTRAP_MIN_N, RATE_BOOTSTRAP_MIN_COUNT
    assert (n, k) == (30, 5)
    middle = rate_interval(50, 100, seed=7)
    assert middle == bootstrap_ci([1.0] * 50 + [0.0] * 50, seed=7)
    assert middle is not None and middle.method == "bootstrap"
    assert middle.low == pytest.approx(0.5 - Z95 * 0.05, abs=0.03)

    def method(hits: int, cases: int) -> str:
        interval = rate_interval(hits, cases, seed=7)
        assert interval is not None
        return interval.method

    assert method(n // 2, n) == "bootstrap"
    assert method(n // 2, n - 1) == "clopper-pearson"
    assert method(k, 100) == method(100 - k, 100) == "bootstrap"
    assert method(k - 1, 100) == method(100 - k + 1, 100) == "clopper-pearson"
    assert rate_interval(0, 0, seed=7) is None
    with pytest.raises(ValueError):
        rate_interval(3, 2, seed=7)
    with pytest.raises(ValueError):
        rate_interval(1, 40, seed=7, resamples=0)


def test_min_discordant_for_significance() -> None:
    # 2 * 0.5^6 = 0.03125 < 0.05 <= 2 * 0.5^5 = 0.0625.
    assert min_discordant_for_significance() == 6
    assert min_discordant_for_significance(0.0625) == 6  # p < alpha, strictly
    assert min_discordant_for_significance(0.0626) == 5
    assert min_discordant_for_significance(0.01) == 8
    assert min_discordant_for_significance(0.999) == 2
    for alpha in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError):
            min_discordant_for_significance(alpha)


@given(st.floats(1e-12, 0.999))
def test_min_discordant_agrees_with_the_exact_test(alpha: float) -> None:
    d = min_discordant_for_significance(alpha)
    assert mcnemar_exact(0, d) < alpha <= mcnemar_exact(0, d - 1)


def test_minimum_detectable_effect_known_values() -> None:
    assert minimum_detectable_effect(0) is None
    assert minimum_detectable_effect(5) is None
    # Six cases: all six must be corrections, q^6 = 0.8.
    assert minimum_detectable_effect(6) == pytest.approx(0.8 ** (1 / 6), abs=1e-12)
    twelve = minimum_detectable_effect(12)
    assert twelve is not None
    assert 0.5 < twelve < 0.65
    assert _upper_tail(12, 6, twelve) == pytest.approx(0.8, abs=1e-12)
    assert _upper_tail(12, 6, twelve) >= 0.8 - 1e-15
    assert minimum_detectable_effect(12, power=0.9) > twelve  # type: ignore[operator]
    assert minimum_detectable_effect(12, alpha=0.01) > twelve  # type: ignore[operator]
    with pytest.raises(ValueError):
        minimum_detectable_effect(-1)
    with pytest.raises(ValueError):
        minimum_detectable_effect(12, power=1.0)
    with pytest.raises(ValueError):
        minimum_detectable_effect(12, alpha=0.0)


@settings(deadline=None)
@given(st.integers(6, 2000), st.integers(6, 2000))
def test_minimum_detectable_effect_does_not_grow_with_more_cases(n1: int, n2: int) -> None:
    n1, n2 = min(n1, n2), max(n1, n2)
    first, second = minimum_detectable_effect(n1), minimum_detectable_effect(n2)
    assert first is not None and second is not None
    assert 0 < second <= first < 1


def test_power_statement_holds_the_numbers() -> None:
    statement = power_statement(40, alpha=0.05, power=0.8)
    assert statement == PowerStatement(
        n=40,
        alpha=0.05,
        power=0.8,
        min_discordant=6,
        mde=minimum_detectable_effect(40),
    )
    assert power_statement(3).mde is None


def _brute_force_power(n: int, p_correct: float, p_divert: float, alpha: float) -> float:
    p_concordant = Fraction(1) - Fraction(p_correct) - Fraction(p_divert)
    total = Fraction(0)
    for b in range(n + 1):
        for c in range(n - b + 1):
            if mcnemar_exact(b, c) < alpha:
                ways = math.comb(n, b) * math.comb(n - b, c)
                total += (
                    ways
                    * Fraction(p_divert) ** b
                    * Fraction(p_correct) ** c
                    * p_concordant ** (n - b - c)
                )
    return float(total)


@settings(deadline=None, max_examples=60)
@given(
    st.integers(0, 30),
    st.floats(0, 0.6),
    st.floats(0, 0.4),
    st.sampled_from([0.01, 0.05, 0.1]),
)
def test_mcnemar_power_matches_the_trinomial_sum(
    n: int, p_correct: float, p_divert: float, alpha: float
) -> None:
    expected = _brute_force_power(n, p_correct, p_divert, alpha)
    power = mcnemar_power(n, p_correct, p_divert, alpha=alpha)
    assert power == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert power == pytest.approx(mcnemar_power(n, p_divert, p_correct, alpha=alpha), abs=1e-12)


@settings(deadline=None, max_examples=30)
@given(st.integers(1, 150), st.floats(0, 0.5))
def test_mcnemar_power_is_at_most_alpha_under_the_null(n: int, p: float) -> None:
    assert mcnemar_power(n, p, p) <= 0.05 + 1e-12


def test_mcnemar_power_edges_and_agreement_with_the_detectable_effect() -> None:
    assert mcnemar_power(50, 0.0, 0.0) == 0.0
    assert mcnemar_power(6, 1.0, 0.0) == pytest.approx(1.0)
    assert mcnemar_power(5, 1.0, 0.0) == 0.0
    assert mcnemar_power(0, 0.3, 0.1) == 0.0
    for n in (6, 12, 50, 200):
        q = minimum_detectable_effect(n)
        assert q is not None
        assert mcnemar_power(n, q, 0.0) == pytest.approx(0.8, abs=1e-9)
        # Diversions cost power; at n = 6 only six one way reject, so they add six
        # diversions' 0.02^6 (a two-sided rejection, in the wrong direction) instead.
        if n == 6:
            assert mcnemar_power(n, q, 0.02) == pytest.approx(0.8 + 0.02**6, abs=1e-12)
        else:
            assert mcnemar_power(n, q, 0.02) < mcnemar_power(n, q, 0.0)
    for p_correct, p_divert in [(-0.1, 0.2), (0.6, 0.5)]:
        with pytest.raises(ValueError):
            mcnemar_power(10, p_correct, p_divert)
    with pytest.raises(ValueError):
        mcnemar_power(-1, 0.1, 0.1)
