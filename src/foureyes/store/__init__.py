"""Durable store: traces, spend ledger and every capability's tables (SQLite or PostgreSQL).

Open one with :meth:`Store.open`; it upgrades the schema and hands out the trace writer
(:attr:`Store.traces`), the spend ledger (:attr:`Store.ledger`) and one record keeper per
capability (``unknowns``, ``assessments``, ``alerts``, ``observations``, ``api_keys``,
``evals``, ``rate_buckets``).
Every database failure surfaces as :class:`~foureyes.core.errors.StoreError`.
"""

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
