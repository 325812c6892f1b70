"""A run belongs to a tenant: the trace list shows and filters runs by it.

The ``tenant`` of a run written before this revision is the one its meta names (the
support pipeline, a lone triage and a facts run record it there), when that is a string
of 1 to 128 characters; any other run belongs to tenant ``local``. The column keeps its
default ``local`` on both dialects: SQLite can drop a default only by copying the table,
which the foreign keys of the runs' events, texts and triages forbid.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

_INDEX = "ix_trace_runs_tenant_trace_id"
# The tenant a run's meta names, as each dialect reads it, and whether it is a string.
_NAMED = {
    "sqlite": ("json_extract(meta, '$.tenant')", "json_type(meta, '$.tenant') = 'text'"),
    "postgresql": ("meta ->> 'tenant'", "jsonb_typeof(meta -> 'tenant') = 'string'"),
}


def upgrade() -> None:
    op.add_column(
        "trace_runs",
        sa.Column("tenant", sa.String(128), nullable=False, server_default="local"),
    )
    named, is_string = _NAMED[op.get_bind().dialect.name]
    op.execute(
        f"UPDATE trace_runs SET tenant = {named}"
        f" WHERE {is_string} AND length({named}) BETWEEN 1 AND 128"
    )
    op.create_index(_INDEX, "trace_runs", ["tenant", "trace_id"])


def downgrade() -> None:
    op.drop_index(_INDEX, table_name="trace_runs")
    # SQLite 3.35 and later drop a column in place: no copy of the table.
    op.drop_column("trace_runs", "tenant")
