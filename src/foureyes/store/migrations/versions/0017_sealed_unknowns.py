"""Open unknowns keep their words sealed: ``gate_open_unknowns.sealed_text`` and its expiry.

``sealed_text`` holds the unknown's words encrypted with AES-256-GCM under the store's
unknowns key (``[privacy] unknowns_key_env``, or a random key kept in ``store_secrets``),
bound to its row; ``sealed_expires_at`` is when they are erased unless the unknown is
resolved first. Both are new and nullable, added in place on both dialects: an unknown
raised before this revision has no sealed words (its prompts keep saying that its
wording is not kept) until a verdict raises it again.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_INDEX = "ix_gate_open_unknowns_sealed_expires_at"


def upgrade() -> None:
    # Nullable columns without defaults: SQLite adds them in place, no copy of the table.
    op.add_column("gate_open_unknowns", sa.Column("sealed_text", sa.LargeBinary(), nullable=True))
    op.add_column(
        "gate_open_unknowns",
        sa.Column("sealed_expires_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(_INDEX, "gate_open_unknowns", ["sealed_expires_at"])


def downgrade() -> None:
    op.drop_index(_INDEX, table_name="gate_open_unknowns")
    # SQLite 3.35 and later drop a column in place: no copy of the table.
    op.drop_column("gate_open_unknowns", "sealed_expires_at")
    op.drop_column("gate_open_unknowns", "sealed_text")
