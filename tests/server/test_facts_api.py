"""The facts endpoints of the shipped server: its own catalog and kinds, reads per key."""

import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import JSON, Boolean, Column, MetaData, String, Table, Text
from sqlalchemy.ext.asyncio import create_async_engine

from foureyes.config import (
    ColumnMap,
    Config,
    EvidenceConfig,
    RouteConfig,
    ServerConfig,
    StoreConfig,
)
from foureyes.core.errors import ConfigError
from foureyes.server import create_app
from tests.evidence._support import (
    CATALOG_FILE,
    KINDS_FILE,
    SMUGGLED,
    example_document,
    observation_rows,
)
from tests.helpers.server import RunningServer, app_client
from tests.helpers.simulator import RunningSimulator
from tests.server._support import ADMIN_KEY, bearer

SNAPSHOT = example_document()["snapshot_id"]
KEY_A = "client-key-a-" + "a" * 24
KEY_B = "client-key-b-" + "b" * 24
TWO_KEYS_ENV = {"CLIENT_KEYS": f"{KEY_A},{KEY_B}", "ADMIN_KEYS": ADMIN_KEY}

Client = Callable[..., Any]


def _config(evidence: EvidenceConfig | None = None, **fields: Any) -> Config:
    return Config(
        store=StoreConfig(url=os.environ["FOUREYES_STORE__URL"]),
        evidence=evidence
        or EvidenceConfig(kinds_file=str(KINDS_FILE), catalog_file=str(CATALOG_FILE)),
        **fields,
    )


def _selector_on(route: RouteConfig, **fields: Any) -> Config:
    return _config(routes={"sim": route}, roles={"selector": "sim"}, **fields)


@pytest.fixture
async def make_client() -> AsyncIterator[Client]:
    """The shipped app (its lifespan, open loopback mode) over ASGI."""
    async with AsyncExitStack() as stack:

        async def make(config: Config | None = None) -> httpx.AsyncClient:
            app = create_app(config or _config(), {})
            return await stack.enter_async_context(app_client(app))

        yield make


def _store_url() -> str:
    return os.environ["FOUREYES_STORE__URL"]


@pytest.mark.parametrize(
    ("locale", "description"),
    [("zh-Hans", "来源记录：健身；频率：1-2。"), ("en", "Source record: 健身; frequency: 1-2.")],
)
async def test_select_commits_from_the_configured_source_and_reads_back(
    make_client: Client, locale: str, description: str
) -> None:
    client = await make_client()
    body = {"subject": "u-1001", "snapshot_id": SNAPSHOT, "locale": locale, "explain": True}
    response = await client.post("/v1/facts/select", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["ok"] and answer["status"] == "committed" and answer["locale"] == locale
    first = next(a for a in answer["accepted"] if a["evidence_ref"] == "ex-1")
    assert first == {
        "kind": "exercise_pattern",
        "evidence_ref": "ex-1",
        "label": "运动记录" if locale == "zh-Hans" else "Exercise record",
        "description": description,
    }
    assert answer["explanation"]["persisted"] is False
    listed = await client.get("/v1/facts/observations", params={"subject": "u-1001"})
    assert listed.status_code == 200
    rows = listed.json()["observations"]
    assert [(r["evidence_ref"], r["description"]) for r in rows] == [
        (a["evidence_ref"], a["description"]) for a in answer["accepted"]
    ]
    assert {r["tenant"] for r in rows} == {"local"}
    assert all(r["trace_id"] == answer["trace_id"] for r in rows)
    other = await client.get("/v1/facts/observations", params={"subject": "nobody"})
    # SQLite is one trust domain: every facts answer says the owner is not independent.
    sqlite_says = {"independent": False, "reason": "sqlite_one_trust_domain", "detail": ""}
    assert other.json() == {"subject": "nobody", "observations": [], "independence": sqlite_says}


def _forged_document() -> dict[str, Any]:
    document = example_document()
    document["items"][0]["value"] = {"activity": SMUGGLED, "frequency": "0"}
    return document


SLOTLESS = {
    "smuggle": {
        "sources": ["lifestyle.exercise"],
        "label": {"zh-Hans": "结论", "zh-Hant": "結論", "en": "Conclusion"},
        "template": {"zh-Hans": SMUGGLED, "zh-Hant": SMUGGLED, "en": SMUGGLED},
    }
}


@pytest.mark.parametrize(
    "extra",
    [
        {"catalog": _forged_document()},
        {"kinds": SLOTLESS},
        {"catalog": _forged_document(), "kinds": SLOTLESS},
    ],
    ids=["catalog", "kinds", "both"],
)
async def test_a_posted_catalog_or_kinds_is_refused_and_nothing_is_stored(
    make_client: Client, extra: dict[str, Any]
) -> None:
    client = await make_client()
    body = {"subject": "u-1001", "snapshot_id": SNAPSHOT} | extra
    response = await client.post("/v1/facts/select", json=body)
    assert response.status_code == 422
    assert await observation_rows(_store_url()) == []
    # The shipped server before [evidence] took exactly this body without a snapshot id.
    del body["snapshot_id"]
    assert (await client.post("/v1/facts/select", json=body)).status_code == 422
    assert await observation_rows(_store_url()) == []


async def test_the_owner_rebuilds_from_the_configured_file_as_it_is_now(
    make_client: Client, tmp_path: Path
) -> None:
    catalog_file = tmp_path / "catalog.json"
    catalog_file.write_text(json.dumps(example_document(), ensure_ascii=False), encoding="utf-8")
    evidence = EvidenceConfig(kinds_file=str(KINDS_FILE), catalog_file=str(catalog_file))
    client = await make_client(_config(evidence))
    unknown = await client.post("/v1/facts/select", json={"subject": "u", "snapshot_id": "other"})
    assert unknown.status_code == 422 and any(
        "holds snapshot" in p for p in unknown.json()["problems"]
    )
    catalog_file.write_text(json.dumps(_forged_document(), ensure_ascii=False), encoding="utf-8")
    body = {"subject": "u-1001", "snapshot_id": SNAPSHOT, "locale": "en"}
    answer = (await client.post("/v1/facts/select", json=body)).json()
    assert answer["status"] == "committed"
    ex1 = next(a for a in answer["accepted"] if a["evidence_ref"] == "ex-1")
    assert ex1["description"] == f"Source record: {SMUGGLED}; frequency: 0."


async def test_the_owner_rebuilds_from_a_configured_sql_table(
    make_client: Client, tmp_path: Path
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'app.db'}"
    records = Table(
        "records",
        MetaData(),
        Column("ref", String(64), primary_key=True),
        Column("snapshot_id", String(128)),
        Column("kind", String(64)),
        Column("value", JSON()),
        Column("source", Text),
        Column("admissible", Boolean),
        Column("observed_at", String(64)),
        Column("person", String(64)),
    )
    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.run_sync(records.metadata.create_all)
        await conn.execute(
            records.insert(),
            [
                item | {"snapshot_id": SNAPSHOT, "person": "u-1001"}
                for item in example_document()["items"]
            ],
        )
    await engine.dispose()
    evidence = EvidenceConfig(
        kinds_file=str(KINDS_FILE),
        catalog_url=url,
        catalog_table="records",
        columns=ColumnMap(subject="person"),
    )
    client = await make_client(_config(evidence))
    body = {"subject": "u-1001", "snapshot_id": SNAPSHOT}
    response = await client.post("/v1/facts/select", json=body)
    assert response.status_code == 200, response.text
    assert len(response.json()["accepted"]) == 6
    # The same records cannot be filed under anyone else: the subject is the evidence's.
    foreign = await client.post("/v1/facts/select", json=body | {"subject": "u-2002"})
    assert foreign.status_code == 409 and foreign.json()["status"] == "subject_mismatch"
    assert {row["subject"] for row in await observation_rows(_store_url())} == {"u-1001"}


async def test_without_evidence_config_the_server_selects_nothing(make_client: Client) -> None:
    client = await make_client(_config(EvidenceConfig()))
    response = await client.post("/v1/facts/select", json={"subject": "u", "snapshot_id": SNAPSHOT})
    assert response.status_code == 404
    assert response.json()["error"] == "ConfigError"
    assert await observation_rows(_store_url()) == []


async def test_a_kinds_file_with_a_slotless_template_stops_the_start(tmp_path: Path) -> None:
    kinds = tmp_path / "kinds.toml"
    kinds.write_text(
        KINDS_FILE.read_text(encoding="utf-8").replace(
            'en = "Source record: {activity}; frequency: {frequency}."', 'en = "Train more."'
        ),
        encoding="utf-8",
    )
    evidence = EvidenceConfig(kinds_file=str(kinds), catalog_file=str(CATALOG_FILE))
    with pytest.raises(ConfigError) as refused:
        async with app_client(create_app(_config(evidence), {})):
            pass
    assert any(
        "kinds.exercise_pattern.template.en" in p and "no {slot}" in p
        for p in refused.value.problems
    ), refused.value.problems


async def test_a_hostile_selector_is_answered_but_never_stored(
    make_client: Client, simulator: RunningSimulator
) -> None:
    selection = {
        "selections": [
            {"kind": "exercise_pattern", "evidence_ref": "ex-1", "description": SMUGGLED},
            {"kind": "lifestyle_habit", "evidence_ref": "diet-1"},
        ]
    }
    simulator.load({"models": {"selector": [{"content": json.dumps(selection)}]}})
    client = await make_client(_selector_on(simulator.route("selector", timeout_s=5)))
    body = {"subject": "u-1001", "snapshot_id": SNAPSHOT}
    answer = (await client.post("/v1/facts/select", json=body)).json()
    assert [a["evidence_ref"] for a in answer["accepted"]] == ["diet-1"]
    assert answer["rejected"] == [
        {"index": 0, "selection": selection["selections"][0], "reason": "extra_fields"}
    ]
    stored = json.dumps(await observation_rows(_store_url()), default=str, ensure_ascii=False)
    assert SMUGGLED not in stored


async def test_selector_failures_map_to_upstream_statuses(
    make_client: Client, simulator: RunningSimulator
) -> None:
    simulator.load({"models": {"selector": [{"content": "not json at all"}]}})
    client = await make_client(_selector_on(simulator.route("selector", timeout_s=5)))
    response = await client.post("/v1/facts/select", json={"subject": "u", "snapshot_id": SNAPSHOT})
    assert response.status_code == 502
    assert response.json()["status"] == "selector_malformed"
    assert await observation_rows(_store_url()) == []


async def test_malformed_requests_are_refused_by_the_schema(make_client: Client) -> None:
    client = await make_client()
    ok = {"subject": "u", "snapshot_id": SNAPSHOT}
    for body in (
        ok | {"label": "x"},
        ok | {"subject": ""},
        ok | {"locale": "fr"},
        {"subject": "u"},
        ok | {"snapshot_id": ""},
    ):
        assert (await client.post("/v1/facts/select", json=body)).status_code == 422, body
    assert (await client.get("/v1/facts/observations")).status_code == 422
    params = {"subject": "u", "limit": 0}
    assert (await client.get("/v1/facts/observations", params=params)).status_code == 422


async def test_the_openapi_body_is_what_the_handler_takes(make_client: Client) -> None:
    client = await make_client()
    document = (await client.get("/openapi.json")).json()
    schema = document["components"]["schemas"]["SelectBody"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"subject", "snapshot_id", "task", "locale", "explain"}
    assert set(schema["required"]) == {"subject", "snapshot_id"}


def test_key_b_cannot_read_key_a_observations(start_server: Callable[..., RunningServer]) -> None:
    keyed = ServerConfig(api_keys_env="CLIENT_KEYS", admin_keys_env="ADMIN_KEYS")
    server = start_server(_config(server=keyed), TWO_KEYS_ENV)
    body = {"subject": "u-1001", "snapshot_id": SNAPSHOT}
    params = {"subject": "u-1001"}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        committed = client.post("/v1/facts/select", json=body, headers=bearer(KEY_A))
        assert committed.status_code == 200, committed.text
        of_a = client.get("/v1/facts/observations", params=params, headers=bearer(KEY_A))
        of_b = client.get("/v1/facts/observations", params=params, headers=bearer(KEY_B))
        of_admin = client.get("/v1/facts/observations", params=params, headers=bearer(ADMIN_KEY))
        # Key B's own commit of the same records is its own, not "already recorded".
        b_commit = client.post("/v1/facts/select", json=body, headers=bearer(KEY_B))
        of_b_after = client.get("/v1/facts/observations", params=params, headers=bearer(KEY_B))
        of_a_after = client.get("/v1/facts/observations", params=params, headers=bearer(KEY_A))

    accepted = {a["evidence_ref"] for a in committed.json()["accepted"]}
    assert len(accepted) == 6
    assert {r["evidence_ref"] for r in of_a.json()["observations"]} == accepted
    assert of_b.status_code == 200 and of_b.json()["observations"] == []
    assert {r["evidence_ref"] for r in of_admin.json()["observations"]} == accepted
    assert {a["evidence_ref"] for a in b_commit.json()["accepted"]} == accepted
    tenants_b = {r["tenant"] for r in of_b_after.json()["observations"]}
    tenants_a = {r["tenant"] for r in of_a_after.json()["observations"]}
    assert len(tenants_a) == len(tenants_b) == 1 and tenants_a != tenants_b
    assert len(of_a_after.json()["observations"]) == 6
