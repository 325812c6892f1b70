"""Support pipeline: index the triage of each run, for the trace list's join.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_risk_assessments_trace_id", "risk_assessments", ["trace_id"])


def downgrade() -> None:
    op.drop_index("ix_risk_assessments_trace_id", table_name="risk_assessments")
