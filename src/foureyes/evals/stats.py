"""Paired statistics, pure and synchronous.

McNemar's exact test and its power, percentile bootstrap intervals, the Wilson and
Clopper–Pearson intervals of a rate, Cohen's kappa and the correlation of two error
vectors.

Nothing here does I/O; every random draw comes from a seeded :class:`random.Random`, so
the same data and seed give the same interval on every machine. Standard library only:
the normal quantile is :class:`statistics.NormalDist`, the beta quantile a bisection on
the regularised incomplete beta below.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

__all__ = [
    "Interval",
    "IntervalMethod",
    "NO_SIGNIFICANT_DIFFERENCE",
    "PairedComparison",
    "PowerStatement",
    "RATE_BOOTSTRAP_MIN_COUNT",
    "RATE_BOOTSTRAP_MIN_N",
    "bootstrap_ci",
    "clopper_pearson_interval",
    "cohen_kappa",
    "compare_paired",
    "mcnemar_exact",
    "mcnemar_power",
    "min_discordant_for_significance",
    "minimum_detectable_effect",
    "pearson",
    "power_statement",
    "rate_interval",
    "wilson_interval",
]

NO_SIGNIFICANT_DIFFERENCE = "no significant difference"
"""The words a comparison states when McNemar's test does not reject the null."""


RATE_BOOTSTRAP_MIN_N = 30
"""The fewest cases :func:`rate_interval` bootstraps a rate over (else Clopper–Pearson)."""
RATE_BOOTSTRAP_MIN_COUNT = 5
"""The fewest hits, and misses, :func:`rate_interval` bootstraps (else Clopper–Pearson)."""

IntervalMethod = Literal["bootstrap", "wilson", "clopper-pearson"]
"""How an :class:`Interval` was computed."""


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate with a confidence interval (a percentile bootstrap by default)."""

    estimate: float
    """The statistic on the observed data (for a rate, ``hits / n``)."""
    low: float
    """Lower bound."""
    high: float
    """Upper bound."""
    level: float
    """Confidence level, e.g. 0.95."""
    method: IntervalMethod = "bootstrap"
    """``bootstrap`` (:func:`bootstrap_ci`), ``wilson`` or ``clopper-pearson``."""


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
    # Integer true division is correctly rounded and, unlike float(2**n), does not
    # overflow past 1023 discordant pairs.
    return min(1.0, 2 * tail / (1 << n))


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


def wilson_interval(hits: int, n: int, *, confidence: float = 0.95) -> Interval | None:
    """The Wilson score interval of a rate ``hits / n``; ``None`` when ``n == 0``.

    With ``p = hits / n`` and ``z`` the normal quantile at ``1 - (1 - confidence) / 2``::

        centre = (p + z²/2n) / (1 + z²/n)
        half   = z / (1 + z²/n) · sqrt(p(1 - p)/n + z²/4n²)

    the bounds are ``centre ± half`` — the rates whose score test does not reject
    (E. B. Wilson, "Probable inference, the law of succession, and statistical
    inference", JASA 22 (1927) 209–212; Brown, Cai & DasGupta, "Interval estimation
    for a binomial proportion", Statistical Science 16 (2001) 101–133). It never leaves
    [0, 1] and is not a point at 0 or n hits; the bounds are clamped against rounding.

    Raises:
        ValueError: ``n`` is negative, ``hits`` is not in ``[0, n]``, or ``confidence``
            is not in (0, 1).
    """
    _check_rate(hits, n, confidence)
    if n == 0:
        return None
    p = hits / n
    z = _z(confidence)
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    low = 0.0 if hits == 0 else min(p, max(0.0, centre - half))
    high = 1.0 if hits == n else max(p, min(1.0, centre + half))
    return Interval(estimate=p, low=low, high=high, level=confidence, method="wilson")


def clopper_pearson_interval(hits: int, n: int, *, confidence: float = 0.95) -> Interval | None:
    """The Clopper–Pearson (exact binomial) interval of ``hits / n``; ``None`` if ``n == 0``.

    With ``α = 1 - confidence`` and ``B(q; a, b)`` the ``q``-quantile of the Beta(a, b)
    distribution::

        low  = B(α/2; hits, n - hits + 1)        (0 when hits = 0)
        high = B(1 - α/2; hits + 1, n - hits)    (1 when hits = n)

    i.e. ``low`` solves ``P(Binomial(n, low) >= hits) = α/2`` and ``high`` solves
    ``P(Binomial(n, high) <= hits) = α/2``, because ``P(Binomial(n, p) >= k) = I_p(k,
    n - k + 1)`` (C. J. Clopper & E. S. Pearson, "The use of confidence or fiducial limits
    illustrated in the case of the binomial", Biometrika 26 (1934) 404–413). Its coverage
    is at least ``confidence`` for every rate, so it is conservative.

    The beta quantile is a bisection on the regularised incomplete beta ``I_x(a, b)``,
    evaluated by its continued fraction (modified Lentz; Press et al., *Numerical
    Recipes*, 3rd ed., §6.4 ``betacf``), which stays accurate for any ``n`` — unlike a
    summed binomial CDF, whose cost grows with ``n``. ``high`` is computed as ``1 -
    B(α/2; n - hits, hits + 1)``, so the interval of ``n - hits`` mirrors that of ``hits``.

    Raises:
        ValueError: ``n`` is negative, ``hits`` is not in ``[0, n]``, or ``confidence``
            is not in (0, 1).
    """
    _check_rate(hits, n, confidence)
    if n == 0:
        return None
    p = hits / n
    tail = (1 - confidence) / 2
    low = 0.0 if hits == 0 else min(p, _beta_quantile(tail, hits, n - hits + 1))
    high = 1.0 if hits == n else max(p, 1.0 - _beta_quantile(tail, n - hits, hits + 1))
    return Interval(estimate=p, low=low, high=high, level=confidence, method="clopper-pearson")


def rate_interval(
    hits: int,
    n: int,
    *,
    seed: int,
    confidence: float = 0.95,
    resamples: int = 2000,
) -> Interval | None:
    """The report's interval for a rate ``hits / n``; ``None`` when ``n == 0``.

    A percentile bootstrap (:func:`bootstrap_ci` of ``hits`` ones and ``n - hits``
    zeros, ``method="bootstrap"``) where it is informative: at least
    :data:`RATE_BOOTSTRAP_MIN_N` cases and at least :data:`RATE_BOOTSTRAP_MIN_COUNT` hits
    and as many misses. Otherwise the Clopper–Pearson interval
    (:func:`clopper_pearson_interval`, ``method="clopper-pearson"``): at 0 or ``n`` hits
    every resample equals the observed rate, so the bootstrap collapses to a point, and
    with few cases or few hits (or misses) its percentiles take few distinct values and
    cover less than stated — the usual ``np >= 5`` and ``n(1 - p) >= 5`` rule of thumb for
    an approximate interval (Brown, Cai & DasGupta 2001). The exact interval is
    conservative there instead. ``method`` on the result says which one was used.

    Raises:
        ValueError: ``n`` is negative, ``hits`` is not in ``[0, n]``, ``confidence`` is
            not in (0, 1), or ``resamples`` is below 1.
    """
    _check_rate(hits, n, confidence)
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    if n == 0:
        return None
    if n < RATE_BOOTSTRAP_MIN_N or min(hits, n - hits) < RATE_BOOTSTRAP_MIN_COUNT:
        return clopper_pearson_interval(hits, n, confidence=confidence)
    values = [1.0] * hits + [0.0] * (n - hits)
    return bootstrap_ci(values, seed=seed, resamples=resamples, level=confidence)


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


@dataclass(frozen=True, slots=True)
class PowerStatement:
    """What a paired run of ``n`` cases could detect with McNemar's exact test (numbers only)."""

    n: int
    """Paired cases in the run."""
    alpha: float
    """Significance level of the two-sided test (reject when ``p < alpha``)."""
    power: float
    """The probability of rejecting that ``mde`` is computed for, e.g. 0.8."""
    min_discordant: int
    """:func:`min_discordant_for_significance` at ``alpha``."""
    mde: float | None
    """:func:`minimum_detectable_effect`: ``None`` when ``n < min_discordant``."""


def min_discordant_for_significance(alpha: float = 0.05) -> int:
    """The least number of discordant pairs, all one way, that McNemar's exact test rejects.

    With ``d`` discordant pairs all in one direction the exact two-sided p-value is
    ``2 · 0.5^d`` (:func:`mcnemar_exact` of ``(0, d)``), so this is the least ``d`` with
    ``2^(1 - d) < alpha``: 6 at 0.05 (``2 · 0.5^6 = 0.03125``, ``2 · 0.5^5 = 0.0625``).
    No run with fewer discordant pairs can show a significant difference, whatever they
    are; with some pairs the other way it needs more.

    Raises:
        ValueError: ``alpha`` is not in (0, 1).
    """
    _check_probability("alpha", alpha)
    d = 1
    while math.ldexp(1.0, 1 - d) >= alpha:
        d += 1
    return d


def minimum_detectable_effect(n: int, *, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The smallest per-pair correction rate a paired run of ``n`` cases detects.

    Suppose every case is, independently, a correction (the arm passes where the baseline
    fails) with probability ``q`` and never a diversion. Then the discordant pairs are
    ``C ~ Binomial(n, q)``, all one way, and the exact test rejects iff ``C >= d`` with
    ``d = min_discordant_for_significance(alpha)``; its power is ``P(C >= d) = I_q(d,
    n - d + 1)``, increasing in ``q``. This returns the least ``q`` with power at least
    ``power``, i.e. the ``power``-quantile of Beta(d, n - d + 1), found by bisection on
    the regularised incomplete beta (see :func:`clopper_pearson_interval`). It is the
    smallest rate of net corrections the run could detect in the most favourable case;
    diversions only raise it (:func:`mcnemar_power` gives the power with both). Cf. the
    power of the exact McNemar test in Lachin, "Power and sample size evaluation for the
    McNemar test", Statistics in Medicine 11 (1992) 1239–1251.

    ``None`` when even ``q = 1`` cannot reach significance (``n < d``). Non-increasing
    in ``n``: more cases, more chances of ``d`` corrections.

    Raises:
        ValueError: ``n`` is negative, or ``alpha`` or ``power`` is not in (0, 1).
    """
    if n < 0:
        raise ValueError("the number of cases cannot be negative")
    _check_probability("power", power)
    d = min_discordant_for_significance(alpha)
    if n < d:
        return None
    return _beta_quantile(power, d, n - d + 1)


def power_statement(n: int, *, alpha: float = 0.05, power: float = 0.8) -> PowerStatement:
    """The numbers of a run's power statement (:class:`PowerStatement`).

    Raises:
        ValueError: as :func:`minimum_detectable_effect`.
    """
    mde = minimum_detectable_effect(n, alpha=alpha, power=power)
    return PowerStatement(
        n=n,
        alpha=alpha,
        power=power,
        min_discordant=min_discordant_for_significance(alpha),
        mde=mde,
    )


def mcnemar_power(n: int, p_correct: float, p_divert: float, *, alpha: float = 0.05) -> float:
    """The exact power of McNemar's exact two-sided test over ``n`` paired cases.

    Each case is independently a correction (arm passes, baseline fails) with probability
    ``p_correct``, a diversion (baseline passes, arm fails) with ``p_divert``, and
    concordant otherwise, so the counts ``(c, b)`` are trinomial::

        power = Σ  n! / (b! c! (n - b - c)!) · p_divert^b · p_correct^c
                      · (1 - p_correct - p_divert)^(n - b - c)

    over the ``b + c <= n`` with ``mcnemar_exact(b, c) < alpha`` (the rejection region is
    ``min(b, c) <= k(b + c)``, its critical value found once per discordant total, with
    the same arithmetic as :func:`mcnemar_exact`). Being two-sided, it counts rejections
    in either direction, so with ``p_divert > 0`` a little of it may be significance the
    wrong way. O(n²) terms, each in log space: fine
    up to a few hundred cases (Lachin 1992; Suissa & Shuster, "The 2 x 2 matched-pairs
    trial: exact unconditional design and analysis", Biometrics 47 (1991) 361–372).

    Raises:
        ValueError: ``n`` is negative, a probability is negative or they sum past 1, or
            ``alpha`` is not in (0, 1).
    """
    if n < 0:
        raise ValueError("the number of cases cannot be negative")
    _check_probability("alpha", alpha)
    if not (p_correct >= 0 and p_divert >= 0 and p_correct + p_divert <= 1 + 1e-12):
        raise ValueError("p_correct and p_divert must be non-negative and sum to at most 1")
    p_concordant = max(0.0, 1.0 - p_correct - p_divert)
    log_n = math.lgamma(n + 1)
    total = 0.0
    for m in range(n + 1):
        k = _mcnemar_critical(m, alpha)
        if k < 0:
            continue
        rest = log_n - math.lgamma(n - m + 1) + _xlogy(n - m, p_concordant)
        for c in (*range(k + 1), *range(m - k, m + 1)):
            b = m - c
            log_term = (
                rest
                - math.lgamma(b + 1)
                - math.lgamma(c + 1)
                + _xlogy(b, p_divert)
                + _xlogy(c, p_correct)
            )
            total += math.exp(log_term)
    return min(1.0, total)


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


def _check_probability(name: str, value: float) -> None:
    if not 0 < value < 1:
        raise ValueError(f"{name} must be in (0, 1)")


def _check_rate(hits: int, n: int, confidence: float) -> None:
    if n < 0 or not 0 <= hits <= n:
        raise ValueError("a rate needs 0 <= hits <= n")
    _check_probability("confidence", confidence)


def _z(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (1.959964 at 0.95)."""
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def _xlogy(k: int, p: float) -> float:
    """``k · log(p)`` with ``0 · log(0) = 0`` (``-inf`` for ``k > 0`` at ``p = 0``)."""
    if k == 0:
        return 0.0
    return -math.inf if p <= 0 else k * math.log(p)


def _mcnemar_critical(m: int, alpha: float) -> int:
    """The largest ``k`` with ``mcnemar_exact(k, m - k) < alpha``; -1 when there is none.

    The p-value grows with the smaller count, so the test rejects ``(b, c)`` with
    ``b + c = m`` iff ``min(b, c) <= k``; ``k < m / 2`` always (``p = 1`` at ``b = c``).
    """
    tail = 0
    k = -1
    while k + 1 <= m // 2:
        tail += math.comb(m, k + 1)
        if not min(1.0, 2 * tail / (1 << m)) < alpha:
            break
        k += 1
    return k


_BETACF_EPS = 1e-15
_BETACF_TINY = 1e-300


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta, modified Lentz (Numerical Recipes §6.4).

    Converges fast for ``x < (a + 1) / (a + b + 2)``, in O(sqrt(max(a, b))) terms.
    """
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) >= _BETACF_TINY else _BETACF_TINY)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) >= _BETACF_TINY else _BETACF_TINY)
        c = 1.0 + aa / c
        c = c if abs(c) >= _BETACF_TINY else _BETACF_TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) >= _BETACF_TINY else _BETACF_TINY)
        c = 1.0 + aa / c
        c = c if abs(c) >= _BETACF_TINY else _BETACF_TINY
        step = d * c
        h *= step
        if abs(step - 1.0) < _BETACF_EPS:
            break
    return h


def _betai(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta ``I_x(a, b)`` for ``a, b > 0`` (Numerical Recipes §6.4)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _beta_quantile(q: float, a: float, b: float) -> float:
    """The least ``x`` in [0, 1] with ``I_x(a, b) >= q``, by bisection to a relative 1e-15.

    ``I_x`` is continuous and increasing in ``x``, so bisection always converges; it
    keeps ``I_hi >= q`` and stops when the bracket is a few ulps of its upper end (or
    cannot be halved), which also resolves roots far below 1 to full relative precision.
    """
    lo, hi = 0.0, 1.0
    for _ in range(2200):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi or hi - lo <= 4e-16 * hi:
            break
        if _betai(a, b, mid) < q:
            lo = mid
        else:
            hi = mid
    return hi
