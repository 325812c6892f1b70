"""Durable store: traces, spend ledger and every capability's tables (SQLite or PostgreSQL).

Open one with :meth:`Store.open`; it upgrades the schema and hands out the trace writer
(:attr:`Store.traces`), the spend ledger (:attr:`Store.ledger`) and one record keeper per
capability (``unknowns``, ``assessments``, ``alerts``, ``observations``, ``api_keys``,
``evals``, ``rate_buckets``).
Every database failure surfaces as :class:`~foureyes.core.errors.StoreError`.

Each name is imported on first use: a command that opens the store for one purpose (``trace
list`` reads runs) loads only the modules it uses (benchmarks/README.md, "Starting the
command line").
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:
    from foureyes.store._clock import WallClock
    from foureyes.store._database import GroupCommits
    from foureyes.store.alerts import AttemptState, PendingAttempt, SqlAlertRecords
    from foureyes.store.api_keys import (
        ApiKeyRecord,
        KeyScope,
        NewApiKey,
        SqlApiKeys,
        api_key_digest,
    )
    from foureyes.store.assessments import NewAssessment, SqlAssessmentLog, StoredAssessment
    from foureyes.store.consent import Contact, OptIn, SqlConsentRecords
    from foureyes.store.engine import Store
    from foureyes.store.evals import EvalResultRow, EvalRunRow, SqlEvalStore
    from foureyes.store.ledger import SqlSpendLedger
    from foureyes.store.observations import (
        NewObservation,
        ObservationBatch,
        RecordedBatch,
        SqlObservationLog,
        StoredObservation,
    )
    from foureyes.store.rate_limits import BucketLease, BucketTake, SqlRateBuckets
    from foureyes.store.traces import PurgeCounts, SqlTraceWriter, new_trace_id
    from foureyes.store.unknowns import OpenUnknown, SqlOpenUnknowns

_LAZY = {
    "ApiKeyRecord": "foureyes.store.api_keys",
    "AttemptState": "foureyes.store.alerts",
    "BucketLease": "foureyes.store.rate_limits",
    "BucketTake": "foureyes.store.rate_limits",
    "Contact": "foureyes.store.consent",
    "EvalResultRow": "foureyes.store.evals",
    "EvalRunRow": "foureyes.store.evals",
    "GroupCommits": "foureyes.store._database",
    "KeyScope": "foureyes.store.api_keys",
    "NewApiKey": "foureyes.store.api_keys",
    "NewAssessment": "foureyes.store.assessments",
    "NewObservation": "foureyes.store.observations",
    "ObservationBatch": "foureyes.store.observations",
    "OpenUnknown": "foureyes.store.unknowns",
    "OptIn": "foureyes.store.consent",
    "PendingAttempt": "foureyes.store.alerts",
    "PurgeCounts": "foureyes.store.traces",
    "RecordedBatch": "foureyes.store.observations",
    "SqlAlertRecords": "foureyes.store.alerts",
    "SqlApiKeys": "foureyes.store.api_keys",
    "SqlAssessmentLog": "foureyes.store.assessments",
    "SqlConsentRecords": "foureyes.store.consent",
    "SqlEvalStore": "foureyes.store.evals",
    "SqlObservationLog": "foureyes.store.observations",
    "SqlOpenUnknowns": "foureyes.store.unknowns",
    "SqlRateBuckets": "foureyes.store.rate_limits",
    "SqlSpendLedger": "foureyes.store.ledger",
    "SqlTraceWriter": "foureyes.store.traces",
    "Store": "foureyes.store.engine",
    "StoredAssessment": "foureyes.store.assessments",
    "StoredObservation": "foureyes.store.observations",
    "WallClock": "foureyes.store._clock",
    "api_key_digest": "foureyes.store.api_keys",
    "new_trace_id": "foureyes.store.traces",
}

__all__ = [
    "ApiKeyRecord",
    "AttemptState",
    "BucketLease",
    "BucketTake",
    "Contact",
    "EvalResultRow",
    "EvalRunRow",
    "GroupCommits",
    "KeyScope",
    "NewApiKey",
    "NewAssessment",
    "NewObservation",
    "ObservationBatch",
    "OpenUnknown",
    "OptIn",
    "PendingAttempt",
    "PurgeCounts",
    "RecordedBatch",
    "SqlAlertRecords",
    "SqlApiKeys",
    "SqlAssessmentLog",
    "SqlConsentRecords",
    "SqlEvalStore",
    "SqlObservationLog",
    "SqlOpenUnknowns",
    "SqlRateBuckets",
    "SqlSpendLedger",
    "SqlTraceWriter",
    "Store",
    "StoredAssessment",
    "StoredObservation",
    "WallClock",
    "api_key_digest",
    "new_trace_id",
]


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'foureyes.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
