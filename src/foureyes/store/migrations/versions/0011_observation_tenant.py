"""Evidence-bound observations belong to a tenant: the API key that committed them.

Rows written before this revision belong to tenant ``local`` (only the admin scope and
the open-loopback caller read them). One record is observed once per tenant, subject
and snapshot, so one key's commits never report, or block, another key's records.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_OLD_UNIQUE = "uq_observations_subject_snapshot_id_evidence_ref"
_NEW_UNIQUE = "uq_observations_tenant_subject_snapshot_id_evidence_ref"


def upgrade() -> None:
    with op.batch_alter_table("observations") as batch:
        batch.add_column(
            sa.Column("tenant", sa.String(128), nullable=False, server_default="local")
        )
        batch.drop_constraint(_OLD_UNIQUE, type_="unique")
        batch.create_unique_constraint(
            _NEW_UNIQUE, ["tenant", "subject", "snapshot_id", "evidence_ref"]
        )
    with op.batch_alter_table("observations") as batch:
        batch.alter_column("tenant", server_default=None, existing_type=sa.String(128))


def downgrade() -> None:
    with op.batch_alter_table("observations") as batch:
        batch.drop_constraint(_NEW_UNIQUE, type_="unique")
        batch.create_unique_constraint(_OLD_UNIQUE, ["subject", "snapshot_id", "evidence_ref"])
        batch.drop_column("tenant")
