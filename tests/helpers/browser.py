"""Real headless Chromium for browser tests: Debian's ``/usr/bin/chromium`` via Playwright.

No browser is ever downloaded. Without Chromium the tests that use ``chromium`` are
skipped, except under ``CI=true``, where they fail so CI cannot pass without running them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

__all__ = ["ARGS", "CHROMIUM", "chromium"]

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium (package ``chromium``, installed by scripts/system-deps.sh)."""
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
"""Flags for a root user on a machine with no network beyond loopback."""


def _chromium_missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"the browser tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"no browser: {reason}")


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """One headless Chromium per test module."""
    if not CHROMIUM.exists():
        _chromium_missing(f"{CHROMIUM} is not installed (Debian package 'chromium')")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()
