"""The console's eval reports in real headless Chromium: list, open, read, download.

The runs are made by the real CLI (``foureyes eval run``, as a process: Playwright's sync
API holds this thread's event loop) into the store the service then serves.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Page, expect

from foureyes.config import Config, ServerConfig, StoreConfig
from foureyes.evals.suite import load_suite, suite_path
from foureyes.server import create_app
from tests.helpers.server import RunningServer, serve_app
from tests.server._support import ADMIN_KEY, CLIENT_KEY, KEYS_ENV

ODD_ID = "评测_2.b-x"
"""A run id with ideographs and every punctuation a run id may hold (in the URL's hash)."""


REPORT_WAIT_MS = 120_000
"""How long the page may say "drawing the report": the server computes the metrics and
draws every plot on the first request, which takes a loaded 2-core machine well over
Playwright's default 5 s. A readiness wait, not a speed assertion."""


def _eval_run(config: Path, suite: str, run_id: str) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "foureyes.cli", "eval", "run", suite, "-c", str(config)]
        + ["--run-id", run_id, "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads(ran.stdout)["run_id"] == run_id


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store holding two gate runs, the second with an odd id (a small suite: 30 pairs)."""
    folder = tmp_path_factory.mktemp("reports")
    url = f"sqlite+aiosqlite:///{folder / 'evals.db'}"
    config = folder / "foureyes.toml"
    config.write_text(
        f'[store]\nurl = "{url}"\n[routes.strong]\nkind = "offline"\n', encoding="utf-8"
    )
    _eval_run(config, "gate", "gate-1")
    _eval_run(config, "gate", ODD_ID)
    return url


@pytest.fixture(scope="module")
def service(store_url: str) -> Iterator[RunningServer]:
    with serve_app(create_app(Config(store=StoreConfig(url=store_url)), {})) as server:
        yield server


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    context = chromium.new_context(
        viewport={"width": 1280, "height": 900}, locale="en-US", timezone_id="UTC"
    )
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    # A refused request is logged by the browser itself; the page shows it (tested).
    refused = "Failed to load resource: the server responded with a status of 4"
    opened.on(
        "console",
        lambda m: (
            errors.append(m.text) if m.type == "error" and not m.text.startswith(refused) else None
        ),
    )
    yield opened
    context.close()
    assert errors == []  # no script error, no CSP violation


def _plots_loaded(page: Page) -> list[int]:
    plots = page.locator("#report-body img.plot")
    return plots.evaluate_all("imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")


def test_the_reports_view_lists_runs_and_opens_one(
    page: Page, service: RunningServer, tmp_path: Path
) -> None:
    gate = load_suite(suite_path("gate"))
    page.goto(f"{service.url}/console#reports")

    rows = page.locator("#report-table tbody tr")
    expect(rows).to_have_count(2)
    assert rows.nth(0).get_attribute("data-run") == ODD_ID  # the most recent first
    first = rows.nth(1).locator("td")
    expect(first.nth(1)).to_have_text("gate")
    expect(first.nth(4)).to_have_text(str(len(gate.cases) * len(gate.arms)))

    page.get_by_role("link", name="Open the report of run gate-1").click()
    body = page.locator("#report-body")
    expect(body.locator(".report-title")).to_have_text("Eval run gate-1", timeout=REPORT_WAIT_MS)
    # What the run could detect, said before the table of p-values, as on the page.
    expect(body.locator("p.report-power")).to_contain_text(f"with {len(gate.cases)} paired cases")
    arms = body.locator("table").nth(1).locator("tbody tr")
    expect(arms).to_have_count(len(gate.arms))
    expect(arms.nth(0).locator("td").nth(0)).to_have_text(gate.arms[0].name)
    expect(body.locator("img.plot")).to_have_count(3 + len(gate.arms))
    page.wait_for_function(
        "() => [...document.querySelectorAll('#report-body img.plot')].every(i => i.complete)"
    )
    assert all(width > 100 for width in _plots_loaded(page))
    assert page.url.endswith("#reports/gate-1")

    with page.expect_download() as download:
        page.get_by_role("button", name="Download the page (HTML)").click()
    saved = tmp_path / "report.html"
    download.value.save_as(saved)
    assert download.value.suggested_filename == "gate-1.html"
    text = saved.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>") and "<h1>Eval run gate-1</h1>" in text
    expect(page.locator("#report-status")).to_have_text("Downloaded: gate-1.html")


def test_a_report_in_chinese_with_an_odd_run_id(
    page: Page, service: RunningServer, tmp_path: Path
) -> None:
    page.goto(f"{service.url}/console?lang=zh-Hans#reports/{quote(ODD_ID, safe='')}")

    body = page.locator("#report-body")
    expect(body.locator(".report-title")).to_have_text(f"评测运行 {ODD_ID}", timeout=REPORT_WAIT_MS)
    expect(page.locator("#report-id")).to_have_text(ODD_ID)
    expect(body.locator("th").filter(has_text="通过率 [95% 置信区间]")).to_have_count(1)
    expect(body).to_contain_text("无显著差异")
    assert "null" not in body.inner_text() and "undefined" not in body.inner_text()
    expect(page.locator("nav a[aria-current=page]")).to_have_text("评测报告")
    with page.expect_download() as download:
        page.get_by_role("button", name="下载摘要（Markdown）").click()
    saved = tmp_path / "summary.md"
    download.value.save_as(saved)
    assert saved.read_text(encoding="utf-8").startswith(f"# 评测运行 {ODD_ID}\n")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#report-body img.plot')].every(i => i.complete)"
    )
    shot = tmp_path / "reports-zh.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000


def test_an_unknown_run_and_a_client_key_are_told_plainly(
    chromium: Browser, page: Page, service: RunningServer, store_url: str
) -> None:
    page.goto(f"{service.url}/console#reports/no-such-run")
    expect(page.locator("#report-status")).to_contain_text(
        "The requested endpoint or resource does not exist"
    )
    expect(page.locator("#report-downloads")).to_be_hidden()

    keyed = Config(
        store=StoreConfig(url=store_url),
        server=ServerConfig(api_keys_env="CLIENT_KEYS", admin_keys_env="ADMIN_KEYS"),
    )
    with serve_app(create_app(keyed, KEYS_ENV)) as server:
        context = chromium.new_context(locale="en-US")
        try:
            tab = context.new_page()
            tab.goto(f"{server.url}/console#reports")
            expect(tab.locator("#reports-status")).to_contain_text("No API key was sent")
            tab.get_by_label("Admin API key").fill(CLIENT_KEY)
            tab.get_by_role("button", name="Use this key").click()
            expect(tab.locator("#reports-status")).to_contain_text("'admin' scope")
            expect(tab.locator("#report-table tbody tr")).to_have_count(0)
            # The admin key, typed in, lists the runs at once; no reload.
            tab.get_by_label("Admin API key").fill(ADMIN_KEY)
            tab.get_by_role("button", name="Use this key").click()
            expect(tab.locator("#report-table tbody tr")).to_have_count(2)
            assert ADMIN_KEY not in tab.url
        finally:
            context.close()
