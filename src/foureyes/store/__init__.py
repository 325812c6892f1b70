"""Durable store: traces, spend ledger, migrations (SQLite default, PostgreSQL by URL).

Open one with :meth:`Store.open`; it upgrades the schema and hands out the trace writer
(:attr:`Store.traces`) and the spend ledger (:attr:`Store.ledger`). Every database failure
surfaces as :class:`~foureyes.core.errors.StoreError`.
"""

from foureyes.store._clock import WallClock
from foureyes.store.engine import Store
from foureyes.store.ledger import SqlSpendLedger
from foureyes.store.traces import SqlTraceWriter, new_trace_id

__all__ = [
    "SqlSpendLedger",
    "SqlTraceWriter",
    "Store",
    "WallClock",
    "new_trace_id",
]
