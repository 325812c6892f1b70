"""Retention of model-written text: trace_texts, and open unknowns whose text may expire.

Revision ID: 0010
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "trace_texts",
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["trace_id"], ["trace_runs.trace_id"], name="fk_trace_texts_trace_id_trace_runs"
        ),
        sa.PrimaryKeyConstraint("trace_id", "fingerprint", name="pk_trace_texts"),
    )
    op.create_index("ix_trace_texts_expires_at", "trace_texts", ["expires_at"])
    # Rows recorded before this revision have text and no expiry: the purge and the reads
    # treat them by the privacy settings in force (SqlOpenUnknowns), counting from
    # raised_at, since the revision cannot know those settings.
    with op.batch_alter_table("gate_open_unknowns") as batch:
        batch.alter_column("text", existing_type=sa.Text(), nullable=True)
        batch.add_column(sa.Column("text_expires_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_gate_open_unknowns_text_expires_at", "gate_open_unknowns", ["text_expires_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_gate_open_unknowns_text_expires_at", table_name="gate_open_unknowns")
    with op.batch_alter_table("gate_open_unknowns") as batch:
        batch.drop_column("text_expires_at")
        batch.alter_column("text", existing_type=sa.Text(), nullable=False)
    op.drop_index("ix_trace_texts_expires_at", table_name="trace_texts")
    op.drop_table("trace_texts")
