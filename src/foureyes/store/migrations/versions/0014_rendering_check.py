"""The database checks the rendering: observations must restate frozen evidence.

Adds the frozen evidence tables (snapshots, records, slot texts, kind templates and the
records each kind may cite) and the checks of :mod:`foureyes.store.rendering`: an
observation is inserted only when it cites a held record and its label and description
are the kind's template rendered from that record, in SQL; a template is accepted only in
the slot grammar. Observations and the evidence tables become append-only.

Rows written before this revision are kept as they are: no snapshot rows back them.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from foureyes.store.rendering import (
    PG_RENDER_FUNCTION,
    PG_TEMPLATE_SHAPE,
    REJECT_PREFIX,
    SQL_RENDERER_VERSION,
    sqlite_rendering,
    sqlite_template_shape,
)

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_FROZEN = (
    "observations",
    "evidence_snapshots",
    "evidence_records",
    "evidence_slots",
    "observation_templates",
    "observation_kind_sources",
)


def _tables() -> None:
    op.create_table(
        "evidence_snapshots",
        sa.Column("catalog_sha256", sa.String(64), nullable=False),
        sa.Column("snapshot_id", sa.String(256), nullable=False),
        sa.PrimaryKeyConstraint("catalog_sha256", name="pk_evidence_snapshots"),
    )
    op.create_table(
        "evidence_records",
        sa.Column("catalog_sha256", sa.String(64), nullable=False),
        sa.Column("ref", sa.String(256), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(128), nullable=False),
        sa.Column("source", sa.String(256), nullable=False),
        sa.Column("admissible", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["catalog_sha256"],
            ["evidence_snapshots.catalog_sha256"],
            name="fk_evidence_records_catalog_sha256_evidence_snapshots",
        ),
        sa.PrimaryKeyConstraint("catalog_sha256", "ref", name="pk_evidence_records"),
    )
    op.create_table(
        "evidence_slots",
        sa.Column("catalog_sha256", sa.String(64), nullable=False),
        sa.Column("ref", sa.String(256), nullable=False),
        sa.Column("slot", sa.String(64), nullable=False),
        sa.Column("slot_text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["catalog_sha256", "ref"],
            ["evidence_records.catalog_sha256", "evidence_records.ref"],
            name="fk_evidence_slots_catalog_sha256_ref_evidence_records",
        ),
        sa.PrimaryKeyConstraint("catalog_sha256", "ref", "slot", name="pk_evidence_slots"),
    )
    op.create_table(
        "observation_templates",
        sa.Column("kinds_sha256", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("locale", sa.String(16), nullable=False),
        sa.Column("renderer_version", sa.String(32), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("template", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint(
            "kinds_sha256", "kind", "locale", "renderer_version", name="pk_observation_templates"
        ),
    )
    op.create_table(
        "observation_kind_sources",
        sa.Column("kinds_sha256", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("axis", sa.String(16), nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.CheckConstraint("axis IN ('kind', 'source')", name="ck_observation_kind_sources_axis"),
        sa.PrimaryKeyConstraint(
            "kinds_sha256", "kind", "axis", "name", name="pk_observation_kind_sources"
        ),
    )


def _record(alias: str, new: str = "NEW") -> str:
    return (
        f"SELECT 1 FROM evidence_records {alias} JOIN evidence_snapshots p"
        f" ON p.catalog_sha256 = {alias}.catalog_sha256"
        f" WHERE {alias}.catalog_sha256 = {new}.catalog_sha256"
        f" AND {alias}.ref = {new}.evidence_ref AND p.snapshot_id = {new}.snapshot_id"
    )


_TEMPLATE = (
    "SELECT {column} FROM observation_templates t WHERE t.kinds_sha256 = NEW.kinds_sha256"
    " AND t.kind = NEW.kind AND t.locale = NEW.locale"
    " AND t.renderer_version = NEW.renderer_version"
)


def _axis(axis: str, column: str) -> str:
    return (
        "SELECT 1 FROM observation_kind_sources k WHERE k.kinds_sha256 = NEW.kinds_sha256"
        f" AND k.kind = NEW.kind AND k.axis = '{axis}'"
        + (
            f" AND k.name = (SELECT r.{column} FROM evidence_records r"
            " WHERE r.catalog_sha256 = NEW.catalog_sha256 AND r.ref = NEW.evidence_ref)"
            if column
            else ""
        )
    )


def _sqlite() -> None:
    checks = [
        ("unknown_ref", f"NOT EXISTS ({_record('r')})"),
        (
            "record_mismatch",
            f"NOT EXISTS ({_record('r')} AND r.sha256 = NEW.evidence_sha256"
            " AND r.kind = NEW.evidence_kind)",
        ),
        ("inadmissible", f"NOT EXISTS ({_record('r')} AND r.admissible)"),
        ("unknown_kind", f"NOT EXISTS ({_TEMPLATE.format(column='1')})"),
        ("kind_incompatible", f"NOT EXISTS ({_axis('kind', 'kind')})"),
        (
            "source_incompatible",
            f"EXISTS ({_axis('source', '')}) AND NOT EXISTS ({_axis('source', 'source')})",
        ),
        ("label_mismatch", f"NEW.label IS NOT ({_TEMPLATE.format(column='t.label')})"),
        (
            "render_mismatch",
            "NEW.description IS NOT "
            + sqlite_rendering(
                f"({_TEMPLATE.format(column='t.template')})",
                "NEW.catalog_sha256",
                "NEW.evidence_ref",
            ),
        ),
    ]
    body = "".join(
        f"SELECT RAISE(ABORT, '{REJECT_PREFIX}{reason}') WHERE {condition};\n"
        for reason, condition in checks
    )
    op.execute(f"CREATE TRIGGER observations_check BEFORE INSERT ON observations BEGIN\n{body}END")
    op.execute(
        "CREATE TRIGGER observation_templates_shape BEFORE INSERT ON observation_templates"
        f" BEGIN SELECT RAISE(ABORT, '{REJECT_PREFIX}template_shape')"
        f" WHERE NOT {sqlite_template_shape('NEW.template')}"
        f" OR NEW.renderer_version <> '{SQL_RENDERER_VERSION}'; END"
    )
    for table in _FROZEN:
        for event in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {table}_no_{event.lower()} BEFORE {event} ON {table}"
                f" BEGIN SELECT RAISE(ABORT, 'foureyes: {table} is append-only'); END"
            )


_PG_CHECK = f"""
CREATE FUNCTION foureyes_check_observation() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rec evidence_records%ROWTYPE;
    tpl observation_templates%ROWTYPE;
BEGIN
    SELECT r.* INTO rec FROM evidence_records r JOIN evidence_snapshots p
        ON p.catalog_sha256 = r.catalog_sha256
     WHERE r.catalog_sha256 = NEW.catalog_sha256 AND r.ref = NEW.evidence_ref
       AND p.snapshot_id = NEW.snapshot_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '{REJECT_PREFIX}unknown_ref' USING ERRCODE = 'check_violation';
    END IF;
    IF rec.sha256 <> NEW.evidence_sha256 OR rec.kind <> NEW.evidence_kind THEN
        RAISE EXCEPTION '{REJECT_PREFIX}record_mismatch' USING ERRCODE = 'check_violation';
    END IF;
    IF NOT rec.admissible THEN
        RAISE EXCEPTION '{REJECT_PREFIX}inadmissible' USING ERRCODE = 'check_violation';
    END IF;
    SELECT t.* INTO tpl FROM observation_templates t
     WHERE t.kinds_sha256 = NEW.kinds_sha256 AND t.kind = NEW.kind AND t.locale = NEW.locale
       AND t.renderer_version = NEW.renderer_version;
    IF NOT FOUND THEN
        RAISE EXCEPTION '{REJECT_PREFIX}unknown_kind' USING ERRCODE = 'check_violation';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM observation_kind_sources k WHERE k.kinds_sha256 = NEW.kinds_sha256
                   AND k.kind = NEW.kind AND k.axis = 'kind' AND k.name = rec.kind) THEN
        RAISE EXCEPTION '{REJECT_PREFIX}kind_incompatible' USING ERRCODE = 'check_violation';
    END IF;
    IF EXISTS (SELECT 1 FROM observation_kind_sources k WHERE k.kinds_sha256 = NEW.kinds_sha256
               AND k.kind = NEW.kind AND k.axis = 'source')
       AND NOT EXISTS (SELECT 1 FROM observation_kind_sources k
                       WHERE k.kinds_sha256 = NEW.kinds_sha256 AND k.kind = NEW.kind
                         AND k.axis = 'source' AND k.name = rec.source) THEN
        RAISE EXCEPTION '{REJECT_PREFIX}source_incompatible' USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.label IS DISTINCT FROM tpl.label THEN
        RAISE EXCEPTION '{REJECT_PREFIX}label_mismatch' USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.description IS DISTINCT FROM
       foureyes_render(tpl.template, NEW.catalog_sha256, NEW.evidence_ref) THEN
        RAISE EXCEPTION '{REJECT_PREFIX}render_mismatch' USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$
"""

_PG_APPEND_ONLY = """
CREATE FUNCTION foureyes_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'foureyes: % is append-only', TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$
"""


def _postgresql() -> None:
    op.create_check_constraint(
        "ck_observation_templates_shape",
        "observation_templates",
        f"{PG_TEMPLATE_SHAPE} AND renderer_version = '{SQL_RENDERER_VERSION}'",
    )
    op.execute(PG_RENDER_FUNCTION)
    op.execute(_PG_CHECK)
    op.execute(_PG_APPEND_ONLY)
    op.execute(
        "CREATE TRIGGER observations_check BEFORE INSERT ON observations"
        " FOR EACH ROW EXECUTE FUNCTION foureyes_check_observation()"
    )
    for table in _FROZEN:
        op.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}"
            " FOR EACH ROW EXECUTE FUNCTION foureyes_append_only()"
        )
        op.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}"
            " FOR EACH STATEMENT EXECUTE FUNCTION foureyes_append_only()"
        )


def upgrade() -> None:
    _tables()
    if op.get_bind().dialect.name == "postgresql":
        _postgresql()
    else:
        _sqlite()


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in _FROZEN:
            op.execute(f"DROP TRIGGER {table}_append_only ON {table}")
            op.execute(f"DROP TRIGGER {table}_no_truncate ON {table}")
        op.execute("DROP TRIGGER observations_check ON observations")
        op.execute("DROP FUNCTION foureyes_append_only()")
        op.execute("DROP FUNCTION foureyes_check_observation()")
        op.execute("DROP FUNCTION foureyes_render(text, text, text)")
    else:
        for table in _FROZEN:
            op.execute(f"DROP TRIGGER {table}_no_update")
            op.execute(f"DROP TRIGGER {table}_no_delete")
        op.execute("DROP TRIGGER observations_check")
        op.execute("DROP TRIGGER observation_templates_shape")
    for table in reversed(_FROZEN[1:]):
        op.drop_table(table)
