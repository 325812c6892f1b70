"""Initial schema: store secrets, traces, spend ledger.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "store_secrets",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("value", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_store_secrets"),
    )
    op.create_table(
        "trace_runs",
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("conversation_id", sa.String(256), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(64), nullable=True),
        sa.Column("reason", sa.String(64), nullable=True),
        sa.Column("input_fingerprint", sa.String(64), nullable=True),
        sa.Column("input_text", sa.Text(), nullable=True),
        sa.Column("input_text_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("meta", _JSON, nullable=False),
        sa.PrimaryKeyConstraint("trace_id", name="pk_trace_runs"),
    )
    op.create_index("ix_trace_runs_conversation_id", "trace_runs", ["conversation_id"])
    op.create_index("ix_trace_runs_input_text_expires_at", "trace_runs", ["input_text_expires_at"])
    op.create_table(
        "trace_events",
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("stage", sa.String(64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("data", _JSON, nullable=False),
        sa.ForeignKeyConstraint(
            ["trace_id"],
            ["trace_runs.trace_id"],
            name="fk_trace_events_trace_id_trace_runs",
        ),
        sa.PrimaryKeyConstraint("trace_id", "seq", name="pk_trace_events"),
    )
    op.create_table(
        "spend_days",
        sa.Column("key", sa.String(128), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("calls", sa.BigInteger(), nullable=False),
        sa.Column("usd_nano", sa.BigInteger(), nullable=False),
        sa.Column("reserved_calls", sa.BigInteger(), nullable=False),
        sa.Column("reserved_usd_nano", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "calls >= 0 AND usd_nano >= 0 AND reserved_calls >= 0 AND reserved_usd_nano >= 0",
            name="ck_spend_days_non_negative",
        ),
        sa.PrimaryKeyConstraint("key", "day", name="pk_spend_days"),
    )
    op.create_table(
        "spend_reservations",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("key", sa.String(128), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("calls", sa.BigInteger(), nullable=False),
        sa.Column("usd_nano", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("used_calls", sa.BigInteger(), nullable=True),
        sa.Column("used_usd_nano", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "state IN ('reserved', 'committed', 'released')", name="ck_spend_reservations_state"
        ),
        sa.ForeignKeyConstraint(
            ["key", "day"],
            ["spend_days.key", "spend_days.day"],
            name="fk_spend_reservations_key_day_spend_days",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_spend_reservations"),
    )
    op.create_index("ix_spend_reservations_key_day", "spend_reservations", ["key", "day"])


def downgrade() -> None:
    op.drop_table("spend_reservations")
    op.drop_table("spend_days")
    op.drop_table("trace_events")
    op.drop_table("trace_runs")
    op.drop_table("store_secrets")
