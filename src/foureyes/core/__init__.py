"""The shared spine: digests, reasons, roles, deadlines, budgets, trace, errors, validation.

``core`` imports nothing else from foureyes.
"""

from foureyes.core.budget import (
    CallBudget,
    Reservation,
    SpendLedger,
    SpendLimit,
    SpendUsage,
    cost_usd,
    utc_day,
)
from foureyes.core.catalogue import Catalogue
from foureyes.core.datadir import DATA_DIR_ENV, DATA_HOWTO, data_dir
from foureyes.core.deadline import Clock, Deadline
from foureyes.core.digest import (
    Proposal,
    canonical_json,
    is_sha256_hex,
    sha256_hex,
    text_fingerprint,
)
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
    StoreDataError,
    StoreError,
    UsageError,
)
from foureyes.core.locale import Locale, detect_locale
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.core.roles import Role
from foureyes.core.trace import EventKind, TraceEvent, TraceRecord, TraceRun, TraceWriter
from foureyes.core.validation import ValidationProblem, explain_errors

__all__ = [
    "BudgetExhausted",
    "CallBudget",
    "Catalogue",
    "Clock",
    "ConfigError",
    "ContractError",
    "DATA_DIR_ENV",
    "DATA_HOWTO",
    "Deadline",
    "DeadlineExceeded",
    "EventKind",
    "FoureyesError",
    "GenerationPolicy",
    "LimitExceeded",
    "Locale",
    "Proposal",
    "ReasonCode",
    "Reservation",
    "Role",
    "RouteBadResponse",
    "RouteConnectionError",
    "RouteError",
    "RouteHTTPError",
    "RouteRateLimited",
    "RouteTimeout",
    "SpendLedger",
    "SpendLimit",
    "SpendUsage",
    "StoreDataError",
    "StoreError",
    "TraceEvent",
    "TraceRecord",
    "TraceRun",
    "TraceWriter",
    "UsageError",
    "ValidationProblem",
    "canonical_json",
    "cost_usd",
    "data_dir",
    "detect_locale",
    "explain_errors",
    "is_sha256_hex",
    "sha256_hex",
    "text_fingerprint",
    "utc_day",
]
