"""An observation is filed under the subject of its evidence, never under a caller's.

Adds ``evidence_snapshots.subject`` (whom a held snapshot's records are about) and a check
on every insert into ``observations``: its ``subject`` must be the one its snapshot
names, else ``foureyes: observation refused: subject_mismatch``. A snapshot held before
this revision names no subject, and no new observation may cite it (the durable owner
holds the snapshot again under a new digest, which covers the subject). Rows written
before are kept as they are.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from foureyes.store.rendering import REJECT_PREFIX

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

# True when the observation cites a held snapshot that names another subject (or none).
# A snapshot the store does not hold is left to observations_check (unknown_ref).
_FOREIGN = (
    "EXISTS (SELECT 1 FROM evidence_snapshots p WHERE p.catalog_sha256 = NEW.catalog_sha256)"
    " AND NOT EXISTS (SELECT 1 FROM evidence_snapshots p"
    " WHERE p.catalog_sha256 = NEW.catalog_sha256 AND p.subject = NEW.subject)"
)

_PG_CHECK = f"""
CREATE FUNCTION foureyes_check_observation_subject() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF {_FOREIGN} THEN
        RAISE EXCEPTION '{REJECT_PREFIX}subject_mismatch' USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$
"""


def upgrade() -> None:
    op.add_column("evidence_snapshots", sa.Column("subject", sa.String(256), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_CHECK)
        op.execute(
            "CREATE TRIGGER observations_subject_check BEFORE INSERT ON observations"
            " FOR EACH ROW EXECUTE FUNCTION foureyes_check_observation_subject()"
        )
    else:
        op.execute(
            "CREATE TRIGGER observations_subject_check BEFORE INSERT ON observations BEGIN"
            f" SELECT RAISE(ABORT, '{REJECT_PREFIX}subject_mismatch') WHERE {_FOREIGN}; END"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER observations_subject_check ON observations")
        op.execute("DROP FUNCTION foureyes_check_observation_subject()")
    else:
        op.execute("DROP TRIGGER observations_subject_check")
    op.drop_column("evidence_snapshots", "subject")
