"""Release gate: open unknowns kept on a conversation.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gate_open_unknowns",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("text_sha256", sa.String(64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("raised_by", sa.String(32), nullable=False),
        sa.Column("raised_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resolved_by", sa.String(256), nullable=True),
        sa.ForeignKeyConstraint(
            ["raised_by"],
            ["trace_runs.trace_id"],
            name="fk_gate_open_unknowns_raised_by_trace_runs",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_gate_open_unknowns"),
        sa.UniqueConstraint(
            "conversation_id",
            "text_sha256",
            name="uq_gate_open_unknowns_conversation_id_text_sha256",
        ),
    )
    op.create_index(
        "ix_gate_open_unknowns_conversation_id_resolved_at",
        "gate_open_unknowns",
        ["conversation_id", "resolved_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_gate_open_unknowns_conversation_id_resolved_at", "gate_open_unknowns")
    op.drop_table("gate_open_unknowns")
