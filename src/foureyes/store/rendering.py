"""The database's own renderer: SQL that refuses an observation its evidence does not say.

The durable owner renders in Python; the store renders again in SQL, in the database
itself, and the ``observations`` table accepts a row only when both agree (revision 0014
installs the checks). The SQL reads nothing but the store's frozen evidence tables: the
snapshot rows (``evidence_snapshots``, ``evidence_records``, and each record's slot texts
in ``evidence_slots``), and the kinds' templates (``observation_templates``,
``observation_kind_sources``). A template is ``literal ({name} literal)+`` with no brace in
its literal text, checked by the template table itself, so rendering is plain
substitution: walk the template from brace to brace, and put each slot's stored text in
place of ``{name}``. A slot the record cannot fill has no row, and the rendering is
``NULL``, which no description equals.

On PostgreSQL the renderer is the PL/pgSQL function ``foureyes_render(template,
catalog_sha256, ref)``; SQLite has no stored functions, so its triggers inline the
expression :func:`sqlite_rendering` builds (a recursive common table expression). Tests
render through the very same function and expression.

What the checks enforce (every insert, whoever connects): the row cites a record of a
snapshot the store holds, with that record's digest and kind, the record is admissible,
the kind may cite a record of that kind and source (``kind_incompatible``,
``source_incompatible``), and label and description are the kind's template rendered from
that record. Observations and the evidence tables are append-only: updates and deletes are
refused. What they cannot enforce: that the snapshot rows are the application's true
records; the writer of those rows (the owner's role, see ``foureyes store init-roles``) is
trusted for that.
"""

from __future__ import annotations

__all__ = [
    "PG_RENDER_FUNCTION",
    "PG_TEMPLATE_SHAPE",
    "REJECT_PREFIX",
    "SQL_RENDERER_VERSION",
    "sqlite_rendering",
    "sqlite_template_shape",
]

SQL_RENDERER_VERSION = "2"
"""The renderer version the SQL implements; templates of other versions are refused."""

REJECT_PREFIX = "foureyes: observation refused: "
"""How every refusal of the checks starts (then the reason: ``unknown_ref``, ...)."""

MAX_TEMPLATE_CHARS = 2000


def _slot_lookup(catalog: str, ref: str, rest: str) -> str:
    return (
        "(SELECT s.slot_text FROM evidence_slots s"
        f" WHERE s.catalog_sha256 = {catalog} AND s.ref = {ref}"
        f" AND s.slot = substr({rest}, instr({rest}, '{{') + 1,"
        f" instr({rest}, '}}') - instr({rest}, '{{') - 1))"
    )


def sqlite_rendering(template: str, catalog: str, ref: str) -> str:
    """An SQLite expression: ``template`` rendered from record ``ref`` of ``catalog``.

    Each argument is an SQL expression (``NEW.catalog_sha256``, a bound ``:ref``). The
    value is ``NULL`` when a slot cannot be filled or the template is malformed.
    """
    return (
        "(WITH RECURSIVE walk(rest, out) AS ("
        f" SELECT {template}, ''"
        " UNION ALL SELECT"
        " CASE WHEN instr(rest, '{') = 0 THEN '' ELSE substr(rest, instr(rest, '}') + 1) END,"
        " CASE WHEN instr(rest, '{') = 0 THEN out || rest"
        " WHEN instr(rest, '}') <= instr(rest, '{') THEN NULL"
        " ELSE out || substr(rest, 1, instr(rest, '{') - 1) || "
        + _slot_lookup(catalog, ref, "rest")
        + " END"
        " FROM walk WHERE rest <> '' AND out IS NOT NULL)"
        " SELECT out FROM walk WHERE rest = '' LIMIT 1)"
    )


def sqlite_template_shape(template: str) -> str:
    """An SQLite expression, true when ``template`` is ``literal ({name} literal)+``."""
    brace, close = "instr(rest, '{')", "instr(rest, '}')"
    name = f"substr(rest, {brace} + 1, {close} - {brace} - 1)"
    return (
        "(WITH RECURSIVE tok(rest, ok, slots) AS ("
        f" SELECT {template}, length({template}) <= {MAX_TEMPLATE_CHARS}, 0"
        " UNION ALL SELECT"
        f" CASE WHEN {brace} = 0 THEN '' ELSE substr(rest, {close} + 1) END,"
        f" CASE WHEN {brace} = 0 THEN {close} = 0"
        f" ELSE {close} > {brace} + 1 AND {close} - {brace} - 1 <= 64"
        f" AND substr(rest, {brace} + 1, 1) GLOB '[A-Za-z_]'"
        f" AND {name} NOT GLOB '*[^A-Za-z0-9_]*' END,"
        f" slots + ({brace} > 0)"
        " FROM tok WHERE rest <> '' AND ok)"
        " SELECT ok AND slots > 0 FROM tok WHERE rest = '' OR NOT ok ORDER BY ok LIMIT 1)"
    )


PG_TEMPLATE_SHAPE = (
    f"char_length(template) <= {MAX_TEMPLATE_CHARS} AND "
    "template ~ '^[^{}]*(\\{[A-Za-z_][A-Za-z0-9_]{0,63}\\}[^{}]*)+$'"
)
"""The PostgreSQL CHECK on a template's shape: the grammar as one regular expression."""

PG_RENDER_FUNCTION = """
CREATE FUNCTION foureyes_render(template text, catalog text, record_ref text)
RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
    rest text := template;
    out text := '';
    open_at integer;
    close_at integer;
    piece text;
BEGIN
    LOOP
        open_at := strpos(rest, '{');
        IF open_at = 0 THEN
            RETURN out || rest;
        END IF;
        close_at := strpos(rest, '}');
        IF close_at <= open_at THEN
            RETURN NULL;
        END IF;
        piece := NULL;
        SELECT s.slot_text INTO piece FROM evidence_slots s
         WHERE s.catalog_sha256 = catalog AND s.ref = record_ref
           AND s.slot = substr(rest, open_at + 1, close_at - open_at - 1);
        IF piece IS NULL THEN
            RETURN NULL;
        END IF;
        out := out || substr(rest, 1, open_at - 1) || piece;
        rest := substr(rest, close_at + 1);
    END LOOP;
END
$$
"""
"""The PostgreSQL renderer; the observations trigger and tests call it."""
