"""The report's plots, drawn with matplotlib (Agg) and returned as PNG bytes."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.figure import Figure  # noqa: E402

from foureyes.evals.metrics import RunMetrics  # noqa: E402

__all__ = ["confusion_png", "cost_benefit_png", "corrections_png", "pass_rate_png"]


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def pass_rate_png(metrics: RunMetrics) -> bytes:
    """Per-arm pass rate with its bootstrap interval."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = [a.arm for a in metrics.arms]
    rates = [a.pass_rate.estimate for a in metrics.arms]
    below = [a.pass_rate.estimate - a.pass_rate.low for a in metrics.arms]
    above = [a.pass_rate.high - a.pass_rate.estimate for a in metrics.arms]
    ax.bar(names, rates, yerr=[below, above], capsize=6, color="#4c78a8")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("pass rate (95% CI)")
    ax.set_title("Pass rate per arm")
    return _png(fig)


def corrections_png(metrics: RunMetrics) -> bytes:
    """Correction rate against false-diversion rate per non-baseline arm."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    arms = [a for a in metrics.arms if a.arm != metrics.baseline]
    xs = range(len(arms))
    ax.bar([x - 0.2 for x in xs], [a.correction_rate or 0 for a in arms], 0.4, label="correction")
    ax.bar(
        [x + 0.2 for x in xs],
        [a.false_diversion_rate or 0 for a in arms],
        0.4,
        label="false diversion",
    )
    ax.set_xticks(list(xs), [a.arm for a in arms])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(f"share of cases vs {metrics.baseline}")
    ax.set_title("Corrections and false diversions")
    ax.legend()
    return _png(fig)


def cost_benefit_png(metrics: RunMetrics) -> bytes:
    """Mean cost per case against pass rate."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for a in metrics.arms:
        ax.scatter(a.mean_cost_usd, a.pass_rate.estimate, s=60)
        ax.annotate(
            a.arm,
            (a.mean_cost_usd, a.pass_rate.estimate),
            xytext=(5, 5),
            textcoords="offset points",
        )
    ax.set_xlabel("mean cost per case (USD)")
    ax.set_ylabel("pass rate")
    ax.set_ylim(0, 1.05)
    ax.set_title("Cost against benefit")
    return _png(fig)


def confusion_png(metrics: RunMetrics, arm: str) -> bytes:
    """One arm's confusion matrix as a heat map."""
    table = metrics.confusions[arm]
    rows = list(metrics.labels)
    cols = [*rows, "none"]
    values = [[table[r][c] for c in cols] for r in rows]
    fig, ax = plt.subplots(figsize=(1.1 * len(cols) + 1.5, 0.8 * len(rows) + 1.5))
    ax.imshow(values, cmap="Blues")
    ax.set_xticks(range(len(cols)), cols)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("predicted")
    ax.set_ylabel("expected")
    for i, row in enumerate(values):
        for j, count in enumerate(row):
            ax.text(j, i, str(count), ha="center", va="center")
    ax.set_title(f"Confusion: {arm}")
    return _png(fig)
