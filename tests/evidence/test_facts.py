import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from foureyes.config import Config
from foureyes.core.errors import StoreError
from foureyes.core.locale import Locale
from foureyes.core.trace import EventKind
from foureyes.evidence import (
    Catalog,
    CommitStatus,
    DurableOwner,
    EvidenceSelector,
    FactsOutcome,
    FactsRequest,
    JsonFileCatalogSource,
    KindRegistry,
    SelectorFailure,
    UserExplanation,
    select_facts,
)
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.store import Store
from tests.evidence._support import CATALOG_FILE, SMUGGLED, observation_rows, selector_config
from tests.helpers.simulator import RunningSimulator
from tests.helpers.work import lines_run_async

EXPECTED = {
    Locale.ZH_HANS: {
        "ex-1": ("运动记录", "来源记录：健身；频率：1-2。"),
        "posture-1": ("体态观察", "体态评估：头部前倾，角度 12°。"),
        "lab-1": ("报告指标", "报告指标：空腹血糖 5.4 mmol/L（2026-02-28）。"),
        "sleep-1": ("生活习惯", "来源记录：每晚睡眠约 6.5 小时（2026-03-13）。"),
    },
    Locale.EN: {
        "ex-1": ("Exercise record", "Source record: 健身; frequency: 1-2."),
        "posture-1": ("Posture finding", "Posture assessment: 头部前倾, angle 12°."),
        "lab-1": ("Report indicator", "Report indicator: 空腹血糖 5.4 mmol/L (2026-02-28)."),
        "sleep-1": ("Lifestyle habit", "Source record: 每晚睡眠约 6.5 小时 (2026-03-13)."),
    },
}


@pytest.fixture
async def routes() -> AsyncIterator[Routes]:
    built = Routes.build(Config(), {})
    yield built
    await built.aclose()


async def _run(
    routes: Routes, store: Store, kinds: KindRegistry, request: FactsRequest, catalog: Catalog
) -> FactsOutcome:
    caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
    owner = DurableOwner(JsonFileCatalogSource(CATALOG_FILE), kinds, store.observations)
    return await select_facts(
        catalog,
        request,
        selector=EvidenceSelector(caller, kinds),
        owner=owner,
        traces=store.traces,
    )


@pytest.mark.parametrize("locale", [Locale.ZH_HANS, Locale.EN])
async def test_the_body_state_example_runs_end_to_end_offline(
    routes: Routes,
    store: Store,
    sqlite_url: str,
    catalog: Catalog,
    kinds: KindRegistry,
    locale: Locale,
) -> None:
    request = FactsRequest(subject="u-1001", task="制定训练计划", locale=locale, explain=True)
    outcome = await _run(routes, store, kinds, request, catalog)
    assert outcome.ok and outcome.status is CommitStatus.COMMITTED
    body = outcome.to_json()
    accepted = {a["evidence_ref"]: (a["label"], a["description"]) for a in body["accepted"]}
    assert EXPECTED[locale].items() <= accepted.items()
    assert set(accepted) == {"diet-1", "ex-1", "ex-2", "lab-1", "posture-1", "sleep-1"}
    assert body["explanation"]["persisted"] is False and body["explanation"]["model_written"]
    assert isinstance(outcome.explanation, UserExplanation) and outcome.explanation.offline
    rows = await observation_rows(sqlite_url)
    assert {r["evidence_ref"]: (r["label"], r["description"]) for r in rows} == accepted
    assert outcome.explanation.text not in json.dumps(rows, default=str, ensure_ascii=False)
    record = await store.traces.get(str(outcome.trace_id))
    assert record is not None and record.run.kind == "facts"
    assert (record.run.outcome, record.run.reason) == ("committed", None)
    assert [e.kind for e in record.events] == [
        EventKind.MODEL_CALL,
        EventKind.PROPOSAL,
        EventKind.DECISION,
        EventKind.MODEL_CALL,
    ]
    proposal, decision = record.events[1].data, record.events[2].data
    assert proposal["sha256"] == body["selector"]["proposal_sha256"]
    assert decision["status"] == "committed" and decision["commit_id"] == body["commit_id"]
    assert all(r["trace_id"] == outcome.trace_id for r in rows)


async def test_a_hostile_selector_and_its_explanation_never_reach_the_table(
    simulator: RunningSimulator,
    store: Store,
    sqlite_url: str,
    catalog: Catalog,
    kinds: KindRegistry,
) -> None:
    selection = {
        "selections": [
            {"kind": "exercise_pattern", "evidence_ref": "ex-1", "description": SMUGGLED},
            {"kind": "posture_finding", "evidence_ref": "posture-1"},
        ]
    }
    simulator.load(
        {
            "models": {
                "selector": [
                    {
                        "match": "evidence_catalog",
                        "content": json.dumps(selection, ensure_ascii=False),
                    },
                    {"match": "Recorded observations", "content": "您的训练量不足，需要加量。"},
                ]
            }
        }
    )
    routes = Routes.build(selector_config(simulator.route("selector", timeout_s=5)), {})
    try:
        request = FactsRequest(subject="u-1001", locale=Locale.ZH_HANS, explain=True)
        outcome = await _run(routes, store, kinds, request, catalog)
    finally:
        await routes.aclose()
    body = outcome.to_json()
    assert [a["evidence_ref"] for a in body["accepted"]] == ["posture-1"]
    assert body["rejected"][0]["reason"] == "extra_fields"
    assert body["rejected"][0]["selection"]["description"] == SMUGGLED
    assert body["explanation"]["text"] == "您的训练量不足，需要加量。"
    stored = json.dumps(await observation_rows(sqlite_url), default=str, ensure_ascii=False)
    assert SMUGGLED not in stored and "训练量不足" not in stored and "需要加量" not in stored


async def test_a_selector_failure_is_recorded_and_commits_nothing(
    simulator: RunningSimulator,
    store: Store,
    sqlite_url: str,
    catalog: Catalog,
    kinds: KindRegistry,
) -> None:
    simulator.load({"models": {"selector": [{"content": "ex-1 and ex-2"}]}})
    routes = Routes.build(selector_config(simulator.route("selector", timeout_s=5)), {})
    try:
        outcome = await _run(routes, store, kinds, FactsRequest(subject="u-1001"), catalog)
    finally:
        await routes.aclose()
    assert outcome.status is SelectorFailure.MALFORMED and not outcome.ok
    body = outcome.to_json()
    assert body["selector"]["parse_failure"] == "no_json" and body["accepted"] == []
    record = await store.traces.get(str(outcome.trace_id))
    assert record is not None
    assert (record.run.outcome, record.run.reason) == ("failed", "selector_malformed")
    assert await observation_rows(sqlite_url) == []


async def test_a_catalog_changed_before_commit_is_refused(
    routes: Routes, store: Store, sqlite_url: str, tmp_path: Path, kinds: KindRegistry
) -> None:
    path = tmp_path / "catalog.json"
    document = json.loads(CATALOG_FILE.read_text(encoding="utf-8"))
    path.write_text(json.dumps(document), encoding="utf-8")
    shown = await JsonFileCatalogSource(path).read()
    document["items"][0]["admissible"] = False  # consent withdrawn after selection
    path.write_text(json.dumps(document), encoding="utf-8")
    caller = ModelCaller(routes, ledger=store.ledger, trace=store.traces)
    owner = DurableOwner(JsonFileCatalogSource(path), kinds, store.observations)
    outcome = await select_facts(
        shown,
        FactsRequest(subject="u-1001"),
        selector=EvidenceSelector(caller, kinds),
        owner=owner,
        traces=store.traces,
    )
    assert outcome.status is CommitStatus.CATALOG_CHANGED
    assert outcome.to_json()["catalog_sha256_at_commit"] != shown.sha256
    assert await observation_rows(sqlite_url) == []
    record = await store.traces.get(str(outcome.trace_id))
    assert record is not None and record.run.reason == "catalog_changed"


async def test_a_store_failure_is_traced_and_raised_with_nothing_persisted(
    routes: Routes, store: Store, sqlite_url: str, catalog: Catalog, kinds: KindRegistry
) -> None:
    engine = create_async_engine(sqlite_url)
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "CREATE TRIGGER inject_fault BEFORE INSERT ON observations WHEN "
                "NEW.evidence_ref = 'lab-1' BEGIN SELECT RAISE(ABORT, 'injected fault'); END"
            )
        )
    await engine.dispose()
    with pytest.raises(StoreError):
        await _run(routes, store, kinds, FactsRequest(subject="u-1001"), catalog)
    assert await observation_rows(sqlite_url) == []
    engine = create_async_engine(sqlite_url)
    async with engine.connect() as conn:
        runs = (await conn.execute(text("SELECT outcome, reason FROM trace_runs"))).all()
    await engine.dispose()
    assert [tuple(r) for r in runs] == [("failed", "store_error")]


def _selections(count: int) -> list[dict[str, str]]:
    """``count`` selections: ex-1, ex-2 and the unknown ex-9 in turn, every other with a note."""
    return [
        {"kind": "exercise_pattern", "evidence_ref": ref, **({"note": SMUGGLED} if n % 2 else {})}
        for n, ref in enumerate(["ex-1", "ex-2", "ex-9"] * (count // 3 + 1))
    ][:count]


async def test_ten_thousand_selections_over_http_do_linear_work(
    simulator: RunningSimulator,
    store: Store,
    sqlite_url: str,
    catalog: Catalog,
    kinds: KindRegistry,
) -> None:
    answers = [json.dumps({"selections": _selections(n)}) for n in (2_500, 10_000)]
    simulator.load({"models": {"selector": [{"content": a, "times": 1} for a in answers]}})
    routes = Routes.build(selector_config(simulator.route("selector", timeout_s=60)), {})
    try:
        few, work = await lines_run_async(
            lambda: _run(routes, store, kinds, FactsRequest(subject="u-1001"), catalog)
        )
        # Another tenant: its commit is its own rows, not already_recorded.
        outcome, four_times = await lines_run_async(
            lambda: _run(routes, store, kinds, FactsRequest(subject="u-1001", tenant="t2"), catalog)
        )
    finally:
        await routes.aclose()
    # Bounded by work, not by a clock: four times the selections, at most four times the
    # Python lines run, the whole way (HTTP reply, contract check, commit, trace)
    assert few.to_json()["status"] == "committed" and len(few.to_json()["rejected"]) == 2_498
    assert four_times <= 4 * work
    body = outcome.to_json()
    assert body["status"] == "committed"
    # ex-2 first comes with a note (refused), then plain (accepted); ex-9 does not exist.
    assert [a["evidence_ref"] for a in body["accepted"]] == ["ex-1", "ex-2"]
    assert len(body["rejected"]) == 9_998
    assert {r["reason"] for r in body["rejected"]} == {
        "extra_fields",
        "duplicate_ref",
        "unknown_ref",
    }
    stored = [r for r in await observation_rows(sqlite_url) if r["tenant"] == "t2"]
    assert [r["evidence_ref"] for r in stored] == ["ex-1", "ex-2"]
    assert SMUGGLED not in json.dumps(stored, default=str, ensure_ascii=False)
