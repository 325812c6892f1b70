"""Reports of a stored run: a self-contained HTML page and a Markdown summary.

A report is first built as a :class:`ReportView` (its tables as text and its plots as
PNG, in one of foureyes' locales, every word from ``report_strings.json``); the page, the
summary and the console's report pane are made from that one view. The page embeds its
plots as base64 PNG and its style inline, so it opens anywhere without a network. Without
matplotlib (a slim install) the same plots are drawn as SVG by :mod:`foureyes.evals._svg`
and inlined, and the page says how to get the full ones. Every text taken from the run
(arm, case and route names) is HTML-escaped.

Besides the numbers, a report says why they are what they are: each arm's pairs counted
by outcome reason (passed, each failure reason, wrong label), and a sentence for each arm
whose judging role ran on the offline engine, whose rates then say nothing about a model.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foureyes.core.catalogue import Catalogue
from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale
from foureyes.evals import _plots, _svg
from foureyes.evals.metrics import PASSED, ArmMetrics, PairRecord, RunMetrics, compute_metrics
from foureyes.evals.runner import check_run_id
from foureyes.evals.stats import Interval, PairedComparison
from foureyes.evals.suite import SuiteKind
from foureyes.store import Store
from foureyes.store.evals import EvalResultRow, EvalRunRow

__all__ = [
    "ReportFiles",
    "ReportPlot",
    "ReportTable",
    "ReportView",
    "html_of",
    "load_metrics",
    "markdown_of",
    "offline_roles",
    "render_html",
    "render_markdown",
    "report_strings",
    "report_view",
    "write_report",
]

_STRINGS = "report_strings.json"


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """Where a report was written."""

    html: Path
    """The self-contained page."""
    markdown: Path
    """The Markdown summary."""
    plots_note: str | None = None
    """Why the page's plots are simple SVG (matplotlib is not installed) and how to get the
    full ones, else ``None``."""


def _records(rows: Sequence[EvalResultRow]) -> list[PairRecord]:
    return [
        PairRecord(
            case_id=r.case_id,
            arm=r.arm,
            passed=r.passed,
            failed=r.status == "failed",
            prediction=r.record.get("prediction"),
            expected=r.record.get("expected"),
            cost_usd=float(r.record.get("cost_usd", 0.0)),
            latency_ms=float(r.record.get("latency_ms", 0.0)),
            detail=r.record.get("detail", {}),
            failure=_code(r.record.get("failure")),
            verifier=_code(r.record.get("verifier")),
        )
        for r in rows
    ]


def _code(value: object) -> str | None:
    """A stored reason code, or ``None`` for none (or anything but a non-empty string)."""
    return value if isinstance(value, str) and value else None


async def load_metrics(store: Store, run_id: str) -> tuple[EvalRunRow, RunMetrics]:
    """The stored run ``run_id`` and its metrics.

    Raises:
        UsageError: there is no such run, or it has no results yet.
        StoreError: the store failed.
    """
    run = await store.evals.get_run(run_id)
    if run is None:
        raise UsageError(f"no eval run {run_id!r}")
    rows = await store.evals.results(run_id)
    if not rows:
        raise UsageError(f"eval run {run_id!r} has no results yet")
    facts = run.facts
    metrics = compute_metrics(
        SuiteKind(facts["kind"]),
        _records(rows),
        arms=[a["name"] for a in facts["arms"]],
        baseline=facts["baseline"],
        labels=facts["labels"],
        seed=int(facts["seed"]),
    )
    return run, metrics


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _usd(value: float | None) -> str:
    return "–" if value is None else f"${value:.4f}"


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _ci(value: Interval | None) -> str:
    if value is None:
        return "–"
    return f"{value.estimate:.1%} [{value.low:.1%}, {value.high:.1%}]"


def _tokens(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def report_strings() -> Catalogue:
    """The reports' strings in every locale (read once per process).

    Raises:
        UsageError: the packaged file is broken (a bug in this release).
    """
    return Catalogue.packaged(__package__ or __name__, _STRINGS, name="report catalogue")


@dataclass(frozen=True, slots=True)
class ReportTable:
    """One table of a report: its heading (``""`` for none), header and rows of text."""

    heading: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class ReportPlot:
    """One plot of a report: what it shows (its alternative text), as PNG or as SVG."""

    alt: str
    png: bytes | None = None
    """Drawn by matplotlib, else ``None``."""
    svg: str | None = None
    """Drawn as SVG by foureyes itself (matplotlib missing), else ``None``."""


@dataclass(frozen=True, slots=True)
class ReportView:
    """Everything a report shows, as text in one locale and plots as PNG (or SVG).

    The HTML page, the Markdown summary and the console's report pane are each built
    from one view, so they cannot say different things.
    """

    locale: Locale
    title: str
    facts: ReportTable
    arms: ReportTable
    agreement: ReportTable | None
    plots_heading: str
    plots: tuple[ReportPlot, ...]
    confusion_heading: str
    confusions: tuple[ReportPlot, ...]
    plots_note: str | None = None
    """Why the plots are SVG drawn by foureyes (matplotlib, the ``eval`` extra, is missing)
    and how to install it, else ``None``."""
    review: ReportTable | None = None
    """Agent suites: each arm's review metrics, tokens and instruction digest."""
    power: str | None = None
    """What the run could detect (its power), shown before the tables of p-values."""
    contrasts: ReportTable | None = None
    """Pairs of arms compared directly (masked against its unmasked control...)."""
    failure_reasons: ReportTable | None = None
    """Each arm's pairs counted by outcome reason (passed, each failure reason, ...)."""
    failure_note: str | None = None
    """What the outcome reasons of :attr:`failure_reasons` mean."""
    caveats: tuple[str, ...] = ()
    """Sentences on arms whose numbers say nothing about a model (an offline engine in a
    judging role, a scripted run), shown with the arms table."""
    plot_notes: tuple[str, ...] = ()
    """Why a plot is left out (no correction to draw, ...)."""
    confusion_notes: tuple[str, ...] = ()
    """Why a confusion matrix is left out (no case has an expected label, ...)."""

    def as_json(self) -> dict[str, Any]:
        """The view as JSON: tables as header and rows, plots as base64 PNG (or SVG)."""

        def table(t: ReportTable | None) -> dict[str, Any] | None:
            if t is None:
                return None
            return {
                "heading": t.heading,
                "header": list(t.header),
                "rows": [list(r) for r in t.rows],
            }

        def plots(items: tuple[ReportPlot, ...]) -> list[dict[str, str]]:
            return [_plot_json(p) for p in items]

        return {
            "locale": self.locale.value,
            "title": self.title,
            "facts": table(self.facts),
            "arms": table(self.arms),
            "agreement": table(self.agreement),
            "review": table(self.review),
            "power": self.power,
            "contrasts": table(self.contrasts),
            "failure_reasons": table(self.failure_reasons),
            "failure_note": self.failure_note,
            "caveats": list(self.caveats),
            "plots": {
                "heading": self.plots_heading,
                "items": plots(self.plots),
                "note": self.plots_note,
                "notes": list(self.plot_notes),
            },
            "confusions": {
                "heading": self.confusion_heading,
                "items": plots(self.confusions),
                "note": None,  # said once, under the plots
                "notes": list(self.confusion_notes),
            },
        }


def _plot_json(plot: ReportPlot) -> dict[str, str]:
    """A plot as JSON: its alternative text and its PNG or SVG in base64."""
    if plot.png is not None:
        return {"alt": plot.alt, "png_base64": base64.b64encode(plot.png).decode("ascii")}
    svg = (plot.svg or "").encode("utf-8")
    return {"alt": plot.alt, "svg_base64": base64.b64encode(svg).decode("ascii")}


_ARM_COLUMNS = (
    "col.arm",
    "col.n",
    "col.failures",
    "col.pass_rate",
    "col.correction",
    "col.false_diversion",
    "col.same_as_baseline",
    "col.cost",
    "col.latency",
    "col.cost_per_correction",
)
_KIND_COLUMNS = {
    SuiteKind.GATE: ("col.block_rate", "col.false_block_rate"),
    SuiteKind.TRIAGE: ("col.critical_recall", "col.alert_precision"),
}


def _tested(c: PairedComparison, better: str, text: Callable[[str], str]) -> str:
    """The paired test's result: ``better`` (which side won) unless not significant."""
    verdict = better if c.significant else text("comparison.none")
    return text("comparison.test").format(verdict=verdict, p=f"{c.p_value:.3g}", n=c.n)


def _comparison(a: ArmMetrics, text: Callable[[str], str]) -> str:
    c = a.comparison
    if c is None:
        return text("comparison.baseline")
    arm_won = c.arm_only > c.baseline_only
    return _tested(c, text("comparison.arm" if arm_won else "comparison.baseline_better"), text)


def _arm_row(a: ArmMetrics, kind: SuiteKind, text: Callable[[str], str]) -> tuple[str, ...]:
    extra = {
        SuiteKind.GATE: [_pct(a.block_rate), _pct(a.false_block_rate)],
        SuiteKind.TRIAGE: [_pct(a.critical_recall), _pct(a.alert_precision)],
    }.get(kind, [])
    return (
        a.arm,
        str(a.n),
        str(a.failures),
        _ci(a.pass_rate),
        _ci(a.correction_ci) if a.correction_ci else _pct(a.correction_rate),
        _ci(a.false_diversion_ci) if a.false_diversion_ci else _pct(a.false_diversion_rate),
        _ci(a.no_update_ci) if a.no_update_ci else _pct(a.no_update_rate),
        _usd(a.mean_cost_usd),
        f"{a.mean_latency_ms:.0f} ms",
        _usd(a.cost_per_correction_usd),
        *extra,
        _comparison(a, text),
    )


_REVIEW_COLUMNS = (
    "col.arm",
    "col.instruction",
    "col.reviewed",
    "col.shown",
    "col.adoption",
    "col.adoption_precision",
    "col.unique_delta",
    "col.would_show",
    "col.timeouts",
    "col.review_timeouts",
    "col.format_failures",
    "col.no_update",
    "col.divergence",
    "col.shared_prefix",
    "col.sample_spread",
    "col.deliberate_calls",
    "col.tokens_per_correction",
    "col.tokens_in",
    "col.tokens_out",
    "col.tokens_reasoning",
    "col.tokens_cached",
)


def _review_table(metrics: RunMetrics, text: Callable[[str], str]) -> ReportTable | None:
    rows = []
    for a in metrics.arms:
        r = a.review
        if r is None:
            continue
        rows.append(
            (
                a.arm,
                r.instruction_sha256[:16] if r.instruction_sha256 else "–",
                str(r.reviewed),
                str(r.shown),
                _ci(r.adoption),
                _ci(r.adoption_precision),
                _ci(r.unique_delta),
                _ci(r.would_show),
                _ci(r.timeouts),
                _ci(r.review_timeouts),
                _ci(r.format_failures),
                _ci(r.no_update),
                _ci(a.divergence_ci),
                "–" if a.shared_prefix is None else f"{a.shared_prefix}/{a.n}",
                _num(a.sample_spread),
                _num(r.deliberate_calls),
                _tokens(a.tokens_per_correction),
                _tokens(r.prompt_tokens),
                _tokens(r.completion_tokens),
                _tokens(r.reasoning_tokens),
                _tokens(r.cached_tokens),
            )
        )
    if not rows:
        return None
    return ReportTable(text("heading.review"), tuple(text(c) for c in _REVIEW_COLUMNS), tuple(rows))


def _contrasts(metrics: RunMetrics, text: Callable[[str], str]) -> ReportTable | None:
    rows = []
    for c in metrics.contrasts:
        k = c.comparison
        better = c.first if k.arm_only > k.baseline_only else c.second
        verdict = text("contrast.first_better").format(first=better)
        rows.append((c.first, c.second, _ci(k.difference), _tested(k, verdict, text)))
    if not rows:
        return None
    columns = ("col.first", "col.second", "col.difference", "col.result")
    return ReportTable(text("heading.contrasts"), tuple(text(c) for c in columns), tuple(rows))


def _power(metrics: RunMetrics, text: Callable[[str], str]) -> str | None:
    """The smallest effect the run could detect, said before any p-value is read."""
    p = metrics.power
    if p is None:
        return None
    values = {"n": p.n, "alpha": f"{p.alpha:g}", "k": p.min_discordant}
    if p.mde is None:
        return text("power.none").format(**values)
    return text("power.statement").format(
        **values,
        share=_pct(p.min_discordant / p.n),
        power=_pct(p.power),
        mde=_pct(p.mde),
    )


def _facts(run: EvalRunRow, text: Callable[[str], str]) -> ReportTable:
    f: dict[str, Any] = dict(run.facts)
    routes = ", ".join(f"{n} ({r['kind']}: {r['model']})" for n, r in f["routes"].items())
    rows = (
        (text("facts.suite"), f"{run.suite} (sha256 {run.suite_sha256[:12]})"),
        (text("facts.started"), run.created_at.isoformat()),
        (text("facts.mode"), str(f["mode"])),
        (text("facts.seed"), str(f["seed"])),
        *(((text("facts.samples"), str(f["samples"])),) if "samples" in f else ()),
        (text("facts.version"), f"{f['version']} (Python {f['python']})"),
        (text("facts.config"), str(f["config_sha256"])[:16]),
        (text("facts.routes"), routes),
    )
    return ReportTable("", (text("facts.fact"), text("facts.value")), rows)


def _failure_reasons(metrics: RunMetrics, text: Callable[[str], str]) -> ReportTable | None:
    """Each arm's pairs by outcome reason: one column per reason any arm has, passed first."""
    totals: dict[str, int] = {}
    for a in metrics.arms:
        for reason, count in a.outcomes.items():
            totals[reason] = totals.get(reason, 0) + count
    if not totals:
        return None
    reasons = sorted(totals, key=lambda r: (r != PASSED, -totals[r], r))
    header = (
        text("col.arm"),
        text("col.n"),
        *(text("outcome.passed") if r == PASSED else r for r in reasons),
    )
    rows = tuple(
        (a.arm, str(a.n), *(str(a.outcomes.get(r, 0)) for r in reasons)) for a in metrics.arms
    )
    return ReportTable(text("heading.failure_reasons"), header, rows)


def _judging_roles(kind: SuiteKind, arm: dict[str, Any]) -> tuple[str, ...]:
    """The roles whose answers an arm's numbers measure, by suite kind and its switches."""
    reviews = arm.get("mask") is not None
    if kind is SuiteKind.GATE:
        return ("supervisor",) if arm.get("supervisor", True) else ()
    if kind is SuiteKind.TRIAGE:
        return ("risk_l1", "risk_l2") if arm.get("l2", True) else ("risk_l1",)
    if kind is SuiteKind.REVIEW:
        return ("reviewer",) if reviews else ()
    checks = arm.get("check", "review") == "review"
    return ("primary", *(("reviewer",) if reviews and checks else ()))


def offline_roles(
    facts: Mapping[str, Any], arm: str, outcomes: Mapping[str, int] | None = None
) -> tuple[str, ...]:
    """The judging roles of ``arm`` that the run's stored ``facts`` show on the offline engine.

    A role is on it when the arm routes it to a route of kind ``offline``, or, for a role
    the arm leaves to the config, when every route the config defines is ``offline`` (the
    built-in default); a reviewer whose pairs failed as ``reviewer_offline`` (in
    ``outcomes``) is too. Facts that do not say (a mixed config, an unknown arm, facts of
    another shape) name no role: the report claims only what the run recorded.
    """
    arms = facts.get("arms")
    routes = facts.get("routes")
    found = None
    if isinstance(arms, list):
        found = next((a for a in arms if isinstance(a, dict) and a.get("name") == arm), None)
    if found is None or not isinstance(routes, dict):
        return ()
    try:
        kind = SuiteKind(str(facts.get("kind")))
    except ValueError:
        return ()

    def kind_of(route: object) -> object:
        entry = routes.get(route) if isinstance(route, str) else None
        return entry.get("kind") if isinstance(entry, dict) else None

    every = bool(routes) and all(kind_of(name) == "offline" for name in routes)
    chosen: dict[str, Any] = found["routes"] if isinstance(found.get("routes"), dict) else {}
    offline = []
    for role in _judging_roles(kind, found):
        on = kind_of(chosen[role]) == "offline" if role in chosen else every
        if role == "reviewer" and (outcomes or {}).get("reviewer_offline"):
            on = True
        if on:
            offline.append(role)
    return tuple(offline)


def _caveats(run: EvalRunRow, metrics: RunMetrics, text: Callable[[str], str]) -> tuple[str, ...]:
    """The sentences that keep an offline or scripted run's numbers from being misread.

    Arms whose offline roles and numbers are the same share one sentence.
    """
    facts: dict[str, Any] = dict(run.facts)
    said = [text("caveat.scripted")] if facts.get("mode") == "scripted" else []
    groups: dict[tuple[tuple[str, ...], str], list[str]] = {}
    for a in metrics.arms:
        roles = offline_roles(facts, a.arm, a.outcomes)
        if not roles:
            continue
        shown = [f"{text('rate.pass')} {_pct(a.pass_rate.estimate)}"]
        if a.false_diversion_rate is not None:
            shown.append(f"{text('rate.false_diversion')} {_pct(a.false_diversion_rate)}")
        groups.setdefault((roles, text("list.separator").join(shown)), []).append(a.arm)
    for (roles, rates), arms in groups.items():
        names = text("list.separator").join(arms)
        said.append(
            text("caveat.offline").format(
                arms=text("caveat.arm" if len(arms) == 1 else "caveat.arms").format(names=names),
                roles=text("list.and").join(text(f"role.{r}") for r in roles),
                rates=rates,
            )
        )
    return tuple(said)


def _draw(
    metrics: RunMetrics, strings: Catalogue, locale: Locale, text: Callable[[str], str]
) -> tuple[tuple[ReportPlot, ...], tuple[ReportPlot, ...], tuple[str, ...], tuple[str, ...]]:
    """The plots and confusion matrices, and why any is left out; PNG, else SVG."""
    bars = _plots.correction_bars(metrics)
    matrices = [a.arm for a in metrics.arms if _plots.has_expected(metrics, a.arm)]
    plot_notes: list[str] = []
    if not bars:
        alone = all(a.arm == metrics.baseline for a in metrics.arms)
        key = "plot.corrections.alone" if alone else "plot.corrections.none"
        plot_notes.append(text(key).format(baseline=metrics.baseline))
    left_out = [a.arm for a in metrics.arms if a.arm not in matrices]
    confusion_notes = (
        [text("confusion.no_expected").format(arms=text("list.separator").join(left_out))]
        if left_out
        else []
    )
    kinds = [
        ("plot.pass_rate.title", _plots.pass_rate_png, _svg.pass_rate_svg),
        *(
            (("plot.corrections.title", _plots.corrections_png, _svg.corrections_svg),)
            if bars
            else ()
        ),
        ("plot.cost.title", _plots.cost_benefit_png, _svg.cost_benefit_svg),
    ]
    if _plots.available():
        # A CJK font, when there is one, also draws the run's own names in any report.
        # The alternative texts are the page's, in its locale even where the plots' own
        # words fall back to English for want of a font.
        labels = _plots.PlotText.of(strings, locale, _plots.cjk_font())
        plots = tuple(ReportPlot(text(key), png=png(metrics, labels)) for key, png, _ in kinds)
        confusions = tuple(
            ReportPlot(
                text("plot.confusion.title").format(arm=arm),
                png=_plots.confusion_png(metrics, arm, labels),
            )
            for arm in matrices
        )
    else:
        # The browser draws the SVG's words: any locale, no font needed here.
        words = _plots.PlotText(strings, locale, ())
        plots = tuple(ReportPlot(text(key), svg=svg(metrics, words)) for key, _, svg in kinds)
        confusions = tuple(
            ReportPlot(
                text("plot.confusion.title").format(arm=arm),
                svg=_svg.confusion_svg(metrics, arm, words),
            )
            for arm in matrices
        )
    return plots, confusions, tuple(plot_notes), tuple(confusion_notes)


def report_view(run: EvalRunRow, metrics: RunMetrics, locale: Locale = Locale.EN) -> ReportView:
    """The report of ``run`` in ``locale``, plots drawn (see :mod:`foureyes.evals._plots`).

    With matplotlib the plots are PNG; without it (a slim install) they are SVG drawn by
    :mod:`foureyes.evals._svg`, and :attr:`ReportView.plots_note` says how to get the PNG.
    """
    strings = report_strings()

    def text(key: str) -> str:
        return strings.text(key, locale)

    columns = (*_ARM_COLUMNS, *_KIND_COLUMNS.get(metrics.kind, ()), "col.vs_baseline")
    arms = ReportTable(
        text("heading.arms"),
        tuple(text(c) for c in columns),
        tuple(_arm_row(a, metrics.kind, text) for a in metrics.arms),
    )
    agreement = None
    if metrics.agreement:
        agreement = ReportTable(
            text("heading.agreement"),
            tuple(text(c) for c in ("col.arm", "col.n", "col.kappa", "col.error_correlation")),
            tuple(
                (arm, str(g.n), _num(g.kappa), _num(g.error_correlation))
                for arm, g in metrics.agreement.items()
            ),
        )
    plots, confusions, plot_notes, confusion_notes = _draw(metrics, strings, locale, text)
    failure_reasons = _failure_reasons(metrics, text)
    return ReportView(
        locale=locale,
        title=text("title").format(run=run.run_id),
        facts=_facts(run, text),
        arms=arms,
        agreement=agreement,
        plots_heading=text("heading.plots"),
        plots=plots,
        confusion_heading=text("heading.confusion"),
        confusions=confusions,
        plots_note=None if _plots.available() else text("plots.missing"),
        review=_review_table(metrics, text),
        power=_power(metrics, text),
        contrasts=_contrasts(metrics, text),
        failure_reasons=failure_reasons,
        failure_note=text("failure_reasons.note") if failure_reasons else None,
        caveats=_caveats(run, metrics, text),
        plot_notes=plot_notes,
        confusion_notes=confusion_notes,
    )


def _md_table(table: ReportTable) -> list[str]:
    def cell(value: str) -> str:
        return value.replace("|", "\\|")

    lines = ["| " + " | ".join(cell(h) for h in table.header) + " |"]
    lines.append("|" + "---|" * len(table.header))
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows]
    return lines


def render_markdown(run: EvalRunRow, metrics: RunMetrics, locale: Locale = Locale.EN) -> str:
    """The Markdown summary of a run, in ``locale`` (no plots)."""
    return markdown_of(report_view(run, metrics, locale))


def markdown_of(view: ReportView) -> str:
    """The Markdown summary of a report view (its tables; the plots are left out)."""
    lines = [f"# {view.title}", ""]
    lines += [f"- **{k}**: {v}" for k, v in view.facts.rows]
    if view.power is not None:
        lines += ["", view.power]
    lines += ["", *_md_table(view.arms)]
    lines += [line for caveat in view.caveats for line in ("", f"> {caveat}")]
    if view.failure_reasons is not None:
        lines += ["", f"## {view.failure_reasons.heading}", "", *_md_table(view.failure_reasons)]
        if view.failure_note:
            lines += ["", view.failure_note]
    if view.contrasts is not None:
        lines += ["", f"## {view.contrasts.heading}", "", *_md_table(view.contrasts)]
    if view.review is not None:
        lines += ["", f"## {view.review.heading}", "", *_md_table(view.review)]
    if view.agreement is not None:
        lines += ["", f"## {view.agreement.heading}", "", *_md_table(view.agreement)]
    lines.append("")
    return "\n".join(lines)


def _img(plot: ReportPlot) -> str:
    if plot.png is None:  # our own SVG: every text in it is escaped (foureyes.evals._svg)
        return f"<figure class='plot'>{plot.svg or ''}</figure>"
    data = base64.b64encode(plot.png).decode("ascii")
    return f'<img class="plot" alt="{html.escape(plot.alt)}" src="data:image/png;base64,{data}">'


def _notes(notes: Sequence[str | None], css: str = "note") -> list[str]:
    return [f"<p class='{css}'>{html.escape(n)}</p>" for n in notes if n]


def _group(heading: str, plots: Sequence[ReportPlot], notes: Sequence[str | None]) -> list[str]:
    """A heading with its plots and notes; nothing at all when it has neither."""
    body = [*_notes(notes), *(_img(p) for p in plots)]
    return [f"<h2>{html.escape(heading)}</h2>", *body] if body else []


def _table(table: ReportTable) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in table.rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2rem;max-width:1200px;color:#222}"
    "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:4px 8px;"
    "text-align:left;font-size:14px}th{background:#f3f3f3}.plot{max-width:100%;margin:.5rem}"
    "figure.plot{display:inline-block}figure.plot svg{max-width:100%;height:auto}"
    ".caveat{border-left:4px solid #b35900;background:#fff4e5;padding:6px 10px}"
)


def render_html(run: EvalRunRow, metrics: RunMetrics, locale: Locale = Locale.EN) -> str:
    """The self-contained HTML page of a run in ``locale`` (plots embedded as base64 PNG)."""
    return html_of(report_view(run, metrics, locale))


def html_of(view: ReportView) -> str:
    """The self-contained HTML page of a report view."""
    title = html.escape(view.title)
    parts = [
        f"<!doctype html><html lang='{view.locale.value}'><head><meta charset='utf-8'>",
        f"<title>{title}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{title}</h1>",
        _table(view.facts),
        *((f"<p class='power'>{html.escape(view.power)}</p>",) if view.power else ()),
        f"<h2>{html.escape(view.arms.heading)}</h2>",
        _table(view.arms),
        *_notes(view.caveats, "caveat"),
        *(
            (
                f"<h2>{html.escape(view.failure_reasons.heading)}</h2>",
                _table(view.failure_reasons),
                *_notes([view.failure_note]),
            )
            if view.failure_reasons is not None
            else ()
        ),
        *(
            (f"<h2>{html.escape(view.contrasts.heading)}</h2>", _table(view.contrasts))
            if view.contrasts is not None
            else ()
        ),
        *(
            (f"<h2>{html.escape(view.review.heading)}</h2>", _table(view.review))
            if view.review is not None
            else ()
        ),
        *_group(view.plots_heading, view.plots, [view.plots_note, *view.plot_notes]),
        *_group(view.confusion_heading, view.confusions, view.confusion_notes),
    ]
    if view.agreement is not None:
        parts += [f"<h2>{html.escape(view.agreement.heading)}</h2>", _table(view.agreement)]
    parts.append("</body></html>")
    return "".join(parts)


async def write_report(
    store: Store, run_id: str, out_dir: Path, *, locale: Locale = Locale.EN
) -> ReportFiles:
    """Write ``<run_id>.html`` and ``<run_id>.md`` into ``out_dir``, in ``locale``.

    Raises:
        UsageError: ``run_id`` is not a valid run id (it names the files), there is no
            such run, or it has no results.
        StoreError: the store failed.
        OSError: the files could not be written.
    """
    check_run_id(run_id)
    run, metrics = await load_metrics(store, run_id)
    out_dir.mkdir(parents=True, exist_ok=True)
    view = report_view(run, metrics, locale)
    files = ReportFiles(
        html=out_dir / f"{run_id}.html",
        markdown=out_dir / f"{run_id}.md",
        plots_note=view.plots_note,
    )
    files.html.write_text(html_of(view), encoding="utf-8")
    files.markdown.write_text(markdown_of(view), encoding="utf-8")
    return files
