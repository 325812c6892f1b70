"""The one exception tree of foureyes.

::

    FoureyesError
    ├── ConfigError              bad or missing configuration (names the key or variable)
    ├── RouteError               a model route failed (carries the route name)
    │   ├── RouteTimeout         no answer within the allowed time
    │   ├── RouteConnectionError the endpoint could not be reached
    │   ├── RouteHTTPError       the endpoint answered with an HTTP error status
    │   │   └── RouteRateLimited     HTTP 429
    │   └── RouteBadResponse     an answer that is not a usable completion
    ├── ContractError            model output that breaks its structured-output contract
    ├── LimitExceeded            a limit stopped the work (carries limit and value)
    │   ├── BudgetExhausted      a call or spend budget is used up
    │   └── DeadlineExceeded     the run's deadline has passed
    └── StoreError               the durable store failed (locked, down, constraint)
        └── StoreDataError       the store refused a value itself; retrying cannot help

    UsageError(RuntimeError)     programmer misuse; never a reason code

Every class carries typed attributes and derives its message from them, so callers
read fields, never parse messages. Capabilities map these classes to reason codes in one
table each; expected failures become data (a decision with a reason), not exceptions that
escape the pipeline.
"""

from __future__ import annotations

__all__ = [
    "BudgetExhausted",
    "ConfigError",
    "ContractError",
    "DeadlineExceeded",
    "FoureyesError",
    "LimitExceeded",
    "RouteBadResponse",
    "RouteConnectionError",
    "RouteError",
    "RouteHTTPError",
    "RouteRateLimited",
    "RouteTimeout",
    "StoreDataError",
    "StoreError",
    "UsageError",
]


class FoureyesError(Exception):
    """Base class of every error foureyes raises on purpose."""


class ConfigError(FoureyesError):
    """Raised when configuration is malformed, inconsistent or incomplete.

    Attributes:
        problems: one line per problem, each naming the key or variable at fault.
            A secret's value never appears here, only the name of its variable.
    """

    def __init__(self, problems: list[str] | tuple[str, ...]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("invalid configuration: " + "; ".join(self.problems))


class RouteError(FoureyesError):
    """Raised when a call to a model route fails.

    Attributes:
        route: the configured route name.
        detail: a short, secret-free description of what went wrong.
    """

    def __init__(self, route: str, detail: str = "") -> None:
        self.route = route
        self.detail = detail
        super().__init__(self._message())

    def _message(self) -> str:
        kind = type(self).__name__
        return f"{kind} on route {self.route!r}" + (f": {self.detail}" if self.detail else "")


class RouteTimeout(RouteError):
    """Raised when a route gave no complete answer within the allowed time.

    Attributes:
        timeout_s: the time that was allowed, in seconds.
    """

    def __init__(self, route: str, timeout_s: float, detail: str = "") -> None:
        self.timeout_s = timeout_s
        super().__init__(route, detail or f"no answer within {timeout_s:.3g}s")


class RouteConnectionError(RouteError):
    """Raised when the route's endpoint could not be reached at all."""


class RouteHTTPError(RouteError):
    """Raised when the endpoint answered with an HTTP error status.

    Attributes:
        status_code: the HTTP status (401 wrong key, 404 unknown model, 5xx server error, ...).
    """

    def __init__(self, route: str, status_code: int, detail: str = "") -> None:
        self.status_code = status_code
        super().__init__(route, f"HTTP {status_code}" + (f": {detail}" if detail else ""))

    @property
    def is_server_error(self) -> bool:
        """Whether the status is a 5xx server-side failure."""
        return 500 <= self.status_code < 600


class RouteRateLimited(RouteHTTPError):
    """Raised when the endpoint answered HTTP 429.

    Attributes:
        retry_after_s: the server's Retry-After hint in seconds, when it gave one.
    """

    def __init__(self, route: str, retry_after_s: float | None = None, detail: str = "") -> None:
        self.retry_after_s = retry_after_s
        super().__init__(route, 429, detail or "rate limited")


class RouteBadResponse(RouteError):
    """Raised when the endpoint answered, but not with a usable completion.

    Examples: a body that is not JSON, a completion with no choices, a stream cut short.
    """


class ContractError(FoureyesError):
    """Raised when model output breaks its structured-output contract.

    Attributes:
        schema: name of the expected schema (the pydantic model's name).
        reason: a machine-readable failure kind, a
            :class:`foureyes.llm.structured.ParseFailure` value (``no_json``,
            ``invalid_json``, ``enum_invalid``, ...).
        detail: human-readable detail (field paths and messages; no model text beyond
            a short excerpt).
    """

    def __init__(self, schema: str, reason: str, detail: str = "") -> None:
        self.schema = schema
        self.reason = reason
        self.detail = detail
        super().__init__(f"{schema}: {reason}" + (f" ({detail})" if detail else ""))


class LimitExceeded(FoureyesError):
    """Raised when a limit stops the work.

    Attributes:
        limit: the limit's name (``calls``, ``usd``, ``deadline``, a route's daily limit, ...).
        value: the value that would have been reached.
        maximum: the configured maximum.
    """

    def __init__(self, limit: str, value: float, maximum: float) -> None:
        self.limit = limit
        self.value = value
        self.maximum = maximum
        super().__init__(f"{type(self).__name__}: {limit} would reach {value:g} (max {maximum:g})")


class BudgetExhausted(LimitExceeded):
    """Raised when a call budget or a spend limit has no room for another call."""


class DeadlineExceeded(LimitExceeded):
    """Raised when a run's deadline has passed before a call could start.

    ``value`` is the elapsed time and ``maximum`` the deadline's length, in seconds.
    """


class StoreError(FoureyesError):
    """Raised when the durable store fails: locked, unreachable, or a write was refused.

    Attributes:
        operation: what the store was doing (``append_event``, ``reserve``, ...).
        detail: the driver's message, without credentials.
    """

    def __init__(self, operation: str, detail: str = "") -> None:
        self.operation = operation
        self.detail = detail
        super().__init__(f"store failed during {operation}" + (f": {detail}" if detail else ""))


class StoreDataError(StoreError):
    """Raised when the store refused the data, not the operation: text it cannot hold.

    A NUL character (PostgreSQL refuses it in text and JSON) or an unpaired surrogate
    (no driver can encode it). The same values would be refused again, so, unlike other
    store failures, this is the caller's bad input, not a reason to retry later.
    """


class UsageError(RuntimeError):
    """Raised on programmer misuse of the library (a bug in the caller, not a model failure)."""
