"""The database checks the rendering itself: raw inserts, with every Python check bypassed.

Each test writes the example's snapshot and kinds through the store (the owner's path),
then talks to the database over a raw driver connection (sqlite3, asyncpg) as a hostile
process holding the store's credentials would, and shows what the tables refuse.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.core.locale import Locale
from foureyes.evidence import Catalog, EvidenceItem, KindRegistry, Template, render
from foureyes.evidence.durable import held_kinds, held_snapshot
from foureyes.evidence.render import RENDERER_VERSION, render_template, slot_texts
from foureyes.store import Store
from foureyes.store.observations import NewObservation, ObservationBatch
from foureyes.store.rendering import REJECT_PREFIX, sqlite_rendering, sqlite_template_shape
from tests.evidence._support import example_catalog, example_kinds
from tests.helpers.stores import seed_migrated

_HOSTILE = "说明训练量不足"


class Raw:
    """One raw connection, ``?`` placeholders on both backends."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pg: asyncpg.Connection | None = None
        self.lite: sqlite3.Connection | None = None

    async def open(self) -> None:
        if self.url.startswith("sqlite"):
            self.lite = sqlite3.connect(self.url.split("///", 1)[1], isolation_level=None)
        else:
            self.pg = await asyncpg.connect(self.url.replace("+asyncpg", ""))

    async def close(self) -> None:
        if self.lite is not None:
            self.lite.close()
        if self.pg is not None:
            await self.pg.close()

    async def execute(self, sql: str, *args: Any) -> None:
        if self.lite is not None:
            self.lite.execute(sql, args)
            return
        assert self.pg is not None
        await self.pg.execute(_numbered(sql), *args)

    async def value(self, sql: str, *args: Any) -> Any:
        if self.lite is not None:
            return self.lite.execute(sql, args).fetchone()[0]
        assert self.pg is not None
        return await self.pg.fetchval(_numbered(sql), *args)

    def refused(self) -> type[Exception] | tuple[type[Exception], ...]:
        return sqlite3.IntegrityError if self.lite is not None else asyncpg.PostgresError

    async def render(self, template: str, catalog_sha256: str, ref: str) -> str | None:
        """The database's rendering, by the expression or function its trigger uses."""
        if self.lite is not None:
            expression = sqlite_rendering("?1", "?2", "?3")
            result: str | None = self.lite.execute(
                f"SELECT {expression}", (template, catalog_sha256, ref)
            ).fetchone()[0]
            return result
        assert self.pg is not None
        rendered: str | None = await self.pg.fetchval(
            "SELECT foureyes_render($1, $2, $3)", template, catalog_sha256, ref
        )
        return rendered


def _numbered(sql: str) -> str:
    pieces = sql.split("?")
    return "".join(p + (f"${i}" if i < len(pieces) else "") for i, p in enumerate(pieces, 1))


def _row(
    catalog: Catalog,
    kinds: KindRegistry,
    ref: str,
    kind: str,
    changes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    changes = changes or {}
    item = catalog.get(ref)
    assert item is not None
    observation = render(item, _kind(kinds, kind), Locale.EN)
    assert observation is not None
    values = {
        "id": "0" * 24 + f"{len(changes):08x}",
        "commit_id": "c" * 32,
        "tenant": "raw",
        "subject": catalog.subject,
        "snapshot_id": catalog.snapshot_id,
        "evidence_ref": ref,
        "evidence_kind": item.kind,
        "evidence_sha256": item.sha256,
        "kind": kind,
        "locale": "en",
        "label": observation.label,
        "description": observation.description,
        "catalog_sha256": catalog.sha256,
        "kinds_sha256": kinds.sha256,
        "renderer_version": RENDERER_VERSION,
    }
    return values | changes


def _kind(kinds: KindRegistry, name: str) -> Any:
    kind = kinds.get(name)
    assert kind is not None
    return kind


async def _insert(raw: Raw, values: dict[str, Any]) -> None:
    columns = ", ".join([*values, "created_at"])
    marks = ", ".join("?" for _ in values)
    now = "CURRENT_TIMESTAMP"
    await raw.execute(
        f"INSERT INTO observations ({columns}) VALUES ({marks}, {now})", *values.values()
    )


@dataclass
class Held:
    raw: Raw
    catalog: Catalog
    kinds: KindRegistry


@pytest.fixture
async def held(store_url: str) -> AsyncIterator[Held]:
    """The example's snapshot and kinds written by the owner's path, and a raw connection."""
    catalog, kinds = example_catalog(), example_kinds()
    store = await Store.open(StoreConfig(url=store_url), PrivacyConfig(), {})
    try:
        batch = ObservationBatch(
            tenant="local",
            subject=catalog.subject,
            snapshot_id=catalog.snapshot_id,
            catalog_sha256=catalog.sha256,
            kinds_sha256=kinds.sha256,
            renderer_version=RENDERER_VERSION,
            locale="en",
        )
        row = _row(catalog, kinds, "ex-1", "exercise_pattern")
        written = await store.observations.record(
            batch,
            [
                NewObservation(
                    kind=row["kind"],
                    evidence_ref=row["evidence_ref"],
                    evidence_kind=row["evidence_kind"],
                    evidence_sha256=row["evidence_sha256"],
                    label=row["label"],
                    description=row["description"],
                )
            ],
            snapshot=held_snapshot(catalog),
            kinds=held_kinds(kinds),
        )
        assert written.inserted == ("ex-1",)
    finally:
        await store.close()
    raw = Raw(store_url)
    await raw.open()
    yield Held(raw, catalog, kinds)
    await raw.close()


async def test_a_raw_insert_of_the_true_rendering_is_accepted(held: Held) -> None:
    await _insert(held.raw, _row(held.catalog, held.kinds, "ex-2", "exercise_pattern"))
    count = await held.raw.value("SELECT count(*) FROM observations WHERE tenant = 'raw'")
    assert count == 1


@pytest.mark.parametrize(
    ("ref", "kind", "changes", "reason"),
    [
        ("ex-2", "exercise_pattern", {"description": _HOSTILE}, "render_mismatch"),
        (
            "ex-2",
            "exercise_pattern",
            {"description": "Source record: 跑步; frequency: 3. " + _HOSTILE},
            "render_mismatch",
        ),
        ("ex-2", "exercise_pattern", {"label": "高危"}, "label_mismatch"),
        ("ex-2", "exercise_pattern", {"evidence_ref": "ex-9"}, "unknown_ref"),
        ("ex-2", "exercise_pattern", {"catalog_sha256": "0" * 64}, "unknown_ref"),
        ("ex-2", "exercise_pattern", {"snapshot_id": "another"}, "unknown_ref"),
        ("ex-2", "exercise_pattern", {"evidence_sha256": "0" * 64}, "record_mismatch"),
        ("lab-2", "report_indicator", {}, "inadmissible"),
        ("note-1", "lifestyle_habit", {}, "kind_incompatible"),
        ("ex-2", "exercise_pattern", {"kind": "invented"}, "unknown_kind"),
        ("ex-2", "exercise_pattern", {"kinds_sha256": "0" * 64}, "unknown_kind"),
        ("ex-2", "exercise_pattern", {"renderer_version": "1"}, "unknown_kind"),
        # The true rendering of a held record, filed under someone else (issue 37).
        ("ex-2", "exercise_pattern", {"subject": "u-2002"}, "subject_mismatch"),
    ],
)
async def test_the_database_refuses_a_row_its_evidence_does_not_say(
    held: Held, ref: str, kind: str, changes: dict[str, Any], reason: str
) -> None:
    with pytest.raises(held.raw.refused(), match=REJECT_PREFIX + reason):
        await _insert(held.raw, _row(held.catalog, held.kinds, ref, kind, changes))
    assert await held.raw.value("SELECT count(*) FROM observations WHERE tenant = 'raw'") == 0


async def test_the_database_refuses_a_record_from_a_source_the_kind_does_not_accept(
    held: Held,
) -> None:
    # The record is held (the owner's path could not write it, but a raw writer can), of
    # the right kind, rendered right: only its source, a chat, is wrong for the kind.
    values = _row(held.catalog, held.kinds, "ex-2", "exercise_pattern")
    values |= {"evidence_ref": "ex-chat", "catalog_sha256": "d" * 64}
    raw = held.raw
    await raw.execute(
        "INSERT INTO evidence_snapshots VALUES (?, ?, ?)",
        "d" * 64,
        values["snapshot_id"],
        values["subject"],
    )
    await raw.execute(
        "INSERT INTO evidence_records VALUES (?, 'ex-chat', ?, 'lifestyle.exercise', 'chat', ?)",
        "d" * 64,
        values["evidence_sha256"],
        True,
    )
    for slot, text in (("activity", "跑步"), ("frequency", "3")):
        await raw.execute(
            "INSERT INTO evidence_slots VALUES (?, 'ex-chat', ?, ?)", "d" * 64, slot, text
        )
    with pytest.raises(raw.refused(), match=REJECT_PREFIX + "source_incompatible"):
        await _insert(raw, values)
    await raw.execute(
        "INSERT INTO evidence_records"
        " VALUES (?, 'ex-wear', ?, 'lifestyle.exercise', 'wearable', ?)",
        "d" * 64,
        values["evidence_sha256"],
        True,
    )
    for slot, text in (("activity", "跑步"), ("frequency", "3")):
        await raw.execute(
            "INSERT INTO evidence_slots VALUES (?, 'ex-wear', ?, ?)", "d" * 64, slot, text
        )
    await _insert(raw, values | {"evidence_ref": "ex-wear"})  # the same from a wearable


@pytest.mark.parametrize(
    "template",
    [
        "Training volume is too low.",
        "{value!r}",
        "{value:>10}",
        "{0}",
        "{value.attr}",
        "{{value}} is literal",
        "{value} } prose",
        "{value",
        "",
    ],
)
async def test_the_template_table_refuses_a_template_outside_the_slot_grammar(
    held: Held, template: str
) -> None:
    with pytest.raises(held.raw.refused()):
        await held.raw.execute(
            "INSERT INTO observation_templates VALUES (?, ?, ?, ?, ?, ?)",
            "f" * 64,
            "smuggle",
            "en",
            RENDERER_VERSION,
            "Label",
            template,
        )
    with pytest.raises(ValueError):
        Template.parse(template)


async def test_a_template_in_the_grammar_is_accepted(held: Held) -> None:
    await held.raw.execute(
        "INSERT INTO observation_templates VALUES (?, ?, ?, ?, ?, ?)",
        "f" * 64,
        "fine",
        "en",
        RENDERER_VERSION,
        "Label",
        "Record [x]: {value} ({observed_at}).",
    )


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE observations SET description = 'x'",
        "DELETE FROM observations",
        "UPDATE evidence_slots SET slot_text = 'x'",
        "DELETE FROM evidence_records WHERE ref = 'note-1'",
        "UPDATE observation_templates SET template = '{value}'",
        "DELETE FROM observation_kind_sources",
    ],
)
async def test_observations_and_their_evidence_are_append_only(held: Held, statement: str) -> None:
    with pytest.raises(held.raw.refused(), match="append-only"):
        await held.raw.execute(statement)


async def test_every_shipped_kind_renders_the_same_bytes_in_python_and_sql(held: Held) -> None:
    compared = rendered = 0
    for kind in held.kinds:
        for locale in Locale:
            template = kind.template_for(locale)
            for item in held.catalog.items:
                python = render_template(template, item)
                sql = await held.raw.render(template.text, held.catalog.sha256, item.ref)
                assert sql == python, (kind.name, locale, item.ref)
                compared += 1
                rendered += python is not None
    assert compared == len(held.kinds) * len(Locale) * len(held.catalog.items)
    assert rendered >= len(held.kinds) * len(Locale)  # every kind renders something


# --- property: the two renderers agree on generated records and templates ----------------

_TEXT = st.text(
    alphabet=st.sampled_from(list("ab {}_:.é中文\U0001f600 \t\n\\'%$"))
    | st.characters(exclude_categories=("Cs",)),
    max_size=12,
).filter(lambda s: "\x00" not in s)
_NAME = st.sampled_from(["value", "source", "observed_at", "a", "b_1", "Z"])
_SCALAR = st.one_of(
    _TEXT,
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)


@st.composite
def _templates(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.one_of(_TEXT, _NAME.map(lambda n: "{" + n + "}"), _TEXT), max_size=6))
    return "".join(pieces)


@st.composite
def _items(draw: st.DrawFn) -> EvidenceItem:
    value: Any = draw(
        st.one_of(_TEXT, st.dictionaries(st.sampled_from(["a", "b_1", "Z", "x-y"]), _SCALAR))
    )
    source = draw(_TEXT.filter(lambda s: 1 <= len(s)))
    return EvidenceItem(
        ref="r",
        kind="k",
        value=value,
        source=source,
        admissible=True,
        observed_at="2026-03-14T12:00:00+08:00",
    )


@pytest.fixture(scope="module")
def sqlite_twin(tmp_path_factory: pytest.TempPathFactory, migrated_sqlite: Path) -> Iterator[Any]:
    """A raw sqlite3 connection to a migrated file, and a counter for fresh digests."""
    path = tmp_path_factory.mktemp("twin") / "store.db"
    seed_migrated(migrated_sqlite, path)
    conn = sqlite3.connect(path, isolation_level=None)
    yield conn
    conn.close()


_count = iter(range(10**9))


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(template=_templates(), item=_items())
def test_python_and_sqlite_render_alike_or_both_refuse(
    sqlite_twin: sqlite3.Connection, template: str, item: EvidenceItem
) -> None:
    conn = sqlite_twin
    try:
        parsed: Template | None = Template.parse(template)
    except ValueError:
        parsed = None
    shape = conn.execute(f"SELECT {sqlite_template_shape('?1')}", (template,)).fetchone()[0]
    assert bool(shape) is (parsed is not None), template
    if parsed is None:
        return
    digest = f"{next(_count):064x}"
    conn.execute("INSERT INTO evidence_snapshots VALUES (?, ?, 'u')", (digest, "s"))
    conn.execute(
        "INSERT INTO evidence_records VALUES (?, 'r', ?, 'k', 's', 1)", (digest, item.sha256)
    )
    conn.executemany(
        "INSERT INTO evidence_slots VALUES (?, 'r', ?, ?)",
        [(digest, slot, text) for slot, text in slot_texts(item).items()],
    )
    sql = conn.execute(
        f"SELECT {sqlite_rendering('?1', '?2', '?3')}", (template, digest, "r")
    ).fetchone()[0]
    assert sql == render_template(parsed, item)


@pytest.mark.postgres
def test_python_and_postgresql_render_alike_or_both_refuse(postgres_url: str) -> None:
    examples: list[tuple[str, EvidenceItem]] = []

    @settings(max_examples=80, deadline=None)
    @given(template=_templates(), item=_items())
    def collect(template: str, item: EvidenceItem) -> None:
        examples.append((template, item))

    collect()
    asyncio.run(_pg_agree(postgres_url, examples))


async def _pg_agree(url: str, examples: list[tuple[str, EvidenceItem]]) -> None:
    store = await Store.open(StoreConfig(url=url), PrivacyConfig(), {})
    await store.close()
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        for number, (template, item) in enumerate(examples):
            try:
                parsed: Template | None = Template.parse(template)
            except ValueError:
                parsed = None
            digest = f"{number:064x}"
            insert = "INSERT INTO observation_templates VALUES ($1, 'k', 'en', $2, 'L', $3)"
            if parsed is None:
                with pytest.raises(asyncpg.CheckViolationError):
                    await conn.execute(insert, digest, RENDERER_VERSION, template)
                continue
            await conn.execute(insert, digest, RENDERER_VERSION, template)
            await conn.execute("INSERT INTO evidence_snapshots VALUES ($1, 's', 'u')", digest)
            await conn.execute(
                "INSERT INTO evidence_records VALUES ($1, 'r', $2, 'k', 's', true)",
                digest,
                item.sha256,
            )
            await conn.executemany(
                "INSERT INTO evidence_slots VALUES ($1, 'r', $2, $3)",
                [(digest, slot, text) for slot, text in slot_texts(item).items()],
            )
            sql = await conn.fetchval("SELECT foureyes_render($1, $2, 'r')", template, digest)
            assert sql == render_template(parsed, item), template
    finally:
        await conn.close()
