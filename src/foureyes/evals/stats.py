"""Paired statistics, pure and synchronous.

McNemar's exact test, percentile bootstrap intervals, Cohen's kappa and the correlation
of two error vectors.

Nothing here does I/O; every random draw comes from a seeded :class:`random.Random`, so
the same data and seed give the same interval on every machine.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "Interval",
    "NO_SIGNIFICANT_DIFFERENCE",
    "PairedComparison",
    "bootstrap_ci",
    "cohen_kappa",
    "compare_paired",
    "mcnemar_exact",
    "pearson",
]

NO_SIGNIFICANT_DIFFERENCE = "no significant difference"
"""The words a comparison states when McNemar's test does not reject the null."""


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate with a percentile bootstrap confidence interval."""

    estimate: float
    """The statistic on the observed data."""
    low: float
    """Lower bound."""
    high: float
    """Upper bound."""
    level: float
    """Confidence level, e.g. 0.95."""


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """An arm against the baseline on the same cases, pass/fail."""

    n: int
    """Cases both arms have a result for."""
    arm_only: int
    """Cases the arm passed and the baseline failed (McNemar's ``c``)."""
    baseline_only: int
    """Cases the baseline passed and the arm failed (McNemar's ``b``)."""
    p_value: float
    """McNemar's exact two-sided p-value."""
    difference: Interval
    """Arm pass rate minus baseline pass rate, with a paired bootstrap interval."""
    significant: bool
    """Whether ``p_value < alpha``."""
    statement: str
    """``no significant difference``, or which arm is better and at what p."""


def mcnemar_exact(b: int, c: int) -> float:
    """McNemar's exact two-sided p-value from the two discordant counts.

    Under the null each discordant pair falls either way with probability 1/2, so the
    smaller count is binomial(b + c, 1/2); the p-value doubles its lower tail (capped at 1).

    Raises:
        ValueError: a count is negative.
    """
    if b < 0 or c < 0:
        raise ValueError("discordant counts cannot be negative")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, float(2 * tail) / float(2**n))


def bootstrap_ci(
    values: Sequence[float],
    *,
    seed: int,
    resamples: int = 2000,
    level: float = 0.95,
    statistic: Callable[[Sequence[float]], float] | None = None,
) -> Interval:
    """A percentile bootstrap interval of ``statistic`` (the mean by default).

    For paired data pass the per-case differences: resampling cases keeps the pairing.

    Raises:
        ValueError: ``values`` is empty, or ``level``/``resamples`` is out of range.
    """
    if not values:
        raise ValueError("a bootstrap needs at least one value")
    if not 0 < level < 1 or resamples < 1:
        raise ValueError("level must be in (0, 1) and resamples at least 1")
    stat = statistic or _mean
    rng = random.Random(seed)
    n = len(values)
    draws = sorted(stat([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    tail = (1 - level) / 2
    low = draws[max(0, math.floor(tail * resamples))]
    high = draws[min(resamples - 1, math.ceil((1 - tail) * resamples) - 1)]
    return Interval(estimate=stat(values), low=low, high=high, level=level)


def compare_paired(
    baseline: Sequence[bool],
    arm: Sequence[bool],
    *,
    seed: int,
    alpha: float = 0.05,
    resamples: int = 2000,
) -> PairedComparison:
    """Compare an arm's pass/fail with the baseline's on the same cases, in order.

    Raises:
        ValueError: the sequences differ in length or are empty.
    """
    if len(baseline) != len(arm) or not arm:
        raise ValueError("paired results need the same, non-zero number of cases")
    b = sum(1 for x, y in zip(baseline, arm, strict=True) if x and not y)
    c = sum(1 for x, y in zip(baseline, arm, strict=True) if y and not x)
    p = mcnemar_exact(b, c)
    diffs = [float(y) - float(x) for x, y in zip(baseline, arm, strict=True)]
    interval = bootstrap_ci(diffs, seed=seed, resamples=resamples)
    significant = p < alpha
    if not significant:
        statement = f"{NO_SIGNIFICANT_DIFFERENCE} (McNemar exact p = {p:.3g}, n = {len(arm)})"
    else:
        better = "arm" if c > b else "baseline"
        statement = f"{better} better (McNemar exact p = {p:.3g}, n = {len(arm)})"
    return PairedComparison(
        n=len(arm),
        arm_only=c,
        baseline_only=b,
        p_value=p,
        difference=interval,
        significant=significant,
        statement=statement,
    )


def cohen_kappa(first: Sequence[str], second: Sequence[str]) -> float | None:
    """Cohen's kappa of two raters' labels on the same items; ``None`` when undefined.

    Undefined when there are no items, or when chance agreement is already 1 (both
    raters used one and the same label throughout).

    Raises:
        ValueError: the sequences differ in length.
    """
    if len(first) != len(second):
        raise ValueError("kappa needs the same items rated twice")
    n = len(first)
    if n == 0:
        return None
    observed = sum(1 for x, y in zip(first, second, strict=True) if x == y) / n
    labels = set(first) | set(second)
    expected = sum((first.count(label) / n) * (second.count(label) / n) for label in labels)
    if expected >= 1:
        return None
    return (observed - expected) / (1 - expected)


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson correlation (the phi coefficient for 0/1 data); ``None`` when undefined.

    Raises:
        ValueError: the sequences differ in length.
    """
    if len(xs) != len(ys):
        raise ValueError("correlation needs paired values")
    n = len(xs)
    if n < 2:
        return None
    mx, my = _mean(xs), _mean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)
