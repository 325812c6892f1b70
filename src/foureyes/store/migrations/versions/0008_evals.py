"""Evaluation harness: runs and their finished case x arm pairs.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "eval_runs",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("suite", sa.String(64), nullable=False),
        sa.Column("suite_sha256", sa.String(64), nullable=False),
        sa.Column("facts", _JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name="pk_eval_runs"),
    )
    op.create_index("ix_eval_runs_suite", "eval_runs", ["suite"])
    op.create_table(
        "eval_results",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("case_id", sa.String(64), nullable=False),
        sa.Column("arm", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("record", _JSON, nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("status IN ('ok', 'failed')", name="ck_eval_results_status"),
        sa.ForeignKeyConstraint(
            ["run_id"], ["eval_runs.run_id"], name="fk_eval_results_run_id_eval_runs"
        ),
        sa.PrimaryKeyConstraint("run_id", "case_id", "arm", name="pk_eval_results"),
    )


def downgrade() -> None:
    op.drop_table("eval_results")
    op.drop_index("ix_eval_runs_suite", table_name="eval_runs")
    op.drop_table("eval_runs")
