import math

import pytest

from foureyes.core.deadline import Deadline
from foureyes.core.errors import DeadlineExceeded, UsageError


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_call_timeout_is_the_smaller_of_route_timeout_and_time_left() -> None:
    clock = FakeClock()
    d = Deadline.after(10, clock=clock)
    assert d.timeout_for(3) == 3
    clock.now += 8
    assert d.timeout_for(3) == pytest.approx(2)
    assert not d.expired


def test_no_call_starts_after_the_deadline() -> None:
    clock = FakeClock()
    d = Deadline.after(1, clock=clock)
    clock.now += 1
    assert d.expired
    with pytest.raises(DeadlineExceeded) as info:
        d.timeout_for(5)
    assert info.value.limit == "deadline"
    assert info.value.value == pytest.approx(1)
    assert info.value.maximum == 1


def test_never_leaves_route_timeout_in_charge() -> None:
    d = Deadline.never(clock=FakeClock())
    assert d.timeout_for(7) == 7
    assert d.remaining() == math.inf


@pytest.mark.parametrize("bad", [0, -1, float("nan")])
def test_a_deadline_must_be_positive(bad: float) -> None:
    with pytest.raises(UsageError):
        Deadline.after(bad)
