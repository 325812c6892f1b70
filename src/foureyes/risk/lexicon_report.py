"""Evidence for tuning the L0 lexicon: how it does on labelled third-party risk data.

Reads the calibration sets in ``risk/`` of the third-party data directory (docs/data.md,
:func:`foureyes.core.datadir.data_dir`; never shipped with the package) and runs every
text through an :class:`~foureyes.risk.l0.L0Gate`:

- ``sos1k`` (zh, Weibo): levels 0-10 of suicide risk;
- ``twitter`` (en): suicidal intention 1 or 0, with many casual "I want to die" idioms;
- ``sdcnl`` (en, Reddit): 1 = r/SuicideWatch, 0 = r/depression. The label comes from the
  subreddit, so it is noisy, and both sides are negative talk.

Each (dataset, label) falls in a :class:`Band`; the figures that matter are recall on the
``high_risk`` band and the escalation rate on the ``everyday`` band. The report also counts,
for every lexicon entry, the texts of each label it matched in (or, for a cue or negation,
lowered the score of), which is the evidence for moving a weight.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from foureyes.core.errors import ConfigError
from foureyes.risk._lexicon import LexiconEntry
from foureyes.risk.l0 import L0Gate

__all__ = [
    "Band",
    "DATA_FILES",
    "Dataset",
    "LabelStats",
    "LabelledText",
    "LexiconReport",
    "TermStats",
    "build_report",
    "load_risk_data",
]

_SOS1K_FILES = tuple(f"zh/sos1k_fold{n}.tsv" for n in (1, 2, 3, 4))
_TWITTER_FILE = "en/twitter_suicidal_intention.csv"
_SDCNL_FILE = "en/sdcnl_combined.csv"
DATA_FILES = (*_SOS1K_FILES, _TWITTER_FILE, _SDCNL_FILE)
"""Every file :func:`load_risk_data` reads, relative to the data directory."""


class Dataset(StrEnum):
    """A labelled calibration set."""

    SOS1K = "sos1k"
    """Chinese Weibo comments graded 0-10 by urgency."""
    TWITTER = "twitter"
    """English tweets labelled with suicidal intention 1 or 0."""
    SDCNL = "sdcnl"
    """English Reddit posts: 1 from r/SuicideWatch, 0 from r/depression."""


class Band(StrEnum):
    """What a (dataset, label) stands for when judging L0."""

    HIGH_RISK = "high_risk"
    """Should escalate: sos1k levels 4-10 (a wish to die or more), twitter 1, sdcnl 1."""
    DISTRESS = "distress"
    """Distress without a stated wish to die: sos1k 2-3, and sdcnl 0 (r/depression)."""
    EVERYDAY = "everyday"
    """Everyday negative talk, should rarely escalate: sos1k levels 0-1, twitter 0.

    The sos1k bands follow the same cut as calibration's levels
    (:func:`foureyes.risk.calibrate.sos1k_level`: 0-1 low, 2-3 medium, 4 and up high or
    critical): level 2 is pain stated clearly, which is distress, not everyday talk.
    """

    @classmethod
    def of(cls, dataset: Dataset, label: int) -> Band:
        """The band of ``label`` in ``dataset``."""
        if dataset is Dataset.SOS1K:
            return cls.HIGH_RISK if label >= 4 else cls.DISTRESS if label >= 2 else cls.EVERYDAY
        if dataset is Dataset.TWITTER:
            return cls.HIGH_RISK if label == 1 else cls.EVERYDAY
        return cls.HIGH_RISK if label == 1 else cls.DISTRESS


@dataclass(frozen=True)
class LabelledText:
    """One text of a calibration set."""

    dataset: Dataset
    """The set it comes from."""
    label: int
    """Its label in that set."""
    text: str
    """The text (for sdcnl: title and body)."""
    source: str = ""
    """The file it was read from, relative to the data directory (e.g. the SOS-1K fold)."""


@dataclass(frozen=True)
class LabelStats:
    """How often L0 escalated the texts of one label."""

    dataset: Dataset
    """The set."""
    label: int
    """The label."""
    texts: int
    """Texts with this label."""
    escalated: int
    """Of those, the ones L0 escalated."""

    @property
    def band(self) -> Band:
        """The band the label falls in."""
        return Band.of(self.dataset, self.label)

    @property
    def rate(self) -> float:
        """The share escalated (recall on high-risk labels)."""
        return self.escalated / self.texts if self.texts else 0.0


@dataclass(frozen=True)
class TermStats:
    """The hits of one lexicon entry, by label."""

    entry: LexiconEntry
    """The entry (its term as written in the source list)."""
    hits: Mapping[tuple[Dataset, int], int]
    """Texts of each (dataset, label) the entry matched in; only non-zero counts."""

    @property
    def total(self) -> int:
        """Texts it matched in, over every label."""
        return sum(self.hits.values())


@dataclass(frozen=True)
class LexiconReport:
    """Escalation by label and hits by term, for one lexicon over the calibration data."""

    labels: tuple[LabelStats, ...]
    """One row per (dataset, label), in dataset then label order."""
    terms: tuple[TermStats, ...]
    """One row per lexicon entry, most hits first."""

    def band_stats(self, dataset: Dataset, band: Band) -> LabelStats | None:
        """The labels of ``band`` in ``dataset`` pooled (label -1), or ``None`` if none."""
        rows = [row for row in self.labels if row.dataset is dataset and row.band is band]
        if not rows:
            return None
        return LabelStats(dataset, -1, sum(r.texts for r in rows), sum(r.escalated for r in rows))

    def summary(self) -> list[tuple[Dataset, Band, LabelStats]]:
        """Every (dataset, band) present, pooled: recall and escalation rates at a glance."""
        rows = []
        for dataset in Dataset:
            for band in Band:
                stats = self.band_stats(dataset, band)
                if stats is not None:
                    rows.append((dataset, band, stats))
        return rows

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON values."""
        return {
            "summary": [
                {
                    "dataset": str(dataset),
                    "band": str(band),
                    "texts": stats.texts,
                    "escalated": stats.escalated,
                    "rate": round(stats.rate, 4),
                }
                for dataset, band, stats in self.summary()
            ],
            "labels": [
                {
                    "dataset": str(row.dataset),
                    "label": row.label,
                    "band": str(row.band),
                    "texts": row.texts,
                    "escalated": row.escalated,
                    "rate": round(row.rate, 4),
                }
                for row in self.labels
            ],
            "terms": [
                {
                    "term": row.entry.term,
                    "kind": str(row.entry.kind),
                    "category": None if row.entry.category is None else str(row.entry.category),
                    "weight": row.entry.weight,
                    "origin": row.entry.origin,
                    "total": row.total,
                    "hits": {f"{d}:{label}": n for (d, label), n in sorted(row.hits.items())},
                }
                for row in self.terms
            ],
        }


def build_report(gate: L0Gate, texts: Iterable[LabelledText]) -> LexiconReport:
    """Scan every text with ``gate`` and count escalations by label and hits by entry."""
    totals: Counter[tuple[Dataset, int]] = Counter()
    escalated: Counter[tuple[Dataset, int]] = Counter()
    hits: dict[LexiconEntry, Counter[tuple[Dataset, int]]] = {
        entry: Counter() for entry in gate.lexicon.entries
    }
    for item in texts:
        label = (item.dataset, item.label)
        result = gate.scan(item.text)
        totals[label] += 1
        escalated[label] += result.escalate
        found = {gate.keys[match.term] for match in result.matches}
        found.update(gate.keys[key] for key in result.dampened_by)
        for entry in found:
            hits[entry][label] += 1
    labels = tuple(
        LabelStats(dataset, label, totals[(dataset, label)], escalated[(dataset, label)])
        for dataset, label in sorted(totals, key=lambda key: (list(Dataset).index(key[0]), key[1]))
    )
    terms = sorted(
        (TermStats(entry, dict(counts)) for entry, counts in hits.items()),
        key=lambda row: -row.total,
    )
    return LexiconReport(labels, tuple(terms))


def load_risk_data(directory: Path) -> tuple[LabelledText, ...]:
    """Read the three calibration sets from ``directory`` (the layout of docs/data.md).

    Raises:
        ConfigError: a file is missing or unreadable, or a row has a label that is not an
            integer (each problem names the file).
    """
    problems: list[str] = []
    texts = [
        *_read(directory, _SOS1K_FILES, Dataset.SOS1K, "\t", "comment", "myLabel", problems),
        *_read(directory, (_TWITTER_FILE,), Dataset.TWITTER, ",", "tweet", "intention", problems),
        *_read(directory, (_SDCNL_FILE,), Dataset.SDCNL, ",", "", "is_suicide", problems),
    ]
    if problems:
        raise ConfigError(problems)
    return tuple(texts)


def _read(
    directory: Path,
    names: tuple[str, ...],
    dataset: Dataset,
    delimiter: str,
    text_column: str,
    label_column: str,
    problems: list[str],
) -> Iterator[LabelledText]:
    for name in names:
        path = directory / name
        try:
            with path.open(encoding="utf-8", newline="") as handle:
                rows = list(csv.DictReader(handle, delimiter=delimiter))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            problems.append(f"{path}: cannot be read ({type(exc).__name__})")
            continue
        for number, row in enumerate(rows, start=1):
            try:
                label = int(row[label_column])
            except (KeyError, TypeError, ValueError):
                problems.append(f"{path}: row {number}: no integer {label_column!r}")
                continue
            # sdcnl keeps the title apart from the body; a reader sees both.
            text = row[text_column] if text_column else f"{row['title']}\n\n{row['selftext']}"
            yield LabelledText(dataset, label, text or "", name)
