"""The trend: negative days and the current run of negative days."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.core.errors import UsageError
from foureyes.risk.levels import RiskLevel
from foureyes.risk.trend import compute_trend

TODAY = dt.date(2026, 3, 14)
LOW, MEDIUM, HIGH = RiskLevel.LOW, RiskLevel.MEDIUM, RiskLevel.HIGH


def ago(n: int) -> dt.date:
    return TODAY - dt.timedelta(days=n)


def test_no_history_is_an_empty_trend() -> None:
    trend = compute_trend([], today=TODAY, days=7)
    assert (trend.assessed_days, trend.negative_days, trend.consecutive_negative_days) == (0, 0, 0)
    assert "no earlier assessments" in trend.describe()


def test_counts_days_not_assessments() -> None:
    levels = [(ago(0), HIGH), (ago(0), MEDIUM), (ago(1), LOW), (ago(1), MEDIUM), (ago(3), LOW)]
    trend = compute_trend(levels, today=TODAY, days=7)
    assert trend.assessed_days == 3 and trend.negative_days == 2
    assert trend.consecutive_negative_days == 2


def test_a_run_ending_yesterday_is_current_while_today_has_nothing() -> None:
    levels = [(ago(1), HIGH), (ago(2), MEDIUM), (ago(3), LOW)]
    assert compute_trend(levels, today=TODAY, days=7).consecutive_negative_days == 2


def test_a_calm_day_breaks_the_run() -> None:
    levels = [(ago(0), LOW), (ago(1), HIGH), (ago(2), HIGH)]
    assert compute_trend(levels, today=TODAY, days=7).consecutive_negative_days == 0


def test_days_outside_the_window_are_ignored() -> None:
    levels = [(ago(n), HIGH) for n in range(10)] + [(TODAY + dt.timedelta(days=1), HIGH)]
    trend = compute_trend(levels, today=TODAY, days=3)
    assert trend.assessed_days == 3 and trend.negative_days == 3
    assert trend.consecutive_negative_days == 3


def test_a_window_needs_a_day() -> None:
    with pytest.raises(UsageError):
        compute_trend([], today=TODAY, days=0)


@given(
    st.lists(st.tuples(st.integers(0, 20), st.sampled_from(list(RiskLevel)))),
    st.integers(1, 14),
)
def test_counts_are_bounded(entries: list[tuple[int, RiskLevel]], days: int) -> None:
    trend = compute_trend([(ago(n), lvl) for n, lvl in entries], today=TODAY, days=days)
    assert 0 <= trend.consecutive_negative_days <= trend.negative_days
    assert trend.negative_days <= trend.assessed_days <= days
