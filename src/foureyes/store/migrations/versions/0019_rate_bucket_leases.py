"""A rate bucket's row says how many tokens its last statement took (leases of several).

Adds ``rate_buckets.taken``: the tokens the last ``INSERT ... ON CONFLICT DO UPDATE`` on
the row took (0 when refused). The statement's ``RETURNING`` sees only the new row, so a
process leasing up to k tokens at once learns how many it got from this column. Rows
written before hold 0 until their next statement.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "rate_buckets", sa.Column("taken", sa.Integer(), nullable=False, server_default="0")
    )


def downgrade() -> None:
    with op.batch_alter_table("rate_buckets") as batch:
        batch.drop_column("taken")
