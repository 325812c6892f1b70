"""Per-key request rate limits in the store: one token bucket row per key.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rate_buckets",
        sa.Column("key", sa.String(256), nullable=False),
        sa.Column("tokens", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("granted", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_rate_buckets")),
    )


def downgrade() -> None:
    op.drop_table("rate_buckets")
