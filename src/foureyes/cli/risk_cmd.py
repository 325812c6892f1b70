"""``foureyes risk ...``: evidence for the crisis-triage lexicon."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from foureyes.cli._common import JsonOption, console, emit_json, fail, print_table
from foureyes.core.datadir import DATA_DIR_ENV, DATA_HOWTO, data_dir
from foureyes.core.errors import ConfigError
from foureyes.risk.l0 import L0Gate, Lexicon
from foureyes.risk.lexicon_report import (
    HELD_OUT_FOLD,
    Dataset,
    Escalation,
    LabelledText,
    LexiconReport,
    Signal,
    build_report,
    load_risk_data,
)
from foureyes.risk.screen_model import default_screen_model

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
    cv: Annotated[
        bool,
        typer.Option(
            "--cv",
            help="Score with out-of-fold scores of the learned screen (cross-validated) "
            "instead of the shipped model on its own training data (in-sample).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Run the screen over the labelled risk data and print the evidence.

    Prints, for the lexicon, the learned scorer and the two combined, the escalation rate
    with its Wilson 95 % interval per dataset band, per language, per label and per SOS-1K
    fold; the goals of the combined screen and where they stand; and, for every lexicon
    entry, the texts of each label it matched in. The scorer's figures are in-sample
    (optimistic) unless --cv. Fails (exit 1) when the data, a lexicon list or the scorer is
    missing or malformed.
    """
    try:
        directory = _data_dir(data)
        # The lexicon alone; the scorer is its own signal, in-sample unless --cv (it was
        # trained on this data).
        gate = L0Gate.from_directory(lexicon) if lexicon else L0Gate(Lexicon.packaged())
        texts = load_risk_data(directory)
        screen = default_screen_model()
        scores = _out_of_fold_scores(texts) if cv else None
        report = build_report(gate, texts, screen=screen, scores=scores)
    except ConfigError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "data": str(directory), **report.to_json()})
        return
    _print(report, top)


def _out_of_fold_scores(texts: Sequence[LabelledText]) -> Sequence[float]:
    """Out-of-fold scores of the learned screen, one per text (its training's folds)."""
    from foureyes.risk.screen_train import out_of_fold_scores

    return [float(v) for v in out_of_fold_scores(texts)]


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
    picks each language's two thresholds (escalate, screened) on the out-of-fold scores,
    trains on everything and writes the weights and the manifest. The same data gives the
    same bytes. Fails
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
    for column in ("language", "level", "threshold", "recall", "false escalation", "auc"):
        table.add_column(column, justify="left" if column in ("language", "level") else "right")
    for language, thresholds in sorted(manifest["thresholds"].items()):
        cv = manifest["cv"][language]
        for level, threshold in thresholds.items():
            table.add_row(
                language,
                level,
                f"{threshold:.4f}",
                f"{cv[level]['recall']:.1%}",
                f"{cv[level]['false_escalation_rate']:.1%}",
                f"{cv['auc']:.3f}",
            )
    print_table(table)


def _signal_table(
    title: str,
    keys: tuple[str, ...],
    rows: list[tuple[tuple[str, ...], dict[Signal, Escalation]]],
    signals: tuple[Signal, ...],
) -> Table:
    table = Table(title=title)
    for column in keys:
        table.add_column(column)
    table.add_column("texts", justify="right")
    for signal in signals:
        table.add_column(f"{signal} (95% CI)", justify="right")
    for key, by_signal in rows:
        texts = next(iter(by_signal.values())).texts
        table.add_row(*key, str(texts), *(str(by_signal[s]) for s in signals))
    return table


def _print(report: LexiconReport, top: int | None) -> None:
    for note in report.notes():
        console.print(f"note: {note}", highlight=False, soft_wrap=True)
    signals = report.signals
    goals = Table(title="goals of the combined screen (judged on the point estimate)")
    for column in ("goal", "target", "measured (95% CI)", f"fold {HELD_OUT_FOLD}", "status"):
        goals.add_column(column, justify="left" if column in ("goal", "status") else "right")
    for result in report.goals():
        goal = result.goal
        shown = result.measured or result.proxy
        value = "" if shown is None else f"{shown} of {shown.texts}"
        status = str(result.status)
        if result.measured is None and result.proxy is not None:
            value = f"proxy {value}"
            status += f" (proxy: {goal.proxy_description})"
        held = result.held_out
        goals.add_row(
            goal.description,
            f"{'>=' if goal.at_least else '<='} {goal.target:.2f}",
            value,
            "" if held is None else f"{held} of {held.texts}",
            status,
        )
    print_table(goals)
    print_table(
        _signal_table(
            "escalation by band (high_risk: recall; everyday: false alarms)",
            ("dataset", "band"),
            [((str(d), str(b)), e) for (d, b), e in report.summary()],
            signals,
        )
    )
    print_table(
        _signal_table(
            "escalation by language",
            ("language", "band"),
            [((lang, str(b)), e) for (lang, b), e in report.languages()],
            signals,
        )
    )
    print_table(
        _signal_table(
            "escalation by label (sos1k: grade)",
            ("dataset", "label", "band"),
            [
                ((str(r.dataset), str(r.label), str(r.band)), {s: r.of(s) for s in signals})
                for r in report.labels
            ],
            signals,
        )
    )
    print_table(
        _signal_table(
            f"escalation by SOS-1K fold (lexicon tuned on folds 1-{HELD_OUT_FOLD - 1}, "
            f"fold {HELD_OUT_FOLD} held out)",
            ("fold", "band"),
            [((str(f), str(b)), e) for (f, b), e in report.fold_bands()],
            signals,
        )
    )

    terms = Table(
        title="texts matched per lexicon entry (s = sos1k level, tw = twitter, sd = sdcnl)",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    terms.add_column("entry", no_wrap=True)
    terms.add_column("category", overflow="fold")
    terms.add_column("w", justify="right")
    for name, _, _ in _COLUMNS:
        terms.add_column(name, justify="right", min_width=len(name))
    terms.add_column("source", overflow="ellipsis", max_width=20)
    for row in report.terms[:top]:
        entry = row.entry
        counts = (
            sum(row.hits.get((dataset, label), 0) for label in label_range)
            for _, dataset, label_range in _COLUMNS
        )
        terms.add_row(
            Text(entry.term),  # a term is not markup: "[doge]" is a lexicon entry
            str(entry.category or entry.kind),
            f"{entry.weight:g}",
            *(str(count or "") for count in counts),
            Text(entry.source),
        )
    print_table(terms)
