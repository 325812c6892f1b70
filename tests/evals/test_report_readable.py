"""Reports people can read (issue 38, item 10).

Each arm's pairs by outcome reason and a sentence where an arm's judging role was the
offline engine; confusion-matrix counts legible on their cells (WCAG contrast, computed
from the colours the plotting code chose); a corrections plot only when there is
something to draw, else a sentence; cost-against-benefit markers that never hide one
another; and, without matplotlib, the same plots as SVG with no empty heading.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import html
import json
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.core.locale import Locale
from foureyes.evals import _plots, _svg
from foureyes.evals.arms import arm_routes
from foureyes.evals.cassette import eval_providers
from foureyes.evals.metrics import PairRecord, RunMetrics, compute_metrics, outcome_of
from foureyes.evals.report import (
    html_of,
    load_metrics,
    markdown_of,
    offline_roles,
    report_strings,
    report_view,
)
from foureyes.evals.runner import EvalRunner
from foureyes.evals.suite import SuiteKind, load_suite, suite_path
from foureyes.llm.provider import Provider
from foureyes.store import Store
from foureyes.store.evals import EvalRunRow
from tests.evals._support import GATE_HEAD, eval_config, gate_case, store, write_suite
from tests.helpers.data import require_data

__all__ = ["store"]

REPO = Path(__file__).resolve().parents[2]
KIND = "That sounds hard. What would help most right now?"
HOTLINE = "Please call the Calm Line at 1-800-555-0199 tonight."


def text(key: str, locale: Locale = Locale.EN) -> str:
    return report_strings().text(key, locale)


# ---- helpers: a stored run's row, metrics built from records, the page's headings ----


def _run(kind: SuiteKind, arms: list[dict[str, Any]], **facts: Any) -> EvalRunRow:
    """A run row as the runner stores it (``run_facts``'s keys), for metrics made here."""
    return EvalRunRow(
        run_id="r",
        suite="s",
        suite_sha256="0" * 64,
        facts={
            "arms": arms,
            "baseline": arms[0]["name"],
            "kind": kind.value,
            "labels": ["block", "pass"],
            "config_sha256": "0" * 64,
            "mode": "live",
            "python": "3",
            "routes": {"offline": {"kind": "offline", "model": "foureyes-offline"}},
            "seed": 0,
            "suite": "s",
            "suite_sha256": "0" * 64,
            "version": "0",
            **facts,
        },
        created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    )


def _record(case: str, arm: str, passed: bool, **extra: Any) -> PairRecord:
    fields: dict[str, Any] = {
        "case_id": case,
        "arm": arm,
        "passed": passed,
        "failed": False,
        "prediction": "pass" if passed else "block",
        "expected": "pass",
        "cost_usd": 0.0,
        "latency_ms": 1.0,
        "detail": {},
    }
    return PairRecord(**(fields | extra))


def _metrics(passes: dict[str, list[bool]], **costs: float) -> RunMetrics:
    """Gate metrics of arms (the first the baseline) passing or failing cases c0, c1, ..."""
    records = [
        _record(f"c{n}", arm, passed, cost_usd=costs.get(arm.replace("-", "_"), 0.0))
        for arm, flags in passes.items()
        for n, passed in enumerate(flags)
    ]
    arms = list(passes)
    return compute_metrics(
        SuiteKind.GATE, records, arms=arms, baseline=arms[0], labels=["block", "pass"], seed=0
    )


class _Headings(HTMLParser):
    """Each ``h2`` of a page and whether anything (text, a table, a plot) follows it."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[list[Any]] = []  # [heading text, followed by content]
        self._in_heading = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "h2":
            self._in_heading = True
            self.headings.append(["", False])
        elif self.headings and not self._in_heading and tag in {"table", "img", "svg", "p"}:
            self.headings[-1][1] = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self._in_heading = False

    def handle_data(self, data: str) -> None:
        if self._in_heading:
            self.headings[-1][0] += data


def _empty_headings(page: str) -> list[str]:
    parser = _Headings()
    parser.feed(page)
    return [heading for heading, followed in parser.headings if not followed]


# ---- failure reasons per arm ---------------------------------------------------------


def test_each_pair_counts_under_one_outcome_reason() -> None:
    assert outcome_of(_record("a", "x", True)) == "passed"
    failed = _record("a", "x", False, failed=True, failure="reviewer_offline")
    assert outcome_of(failed) == "reviewer_offline"
    # A failed pair of an older release stored no reason.
    assert outcome_of(_record("a", "x", False, failed=True)) == "failed"
    assert outcome_of(_record("a", "x", False, verifier="rejected")) == "verifier_rejected"
    # An agent pair's verifier verdict is in its detail.
    agent = _record("a", "x", False, detail={"verifier": "rejected"})
    assert outcome_of(agent) == "verifier_rejected"
    gate = _record("a", "x", False, detail={"reason": "insufficient"})
    assert outcome_of(gate) == "wrong_label:insufficient"
    # A reason of another shape is not spliced into the code.
    odd = _record("a", "x", False, detail={"reason": {"nested": 1}})
    assert outcome_of(odd) == "wrong_label"


_BUILT: list[Provider] = []


@pytest.fixture(autouse=True)
async def _close_providers() -> AsyncIterator[None]:
    yield
    while _BUILT:
        await _BUILT.pop().aclose()


async def _gate_run(tmp_path: Path, store: Store) -> tuple[EvalRunRow, RunMetrics]:
    """A mini gate suite, run offline, and its metrics.

    Its arms: rules only, the offline Supervisor by the config's default and by name, and
    a Supervisor whose route is down (``review_failed``).
    """
    head = GATE_HEAD | {
        "arms": [
            {"name": "rules-only", "baseline": True, "supervisor": False},
            {"name": "supervisor-same"},
            {"name": "named-offline", "routes": {"supervisor": "offline"}},
            {"name": "down", "routes": {"supervisor": "down"}},
        ]
    }
    cases = [gate_case("kind", KIND, "pass"), gate_case("hotline", HOTLINE, "block")]
    suite = load_suite(write_suite(tmp_path / "suite", head, cases))
    # Port 9 (discard) is closed on loopback: the ``down`` route refuses every connection.
    cfg = eval_config(tmp_path, down={"kind": "openai", "base_url": "http://127.0.0.1:9/v1"})
    providers = eval_providers(cfg, arm_routes(cfg, suite.arms), {})
    _BUILT.extend(providers.values())
    await EvalRunner(
        suite, suite.arms, config=cfg, providers=providers, store=store, run_id="g"
    ).run()
    return await load_metrics(store, "g")


async def test_the_failure_reasons_of_each_arm_are_counted_and_shown(
    tmp_path: Path, store: Store
) -> None:
    run, metrics = await _gate_run(tmp_path, store)
    by_arm = {a.arm: dict(a.outcomes) for a in metrics.arms}
    # The rules block the hotline before any Supervisor is asked; the kind draft needs it.
    assert by_arm["down"] == {"passed": 1, "review_failed": 1}
    assert sum(by_arm["supervisor-same"].values()) == 2
    # The offline Supervisor falls back on the must-pass draft: a wrong label, and why.
    assert by_arm["supervisor-same"].get("wrong_label:insufficient") == 1

    view = report_view(run, metrics)
    table = view.failure_reasons
    assert table is not None and table.heading == text("heading.failure_reasons")
    assert table.header[:3] == (text("col.arm"), text("col.n"), text("outcome.passed"))
    rows = {row[0]: dict(zip(table.header, row, strict=True)) for row in table.rows}
    assert rows["down"]["review_failed"] == "1" and rows["down"][text("outcome.passed")] == "1"
    assert rows["rules-only"]["review_failed"] == "0"
    # Every pair is counted once: each row's counts add up to its n.
    for row in table.rows:
        assert sum(int(c) for c in row[2:]) == int(row[1])

    as_json = view.as_json()
    assert as_json["failure_reasons"]["rows"] == [list(r) for r in table.rows]
    assert as_json["failure_note"] == text("failure_reasons.note")
    page, summary = html_of(view), markdown_of(view)
    for shown in (page, summary):
        assert text("heading.failure_reasons") in shown and "review_failed" in shown


async def test_an_arm_judged_by_the_offline_engine_is_said_to_be(
    tmp_path: Path, store: Store
) -> None:
    run, metrics = await _gate_run(tmp_path, store)
    view = report_view(run, metrics)
    # The config mixes an offline and an openai route: only the arm that named the
    # offline route is known to have run on it; the run's facts do not say which route
    # the config's default Supervisor was, so nothing is claimed about supervisor-same.
    (said,) = view.caveats
    assert "arm named-offline" in said and "Supervisor" in said and "offline engine" in said
    assert "supervisor-same" not in said and "down" not in said and "rules-only" not in said
    named = next(a for a in metrics.arms if a.arm == "named-offline")
    assert f"false diversion {named.false_diversion_rate:.1%}" in said
    assert view.as_json()["caveats"] == [said]
    assert html.escape(said) in html_of(view) and said in markdown_of(view)


async def test_review_smoke_says_its_reviewer_was_offline_and_has_no_empty_heading(
    tmp_path: Path, store: Store
) -> None:
    root = require_data("trajectories")
    cfg = eval_config(tmp_path)
    suite = load_suite(suite_path("review-smoke"))
    providers = eval_providers(cfg, arm_routes(cfg, suite.arms), {})
    _BUILT.extend(providers.values())
    await EvalRunner(
        suite, suite.arms, config=cfg, providers=providers, store=store, run_id="rs",
        data_root=root,
    ).run()  # fmt: skip
    run, metrics = await load_metrics(store, "rs")
    view = report_view(run, metrics)

    reviewing = [a.name for a in suite.arms if a.mask is not None]
    (said,) = view.caveats  # the reviewing arms share their numbers: one sentence
    assert all(arm in said for arm in reviewing) and "baseline" not in said
    assert "the reviewer ran on foureyes' offline engine" in said
    assert "false diversion 100.0%" in said and "say nothing about a model" in said
    assert view.failure_reasons is not None
    rows = {row[0]: row for row in view.failure_reasons.rows}
    column = view.failure_reasons.header.index("reviewer_offline")
    assert all(rows[arm][column] == str(len(suite.cases)) for arm in reviewing)

    # The sessions have no ground truth: no matrix of zeros, a sentence instead.
    assert view.confusions == () and len(view.confusion_notes) == 1
    page = html_of(view)
    assert _empty_headings(page) == []
    assert f"<h2>{text('heading.confusion')}</h2><p class='note'>" in page
    # The four reviewing arms diverted every case: the corrections plot has bars.
    assert len(_plots.correction_bars(metrics)) == len(reviewing)


def test_offline_roles_claims_only_what_the_facts_record() -> None:
    routes = {
        "offline": {"kind": "offline", "model": "foureyes-offline"},
        "real": {"kind": "openai", "model": "m"},
    }
    arms = [
        {"name": "base", "mask": None},
        {"name": "default", "mask": "none"},
        {"name": "named", "mask": "none", "routes": {"reviewer": "offline"}},
        {"name": "remote", "mask": "none", "routes": {"reviewer": "real"}},
    ]
    facts = {"kind": "review", "arms": arms, "routes": routes}
    assert offline_roles(facts, "base") == ()  # it reviews nothing
    assert offline_roles(facts, "default") == ()  # the config's default: not recorded
    assert offline_roles(facts, "named") == ("reviewer",)
    assert offline_roles(facts, "remote") == ()
    # The reviewer's own failure code says it was offline, whatever the routes.
    assert offline_roles(facts, "default", {"reviewer_offline": 2}) == ("reviewer",)
    # Every route offline (the built-in default): every judging role is.
    alone = facts | {"routes": {"offline": routes["offline"]}}
    assert offline_roles(alone, "default") == ("reviewer",)
    triage = {"kind": "triage", "routes": alone["routes"], "arms": [{"name": "l1", "l2": False}]}
    assert offline_roles(triage, "l1") == ("risk_l1",)
    agent = {"kind": "agent", "routes": alone["routes"], "arms": [{"name": "a", "mask": "none"}]}
    assert offline_roles(agent, "a") == ("primary", "reviewer")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@given(
    st.dictionaries(
        st.sampled_from(["kind", "arms", "routes", "mode", "x"]),
        _JSON | st.sampled_from(["review", "gate", "triage", "agent"]),
    ),
    st.text(max_size=8),
)
def test_offline_roles_of_facts_of_any_shape_never_raises(facts: dict[str, Any], arm: str) -> None:
    found = offline_roles(facts, arm)
    assert set(found) <= {"supervisor", "risk_l1", "risk_l2", "reviewer", "primary"}


# ---- confusion matrices: legible counts ---------------------------------------------

_COLOUR = st.integers(0, 0xFFFFFF).map(lambda v: f"#{v:06x}")


@given(_COLOUR)
def test_the_ink_chosen_for_any_background_contrasts_at_least_4_5(background: str) -> None:
    ink = _plots.text_colour(background)
    assert _plots.contrast_ratio(background, ink) >= _plots.MIN_CONTRAST


@given(st.lists(st.integers(0, 500), min_size=1, max_size=30))
def test_every_heat_map_fill_is_legible_and_never_dark_at_the_low_end(counts: list[int]) -> None:
    peak = max(counts)
    for count in counts:
        fill = _plots.cell_fill(count, peak)
        ink = _plots.text_colour(fill)
        assert _plots.contrast_ratio(fill, ink) >= _plots.MIN_CONTRAST
    # Empty cells are pale (dark counts on them), the fullest is not navy or black.
    assert _plots.relative_luminance(_plots.cell_fill(0, peak)) > 0.85
    assert _plots.relative_luminance(_plots.cell_fill(peak, peak)) > 0.08


def test_colours_that_are_not_hex_are_refused() -> None:
    for bad in ("navy", "#fff", "#gggggg", "", "#1234567"):
        with pytest.raises(ValueError, match="#rrggbb"):
            _plots.text_colour(bad)
    # Counts out of range are clamped, not an error.
    assert _plots.cell_fill(-3, 4) == _plots.cell_fill(0, 4)
    assert _plots.cell_fill(9, 4) == _plots.cell_fill(4, 4)
    assert _plots.cell_fill(0, 0) == _plots.cell_fill(0, 1)


def _triage_like() -> RunMetrics:
    """Metrics with a full confusion matrix: one cell far fuller than the others."""
    labels = ["low", "medium", "high", "critical"]
    records = [
        PairRecord(
            case_id=f"c{n}",
            arm="a",
            passed=e == p,
            failed=False,
            prediction=p,
            expected=e,
            cost_usd=0.0,
            latency_ms=0.0,
            detail={},
        )
        for n, (e, p) in enumerate(
            [("low", "low")] * 40
            + [("medium", "low")] * 9
            + [("high", "high")] * 17
            + [("critical", "critical")] * 25
            + [("critical", None)] * 3
        )
    ]
    return compute_metrics(
        SuiteKind.TRIAGE, records, arms=["a"], baseline="a", labels=labels, seed=0
    )


def test_confusion_cells_carry_their_counts_and_legible_inks() -> None:
    metrics = _triage_like()
    cells = _plots.confusion_cells(metrics, "a")
    assert [[c.count for c in row] for row in cells][0] == [40, 0, 0, 0, 0]
    assert cells[3][4].predicted == "none" and cells[3][4].count == 3
    inks = {c.ink for row in cells for c in row}
    assert inks == {"#000000", "#ffffff"}  # dark on the pale cells, light on the full one
    assert all(_plots.contrast_ratio(c.fill, c.ink) >= 4.5 for row in cells for c in row)


def test_the_drawn_confusion_png_annotations_contrast_with_their_cells() -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_hex

    metrics = _triage_like()
    words = _plots.PlotText.of(report_strings(), Locale.EN, None)
    with _plots.CONFUSION.figure(metrics, words, "a") as fig:
        ax = fig.axes[0]
        (image,) = ax.images
        pixels = image.get_array()
        counts = [t for t in ax.texts if t.get_text().isdigit()]
        assert len(counts) == len(metrics.labels) * (len(metrics.labels) + 1)
        for t in counts:
            col, row = (round(v) for v in t.get_position())
            assert pixels is not None
            r, g, b = (float(v) for v in pixels[row][col][:3])
            cell = to_hex((r, g, b))
            ink = to_hex(t.get_color())
            assert _plots.contrast_ratio(cell, ink) >= _plots.MIN_CONTRAST, (t.get_text(), cell)
    png = _plots.confusion_png(metrics, "a", words)
    assert png.startswith(b"\x89PNG")


# ---- corrections ---------------------------------------------------------------------


def test_correction_bars_are_the_arms_shares_and_drawn_as_such() -> None:
    # Against the baseline on four cases: "better" corrects two and diverts one.
    metrics = _metrics(
        {
            "base": [False, False, True, True],
            "better": [True, True, False, True],
            "same": [False, False, True, True],
        }
    )
    bars = _plots.correction_bars(metrics)
    assert [(b.arm, b.correction, b.false_diversion) for b in bars] == [
        ("better", 0.5, 0.25),
        ("same", 0.0, 0.0),
    ]
    pytest.importorskip("matplotlib")
    from matplotlib.patches import Rectangle

    words = _plots.PlotText.of(report_strings(), Locale.EN, None)
    with _plots.CORRECTIONS.figure(metrics, words) as fig:
        heights = [p.get_height() for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    assert len(heights) == 2 * len(bars)
    assert sorted(h for h in heights if h > 0) == [0.25, 0.5]


def test_without_corrections_there_is_no_plot_but_a_sentence() -> None:
    metrics = _metrics({"base": [True, False], "twin": [True, False]})
    assert _plots.correction_bars(metrics) == ()
    run = _run(SuiteKind.GATE, [{"name": "base", "baseline": True}, {"name": "twin"}])
    view = report_view(run, metrics)
    assert text("plot.corrections.title") not in [p.alt for p in view.plots]
    assert len(view.plots) == 2
    assert view.plot_notes == (text("plot.corrections.none").format(baseline="base"),)
    assert view.as_json()["plots"]["notes"] == list(view.plot_notes)
    assert html.escape(view.plot_notes[0]) in html_of(view)
    # The baseline alone: nothing to compare, said so.
    alone = report_view(run, _metrics({"base": [True, False]}))
    assert alone.plot_notes == (text("plot.corrections.alone").format(baseline="base"),)


# ---- cost against benefit ------------------------------------------------------------


def test_arms_at_the_same_cost_and_pass_rate_are_set_side_by_side() -> None:
    metrics = _metrics(
        {
            "base": [True, False],
            "first": [True, True],
            "second": [True, True],
            "far": [False, False],
        },
        far=0.5,
    )
    points = {p.arm: p for p in _plots.cost_points(metrics)}
    assert list(points) == ["base", "first", "second", "far"]
    first, second = points["first"], points["second"]
    assert (first.cost_usd, first.pass_rate) == (second.cost_usd, second.pass_rate)
    assert first.offset == -0.5 and second.offset == 0.5
    assert first.together == second.together == ("first", "second")
    assert points["far"].offset == 0 and points["far"].together == ("far",)
    assert points["base"].offset == 0  # same cost, another pass rate: not covered
    assert _plots.cost_points(metrics) == tuple(points.values())  # the same every time


@given(
    st.lists(
        st.tuples(st.sampled_from([0.0, 0.001, 0.002]), st.lists(st.booleans(), min_size=2)),
        min_size=1,
        max_size=9,
    )
)
def test_no_cost_marker_is_drawn_where_another_is(arms: list[tuple[float, list[bool]]]) -> None:
    size = min(len(flags) for _, flags in arms)
    passes = {f"arm{n}": flags[:size] for n, (_, flags) in enumerate(arms)}
    metrics = _metrics(passes, **{f"arm{n}": cost for n, (cost, _) in enumerate(arms)})
    points = _plots.cost_points(metrics)
    assert [p.arm for p in points] == list(passes)
    drawn = {(p.cost_usd, p.pass_rate, p.offset) for p in points}
    assert len(drawn) == len(points)


def test_the_cost_png_shows_every_arm_of_one_point_apart() -> None:
    pytest.importorskip("matplotlib")
    metrics = _metrics({"base": [True, True], "a": [True, True], "b": [True, True]})
    words = _plots.PlotText.of(report_strings(), Locale.EN, None)
    with _plots.COST_BENEFIT.figure(metrics, words) as fig:
        ax = fig.axes[0]
        shown = []
        for c in ax.collections:
            ((x, y),) = c.get_offset_transform().transform(c.get_offsets())
            shown.append((round(x), round(y)))
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["base", "a", "b"]
    assert len(set(shown)) == 3 and len({y for _, y in shown}) == 1  # side by side


# ---- without matplotlib: SVG, and no empty heading ------------------------------------

# A child interpreter where matplotlib cannot be imported (as after `pip install .`, the
# `eval` extra left out), which prints the report view of a stored run as JSON and HTML.
_WITHOUT_MATPLOTLIB = """
import asyncio, importlib.abc, json, sys

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Refuse())
from foureyes.config import Config
from foureyes.core.locale import Locale
from foureyes.evals.report import html_of, load_metrics, report_view
from foureyes.store import Store

async def main(url, run_id, locale):
    cfg = Config.model_validate({"store": {"url": url}})
    store = await Store.open(cfg.store, cfg.privacy, {})
    try:
        view = report_view(*await load_metrics(store, run_id), Locale(locale))
    finally:
        await store.close()
    assert "matplotlib" not in sys.modules
    print(json.dumps({"view": view.as_json(), "html": html_of(view)}))

asyncio.run(main(*sys.argv[1:]))
"""


def _slim_report(url: str, run_id: str, locale: Locale) -> dict[str, Any]:
    child = subprocess.run(
        [sys.executable, "-c", _WITHOUT_MATPLOTLIB, url, run_id, locale.value],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    result: dict[str, Any] = json.loads(child.stdout)
    return result


@pytest.mark.parametrize("locale", [Locale.EN, Locale.ZH_HANT])
async def test_without_matplotlib_the_plots_are_svg_and_no_heading_is_empty(
    tmp_path: Path, store: Store, locale: Locale
) -> None:
    run, metrics = await _gate_run(tmp_path, store)
    slim = _slim_report(eval_config(tmp_path).store.url, "g", locale)
    view, page = slim["view"], slim["html"]

    assert view["plots"]["note"] == text("plots.missing", locale)
    assert "pip install 'foureyes[eval]'" in view["plots"]["note"]
    items = view["plots"]["items"] + view["confusions"]["items"]
    assert len(view["plots"]["items"]) == 2 + bool(_plots.correction_bars(metrics))
    assert len(view["confusions"]["items"]) == len(metrics.arms)
    for item in items:
        assert "png_base64" not in item
        svg = base64.b64decode(item["svg_base64"]).decode("utf-8")
        assert ET.fromstring(svg).tag == "{http://www.w3.org/2000/svg}svg"  # well-formed
    assert "<img" not in page and page.count("<svg ") == len(items)
    assert _empty_headings(page) == []
    assert html.escape(text("plots.missing", locale)) in page
    assert f"<h2>{text('heading.confusion', locale)}</h2>" in page
    # The SVG's words are the report's own, in its locale (the browser draws them).
    assert text("plot.cost.title", locale) in page
    assert text("plot.confusion.predicted", locale) in page


def test_the_install_command_names_an_extra_that_brings_matplotlib() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    assert any(r.startswith("matplotlib") for r in extras["eval"])
    for locale in Locale:
        assert "pip install 'foureyes[eval]'" in text("plots.missing", locale)


def _svg_texts(svg: str) -> list[ET.Element]:
    return list(ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text"))


def test_svg_escapes_what_the_run_names_and_stays_well_formed() -> None:
    hostile = "<script>alert(1)</script>&\x01\ud800x"
    metrics = _metrics({"base": [True, False], "other": [False, True]})
    renamed = dataclasses.replace(
        metrics,
        arms=tuple(
            dataclasses.replace(a, arm=hostile) if a.arm == "other" else a for a in metrics.arms
        ),
        confusions={"base": metrics.confusions["base"], hostile: metrics.confusions["other"]},
    )
    words = _plots.PlotText(report_strings(), Locale.EN, ())
    for svg in (
        _svg.pass_rate_svg(renamed, words),
        _svg.corrections_svg(renamed, words),
        _svg.cost_benefit_svg(renamed, words),
        _svg.confusion_svg(renamed, hostile, words),
    ):
        assert "<script>" not in svg
        names = [t.text for t in _svg_texts(svg)]
        assert any(n and "<script>alert(1)</script>&x" in n for n in names)
    with pytest.raises(KeyError):
        _svg.confusion_svg(renamed, "no-such-arm", words)


def test_svg_confusion_counts_are_in_their_cells_ink() -> None:
    metrics = _triage_like()
    svg = _svg.confusion_svg(metrics, "a", _plots.PlotText(report_strings(), Locale.EN, ()))
    cells = [c for row in _plots.confusion_cells(metrics, "a") for c in row]
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    fills = [r.get("fill") for r in root.iter(f"{ns}rect") if r.find(f"{ns}title") is not None]
    counts = [t for t in root.iter(f"{ns}text") if t.text and t.text.isdigit()]
    assert fills == [c.fill for c in cells]
    assert [(t.text, t.get("fill")) for t in counts] == [(str(c.count), c.ink) for c in cells]
    assert all(_plots.contrast_ratio(c.fill, c.ink) >= 4.5 for c in cells)


def test_svg_cost_markers_of_one_point_are_apart() -> None:
    metrics = _metrics({"base": [True, True], "a": [True, True], "b": [True, True]})
    svg = _svg.cost_benefit_svg(metrics, _plots.PlotText(report_strings(), Locale.EN, ()))
    ns = "{http://www.w3.org/2000/svg}"
    root = ET.fromstring(svg)
    marks = [
        el
        for el in root.iter()
        if el.tag in {f"{ns}circle", f"{ns}rect", f"{ns}polygon"}
        and (tip := el.find(f"{ns}title")) is not None
        and ": $" in (tip.text or "")
    ]
    assert len(marks) == 3
    xs = {el.get("cx") or el.get("x") or (el.get("points") or "").split(",")[0] for el in marks}
    assert len(xs) == 3
    legend = [t.text for t in _svg_texts(svg)]
    assert {"base", "a", "b"} <= set(legend)


def test_every_new_report_string_is_in_every_locale() -> None:
    keys = [
        "heading.failure_reasons",
        "outcome.passed",
        "failure_reasons.note",
        "caveat.offline",
        "caveat.arm",
        "caveat.arms",
        "caveat.scripted",
        "rate.pass",
        "rate.false_diversion",
        "list.separator",
        "list.and",
        "plot.corrections.none",
        "plot.corrections.alone",
        "confusion.no_expected",
        *(f"role.{r}" for r in ("supervisor", "risk_l1", "risk_l2", "reviewer", "primary")),
    ]
    for locale in Locale:
        for key in keys:
            assert text(key, locale)
    assert "{arms}" in text("caveat.offline", Locale.ZH_HANS)


def test_a_scripted_run_says_its_models_are_stand_ins() -> None:
    metrics = _metrics({"base": [True, False], "other": [True, True]})
    arms: list[dict[str, Any]] = [{"name": "base", "baseline": True}, {"name": "other"}]
    scripted = report_view(_run(SuiteKind.GATE, arms, mode="scripted"), metrics)
    assert scripted.caveats[0] == text("caveat.scripted")
    live = report_view(
        _run(SuiteKind.GATE, arms, routes={"m": {"kind": "openai", "model": "x"}}), metrics
    )
    assert live.caveats == ()
