"""Reports of a stored run: a self-contained HTML page and a Markdown summary.

The page embeds its plots as base64 PNG and its style inline, so it opens anywhere
without a network. Every text taken from the run (arm, case and route names) is
HTML-escaped.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foureyes.core.errors import UsageError
from foureyes.evals import _plots
from foureyes.evals.metrics import ArmMetrics, PairRecord, RunMetrics, compute_metrics
from foureyes.evals.suite import SuiteKind
from foureyes.store import Store
from foureyes.store.evals import EvalResultRow, EvalRunRow

__all__ = ["ReportFiles", "load_metrics", "render_html", "render_markdown", "write_report"]


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """Where a report was written."""

    html: Path
    """The self-contained page."""
    markdown: Path
    """The Markdown summary."""


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


_COLUMNS = (
    "arm",
    "n",
    "failures",
    "pass rate [95% CI]",
    "correction",
    "false diversion",
    "no update",
    "cost/case",
    "latency/case",
    "cost/correction",
)


def _kind_columns(kind: SuiteKind) -> tuple[str, ...]:
    if kind is SuiteKind.GATE:
        return ("block rate", "false-block rate")
    if kind is SuiteKind.TRIAGE:
        return ("critical recall", "alert precision")
    return ()


def _row(a: ArmMetrics, kind: SuiteKind) -> list[str]:
    extra = {
        SuiteKind.GATE: [_pct(a.block_rate), _pct(a.false_block_rate)],
        SuiteKind.TRIAGE: [_pct(a.critical_recall), _pct(a.alert_precision)],
    }.get(kind, [])
    rate = a.pass_rate
    return [
        a.arm,
        str(a.n),
        str(a.failures),
        f"{rate.estimate:.1%} [{rate.low:.1%}, {rate.high:.1%}]",
        _pct(a.correction_rate),
        _pct(a.false_diversion_rate),
        _pct(a.no_update_rate),
        _usd(a.mean_cost_usd),
        f"{a.mean_latency_ms:.0f} ms",
        _usd(a.cost_per_correction_usd),
        *extra,
        a.comparison.statement if a.comparison else "baseline",
    ]


def _facts_lines(run: EvalRunRow) -> list[tuple[str, str]]:
    f: dict[str, Any] = dict(run.facts)
    routes = ", ".join(f"{n} ({r['kind']}: {r['model']})" for n, r in f["routes"].items())
    return [
        ("suite", f"{run.suite} (sha256 {run.suite_sha256[:12]})"),
        ("started", run.created_at.isoformat()),
        ("mode", str(f["mode"])),
        ("seed", str(f["seed"])),
        ("foureyes", f"{f['version']} (Python {f['python']})"),
        ("config sha256", str(f["config_sha256"])[:16]),
        ("routes", routes),
    ]


def render_markdown(run: EvalRunRow, metrics: RunMetrics) -> str:
    """The Markdown summary of a run."""
    header = [*_COLUMNS, *_kind_columns(metrics.kind), "vs baseline"]
    lines = [f"# Eval run {run.run_id}", ""]
    lines += [f"- **{k}**: {v}" for k, v in _facts_lines(run)]
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_row(a, metrics.kind)) + " |" for a in metrics.arms]
    if metrics.agreement:
        lines += ["", "## L1/L2 agreement", "", "| arm | n | kappa | error correlation |"]
        lines.append("|---|---|---|---|")
        for arm, g in metrics.agreement.items():
            kappa = "–" if g.kappa is None else f"{g.kappa:.3f}"
            corr = "–" if g.error_correlation is None else f"{g.error_correlation:.3f}"
            lines.append(f"| {arm} | {g.n} | {kappa} | {corr} |")
    lines.append("")
    return "\n".join(lines)


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img class="plot" alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2rem;max-width:1200px;color:#222}"
    "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:4px 8px;"
    "text-align:left;font-size:14px}th{background:#f3f3f3}.plot{max-width:100%;margin:.5rem}"
)


def render_html(run: EvalRunRow, metrics: RunMetrics) -> str:
    """The self-contained HTML page of a run (plots embedded as base64 PNG)."""
    header = [*_COLUMNS, *_kind_columns(metrics.kind), "vs baseline"]
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>Eval run {html.escape(run.run_id)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>Eval run {html.escape(run.run_id)}</h1>",
        _table(["fact", "value"], _facts_lines(run)),
        "<h2>Arms</h2>",
        _table(header, [_row(a, metrics.kind) for a in metrics.arms]),
        "<h2>Plots</h2>",
        _img(_plots.pass_rate_png(metrics), "pass rate per arm"),
        _img(_plots.corrections_png(metrics), "corrections and false diversions"),
        _img(_plots.cost_benefit_png(metrics), "cost against benefit"),
        "<h2>Confusion matrices</h2>",
        *(_img(_plots.confusion_png(metrics, a.arm), f"confusion {a.arm}") for a in metrics.arms),
    ]
    if metrics.agreement:
        rows = [
            [
                arm,
                str(g.n),
                "–" if g.kappa is None else f"{g.kappa:.3f}",
                "–" if g.error_correlation is None else f"{g.error_correlation:.3f}",
            ]
            for arm, g in metrics.agreement.items()
        ]
        parts += ["<h2>L1/L2 agreement</h2>", _table(["arm", "n", "kappa", "error corr."], rows)]
    parts.append("</body></html>")
    return "".join(parts)


async def write_report(store: Store, run_id: str, out_dir: Path) -> ReportFiles:
    """Write ``<run_id>.html`` and ``<run_id>.md`` into ``out_dir``.

    Raises:
        UsageError: there is no such run or it has no results.
        StoreError: the store failed.
        OSError: the files could not be written.
    """
    run, metrics = await load_metrics(store, run_id)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = ReportFiles(html=out_dir / f"{run_id}.html", markdown=out_dir / f"{run_id}.md")
    files.html.write_text(render_html(run, metrics), encoding="utf-8")
    files.markdown.write_text(render_markdown(run, metrics), encoding="utf-8")
    return files
