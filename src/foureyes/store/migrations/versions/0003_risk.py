"""Crisis triage and guardian alerts: assessments, flights, opt-ins, contacts, alerts.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "risk_assessments",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=True),
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("purpose", sa.String(16), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("text_fingerprint", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("level", sa.String(16), nullable=True),
        sa.Column("tier", sa.String(4), nullable=False),
        sa.Column("confirmed", sa.Boolean(), nullable=False),
        sa.Column("policy", sa.String(16), nullable=False),
        sa.Column("reasons", _JSON, nullable=False),
        sa.Column("detail", _JSON, nullable=False),
        sa.CheckConstraint(
            "purpose IN ('live', 'test', 'calibration')", name="ck_risk_assessments_purpose"
        ),
        sa.CheckConstraint("status IN ('ok', 'unknown')", name="ck_risk_assessments_status"),
        sa.ForeignKeyConstraint(
            ["trace_id"], ["trace_runs.trace_id"], name="fk_risk_assessments_trace_id_trace_runs"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_risk_assessments"),
    )
    op.create_index(
        "ix_risk_assessments_conversation_id_purpose_day",
        "risk_assessments",
        ["conversation_id", "purpose", "day"],
    )
    op.create_table(
        "risk_flights",
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("token", sa.String(32), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_risk_flights"),
    )
    op.create_table(
        "alert_opt_ins",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("opted_in_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_alert_opt_ins"),
    )
    op.create_index("ix_alert_opt_ins_conversation_id", "alert_opt_ins", ["conversation_id"])
    op.create_table(
        "guardian_contacts",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("address", sa.Text(), nullable=False),
        sa.Column("locale", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("verified_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_guardian_contacts"),
    )
    op.create_index(
        "ix_guardian_contacts_conversation_id", "guardian_contacts", ["conversation_id"]
    )
    op.create_table(
        "alert_decisions",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("purpose", sa.String(16), nullable=False),
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("episode", sa.String(64), nullable=False),
        sa.Column("assessment_id", sa.String(32), nullable=True),
        sa.Column("contact_id", sa.String(32), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.CheckConstraint(
            "outcome IN ('blocked', 'attempted')", name="ck_alert_decisions_outcome"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_alert_decisions"),
    )
    op.create_index("ix_alert_decisions_conversation_id", "alert_decisions", ["conversation_id"])
    op.create_table(
        "alert_attempts",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("decision_id", sa.String(32), nullable=False),
        sa.Column("conversation_id", sa.String(256), nullable=False),
        sa.Column("contact_id", sa.String(32), nullable=False),
        sa.Column("episode", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("message_sha256", sa.String(64), nullable=False),
        sa.Column("notifier", sa.String(16), nullable=False),
        sa.CheckConstraint(
            "state IN ('pending', 'sent', 'failed')", name="ck_alert_attempts_state"
        ),
        sa.ForeignKeyConstraint(
            ["decision_id"],
            ["alert_decisions.id"],
            name="fk_alert_attempts_decision_id_alert_decisions",
        ),
        sa.ForeignKeyConstraint(
            ["contact_id"],
            ["guardian_contacts.id"],
            name="fk_alert_attempts_contact_id_guardian_contacts",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_alert_attempts"),
        sa.UniqueConstraint(
            "conversation_id",
            "contact_id",
            "episode",
            name="uq_alert_attempts_conversation_id_contact_id_episode",
        ),
    )
    op.create_index(
        "ix_alert_attempts_contact_id_created_at", "alert_attempts", ["contact_id", "created_at"]
    )
    op.create_index("ix_alert_attempts_created_at", "alert_attempts", ["created_at"])


def downgrade() -> None:
    op.drop_table("alert_attempts")
    op.drop_table("alert_decisions")
    op.drop_table("guardian_contacts")
    op.drop_table("alert_opt_ins")
    op.drop_table("risk_flights")
    op.drop_table("risk_assessments")
