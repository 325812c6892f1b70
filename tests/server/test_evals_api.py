"""``GET /v1/evals`` and a run's report (JSON, page, Markdown) in process, on real runs."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from urllib.parse import quote

import pytest

from foureyes.config import Config
from foureyes.core.locale import Locale
from foureyes.evals.cassette import eval_providers
from foureyes.evals.report import html_of, load_metrics, markdown_of, report_view, write_report
from foureyes.evals.runner import EvalRunner
from foureyes.evals.suite import load_suite, suite_path
from foureyes.server import create_app
from foureyes.store import Store
from tests.helpers.server import app_client
from tests.server._support import ADMIN_KEY, CLIENT_KEY, KEYS_ENV, bearer, keyed

ODD_ID = "第二轮_b.2-x"
"""A run id with ideographs and every punctuation a run id may hold."""


@pytest.fixture
async def stored_runs() -> list[str]:
    """A gate run, a triage run with an odd id, and a run with no results, in that order."""
    cfg = Config.model_validate(
        {
            "store": {"url": os.environ["FOUREYES_STORE__URL"]},
            "routes": {"strong": {"kind": "offline"}},
        }
    )
    store = await Store.open(cfg.store, cfg.privacy, {})
    try:
        providers = eval_providers(cfg, ["offline", "strong"], {})
        for name, run_id in (("gate", "gate-1"), ("triage", ODD_ID)):
            suite = load_suite(suite_path(name))
            runner = EvalRunner(
                suite, suite.arms, config=cfg, providers=providers, store=store, run_id=run_id
            )
            await runner.run()
        gate = await store.evals.get_run("gate-1")
        assert gate is not None
        await store.evals.start_run(
            "empty", suite="gate", suite_sha256=gate.suite_sha256, facts=gate.facts
        )
    finally:
        await store.close()
    return ["gate-1", ODD_ID, "empty"]


def report_path(run_id: str, suffix: str = "") -> str:
    return f"/v1/evals/{quote(run_id, safe='')}/report{suffix}"


async def test_runs_are_listed_newest_first_with_their_result_counts(
    stored_runs: list[str],
) -> None:
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        listed = (await client.get("/v1/evals", headers=bearer(ADMIN_KEY))).json()
        one = (await client.get("/v1/evals?limit=1", headers=bearer(ADMIN_KEY))).json()

    rows = listed["data"]
    assert listed["object"] == "list"
    assert [r["run_id"] for r in rows] == stored_runs[::-1]
    assert [r["run_id"] for r in one["data"]] == ["empty"]
    gate, triage, empty = rows[2], rows[1], rows[0]
    gate_suite, triage_suite = load_suite(suite_path("gate")), load_suite(suite_path("triage"))
    assert gate["results"] == len(gate_suite.cases) * len(gate_suite.arms)
    assert triage["results"] == len(triage_suite.cases) * len(triage_suite.arms)
    assert empty["results"] == 0
    assert gate["kind"] == "gate" and gate["arms"] == [a.name for a in gate_suite.arms]
    assert triage["kind"] == "triage" and triage["baseline"] == "l1-only"


@pytest.mark.parametrize(
    ("lang", "accept", "locale"),
    [
        ("zh-Hans", "en", Locale.ZH_HANS),
        (None, "zh-TW,zh;q=0.8", Locale.ZH_HANT),
        ("klingon", None, Locale.EN),
    ],
)
async def test_the_report_is_the_view_of_the_run_in_the_language_asked(
    stored_runs: list[str], lang: str | None, accept: str | None, locale: Locale
) -> None:
    headers = bearer(ADMIN_KEY) | ({"accept-language": accept} if accept else {})
    params = {"lang": lang} if lang else {}
    app = create_app(keyed(), KEYS_ENV)
    async with app_client(app) as client:
        response = await client.get(report_path(ODD_ID), headers=headers, params=params)
        store = app.state.service.store
        expected = report_view(*await load_metrics(store, ODD_ID), locale)

    assert response.status_code == 200
    body = response.json()
    assert body == expected.as_json()
    assert body["locale"] == locale.value and ODD_ID in body["title"]
    triage = load_suite(suite_path("triage"))
    assert len(body["arms"]["rows"]) == len(triage.arms)
    assert len(body["plots"]["items"]) == 2 and len(body["confusions"]["items"]) == 3
    for plot in body["plots"]["items"] + body["confusions"]["items"]:
        assert base64.b64decode(plot["png_base64"]).startswith(b"\x89PNG")


async def test_the_downloads_are_the_files_the_cli_writes(
    stored_runs: list[str], tmp_path: Path
) -> None:
    app = create_app(keyed(), KEYS_ENV)
    async with app_client(app) as client:
        page = await client.get(
            report_path(ODD_ID, ".html"), headers=bearer(ADMIN_KEY), params={"lang": "zh-Hant"}
        )
        summary = await client.get(report_path(ODD_ID, ".md"), headers=bearer(ADMIN_KEY))
        store = app.state.service.store
        files = await write_report(store, ODD_ID, tmp_path, locale=Locale.ZH_HANT)
        english = report_view(*await load_metrics(store, ODD_ID))

    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.text == files.html.read_text(encoding="utf-8")
    assert summary.text == markdown_of(english) and summary.text != html_of(english)
    assert summary.headers["content-type"].startswith("text/markdown")
    disposition = page.headers["content-disposition"]
    assert disposition == "attachment; filename*=UTF-8''" + quote(f"{ODD_ID}.html", safe="-._")
    assert "sandbox" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"


async def test_an_unknown_run_is_404_and_a_run_without_results_is_409(
    stored_runs: list[str],
) -> None:
    admin = bearer(ADMIN_KEY)
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        unknown = await client.get(report_path("nope"), headers=admin)
        unknown_page = await client.get(report_path("nope", ".html"), headers=admin)
        empty = await client.get(report_path("empty"), headers=admin | {"accept-language": "zh-CN"})
        empty_md = await client.get(report_path("empty", ".md"), headers=admin)
        too_long = await client.get(report_path("x" * 65), headers=admin)
        bad_limit = await client.get("/v1/evals?limit=0", headers=admin)

    for response in (unknown, unknown_page):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert empty.status_code == 409 and empty_md.status_code == 409
    error = empty.json()["error"]
    assert error["code"] == "eval_run_empty" and error["message"].startswith("评测运行 'empty'")
    assert too_long.status_code == 422 and bad_limit.status_code == 422


async def test_eval_runs_need_an_admin_key(stored_runs: list[str]) -> None:
    async with app_client(create_app(keyed(), KEYS_ENV)) as client:
        anonymous = await client.get("/v1/evals")
        client_list = await client.get("/v1/evals", headers=bearer(CLIENT_KEY))
        client_report = await client.get(report_path("gate-1"), headers=bearer(CLIENT_KEY))
        client_page = await client.get(report_path("gate-1", ".html"), headers=bearer(CLIENT_KEY))

    assert anonymous.status_code == 401
    for response in (client_list, client_report, client_page):
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "insufficient_scope"
