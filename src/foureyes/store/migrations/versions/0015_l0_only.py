"""A triage's status may be ``l0_only``: a daily L1 limit left the message to L0 alone.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_TABLE = "risk_assessments"
# The names 0003 gave, as the naming convention applied to them (prefixed twice).
_STATUS = "ck_risk_assessments_ck_risk_assessments_status"
_PURPOSE = "ck_risk_assessments_ck_risk_assessments_purpose"
_PURPOSES = "purpose IN ('live', 'test', 'calibration')"


def _set_statuses(condition: str) -> None:
    if op.get_bind().dialect.name == "sqlite":
        # SQLite alters a constraint by copying the table, and the copy does not reflect
        # CHECK constraints: both are written again.
        with op.batch_alter_table(_TABLE, recreate="always") as batch:
            batch.create_check_constraint(op.f(_PURPOSE), _PURPOSES)
            batch.create_check_constraint(op.f(_STATUS), condition)
        return
    op.drop_constraint(op.f(_STATUS), _TABLE, type_="check")
    op.create_check_constraint(op.f(_STATUS), _TABLE, condition)


def upgrade() -> None:
    _set_statuses("status IN ('ok', 'unknown', 'unscreened', 'l0_only')")


def downgrade() -> None:
    # An l0_only triage is L0's low: the status it had before this revision.
    op.execute(f"UPDATE {_TABLE} SET status = 'ok' WHERE status = 'l0_only'")
    _set_statuses("status IN ('ok', 'unknown', 'unscreened')")
