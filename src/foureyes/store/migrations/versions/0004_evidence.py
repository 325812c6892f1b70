"""Evidence-bound observations: durable facts rendered by code from cited evidence.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "observations",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("commit_id", sa.String(32), nullable=False),
        sa.Column("subject", sa.String(256), nullable=False),
        sa.Column("snapshot_id", sa.String(256), nullable=False),
        sa.Column("evidence_ref", sa.String(256), nullable=False),
        sa.Column("evidence_kind", sa.String(128), nullable=False),
        sa.Column("evidence_sha256", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("locale", sa.String(16), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("catalog_sha256", sa.String(64), nullable=False),
        sa.Column("kinds_sha256", sa.String(64), nullable=False),
        sa.Column("renderer_version", sa.String(32), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["trace_id"], ["trace_runs.trace_id"], name="fk_observations_trace_id_trace_runs"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_observations"),
        sa.UniqueConstraint(
            "subject",
            "snapshot_id",
            "evidence_ref",
            name="uq_observations_subject_snapshot_id_evidence_ref",
        ),
    )
    op.create_index("ix_observations_commit_id", "observations", ["commit_id"])
    op.create_index("ix_observations_subject_created_at", "observations", ["subject", "created_at"])


def downgrade() -> None:
    op.drop_table("observations")
