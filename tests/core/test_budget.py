import datetime as dt

import pytest

from foureyes.core.budget import CallBudget, cost_usd, utc_day
from foureyes.core.errors import BudgetExhausted, UsageError


def test_call_budget_counts_down_and_refuses_past_its_maximum() -> None:
    b = CallBudget(2)
    b.take()
    b.take()
    assert b.remaining == 0
    with pytest.raises(BudgetExhausted) as info:
        b.take()
    assert (info.value.limit, info.value.value, info.value.maximum) == ("calls", 3, 2)
    assert b.used == 2  # a refused take takes nothing


def test_call_budget_needs_a_call() -> None:
    with pytest.raises(UsageError):
        CallBudget(0)


def test_cost_is_priced_per_million_tokens() -> None:
    assert cost_usd(1_000_000, 0, price_in=0.5, price_out=2) == pytest.approx(0.5)
    assert cost_usd(1000, 500, price_in=0.5, price_out=2) == pytest.approx(0.0015)


def test_utc_day_uses_utc_not_local_time() -> None:
    late_in_shanghai = dt.datetime(2026, 3, 1, 7, 30, tzinfo=dt.timezone(dt.timedelta(hours=8)))
    assert utc_day(late_in_shanghai) == dt.date(2026, 2, 28)
