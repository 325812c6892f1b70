import pytest

from foureyes.core import errors
from foureyes.core.errors import (
    BudgetExhausted,
    ConfigError,
    ContractError,
    DeadlineExceeded,
    FoureyesError,
    LimitExceeded,
    RouteBadResponse,
    RouteConnectionError,
    RouteError,
    RouteHTTPError,
    RouteRateLimited,
    RouteTimeout,
    StoreError,
    UsageError,
)


def test_tree_matches_the_module_docstring() -> None:
    parents = {
        ConfigError: FoureyesError,
        RouteError: FoureyesError,
        RouteTimeout: RouteError,
        RouteConnectionError: RouteError,
        RouteHTTPError: RouteError,
        RouteRateLimited: RouteHTTPError,
        RouteBadResponse: RouteError,
        ContractError: FoureyesError,
        LimitExceeded: FoureyesError,
        BudgetExhausted: LimitExceeded,
        DeadlineExceeded: LimitExceeded,
        StoreError: FoureyesError,
    }
    for cls, parent in parents.items():
        assert cls.__bases__ == (parent,), cls
        assert cls.__name__ in (errors.__doc__ or "")
    assert not issubclass(UsageError, FoureyesError)
    assert issubclass(UsageError, RuntimeError)


def test_messages_are_derived_from_typed_fields() -> None:
    assert str(RouteTimeout("flash", 1.5)) == "RouteTimeout on route 'flash': no answer within 1.5s"
    e = RouteRateLimited("flash", retry_after_s=2.0)
    assert (e.status_code, e.retry_after_s, e.route) == (429, 2.0, "flash")
    assert not e.is_server_error
    assert RouteHTTPError("flash", 503).is_server_error
    c = ContractError("Verdict", "enum_invalid", "decision: 'maybe'")
    assert (c.schema, c.reason) == ("Verdict", "enum_invalid")
    assert "enum_invalid" in str(c)
    cfg = ConfigError(["unknown key 'gate.x'", "roles.counselor names route 'y'"])
    assert cfg.problems == ("unknown key 'gate.x'", "roles.counselor names route 'y'")
    s = StoreError("reserve", "database is locked")
    assert s.operation == "reserve" and "locked" in str(s)


@pytest.mark.parametrize("cls", [BudgetExhausted, DeadlineExceeded])
def test_limit_errors_carry_limit_value_and_maximum(cls: type[LimitExceeded]) -> None:
    e = cls("calls", 7, 6)
    assert (e.limit, e.value, e.maximum) == ("calls", 7, 6)
    assert "max 6" in str(e)
