import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.core.errors import StoreError, UsageError
from foureyes.core.locale import Locale
from foureyes.core.tenancy import LOCAL_TENANT
from foureyes.evidence import (
    RENDERER_VERSION,
    Catalog,
    CatalogError,
    Claim,
    CommitStatus,
    DurableOwner,
    JsonFileCatalogSource,
    KindRegistry,
    Observation,
    RejectReason,
    check_selections,
    render,
)
from foureyes.store import Store
from tests.evidence._support import (
    SMUGGLED,
    example_catalog,
    example_document,
    example_kinds,
    observation_rows,
)

SELECTIONS: list[Any] = [
    {"kind": "exercise_pattern", "evidence_ref": "ex-1", "description": SMUGGLED},
    {"kind": "exercise_pattern", "evidence_ref": "ex-2"},
    {"kind": "report_indicator", "evidence_ref": "lab-1", "label": "高危指标"},
    {"kind": "posture_finding", "evidence_ref": "posture-1"},
    {"kind": "lifestyle_habit", "evidence_ref": "sleep-1"},
]


@pytest.fixture
def catalog_file(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(example_document(), ensure_ascii=False), encoding="utf-8")
    return path


def _claim(catalog: Catalog, kinds: KindRegistry, locale: Locale, **changes: Any) -> Claim:
    validation = check_selections(SELECTIONS, catalog, kinds, locale)
    fields: dict[str, Any] = {
        "snapshot_id": catalog.snapshot_id,
        "catalog_sha256": catalog.sha256,
        "locale": locale,
        "selections": SELECTIONS,
        "rendered": validation.accepted,
    }
    return Claim(**(fields | changes))


async def _owner(url: str, catalog_file: Path, kinds: KindRegistry) -> tuple[Store, DurableOwner]:
    store = await Store.open(StoreConfig(url=url), PrivacyConfig(), {})
    log = store.observations
    return store, DurableOwner(JsonFileCatalogSource(catalog_file), kinds, log)


@pytest.mark.parametrize("locale", list(Locale))
async def test_a_commit_persists_only_the_owners_rendering(
    store_url: str, catalog_file: Path, catalog: Catalog, kinds: KindRegistry, locale: Locale
) -> None:
    store, owner = await _owner(store_url, catalog_file, kinds)
    try:
        result = await owner.commit("u-1001", _claim(catalog, kinds, locale))
    finally:
        await store.close()
    assert result.status is CommitStatus.COMMITTED and result.ok
    assert [o.evidence_ref for o in result.accepted] == ["ex-2", "posture-1", "sleep-1"]
    assert [(r.index, r.reason) for r in result.rejected] == [
        (0, RejectReason.EXTRA_FIELDS),
        (2, RejectReason.EXTRA_FIELDS),
    ]
    rows = await observation_rows(store_url)
    assert [r["evidence_ref"] for r in rows] == ["ex-2", "posture-1", "sleep-1"]
    for row, observation in zip(rows, result.accepted, strict=True):
        item = catalog.get(row["evidence_ref"])
        assert item is not None
        assert (row["label"], row["description"]) == (observation.label, observation.description)
        assert row["subject"] == "u-1001" and row["locale"] == locale.value
        assert row["catalog_sha256"] == catalog.sha256 and row["kinds_sha256"] == kinds.sha256
        assert row["evidence_sha256"] == item.sha256 and row["evidence_kind"] == item.kind
        assert row["renderer_version"] == RENDERER_VERSION
        assert row["commit_id"] == result.commit_id
    written = json.dumps(rows, default=str, ensure_ascii=False)
    assert SMUGGLED not in written and "高危指标" not in written


async def test_a_retried_commit_persists_nothing_twice(
    sqlite_url: str, catalog_file: Path, catalog: Catalog, kinds: KindRegistry
) -> None:
    store, owner = await _owner(sqlite_url, catalog_file, kinds)
    try:
        first = await owner.commit("u-1001", _claim(catalog, kinds, Locale.ZH_HANS))
        again = await owner.commit("u-1001", _claim(catalog, kinds, Locale.EN))
        # Another subject's observations cannot be made of these records (issue 37).
        other = await owner.commit("u-2002", _claim(catalog, kinds, Locale.EN))
    finally:
        await store.close()
    assert len(first.accepted) == 3
    assert other.status is CommitStatus.SUBJECT_MISMATCH and other.accepted == ()
    assert again.ok and again.accepted == () and again.commit_id is None
    assert [(r.index, r.reason) for r in again.rejected] == [
        (0, RejectReason.EXTRA_FIELDS),
        (1, RejectReason.ALREADY_RECORDED),
        (2, RejectReason.EXTRA_FIELDS),
        (3, RejectReason.ALREADY_RECORDED),
        (4, RejectReason.ALREADY_RECORDED),
    ]
    rows = await observation_rows(sqlite_url)
    assert len(rows) == 3
    assert {(r["subject"], r["locale"]) for r in rows} == {("u-1001", "zh-Hans")}


async def test_a_catalog_changed_between_selection_and_commit_persists_nothing(
    store_url: str, catalog_file: Path, catalog: Catalog, kinds: KindRegistry
) -> None:
    claim = _claim(catalog, kinds, Locale.ZH_HANS)  # judged against the catalog as it was
    document = example_document()
    document["items"][1]["value"] = {"activity": "跑步", "frequency": "0"}
    catalog_file.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    store, owner = await _owner(store_url, catalog_file, kinds)
    try:
        result = await owner.commit("u-1001", claim)
    finally:
        await store.close()
    assert result.status is CommitStatus.CATALOG_CHANGED and not result.ok
    assert result.catalog_sha256 != catalog.sha256 and result.accepted == ()
    assert await observation_rows(store_url) == []


@pytest.mark.parametrize(
    ("write", "fragment"),
    [
        (lambda p: p.unlink(), "does not exist"),
        (lambda p: p.write_text("{", encoding="utf-8"), "not valid JSON"),
        (
            lambda p: p.write_text(
                json.dumps(example_document() | {"snapshot_id": "later"}), encoding="utf-8"
            ),
            "holds snapshot 'later'",
        ),
    ],
)
async def test_a_snapshot_the_source_cannot_rebuild_persists_nothing(
    sqlite_url: str,
    catalog_file: Path,
    catalog: Catalog,
    kinds: KindRegistry,
    write: Any,
    fragment: str,
) -> None:
    claim = _claim(catalog, kinds, Locale.EN)
    write(catalog_file)
    store, owner = await _owner(sqlite_url, catalog_file, kinds)
    try:
        result = await owner.commit("u-1001", claim)
    finally:
        await store.close()
    assert result.status is CommitStatus.CATALOG_UNAVAILABLE
    assert fragment in result.detail and result.catalog_sha256 is None
    assert await observation_rows(sqlite_url) == []


class _WrongSnapshot:
    """An application source with a bug: it answers with whatever snapshot it has."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    async def snapshot(self, snapshot_id: str) -> Catalog:
        return self.catalog


class _Broken:
    async def snapshot(self, snapshot_id: str) -> Catalog:
        raise CatalogError(["database is down"])


async def test_sources_that_answer_wrongly_or_fail_persist_nothing(
    store: Store, sqlite_url: str, catalog: Catalog, kinds: KindRegistry
) -> None:
    other = Catalog(snapshot_id="other", items=catalog.items)
    claim = _claim(catalog, kinds, Locale.EN)
    for source in (_WrongSnapshot(other), _Broken()):
        owner = DurableOwner(source, kinds, store.observations)
        result = await owner.commit("u-1001", claim)
        assert result.status is CommitStatus.CATALOG_UNAVAILABLE
    assert await observation_rows(sqlite_url) == []


def _forged(observations: tuple[Observation, ...], **change: str) -> tuple[Observation, ...]:
    first, *rest = observations
    return (first.model_copy(update=change), *rest)


@pytest.mark.parametrize(
    "forge",
    [
        lambda accepted: _forged(accepted, description="来源记录：跑步；频率：3。说明训练量不足"),
        lambda accepted: _forged(accepted, label="训练量不足"),
        lambda accepted: _forged(accepted, description=accepted[0].description + " "),
        lambda accepted: accepted[:-1],
        lambda accepted: (
            *accepted,
            Observation(kind="exercise_pattern", evidence_ref="ex-1", label="x", description="y"),
        ),
        lambda accepted: (),
    ],
)
async def test_a_caller_rendering_other_bytes_persists_nothing(
    store: Store, sqlite_url: str, catalog: Catalog, kinds: KindRegistry, forge: Any
) -> None:
    honest = check_selections(SELECTIONS, catalog, kinds, Locale.ZH_HANS).accepted
    claim = _claim(catalog, kinds, Locale.ZH_HANS, rendered=forge(honest))
    owner = DurableOwner(_WrongSnapshot(catalog), kinds, store.observations)
    result = await owner.commit("u-1001", claim)
    assert result.status is CommitStatus.RENDER_MISMATCH and result.accepted == ()
    assert await observation_rows(sqlite_url) == []


async def test_without_a_caller_rendering_the_owner_renders_alone(
    store: Store, sqlite_url: str, catalog: Catalog, kinds: KindRegistry
) -> None:
    owner = DurableOwner(_WrongSnapshot(catalog), kinds, store.observations)
    claim = _claim(catalog, kinds, Locale.EN, rendered=None)
    result = await owner.commit("u-1001", claim)
    assert result.ok and len(result.accepted) == 3
    assert len(await observation_rows(sqlite_url)) == 3


async def test_a_commit_with_nothing_accepted_writes_nothing(
    store: Store, sqlite_url: str, catalog: Catalog, kinds: KindRegistry
) -> None:
    owner = DurableOwner(_WrongSnapshot(catalog), kinds, store.observations)
    claim = _claim(catalog, kinds, Locale.EN, selections=[SELECTIONS[0]], rendered=())
    result = await owner.commit("u-1001", claim)
    assert result.ok and result.commit_id is None and len(result.rejected) == 1
    assert await observation_rows(sqlite_url) == []


async def test_a_bad_subject_is_a_usage_error(
    store: Store, catalog: Catalog, kinds: KindRegistry
) -> None:
    owner = DurableOwner(_WrongSnapshot(catalog), kinds, store.observations)
    for subject in ("", "x" * 257):
        with pytest.raises(UsageError):
            await owner.commit(subject, _claim(catalog, kinds, Locale.EN))


_SQLITE_FAULT = (
    "CREATE TRIGGER inject_fault BEFORE INSERT ON observations "
    "WHEN NEW.evidence_ref = 'sleep-1' BEGIN SELECT RAISE(ABORT, 'injected fault'); END"
)
_PG_FAULT = (
    "CREATE FUNCTION inject_fault() RETURNS trigger AS $$ BEGIN "
    "IF NEW.evidence_ref = 'sleep-1' THEN RAISE EXCEPTION 'injected fault'; END IF; "
    "RETURN NEW; END $$ LANGUAGE plpgsql",
    "CREATE TRIGGER inject_fault BEFORE INSERT ON observations "
    "FOR EACH ROW EXECUTE FUNCTION inject_fault()",
)


async def test_a_failure_mid_commit_leaves_nothing(
    store_url: str, catalog_file: Path, catalog: Catalog, kinds: KindRegistry
) -> None:
    store, owner = await _owner(store_url, catalog_file, kinds)
    engine = create_async_engine(store_url)
    try:
        async with engine.begin() as conn:
            # The third row fails, after two were inserted in the same transaction.
            statements = (_SQLITE_FAULT,) if store.dialect == "sqlite" else _PG_FAULT
            for statement in statements:
                await conn.execute(text(statement))
        with pytest.raises(StoreError, match="injected fault") as caught:
            await owner.commit("u-1001", _claim(catalog, kinds, Locale.ZH_HANS))
        assert caught.value.operation == "record_observations"
    finally:
        await engine.dispose()
        await store.close()
    assert await observation_rows(store_url) == []


async def test_observations_read_back_per_subject_and_commit(
    store: Store, catalog: Catalog, kinds: KindRegistry
) -> None:
    log = store.observations
    owner = DurableOwner(_WrongSnapshot(catalog), kinds, log)
    result = await owner.commit("u-1001", _claim(catalog, kinds, Locale.ZH_HANS))
    assert result.commit_id is not None
    stored = await log.for_commit(result.commit_id)
    assert [s.evidence_ref for s in stored] == ["ex-2", "posture-1", "sleep-1"]
    recent = await log.for_subject("u-1001", tenant=LOCAL_TENANT, limit=2)
    assert [s.evidence_ref for s in recent] == ["posture-1", "sleep-1"]
    assert await log.for_subject("nobody", tenant=LOCAL_TENANT) == []
    assert stored[0].to_json()["description"] == "来源记录：跑步；频率：3。"
    assert stored[0].to_json()["tenant"] == LOCAL_TENANT
    with pytest.raises(UsageError):
        await log.for_subject("u-1001", tenant=LOCAL_TENANT, limit=0)


async def test_each_tenant_commits_and_reads_only_its_own_observations(
    store_url: str, catalog_file: Path, catalog: Catalog, kinds: KindRegistry
) -> None:
    store, owner = await _owner(store_url, catalog_file, kinds)
    try:
        claim = _claim(catalog, kinds, Locale.EN)
        first = await owner.commit("u-1001", claim, tenant="key:a")
        # The same subject, snapshot and records under another tenant: its own rows, not
        # "already recorded" (that would tell key b what key a holds).
        second = await owner.commit("u-1001", claim, tenant="key:b")
        again = await owner.commit("u-1001", claim, tenant="key:b")
        log = store.observations
        of_a = await log.for_subject("u-1001", tenant="key:a")
        of_b = await log.for_subject("u-1001", tenant="key:b")
        of_none = await log.for_subject("u-1001", tenant="key:c")
        of_all = await log.for_subject("u-1001", tenant=None)
    finally:
        await store.close()
    assert len(first.accepted) == len(second.accepted) == 3
    assert again.accepted == () and {r.reason for r in again.rejected} >= {
        RejectReason.ALREADY_RECORDED
    }
    assert {o.tenant for o in of_a} == {"key:a"} and {o.tenant for o in of_b} == {"key:b"}
    assert [o.evidence_ref for o in of_a] == [o.evidence_ref for o in of_b]
    assert of_none == [] and len(of_all) == 6


# --- invariant 8: whatever the selector or the caller says, the table holds the owner's text --

_ADVERSARIAL_TEXT = st.sampled_from(
    [
        SMUGGLED,
        "<<<END DATA>>>",
        "来源记录：健身；频率：1-2。",
        "",
        " ",
        "\u202e",
        "ex-1",
        "{value}",
    ]
)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | _ADVERSARIAL_TEXT,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=6,
)
_KINDS = st.sampled_from(
    ["exercise_pattern", "lifestyle_habit", "posture_finding", "report_indicator", "nope", ""]
)
_REFS = st.sampled_from(
    ["ex-1", "ex-2", "sleep-1", "diet-1", "posture-1", "lab-1", "lab-2", "note-1", "ex-9", ""]
)
_EXTRA_KEYS = st.sampled_from(
    ["description", "label", "severity", "text", "note", "Kind", "evidence_ref ", "kind\u200b"]
) | st.text(max_size=10)
_VALID = st.sampled_from(
    [
        {"kind": kind, "evidence_ref": ref}
        for kind, ref in [
            ("exercise_pattern", "ex-1"),
            ("exercise_pattern", "ex-2"),
            ("lifestyle_habit", "sleep-1"),
            ("lifestyle_habit", "diet-1"),
            ("posture_finding", "posture-1"),
            ("report_indicator", "lab-1"),
        ]
    ]
)
_PLAIN = st.fixed_dictionaries({"kind": _KINDS, "evidence_ref": _REFS})
_WITH_EXTRAS = st.builds(
    lambda base, extra: extra | base,
    _VALID | _PLAIN,
    st.dictionaries(_EXTRA_KEYS, _JSON, min_size=1, max_size=3),
)
_PARTIAL = st.dictionaries(st.sampled_from(["kind", "evidence_ref"]), _JSON | _KINDS | _REFS)
_SELECTION = st.one_of(_VALID, _VALID, _PLAIN, _WITH_EXTRAS, _PARTIAL, _JSON)
_OBSERVATION = st.builds(
    Observation,
    kind=_KINDS,
    evidence_ref=_REFS,
    label=st.text(max_size=10) | _ADVERSARIAL_TEXT,
    description=st.text(max_size=20) | _ADVERSARIAL_TEXT,
)


@dataclass
class _Harness:
    loop: asyncio.AbstractEventLoop
    url: str
    owner: DurableOwner
    catalog: Catalog
    kinds: KindRegistry


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Harness]:
    """One event loop and one SQLite store for every generated example."""
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('invariant') / 'store.db'}"
    loop = asyncio.new_event_loop()
    store = loop.run_until_complete(Store.open(StoreConfig(url=url), PrivacyConfig(), {}))
    catalog, kinds = example_catalog(), example_kinds()
    owner = DurableOwner(_WrongSnapshot(catalog), kinds, store.observations)
    try:
        yield _Harness(loop, url, owner, catalog, kinds)
    finally:
        loop.run_until_complete(store.close())
        loop.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    selections=st.lists(_SELECTION, max_size=12),
    caller=st.sampled_from(["none", "honest", "hostile"]),
    forged=st.lists(_OBSERVATION, max_size=4),
    locale=st.sampled_from(list(Locale)),
)
def test_every_persisted_observation_is_the_owners_rendering_of_its_evidence(
    harness: _Harness,
    selections: list[Any],
    caller: str,
    forged: list[Observation],
    locale: Locale,
) -> None:
    catalog, kinds = harness.catalog, harness.kinds
    honest = check_selections(selections, catalog, kinds, locale).accepted
    rendered = {"none": None, "honest": honest, "hostile": tuple(forged)}[caller]
    claim = Claim(
        snapshot_id=catalog.snapshot_id,
        catalog_sha256=catalog.sha256,
        locale=locale,
        selections=selections,
        rendered=rendered,
    )
    subject = uuid.uuid4().hex
    result = harness.loop.run_until_complete(harness.owner.commit(subject, claim))
    rows = [
        r
        for r in harness.loop.run_until_complete(observation_rows(harness.url))
        if r["subject"] == subject
    ]
    event(f"{result.status.value}, {'some' if rows else 'no'} rows")
    if not result.ok:
        assert rows == []
    assert [r["evidence_ref"] for r in rows] == [o.evidence_ref for o in result.accepted]
    for row in rows:
        item, kind = catalog.get(row["evidence_ref"]), kinds.get(row["kind"])
        assert item is not None and kind is not None and item.admissible
        expected = render(item, kind, Locale(row["locale"]))
        assert expected is not None
        assert row["description"].encode("utf-8") == expected.description.encode("utf-8")
        assert row["label"].encode("utf-8") == expected.label.encode("utf-8")
        assert row["evidence_sha256"] == item.sha256
        assert row["catalog_sha256"] == catalog.sha256
