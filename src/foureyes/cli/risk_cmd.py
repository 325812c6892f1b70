"""``foureyes risk ...``: evidence for the crisis-triage lexicon."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from foureyes.cli._common import JsonOption, console, emit_json, fail
from foureyes.core.datadir import DATA_DIR_ENV, DATA_HOWTO, data_dir
from foureyes.core.errors import ConfigError
from foureyes.risk.l0 import L0Gate
from foureyes.risk.lexicon_report import Dataset, LexiconReport, build_report, load_risk_data

__all__ = ["app", "lexicon_report", "risk", "train_screen"]

app = typer.Typer(no_args_is_help=True)


@app.callback()
def risk() -> None:
    """Crisis triage: evidence for the L0 lexicon, and training of the learned screen."""


# Columns of the per-term table: labels, with the sos1k levels grouped as in its level
# definitions (0-1 everyday, 2-3 distress, 4-5 wish to die, 6-10 plan or act); --json has
# every label on its own.
_COLUMNS: tuple[tuple[str, Dataset, range], ...] = (
    ("s0-1", Dataset.SOS1K, range(0, 2)),
    ("s2-3", Dataset.SOS1K, range(2, 4)),
    ("s4-5", Dataset.SOS1K, range(4, 6)),
    ("s6-10", Dataset.SOS1K, range(6, 11)),
    ("tw0", Dataset.TWITTER, range(0, 1)),
    ("tw1", Dataset.TWITTER, range(1, 2)),
    ("sd0", Dataset.SDCNL, range(0, 1)),
    ("sd1", Dataset.SDCNL, range(1, 2)),
)


_DataOption = Annotated[
    Path | None,
    typer.Option(
        "--data",
        help=f"Calibration data directory (default: risk/ in ${DATA_DIR_ENV}, "
        "else ../shared/data/risk from the checkout; see docs/data.md).",
        file_okay=False,
    ),
]


def _data_dir(data: Path | None) -> Path:
    """``--data``, else ``risk/`` in the third-party data directory (:func:`data_dir`).

    Raises:
        ConfigError: none was given and the default holds no calibration data.
    """
    if data is not None:
        return data
    directory = data_dir() / "risk"
    if not directory.is_dir():
        raise ConfigError([f"no calibration data at {directory}: pass --data DIR, or {DATA_HOWTO}"])
    return directory


@app.command("lexicon-report")
def lexicon_report(
    data: _DataOption = None,
    lexicon: Annotated[
        Path | None,
        typer.Option(
            "--lexicon",
            help="Directory of lexicon source lists to try instead of the packaged one.",
            file_okay=False,
        ),
    ] = None,
    top: Annotated[
        int | None, typer.Option(min=1, help="Show only the N entries with most hits.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run the L0 gate over the labelled risk data and print the evidence.

    Prints the escalation rate of every dataset label (recall on high-risk posts, rate on
    everyday negative talk) and, for every lexicon entry, the texts of each label it
    matched in. Fails (exit 1) when the data or a lexicon list is missing or malformed.
    """
    try:
        directory = _data_dir(data)
        gate = L0Gate.from_directory(lexicon) if lexicon else L0Gate.default()
        report = build_report(gate, load_risk_data(directory))
    except ConfigError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "data": str(directory), **report.to_json()})
        return
    _print(report, top)


@app.command("train-screen")
def train_screen(
    data: _DataOption = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Where to write screen_manifest.json and screen_weights.json (default: "
            "the package's foureyes/risk/data).",
            file_okay=False,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Train the learned risk screen on the labelled data and write its two files.

    Cross-validates (SOS-1K by its folds 1-4, the English sets by a seeded 4-way split),
    picks each language's threshold on the out-of-fold scores, trains on everything and
    writes the weights and the manifest. The same data gives the same bytes. Fails
    (exit 1) when the data is missing or malformed.
    """
    from foureyes.risk.screen_train import train_screen as train

    try:
        directory = _data_dir(data)
        target = out or Path(str(resources.files("foureyes.risk") / "data"))
        result = train(directory, target)
    except ConfigError as exc:
        fail(exc, as_json=as_json)
    manifest = result.manifest
    if as_json:
        emit_json({"ok": True, "data": str(directory), "out": str(target), **manifest})
        return
    table = Table(title=f"risk screen, cross-validated (written to {target})")
    for column in ("language", "threshold", "recall", "false escalation", "auc"):
        table.add_column(column, justify="left" if column == "language" else "right")
    for language, threshold in sorted(manifest["thresholds"].items()):
        cv = manifest["cv"][language]
        table.add_row(
            language,
            f"{threshold:.4f}",
            f"{cv['recall']:.1%}",
            f"{cv['false_escalation_rate']:.1%}",
            f"{cv['auc']:.3f}",
        )
    console.print(table)


def _print(report: LexiconReport, top: int | None) -> None:
    summary = Table(title="L0 escalation by band (high_risk: recall; everyday: false alarms)")
    for column in ("dataset", "band", "texts", "escalated", "rate"):
        summary.add_column(column, justify="left" if column in ("dataset", "band") else "right")
    for dataset, band, stats in report.summary():
        summary.add_row(dataset, band, str(stats.texts), str(stats.escalated), f"{stats.rate:.1%}")
    console.print(summary)

    labels = Table(title="L0 escalation by label")
    for column in ("dataset", "label", "band", "texts", "escalated", "rate"):
        labels.add_column(column, justify="right" if column not in ("dataset", "band") else "left")
    for stats in report.labels:
        labels.add_row(
            stats.dataset,
            str(stats.label),
            stats.band,
            str(stats.texts),
            str(stats.escalated),
            f"{stats.rate:.1%}",
        )
    console.print(labels)

    terms = Table(
        title="texts matched per lexicon entry (s = sos1k level, tw = twitter, sd = sdcnl)",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    terms.add_column("entry", no_wrap=True)
    terms.add_column("category", overflow="fold")
    terms.add_column("w", justify="right")
    for name, _, _ in _COLUMNS:
        terms.add_column(name, justify="right")
    for row in report.terms[:top]:
        entry = row.entry
        counts = (
            sum(row.hits.get((dataset, label), 0) for label in label_range)
            for _, dataset, label_range in _COLUMNS
        )
        terms.add_row(
            entry.term,
            str(entry.category or entry.kind),
            f"{entry.weight:g}",
            *(str(count or "") for count in counts),
        )
    console.print(terms)
