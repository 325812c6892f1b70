import json
import tomllib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from foureyes.config import Config, PrivacyConfig, StoreConfig
from foureyes.evidence import (
    Catalog,
    CatalogSource,
    JsonFileCatalogSource,
    KindRegistry,
    catalog_from_mapping,
)
from foureyes.llm.routes import Routes
from foureyes.server.facts_api import facts_router
from foureyes.store import Store
from tests.evidence._support import (
    CATALOG_FILE,
    KINDS_FILE,
    SMUGGLED,
    example_document,
    observation_rows,
    selector_config,
)
from tests.helpers.simulator import RunningSimulator

KINDS = tomllib.loads(KINDS_FILE.read_text(encoding="utf-8"))["kinds"]
SNAPSHOT = example_document()["snapshot_id"]

Client = Callable[..., Any]


@dataclass(frozen=True)
class _Services:
    """What the router needs of the running service (server.app.Service has more)."""

    routes: Routes
    store: Store


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'api.db'}"


@pytest.fixture
async def make_client(store_url: str) -> AsyncIterator[Client]:
    """Mount only the facts router on a tiny app over a real store and real routes."""
    opened: list[tuple[httpx.AsyncClient, Routes, Store]] = []

    async def make(config: Config | None = None, **router: Any) -> httpx.AsyncClient:
        config = (config or Config()).model_copy(update={"store": StoreConfig(url=store_url)})
        routes = Routes.build(config, {})
        store = await Store.open(config.store, PrivacyConfig(), {})
        app = FastAPI()
        app.state.service = _Services(routes=routes, store=store)
        app.include_router(facts_router(lambda request: request.app.state.service, **router))
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
        opened.append((client, routes, store))
        return client

    yield make
    for client, routes, store in opened:
        await client.aclose()
        await routes.aclose()
        await store.close()


def _body(**changes: Any) -> dict[str, Any]:
    return {"subject": "u-1001", "catalog": example_document(), "kinds": KINDS} | changes


@pytest.mark.parametrize(
    ("locale", "description"),
    [("zh-Hans", "来源记录：健身；频率：1-2。"), ("en", "Source record: 健身; frequency: 1-2.")],
)
async def test_select_commits_and_observations_read_back(
    make_client: Client, locale: str, description: str
) -> None:
    client = await make_client()
    response = await client.post("/v1/facts/select", json=_body(locale=locale, explain=True))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["ok"] and body["status"] == "committed" and body["locale"] == locale
    first = next(a for a in body["accepted"] if a["evidence_ref"] == "ex-1")
    assert first == {
        "kind": "exercise_pattern",
        "evidence_ref": "ex-1",
        "label": "运动记录" if locale == "zh-Hans" else "Exercise record",
        "description": description,
    }
    assert body["explanation"]["persisted"] is False
    listed = await client.get("/v1/facts/observations", params={"subject": "u-1001"})
    assert listed.status_code == 200
    rows = listed.json()["observations"]
    assert [(r["evidence_ref"], r["description"]) for r in rows] == [
        (a["evidence_ref"], a["description"]) for a in body["accepted"]
    ]
    assert all(r["trace_id"] == body["trace_id"] for r in rows)
    other = await client.get("/v1/facts/observations", params={"subject": "nobody"})
    assert other.json() == {"subject": "nobody", "observations": []}


async def test_a_hostile_selector_is_answered_but_never_stored(
    make_client: Client, simulator: RunningSimulator, store_url: str
) -> None:
    selection = {
        "selections": [
            {"kind": "exercise_pattern", "evidence_ref": "ex-1", "description": SMUGGLED},
            {"kind": "lifestyle_habit", "evidence_ref": "diet-1"},
        ]
    }
    simulator.load({"models": {"selector": [{"content": json.dumps(selection)}]}})
    client = await make_client(selector_config(simulator.route("selector", timeout_s=5)))
    body = (await client.post("/v1/facts/select", json=_body())).json()
    assert [a["evidence_ref"] for a in body["accepted"]] == ["diet-1"]
    assert body["rejected"] == [
        {"index": 0, "selection": selection["selections"][0], "reason": "extra_fields"}
    ]
    stored = json.dumps(await observation_rows(store_url), default=str, ensure_ascii=False)
    assert SMUGGLED not in stored


async def test_selector_failures_map_to_upstream_statuses(
    make_client: Client, simulator: RunningSimulator, store_url: str
) -> None:
    simulator.load({"models": {"selector": [{"content": "not json at all"}]}})
    client = await make_client(selector_config(simulator.route("selector", timeout_s=5)))
    response = await client.post("/v1/facts/select", json=_body())
    assert response.status_code == 502
    assert response.json()["status"] == "selector_malformed"
    assert await observation_rows(store_url) == []


@pytest.mark.parametrize(
    ("changes", "error", "fragment"),
    [
        ({"catalog": {"snapshot_id": "s"}}, "CatalogError", "items"),
        ({"catalog": None}, "CatalogError", "post the catalog"),
        ({"snapshot_id": SNAPSHOT}, "CatalogError", "post the catalog"),
        ({"kinds": None}, "ConfigError", "kinds are required"),
        ({"kinds": {"x": {"sources": []}}}, "ConfigError", "kinds.x"),
    ],
)
async def test_bad_inputs_are_422_naming_the_problem(
    make_client: Client, changes: dict[str, Any], error: str, fragment: str
) -> None:
    client = await make_client()
    response = await client.post("/v1/facts/select", json=_body(**changes))
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == error and any(fragment in p for p in body["problems"]), body


async def test_malformed_requests_are_refused_by_the_schema(make_client: Client) -> None:
    client = await make_client()
    assert (await client.post("/v1/facts/select", json=_body(label="x"))).status_code == 422
    assert (await client.post("/v1/facts/select", json=_body(subject=""))).status_code == 422
    assert (await client.post("/v1/facts/select", json=_body(locale="fr"))).status_code == 422
    assert (await client.get("/v1/facts/observations")).status_code == 422
    params = {"subject": "u", "limit": 0}
    assert (await client.get("/v1/facts/observations", params=params)).status_code == 422


async def test_with_a_server_source_and_kinds_requests_name_a_snapshot(
    make_client: Client,
) -> None:
    kinds = KindRegistry.from_file(KINDS_FILE)
    client = await make_client(source=JsonFileCatalogSource(CATALOG_FILE), kinds=kinds)
    ok = await client.post(
        "/v1/facts/select", json={"subject": "u", "snapshot_id": SNAPSHOT, "locale": "en"}
    )
    assert ok.status_code == 200 and len(ok.json()["accepted"]) == 6
    for body, fragment in [
        ({"subject": "u", "snapshot_id": SNAPSHOT, "kinds": KINDS}, "configured by the server"),
        ({"subject": "u", "catalog": example_document()}, "name a snapshot_id"),
        ({"subject": "u", "snapshot_id": "other"}, "holds snapshot"),
    ]:
        refused = await client.post("/v1/facts/select", json=body)
        assert refused.status_code == 422
        assert any(fragment in p for p in refused.json()["problems"])


class _ChangingSource:
    """The application's records change while the selector is thinking."""

    def __init__(self) -> None:
        self.calls = 0

    async def snapshot(self, snapshot_id: str) -> Catalog:
        self.calls += 1
        document = example_document()
        if self.calls > 1:
            document["items"][0]["value"] = {"activity": "健身", "frequency": "0"}
        return catalog_from_mapping(document)


async def test_records_changing_before_commit_are_409_with_nothing_stored(
    make_client: Client, store_url: str
) -> None:
    source: CatalogSource = _ChangingSource()
    client = await make_client(source=source, kinds=KindRegistry.from_file(KINDS_FILE))
    response = await client.post("/v1/facts/select", json={"subject": "u", "snapshot_id": SNAPSHOT})
    assert response.status_code == 409
    assert response.json()["status"] == "catalog_changed"
    assert await observation_rows(store_url) == []
