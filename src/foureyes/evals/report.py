"""Reports of a stored run: a self-contained HTML page and a Markdown summary.

A report is first built as a :class:`ReportView` (its tables as text and its plots as
PNG, in one of foureyes' locales, every word from ``report_strings.json``); the page, the
summary and the console's report pane are made from that one view. The page embeds its
plots as base64 PNG and its style inline, so it opens anywhere without a network. Every
text taken from the run (arm, case and route names) is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foureyes.core.catalogue import Catalogue
from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale
from foureyes.evals import _plots
from foureyes.evals.metrics import ArmMetrics, PairRecord, RunMetrics, compute_metrics
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
    """Why the page has no plots (matplotlib is not installed), else ``None``."""


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
        )
        for r in rows
    ]


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
    """One plot of a report: what it shows (its alternative text) and the PNG."""

    alt: str
    png: bytes


@dataclass(frozen=True, slots=True)
class ReportView:
    """Everything a report shows, as text in one locale and plots as PNG.

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
    """Why there are no plots (matplotlib, the ``eval`` extra, is missing), else ``None``."""
    review: ReportTable | None = None
    """Agent suites: each arm's review metrics, tokens and instruction digest."""
    power: str | None = None
    """What the run could detect (its power), shown before the tables of p-values."""
    contrasts: ReportTable | None = None
    """Pairs of arms compared directly (masked against its unmasked control...)."""

    def as_json(self) -> dict[str, Any]:
        """The view as JSON: tables as header and rows, plots as base64 PNG."""

        def table(t: ReportTable | None) -> dict[str, Any] | None:
            if t is None:
                return None
            return {
                "heading": t.heading,
                "header": list(t.header),
                "rows": [list(r) for r in t.rows],
            }

        def plots(items: tuple[ReportPlot, ...]) -> list[dict[str, str]]:
            return [
                {"alt": p.alt, "png_base64": base64.b64encode(p.png).decode("ascii")} for p in items
            ]

        return {
            "locale": self.locale.value,
            "title": self.title,
            "facts": table(self.facts),
            "arms": table(self.arms),
            "agreement": table(self.agreement),
            "review": table(self.review),
            "power": self.power,
            "contrasts": table(self.contrasts),
            "plots": {
                "heading": self.plots_heading,
                "items": plots(self.plots),
                "note": self.plots_note,
            },
            "confusions": {
                "heading": self.confusion_heading,
                "items": plots(self.confusions),
                "note": None,  # said once, under the plots
            },
        }


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


def report_view(run: EvalRunRow, metrics: RunMetrics, locale: Locale = Locale.EN) -> ReportView:
    """The report of ``run`` in ``locale``, plots drawn (see :mod:`foureyes.evals._plots`)."""
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
    plots: tuple[ReportPlot, ...] = ()
    confusions: tuple[ReportPlot, ...] = ()
    note = None
    if not _plots.available():  # a slim install: the tables only, and why
        note = text("plots.missing")
    else:
        # A CJK font, when there is one, also draws the run's own names in any report.
        labels = _plots.PlotText.of(strings, locale, _plots.cjk_font())
        # The alternative texts are the page's, in its locale even where the plots' own
        # words fall back to English for want of a font.
        plots = (
            ReportPlot(text("plot.pass_rate.title"), _plots.pass_rate_png(metrics, labels)),
            ReportPlot(text("plot.corrections.title"), _plots.corrections_png(metrics, labels)),
            ReportPlot(text("plot.cost.title"), _plots.cost_benefit_png(metrics, labels)),
        )
        confusions = tuple(
            ReportPlot(
                text("plot.confusion.title").format(arm=a.arm),
                _plots.confusion_png(metrics, a.arm, labels),
            )
            for a in metrics.arms
        )
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
        plots_note=note,
        review=_review_table(metrics, text),
        power=_power(metrics, text),
        contrasts=_contrasts(metrics, text),
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
    if view.contrasts is not None:
        lines += ["", f"## {view.contrasts.heading}", "", *_md_table(view.contrasts)]
    if view.review is not None:
        lines += ["", f"## {view.review.heading}", "", *_md_table(view.review)]
    if view.agreement is not None:
        lines += ["", f"## {view.agreement.heading}", "", *_md_table(view.agreement)]
    lines.append("")
    return "\n".join(lines)


def _img(plot: ReportPlot) -> str:
    data = base64.b64encode(plot.png).decode("ascii")
    return f'<img class="plot" alt="{html.escape(plot.alt)}" src="data:image/png;base64,{data}">'


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
        f"<h2>{html.escape(view.plots_heading)}</h2>",
        *(_img(p) for p in view.plots),
    ]
    if view.plots_note is not None:
        parts.append(f"<p class='note'>{html.escape(view.plots_note)}</p>")
    else:
        parts += [
            f"<h2>{html.escape(view.confusion_heading)}</h2>",
            *(_img(p) for p in view.confusions),
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
