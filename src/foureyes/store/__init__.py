"""Durable store: traces, spend ledger, migrations (SQLite default, PostgreSQL by URL)."""
