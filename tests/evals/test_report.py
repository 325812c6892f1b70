"""Reports: a self-contained page with embedded plots, and a Markdown summary."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from foureyes.core.errors import UsageError
from foureyes.evals.cassette import eval_providers
from foureyes.evals.report import write_report
from foureyes.evals.runner import EvalRunner
from foureyes.evals.suite import load_suite, suite_path
from foureyes.store import Store
from tests.evals._support import eval_config, store

__all__ = ["store"]


async def test_report_of_a_triage_run(tmp_path: Path, store: Store) -> None:
    cfg = eval_config(tmp_path)
    suite = load_suite(suite_path("triage"))
    providers = eval_providers(cfg, ["offline", "strong"], {})
    await EvalRunner(
        suite, suite.arms, config=cfg, providers=providers, store=store, run_id="t"
    ).run()
    files = await write_report(store, "t", tmp_path / "out")
    page = files.html.read_text(encoding="utf-8")
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 3 + len(suite.arms)
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert "http://" not in page and "https://" not in page
    summary = files.markdown.read_text(encoding="utf-8")
    assert "no significant difference" in summary
    assert "L1/L2 agreement" in summary and "l1-l2-different" in summary
    assert "critical recall" in summary


async def test_report_of_an_unknown_run_is_refused(tmp_path: Path, store: Store) -> None:
    with pytest.raises(UsageError, match="no eval run"):
        await write_report(store, "nope", tmp_path)
