"""Reports: a self-contained page with embedded plots, and a Markdown summary."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import html
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from matplotlib.text import Text

from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale
from foureyes.evals import _plots
from foureyes.evals.cassette import eval_providers
from foureyes.evals.report import (
    html_of,
    load_metrics,
    markdown_of,
    report_strings,
    report_view,
    write_report,
)
from foureyes.evals.runner import EvalRunner
from foureyes.evals.suite import load_suite, suite_path
from foureyes.store import Store
from tests.evals._support import eval_config, store

__all__ = ["store"]


TRIAGE_ARMS = len(load_suite(suite_path("triage")).arms)


@pytest.fixture(scope="module")
def triage_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped triage suite run offline once per module (run id ``t``), as a file.

    A run of the whole suite is most of these tests' cost; each test opens a copy of it.
    """
    folder = tmp_path_factory.mktemp("triage-run")

    async def run() -> None:
        cfg = eval_config(folder)
        suite = load_suite(suite_path("triage"))
        providers = eval_providers(cfg, ["offline", "strong"], {})
        opened = await Store.open(cfg.store, cfg.privacy, {})
        try:
            await EvalRunner(
                suite, suite.arms, config=cfg, providers=providers, store=opened, run_id="t"
            ).run()
        finally:
            await opened.close()

    asyncio.run(run())
    return folder / "eval.db"


@pytest.fixture
async def triage_store(tmp_path: Path, triage_db: Path) -> AsyncIterator[Store]:
    """A store of this test's own (at ``eval_config(tmp_path)``) holding the triage run ``t``."""
    shutil.copyfile(triage_db, tmp_path / "eval.db")
    cfg = eval_config(tmp_path)
    opened = await Store.open(cfg.store, cfg.privacy, {})
    try:
        yield opened
    finally:
        await opened.close()


async def test_report_of_a_triage_run(tmp_path: Path, triage_store: Store) -> None:
    files = await write_report(triage_store, "t", tmp_path / "out")
    page = files.html.read_text(encoding="utf-8")
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    # Offline, L1 and L2 agree: no arm corrects the baseline, so there is no corrections
    # plot but a sentence saying why (tests/evals/test_report_readable.py).
    assert len(images) == 2 + TRIAGE_ARMS
    none = report_strings().text("plot.corrections.none", Locale.EN).format(baseline="l1-only")
    assert html.escape(none) in page
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert "http://" not in page and "https://" not in page
    summary = files.markdown.read_text(encoding="utf-8")
    assert "no significant difference" in summary
    assert "L1/L2 agreement" in summary and "l1-l2-different" in summary
    assert "critical recall" in summary


async def test_report_of_an_unknown_run_is_refused(tmp_path: Path, store: Store) -> None:
    with pytest.raises(UsageError, match="no eval run"):
        await write_report(store, "nope", tmp_path)


@pytest.mark.parametrize(
    ("locale", "title", "verdict", "header"),
    [
        (
            Locale.ZH_HANS,
            "评测运行 t",
            "无显著差异（McNemar 精确检验 p = ",
            "通过率 [95% 置信区间]",
        ),
        (
            Locale.ZH_HANT,
            "評測執行 t",
            "無顯著差異（McNemar 精確檢定 p = ",
            "通過率 [95% 信賴區間]",
        ),
    ],
)
async def test_a_report_in_chinese_says_everything_in_chinese(
    tmp_path: Path, triage_store: Store, locale: Locale, title: str, verdict: str, header: str
) -> None:
    files = await write_report(triage_store, "t", tmp_path / "out", locale=locale)
    page = files.html.read_text(encoding="utf-8")
    summary = files.markdown.read_text(encoding="utf-8")

    assert f"<html lang='{locale.value}'>" in page and f"<h1>{title}</h1>" in page
    for text in (page, summary):
        assert verdict in text and header in text
        # No word of the English report is left (the run's own names are not words).
        for english in ("no significant difference", "pass rate", "false diversion", "Arms"):
            assert english not in text
    english_page = html_of(report_view(*await load_metrics(triage_store, "t")))
    assert "no significant difference (McNemar exact p = " in english_page


async def test_chinese_plots_are_drawn_with_chinese_words_when_a_cjk_font_exists(
    tmp_path: Path, triage_store: Store
) -> None:
    run, metrics = await load_metrics(triage_store, "t")
    strings = report_strings()
    # The words follow the locale only when a font can draw them.
    drawn = _plots.PlotText.of(strings, Locale.ZH_HANS, "Some CJK Family")
    assert drawn("pass_rate.title") == "各臂通过率" and drawn.families[-1] == "Some CJK Family"
    fallback = _plots.PlotText.of(strings, Locale.ZH_HANT, None)
    assert fallback == _plots.PlotText.of(strings, Locale.EN, None)
    assert fallback("pass_rate.title") == "Pass rate per arm"

    font = _plots.cjk_font()
    if font is None:
        pytest.skip("no CJK font on this machine (scripts/system-deps.sh installs one)")
    chinese = report_view(run, metrics, Locale.ZH_HANS)
    assert chinese.plots[0].alt == "各臂通过率"
    # The ideographs are drawn with the CJK font, not as the boxes of a Latin-only one.
    words = _plots.PlotText.of(strings, Locale.ZH_HANS, font)
    latin_only = dataclasses.replace(words, families=words.families[:1])
    assert chinese.plots[0].png == _plots.pass_rate_png(metrics, words)
    assert _plots.pass_rate_png(metrics, words) != _plots.pass_rate_png(metrics, latin_only)


async def test_markdown_cells_cannot_break_the_table(tmp_path: Path, triage_store: Store) -> None:
    view = report_view(*await load_metrics(triage_store, "t"))
    first = view.arms.rows[0]
    bent = dataclasses.replace(view.arms, rows=(("a|b", *first[1:]),))
    table = markdown_of(dataclasses.replace(view, arms=bent, agreement=None))

    row = next(line for line in table.splitlines() if line.startswith("| a\\|b |"))
    assert row.replace("\\|", "").count("|") == len(view.arms.header) + 1


def _overlapping_texts(fig: Any) -> list[tuple[str, str]]:
    """Pairs of drawn texts of ``fig`` whose boxes intersect, and texts that leave it."""
    renderer = fig.canvas.get_renderer()
    ticks, drawn = set(), set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            every = axis.get_major_ticks() + axis.get_minor_ticks()
            ticks |= {id(label) for tick in every for label in (tick.label1, tick.label2)}
            # Only ticks inside the view are drawn (a locator also places some beyond it).
            for tick in axis._update_ticks():
                drawn |= {id(label) for label in (tick.label1, tick.label2) if label.get_visible()}
    texts = [
        t
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and (id(t) not in ticks or id(t) in drawn)
    ]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    page = fig.bbox
    problems = [
        (name, "the figure's edge")
        for name, box in boxes
        if box.x0 < page.x0 or box.y0 < page.y0 or box.x1 > page.x1 or box.y1 > page.y1
    ]
    for n, (first, a) in enumerate(boxes):
        problems += [(first, second) for second, b in boxes[n + 1 :] if a.overlaps(b)]
    return problems


@pytest.mark.parametrize("locale", [Locale.EN, Locale.ZH_HANS])
async def test_no_plot_label_overlaps_another_or_leaves_the_figure(
    tmp_path: Path, triage_store: Store, locale: Locale
) -> None:
    _, metrics = await load_metrics(triage_store, "t")
    # Long arm names, all at the same (zero) cost: the case where labels used to collide.
    renamed = {a.arm: f"{a.arm}-with-a-rather-long-arm-name" for a in metrics.arms}
    metrics = dataclasses.replace(
        metrics,
        baseline=renamed[metrics.baseline],
        arms=tuple(dataclasses.replace(a, arm=renamed[a.arm]) for a in metrics.arms),
        confusions={renamed[k]: v for k, v in metrics.confusions.items()},
    )
    assert len({(a.mean_cost_usd, a.pass_rate.estimate) for a in metrics.arms}) < len(metrics.arms)
    text = _plots.PlotText.of(report_strings(), locale, _plots.cjk_font())

    for plot, args in [
        (_plots.PASS_RATE, ()),
        (_plots.CORRECTIONS, ()),
        (_plots.COST_BENEFIT, ()),
        *((_plots.CONFUSION, (a.arm,)) for a in metrics.arms),
    ]:
        with plot.figure(metrics, text, *args) as fig:
            assert _overlapping_texts(fig) == [], plot.draw.__name__


# A child interpreter where matplotlib is not installed, as after `pip install .` (the
# `eval` extra left out): a finder refuses it, then `foureyes ARGV...` runs.
_WITHOUT_MATPLOTLIB = """
import importlib.abc, sys

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Refuse())
sys.argv = ["foureyes", *sys.argv[1:]]
from foureyes.cli import main
main()
"""


@pytest.mark.parametrize("as_json", [True, False])
async def test_without_matplotlib_the_report_is_written_and_says_why_it_has_no_plots(
    tmp_path: Path, triage_store: Store, as_json: bool
) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "FOUREYES_STORE__URL": eval_config(tmp_path).store.url}
    argv = ["eval", "report", "t", "--out", str(out), *(["--json"] if as_json else [])]
    child = subprocess.run(
        [sys.executable, "-c", _WITHOUT_MATPLOTLIB, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    note = report_strings().text("plots.missing", Locale.EN)
    assert "pip install 'foureyes[eval]'" in note
    if as_json:
        assert json.loads(child.stdout)["plots_note"] == note
    else:
        assert note in " ".join(child.stderr.split())
    page = (out / "t.html").read_text(encoding="utf-8")
    assert "<img" not in page and html.escape(note) in page
    # The plots are there all the same, drawn as SVG (no corrections offline: see above).
    assert page.count("<svg ") == 2 + TRIAGE_ARMS
    assert "critical recall" in page  # the tables are all there
    assert "critical recall" in (out / "t.md").read_text(encoding="utf-8")


async def test_with_matplotlib_a_report_has_no_missing_plots_note(
    tmp_path: Path, triage_store: Store
) -> None:
    run, metrics = await load_metrics(triage_store, "t")
    view = report_view(run, metrics)
    assert view.plots_note is None and view.plots
    assert view.as_json()["plots"]["note"] is None
