"""``foureyes risk calibrate``: run labelled cases through the triage and gate on thresholds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from foureyes.cli._common import ConfigOption, JsonOption, console, fail, load, print_table, run
from foureyes.cli.assess_cmd import open_triage
from foureyes.config import Config
from foureyes.core.errors import ConfigError, StoreError
from foureyes.risk.calibrate import (
    CalibrationReport,
    Case,
    CaseFormat,
    load_cases,
    load_thresholds,
    run_cases,
    summarise,
)
from foureyes.risk.levels import RiskLevel


def calibrate(
    cases: Annotated[Path, typer.Option("--cases", help="Labelled cases to run.", dir_okay=False)],
    thresholds: Annotated[
        Path | None,
        typer.Option("--thresholds", help="TOML or JSON thresholds: pass/fail.", dir_okay=False),
    ] = None,
    fmt: Annotated[
        CaseFormat, typer.Option("--format", help="Format of the cases file.")
    ] = CaseFormat.JSONL,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Run only the first N cases.")
    ] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, max=64, help="Triages run at once.")
    ] = 4,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Triage labelled cases on the configured routes and report how well it did.

    Prints a confusion matrix per level, critical recall, the escalation recall and false
    escalation rate, alert precision, the unknown rate, L1/L2 agreement (Cohen's kappa),
    cost and latency, and per L0 screen signal its escalations among the cases at risk and
    the others, with Wilson 95 % intervals. With --thresholds, exits 1 when any threshold
    fails. Cases run as ``calibration`` triages, kept apart from live records.
    """
    cfg = load(config, as_json=as_json)
    try:
        gate = None if thresholds is None else load_thresholds(thresholds)
        loaded = load_cases(cases, fmt)[:limit]
        report = run(_run(cfg, loaded))
    except (ConfigError, StoreError) as exc:
        fail(exc, as_json=as_json)
    checks = [] if gate is None else report.check(gate)
    passed = all(c.passed for c in checks)
    if as_json:
        document: dict[str, Any] = {"ok": passed} | report.as_dict()
        document["checks"] = [
            {"name": c.name, "value": c.value, "limit": c.limit, "passed": c.passed} for c in checks
        ]
        typer.echo(json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True))
    else:
        _show(report, checks_rows=[(c.name, c.value, c.limit, c.passed) for c in checks])
    if not passed:
        raise typer.Exit(1)


async def _run(cfg: Config, cases: list[Case]) -> CalibrationReport:
    async with open_triage(cfg) as triage:
        results = await run_cases(triage, cases)
    return summarise(cases, results)


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _show(
    report: CalibrationReport, *, checks_rows: list[tuple[str, float | None, float, bool]]
) -> None:
    console.print(f"{report.cases} cases", highlight=False)
    matrix = Table(title="confusion (rows: expected, columns: triage)")
    matrix.add_column("expected")
    columns = [level.value for level in RiskLevel] + ["unknown"]
    for column in columns:
        matrix.add_column(column, justify="right")
    for expected, row in report.confusion.items():
        if any(row.values()):
            matrix.add_row(expected, *(str(row[c]) for c in columns))
    print_table(matrix)
    metrics = Table(title="metrics")
    metrics.add_column("metric")
    metrics.add_column("value", justify="right")
    for name, value in report.metrics.items():
        metrics.add_row(name, _number(value))
    print_table(metrics)
    if report.signals:
        screen = Table(title="L0 screen signals: escalated (95% CI)")
        for column in ("signal", "at risk (recall)", "not at risk (false escalation)"):
            screen.add_column(column, justify="left" if column == "signal" else "right")
        for signal in report.signals:
            screen.add_row(
                str(signal.signal),
                f"{signal.at_risk} of {signal.at_risk.texts}",
                f"{signal.not_at_risk} of {signal.not_at_risk.texts}",
            )
        print_table(screen)
    if report.reasons:
        console.print(
            "reasons: " + ", ".join(f"{k}={v}" for k, v in report.reasons.items()),
            highlight=False,
        )
    if checks_rows:
        gate = Table(title="thresholds")
        for column in ("threshold", "value", "limit", "result"):
            gate.add_column(column)
        for name, value, limit, passed in checks_rows:
            verdict = "[green]pass[/]" if passed else "[red]FAIL[/]"
            gate.add_row(name, _number(value), _number(limit), verdict)
        print_table(gate)
