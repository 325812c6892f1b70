import itertools

import pytest

from foureyes.risk.levels import RiskLevel, RiskStatus

ORDER = [RiskLevel.LOW, RiskLevel.MEDIUM, RiskLevel.HIGH, RiskLevel.CRITICAL]


@pytest.mark.parametrize(("a", "b"), list(itertools.product(ORDER, ORDER)))
def test_every_pair_compares_by_severity(a: RiskLevel, b: RiskLevel) -> None:
    ia, ib = ORDER.index(a), ORDER.index(b)
    assert (a < b) is (ia < ib)
    assert (a <= b) is (ia <= ib)
    assert (a > b) is (ia > ib)
    assert (a >= b) is (ia >= ib)
    assert (a == b) is (ia == ib)
    assert max(a, b) is ORDER[max(ia, ib)]
    assert min(a, b) is ORDER[min(ia, ib)]


@pytest.mark.parametrize("perm", list(itertools.permutations(ORDER)))
def test_sorted_gives_severity_order_not_alphabetical(perm: tuple[RiskLevel, ...]) -> None:
    assert sorted(perm) == ORDER
    assert max(perm) is RiskLevel.CRITICAL


def test_alphabetical_order_would_differ() -> None:
    # The bug this type exists to prevent: names sort critical < high < low < medium.
    assert sorted(level.value for level in ORDER) != [level.value for level in ORDER]


def test_unknown_is_not_a_level_and_does_not_compare() -> None:
    assert "unknown" not in {level.value for level in RiskLevel}
    for level in ORDER:
        with pytest.raises(TypeError):
            _ = RiskStatus.UNKNOWN < level  # type: ignore[operator]
        with pytest.raises(TypeError):
            _ = level >= "high"  # type: ignore[operator]
        assert level != RiskStatus.UNKNOWN


def test_cap_and_elevated() -> None:
    assert RiskLevel.capped(RiskLevel.CRITICAL, RiskLevel.MEDIUM) is RiskLevel.MEDIUM
    assert RiskLevel.capped(RiskLevel.LOW, RiskLevel.MEDIUM) is RiskLevel.LOW
    assert [level.is_elevated for level in ORDER] == [False, False, True, True]
    assert str(RiskLevel.HIGH) == "high"
