"""The durable owner as its own service: the only writer, trusting no evidence it is sent.

`foureyes owner serve` runs as a subprocess on loopback, as a deployment runs it. The
audit of issue 37 tried, with the serving process's credentials, to make the store keep
"用户患有严重心脏病" as a fact: a forged record, prose slot texts, a `{v}` template, and an
exact rendering filed under another subject. Each is tried here against the service, on
SQLite and on PostgreSQL; on PostgreSQL with two roles the gateway's role is shown to be
unable to write anything the owner guards, or to switch the checks off.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from typer.testing import CliRunner

from foureyes.cli.main import app as root
from foureyes.config import Config, EvidenceConfig, PrivacyConfig, StoreConfig
from foureyes.core.errors import StoreError
from foureyes.core.locale import Locale
from foureyes.evidence import Claim, RemoteOwner
from foureyes.server import create_app
from foureyes.store import Store
from foureyes.store._database import Database
from foureyes.store.roles import EVIDENCE_TABLES, init_roles
from tests.evidence._support import CATALOG_FILE, KINDS_FILE, example_catalog
from tests.helpers.postgres import free_port
from tests.helpers.server import RunningServer, app_client, start_serve_process, stop_process

TOKEN_ENV = "OWNER_SERVICE_TEST_TOKEN"
TOKEN = "owner-token-" + "x" * 24
FORGED = "用户患有严重心脏病"
"""What the audit made the store keep as a durable observation."""
SNAPSHOT = example_catalog().snapshot_id
runner = CliRunner()


def _as(url: str, role: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{role}@{rest.split('@', 1)[1]}"


def _owner_config(folder: Path, store_url: str, owner_url: str | None = None) -> Path:
    lines = [
        "[store]",
        f"url = {json.dumps(store_url)}",
        "[evidence]",
        f"kinds_file = {json.dumps(str(KINDS_FILE))}",
        f"catalog_file = {json.dumps(str(CATALOG_FILE))}",
        f'owner_token_env = "{TOKEN_ENV}"',
    ]
    if owner_url is not None:
        lines.append(f"owner_url = {json.dumps(owner_url)}")
    path = folder / "owner.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _gateway_config(store_url: str, owner: RunningServer) -> Config:
    return Config(
        store=StoreConfig(url=store_url),
        evidence=EvidenceConfig(
            kinds_file=str(KINDS_FILE),
            catalog_file=str(CATALOG_FILE),
            owner_service_url=owner.url,
            owner_token_env=TOKEN_ENV,
        ),
    )


def _start_owner(folder: Path, config: Path) -> RunningServer:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
    return start_serve_process(
        ["--config", str(config)],
        env=env | {TOKEN_ENV: TOKEN},
        cwd=folder,
        command_name=("owner", "serve"),
        health="/v1/owner/health",
    )


async def _migrated(url: str) -> None:
    async with await Store.open(StoreConfig(url=url), PrivacyConfig(), {}):
        pass


@pytest.fixture
async def owner(store_url: str, tmp_path: Path) -> AsyncIterator[RunningServer]:
    """The owner service over the test's store (SQLite, or PostgreSQL as its admin)."""
    await _migrated(store_url)
    running = _start_owner(tmp_path, _owner_config(tmp_path, store_url))
    try:
        yield running
    finally:
        assert running.process is not None
        stop_process(running.process)


def _claim(selections: list[Any], rendered: list[dict[str, str]] | None = None) -> dict[str, Any]:
    catalog = example_catalog()
    return {
        "snapshot_id": catalog.snapshot_id,
        "catalog_sha256": catalog.sha256,
        "locale": "zh-Hans",
        "selections": selections,
        "rendered": rendered,
    }


async def _stored_text(url: str) -> str:
    """Everything the observation and evidence tables hold, as one string."""
    db = Database.create(url, timeout_s=10)
    try:
        async with db.read("dump") as conn:
            from sqlalchemy import text

            rows = [
                [str(v) for v in row]
                for table in EVIDENCE_TABLES
                for row in (await conn.execute(text(f"SELECT * FROM {table}"))).all()
            ]
    finally:
        await db.dispose()
    return json.dumps(rows, ensure_ascii=False)


async def test_the_gateway_commits_through_the_owner_service(
    owner: RunningServer, store_url: str
) -> None:
    app = create_app(_gateway_config(store_url, owner), {TOKEN_ENV: TOKEN})
    async with app_client(app) as client:
        body = {"subject": "u-1001", "snapshot_id": SNAPSHOT, "locale": "en"}
        answer = await client.post("/v1/facts/select", json=body)
        foreign = await client.post("/v1/facts/select", json=body | {"subject": "u-2002"})
        listed = await client.get("/v1/facts/observations", params={"subject": "u-1001"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "committed" and len(answer.json()["accepted"]) == 6
    assert foreign.status_code == 409 and foreign.json()["status"] == "subject_mismatch"
    assert len(listed.json()["observations"]) == 6
    # Neither deployment is independent: SQLite is one file; on PostgreSQL this gateway
    # connects as the role that owns the tables, and the start-up check finds it out.
    expected = "sqlite_one_trust_domain" if "sqlite" in store_url else "gateway_can_write"
    assert answer.json()["independence"]["independent"] is False
    assert answer.json()["independence"]["reason"] == expected


async def test_the_audit_s_forgeries_are_refused_by_the_owner_service(
    owner: RunningServer, store_url: str
) -> None:
    headers = {"authorization": f"Bearer {TOKEN}"}
    fake = {"kind": "exercise_pattern", "evidence_ref": "forged-1"}
    forged_record = {
        "ref": "forged-1",
        "kind": "lifestyle.exercise",
        "value": {"activity": FORGED, "frequency": "7"},
        "source": "questionnaire",
        "admissible": True,
        "observed_at": "2026-03-14",
    }
    async with httpx.AsyncClient(base_url=owner.url, timeout=30, trust_env=False) as client:

        async def commit(body: dict[str, Any], **kwargs: Any) -> httpx.Response:
            return await client.post("/v1/owner/commit", json=body, **kwargs)

        base = {"subject": "u-1001", "claim": _claim([fake])}
        # No token, or a wrong one: nothing is even read.
        assert (await commit(base)).status_code == 401
        wrong = {"authorization": "Bearer " + "y" * 36}
        assert (await commit(base, headers=wrong)).status_code == 401
        # Evidence, slot texts or templates in the body: refused before anything is read.
        for key, value in (
            ("records", [forged_record]),
            ("slots", {"forged-1": {"activity": FORGED}}),
            ("templates", {"exercise_pattern": {"zh-Hans": "{v}"}}),
        ):
            refused = await commit(base | {key: value}, headers=headers)
            assert refused.status_code == 422, refused.text
            assert any(key in problem for problem in refused.json()["problems"])
        # A forged record: the owner's own source has no such ref.
        rendered = [
            {"kind": "exercise_pattern", "evidence_ref": "forged-1", "label": "运动记录"}
            | {"description": FORGED}
        ]
        forged = await commit(base | {"claim": _claim([fake], rendered)}, headers=headers)
        assert forged.status_code == 409 and forged.json()["status"] == "render_mismatch"
        unrendered = await commit(base, headers=headers)
        assert unrendered.json()["rejected"][0]["reason"] == "unknown_ref"
        # Prose slot values on a true record, and a kind with a `{v}` template the owner's
        # kinds do not have: each selection refused with its reason.
        prose = {"kind": "exercise_pattern", "evidence_ref": "ex-1", "slots": {"activity": FORGED}}
        template = {"kind": "v_template", "evidence_ref": "ex-1"}
        judged = await commit(base | {"claim": _claim([prose, template])}, headers=headers)
        assert judged.status_code == 200, judged.text
        assert [r["reason"] for r in judged.json()["rejected"]] == ["extra_fields", "unknown_kind"]
        # The true rendering of a true record, filed under someone else.
        true = {"kind": "exercise_pattern", "evidence_ref": "ex-1"}
        foreign = await commit({"subject": "u-2002", "claim": _claim([true])}, headers=headers)
        assert foreign.status_code == 409 and foreign.json()["status"] == "subject_mismatch"
        # Not JSON, and a body too large: typed refusals.
        garbage = await client.post("/v1/owner/commit", content=b"{", headers=headers)
        assert garbage.status_code == 422
        huge = await client.post(
            "/v1/owner/commit", content=b" " * (9 * 1024 * 1024), headers=headers
        )
        assert huge.status_code == 413
    stored = await _stored_text(store_url)
    assert FORGED not in stored and "u-2002" not in stored and "{v}" not in stored


async def test_an_owner_service_that_cannot_be_reached_is_a_store_error(tmp_path: Path) -> None:
    # Nothing listens there: the gateway answers 503 and nothing is known to be persisted.
    owner = RemoteOwner(f"http://127.0.0.1:{free_port()}", TOKEN, timeout_s=5)
    catalog = example_catalog()
    claim = Claim(
        snapshot_id=catalog.snapshot_id,
        catalog_sha256=catalog.sha256,
        locale=Locale.EN,
        selections=({"kind": "exercise_pattern", "evidence_ref": "ex-1"},),
    )
    try:
        with pytest.raises(StoreError, match="owner_commit"):
            await owner.commit("u-1001", claim)
    finally:
        await owner.aclose()


async def test_an_owner_answer_that_is_not_a_commit_result_is_a_store_error() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        wanted = {"/a": (200, b'{"status": "committed"}'), "/b": (500, b"{}"), "/c": (200, b"[")}
        status, body = wanted[request.url.path.removesuffix("/v1/owner/commit")]
        return httpx.Response(status, content=body)

    catalog = example_catalog()
    claim = Claim(
        snapshot_id=catalog.snapshot_id,
        catalog_sha256=catalog.sha256,
        locale=Locale.EN,
        selections=(),
    )
    for path in ("/a", "/b", "/c"):
        owner = RemoteOwner(f"http://owner{path}", TOKEN, transport=httpx.MockTransport(answer))
        try:
            with pytest.raises(StoreError):
                await owner.commit("u-1001", claim)
        finally:
            await owner.aclose()


_EVIDENCE = [
    "[evidence]",
    f"kinds_file = {json.dumps(str(KINDS_FILE))}",
    f"catalog_file = {json.dumps(str(CATALOG_FILE))}",
    f'owner_token_env = "{TOKEN_ENV}"',
]


@pytest.mark.parametrize(
    ("lines", "token", "fragment"),
    [
        (["[evidence]"], TOKEN, "needs kinds_file"),
        ([*_EVIDENCE, 'owner_service_url = "http://127.0.0.1:1"'], TOKEN, "gateway's setting"),
        (_EVIDENCE, None, TOKEN_ENV),
        (_EVIDENCE, "short", "at least 16"),
    ],
)
def test_the_owner_service_refuses_to_start_on_a_config_it_cannot_serve(
    tmp_path: Path,
    lines: list[str],
    token: str | None,
    fragment: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = tmp_path / "owner.toml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if token is None:
        monkeypatch.delenv(TOKEN_ENV, raising=False)
    else:
        monkeypatch.setenv(TOKEN_ENV, token)
    result = runner.invoke(root, ["owner", "serve", "--config", str(config), "--json"])
    assert result.exit_code == 1, result.output
    assert fragment in result.output


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"owner_service_url": "http://127.0.0.1:8711"}, "needs owner_token_env"),
        (
            {
                "owner_service_url": "http://127.0.0.1:8711",
                "owner_token_env": TOKEN_ENV,
                "owner_url": "postgresql+asyncpg://own@db/foureyes",
            },
            "do not go together",
        ),
        ({"owner_service_url": "ftp://owner", "owner_token_env": TOKEN_ENV}, "owner_service_url"),
    ],
)
def test_the_gateway_s_owner_settings_are_checked(fields: dict[str, str], fragment: str) -> None:
    from pydantic import ValidationError

    paths = {"kinds_file": str(KINDS_FILE), "catalog_file": str(CATALOG_FILE)}
    with pytest.raises(ValidationError, match=fragment):
        EvidenceConfig(**paths, **fields)


@pytest.mark.postgres
async def test_with_two_roles_the_gateway_can_write_nothing_the_owner_guards(
    postgres_url: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    gateway_role, owner_role = f"gw_{tag}", f"own_{tag}"
    await _migrated(postgres_url)
    admin = Database.create(postgres_url, timeout_s=10)
    try:
        await init_roles(admin, gateway_role, owner_role)
    finally:
        await admin.dispose()
    gateway_url, owner_url = _as(postgres_url, gateway_role), _as(postgres_url, owner_role)
    service = _start_owner(tmp_path, _owner_config(tmp_path, owner_url, owner_url))
    try:
        config = _gateway_config(gateway_url, service)
        environ = {TOKEN_ENV: TOKEN}
        # The gateway holds no owner credential: not in its config, not in its environment.
        assert config.evidence.owner_url is None
        held = config.model_dump_json() + json.dumps(environ)
        assert owner_role not in held and owner_url not in held
        async with app_client(create_app(config, environ)) as client:
            body = {"subject": "u-1001", "snapshot_id": SNAPSHOT}
            answer = await client.post("/v1/facts/select", json=body)
        assert answer.status_code == 200, answer.text
        assert len(answer.json()["accepted"]) == 6
        assert answer.json()["independence"] == {
            "independent": True,
            "reason": "separate_owner_service",
            "detail": "",
        }
    finally:
        assert service.process is not None
        stop_process(service.process)

    # What the audit did with the owner's credential, tried with the gateway's: refused.
    catalog = example_catalog()
    conn = await asyncpg.connect(gateway_url.replace("+asyncpg", ""))
    try:
        attempts = [
            ("INSERT INTO evidence_snapshots VALUES ($1, 's', 'u-1001')", ("f" * 64,)),
            (
                "INSERT INTO evidence_records VALUES ($1, 'forged-1', $2, 'lifestyle.exercise',"
                " 'questionnaire', true)",
                (catalog.sha256, "0" * 64),
            ),
            (
                "INSERT INTO evidence_slots VALUES ($1, 'ex-1', 'activity', $2)",
                (catalog.sha256, FORGED),
            ),
            (
                "INSERT INTO observation_templates VALUES ($1, 'v', 'en', '2', 'L', '{v}')",
                ("e" * 64,),
            ),
            ("UPDATE observations SET subject = 'u-2002'", ()),
            ("DROP TRIGGER observations_check ON observations", ()),
            ("ALTER TABLE observations DISABLE TRIGGER ALL", ()),
            ("DROP FUNCTION foureyes_render(text, text, text)", ()),
            (
                "CREATE OR REPLACE FUNCTION foureyes_render(t text, c text, r text)"
                " RETURNS text LANGUAGE sql AS 'SELECT t'",
                (),
            ),
            ("ALTER FUNCTION foureyes_check_observation() RENAME TO gone", ()),
            ("SET session_replication_role = replica", ()),
        ]
        for sql, args in attempts:
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(sql, *args)
        stored = await conn.fetchval("SELECT count(*) FROM observations")
        assert stored == 6
    finally:
        await conn.close()
