"""An eval report, made offline by the real CLI (as a process), opened in real headless Chromium.

The page must render its plots from the embedded PNGs with no network; the screenshot is
kept under the test's tmp folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import Browser


def test_report_opens_and_shows_its_plots(chromium: Browser, tmp_path: Path) -> None:
    config = tmp_path / "foureyes.toml"
    config.write_text(
        f'[store]\nurl = "sqlite+aiosqlite:///{tmp_path}/e.db"\n'
        '[routes.strong]\nkind = "offline"\n',
        encoding="utf-8",
    )
    # Playwright's sync API holds this thread's event loop, so the CLI runs as a process. The
    # gate suite (30 pairs) draws the same six plots as the triage suite (1,750 pairs).
    cli = [sys.executable, "-m", "foureyes.cli", "eval"]
    ran = subprocess.run(
        [*cli, "run", "gate", "-c", str(config), "--run-id", "b", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    made = subprocess.run(
        [*cli, "report", "b", "-c", str(config), "--out", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    page_path = Path(json.loads(made.stdout)["html"])
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(page_path.as_uri())
    assert page.locator("h1").inner_text() == "Eval run b"
    plots = page.locator("img.plot")
    assert plots.count() == 6
    widths = plots.evaluate_all("imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")
    assert all(w > 100 for w in widths)
    assert "no significant difference" in page.locator("body").inner_text()
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    context.close()
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000
    assert all(u.startswith(("file:", "data:")) for u in requests)
