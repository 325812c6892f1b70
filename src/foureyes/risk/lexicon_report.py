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

Every escalation figure is given for each screen signal alone and for the combined screen
(:class:`Signal`), per dataset, per language and per label (SOS-1K: grade; also per
SOS-1K fold), with a Wilson 95 % interval (:func:`wilson`), and against the goals of issue
14 (:data:`GOALS`). The learned scorer scored on its own training data is in-sample, so
optimistic (:class:`ScorerMode`); out-of-fold scores give the cross-validated figure.
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from foureyes.core.errors import ConfigError
from foureyes.risk._lexicon import LexiconEntry
from foureyes.risk.l0 import L0Gate, L0Result, L0Signal

if TYPE_CHECKING:
    from foureyes.risk.screen_model import ScreenModel

__all__ = [
    "Band",
    "DATA_FILES",
    "Dataset",
    "Escalation",
    "GOALS",
    "Goal",
    "GoalResult",
    "GoalStatus",
    "HELD_OUT_FOLD",
    "LabelStats",
    "LabelledText",
    "Language",
    "LexiconReport",
    "ScorerMode",
    "Signal",
    "TermStats",
    "build_report",
    "load_risk_data",
    "signals_of",
    "wilson",
]

_SOS1K_FILES = tuple(f"zh/sos1k_fold{n}.tsv" for n in (1, 2, 3, 4))
_TWITTER_FILE = "en/twitter_suicidal_intention.csv"
_SDCNL_FILE = "en/sdcnl_combined.csv"
DATA_FILES = (*_SOS1K_FILES, _TWITTER_FILE, _SDCNL_FILE)
"""Every file :func:`load_risk_data` reads, relative to the data directory."""

HELD_OUT_FOLD = 4
"""The SOS-1K fold the lexicon is not tuned on: its weights are tuned on folds 1-3, so
fold 4's figures for the lexicon (and the combined screen) are the held-out ones. The
scorer in-sample has seen every fold; cross-validated, every fold is out of fold."""

Language = Literal["zh", "en"]


class Dataset(StrEnum):
    """A labelled calibration set."""

    SOS1K = "sos1k"
    """Chinese Weibo comments graded 0-10 by urgency."""
    TWITTER = "twitter"
    """English tweets labelled with suicidal intention 1 or 0."""
    SDCNL = "sdcnl"
    """English Reddit posts: 1 from r/SuicideWatch, 0 from r/depression."""

    @property
    def language(self) -> Language:
        """The language of its texts."""
        return "zh" if self is Dataset.SOS1K else "en"


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


class Signal(StrEnum):
    """A signal of the L0 screen, or all of them together."""

    LEXICON = "lexicon"
    """The lexicon's score reaches the escalation threshold."""
    SCORER = "scorer"
    """The learned screen's score reaches its language's threshold."""
    COMBINED = "combined"
    """Either of the signals measured: what the screen as a whole escalates."""


class ScorerMode(StrEnum):
    """Which scores of the learned screen a report used."""

    IN_SAMPLE = "in_sample"
    """The shipped model on the data it was trained on: optimistic, not a measurement of
    how it generalises."""
    CROSS_VALIDATED = "cross_validated"
    """Out-of-fold scores (each text scored by a model trained without its fold)."""


def signals_of(l0: L0Result, scorer: bool | None = None) -> dict[Signal, bool]:
    """The screen's signals for one text: what L0 found and, unless ``None``, the scorer.

    The one place that reads signals off an :class:`~foureyes.risk.l0.L0Result`: the
    lexicon is whether its lexicon signal escalated; ``scorer`` is whether the learned
    screen flagged the text, given by the caller (the report's in-sample or out-of-fold
    score) or, when ``None``, read off ``l0`` if its gate had a screen; left out when
    neither holds. ``combined`` is any of them.
    """
    signals = {Signal.LEXICON: L0Signal.LEXICON in l0.signals}
    if scorer is None and l0.screen_score is not None:
        scorer = L0Signal.SCORER in l0.signals
    if scorer is not None:
        signals[Signal.SCORER] = scorer
    signals[Signal.COMBINED] = any(signals.values())
    return signals


_Z95 = 1.959963984540054
"""The standard normal quantile of 0.975."""


def wilson(k: int, n: int, z: float = _Z95) -> tuple[float, float]:
    """The Wilson score interval of ``k`` successes in ``n`` trials (95 % by default).

    ``(0.0, 1.0)`` when ``n`` is 0: nothing is known.

    Raises:
        ValueError: ``n`` is negative or ``k`` is not in ``0..n``.
    """
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"wilson needs 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # Clamp to the observed share: rounding must not leave k/n outside its own interval.
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


@dataclass(frozen=True)
class Escalation:
    """How many of some texts a signal escalated, with the share's Wilson 95 % interval."""

    texts: int
    """Texts counted."""
    escalated: int
    """Of those, the ones escalated."""

    @property
    def rate(self) -> float:
        """The share escalated (recall on at-risk texts), 0 when there are none."""
        return self.escalated / self.texts if self.texts else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        """:func:`wilson` of the counts."""
        return wilson(self.escalated, self.texts)

    def to_json(self) -> dict[str, Any]:
        """``texts``, ``escalated``, ``rate`` and ``ci95`` (``[low, high]``), 4 decimals."""
        low, high = self.interval
        return {
            "texts": self.texts,
            "escalated": self.escalated,
            "rate": round(self.rate, 4),
            "ci95": [round(low, 4), round(high, 4)],
        }

    def __str__(self) -> str:
        low, high = self.interval
        return f"{self.rate:.1%} [{low:.1%}, {high:.1%}]"


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

    @property
    def fold(self) -> int | None:
        """The SOS-1K fold (1-4) it was read from; ``None`` for the other sets."""
        for number, name in enumerate(_SOS1K_FILES, start=1):
            if self.source == name:
                return number
        return None


@dataclass(frozen=True)
class LabelStats:
    """How often each signal escalated the texts of one label (of one SOS-1K fold)."""

    dataset: Dataset
    """The set."""
    label: int
    """The label."""
    texts: int
    """Texts with this label."""
    escalated: Mapping[Signal, int]
    """Of those, the ones each signal escalated."""
    fold: int | None = None
    """The SOS-1K fold, for a per-fold row; ``None`` when pooled or not SOS-1K."""

    @property
    def band(self) -> Band:
        """The band the label falls in."""
        return Band.of(self.dataset, self.label)

    def of(self, signal: Signal) -> Escalation:
        """The counts of ``signal``."""
        return Escalation(self.texts, self.escalated[signal])


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


class GoalStatus(StrEnum):
    """Where a goal stands on this data (judged on the point estimate)."""

    MET = "met"
    NOT_MET = "not_met"
    NOT_MEASURABLE = "not_measurable"
    """The data here is not what the goal is defined on; a proxy is shown instead."""


_Select = Callable[["LabelStats"], bool]


@dataclass(frozen=True)
class Goal:
    """A target for the combined screen (issue 14, "Measured, not asserted")."""

    key: str
    """Stable name, the ``key`` of the JSON goals block."""
    description: str
    """What is measured, in words."""
    target: float
    """The bound the rate must keep."""
    at_least: bool
    """``True``: the rate must be at least ``target`` (a recall); else at most."""
    select: _Select | None
    """The rows the goal is measured on; ``None``: not measurable on this data."""
    proxy: _Select | None = None
    """For a goal not measurable here: the rows shown in its place."""
    proxy_description: str = ""
    """What the proxy is and why it is only a proxy."""

    def meets(self, rate: float) -> bool:
        """Whether ``rate`` keeps the target."""
        return rate >= self.target if self.at_least else rate <= self.target


GOALS: tuple[Goal, ...] = (
    Goal(
        "zh_recall_grade4",
        "Chinese (SOS-1K) recall at grade 4 and up",
        0.92,
        True,
        lambda row: row.dataset is Dataset.SOS1K and row.label >= 4,
    ),
    Goal(
        "zh_grade0_escalation",
        "Chinese (SOS-1K) escalation of grade-0 posts",
        0.25,
        False,
        lambda row: row.dataset is Dataset.SOS1K and row.label == 0,
    ),
    Goal(
        "en_user_recall",
        "English at-risk user recall",
        0.95,
        True,
        None,
        lambda row: row.dataset is not Dataset.SOS1K and row.band is Band.HIGH_RISK,
        "posts, not users: twitter intention 1 and SDCNL r/SuicideWatch posts; the "
        "user-level goal is checked on held-out data this project does not have",
    ),
    Goal(
        "en_supporter_escalation",
        "English escalation of users who only write to support others",
        0.5,
        False,
        None,
        lambda row: row.dataset is not Dataset.SOS1K and row.band is not Band.HIGH_RISK,
        "no supporter set here: twitter intention 0 and SDCNL r/depression posts, "
        "the English posts not at risk; the goal is checked on held-out data this project "
        "does not have",
    ),
)
"""The goals the combined screen is measured against, in report order."""


@dataclass(frozen=True)
class GoalResult:
    """A goal against the combined screen's figures on this data."""

    goal: Goal
    measured: Escalation | None
    """Over SOS-1K folds 1-4 (or the English sets); ``None``: not measurable here."""
    held_out: Escalation | None
    """SOS-1K fold :data:`HELD_OUT_FOLD` alone, for a Chinese goal."""
    proxy: Escalation | None
    """What stands in for a goal not measurable here."""

    @property
    def status(self) -> GoalStatus:
        """Met or not on the point estimate; not measurable without a measurement."""
        if self.measured is None:
            return GoalStatus.NOT_MEASURABLE
        return GoalStatus.MET if self.goal.meets(self.measured.rate) else GoalStatus.NOT_MET

    def to_json(self) -> dict[str, Any]:
        """The goal, its figures and its status (keys documented in ``docs/risk.md``)."""

        def counts(e: Escalation | None) -> dict[str, Any] | None:
            return None if e is None else e.to_json()

        return {
            "key": self.goal.key,
            "description": self.goal.description,
            "signal": str(Signal.COMBINED),
            "target": self.goal.target,
            "bound": "at_least" if self.goal.at_least else "at_most",
            "status": str(self.status),
            "measured": counts(self.measured),
            "held_out": counts(self.held_out),
            "proxy": counts(self.proxy),
            "proxy_meets_target": None if self.proxy is None else self.goal.meets(self.proxy.rate),
            "proxy_description": self.goal.proxy_description or None,
        }


def _sum(rows: Sequence[LabelStats], signal: Signal) -> Escalation:
    return Escalation(sum(r.texts for r in rows), sum(r.escalated[signal] for r in rows))


def _pool(rows: Iterable[LabelStats], signal: Signal) -> Escalation | None:
    chosen = list(rows)
    return _sum(chosen, signal) if chosen else None


_K = TypeVar("_K")
_DATASETS = list(Dataset)
_BANDS = list(Band)


@dataclass(frozen=True)
class LexiconReport:
    """Escalation by signal and label, and hits by term, over the calibration data."""

    labels: tuple[LabelStats, ...]
    """One row per (dataset, label), in dataset then label order."""
    terms: tuple[TermStats, ...]
    """One row per lexicon entry, most hits first."""
    folds: tuple[LabelStats, ...] = ()
    """One row per (SOS-1K fold, label), in fold then label order."""
    signals: tuple[Signal, ...] = (Signal.LEXICON, Signal.COMBINED)
    """The signals measured (``combined`` last)."""
    scorer: ScorerMode | None = None
    """Which scores the scorer's figures come from; ``None`` when it was not run."""

    def escalation(self, signal: Signal, select: _Select) -> Escalation | None:
        """``signal``'s counts pooled over the labels ``select`` picks, ``None`` if none."""
        return _pool((row for row in self.labels if select(row)), signal)

    def band_stats(self, dataset: Dataset, band: Band, signal: Signal) -> Escalation | None:
        """The labels of ``band`` in ``dataset`` pooled, or ``None`` if none."""
        return self.escalation(signal, lambda row: row.dataset is dataset and row.band is band)

    def _grouped(
        self, rows: Iterable[LabelStats], key: Callable[[LabelStats], _K]
    ) -> list[tuple[_K, dict[Signal, Escalation]]]:
        groups: dict[_K, list[LabelStats]] = {}
        for row in rows:
            groups.setdefault(key(row), []).append(row)
        return [(k, {s: _sum(group, s) for s in self.signals}) for k, group in groups.items()]

    def summary(self) -> list[tuple[tuple[Dataset, Band], dict[Signal, Escalation]]]:
        """Every (dataset, band) present, pooled, per signal: the rates at a glance."""
        ordered = sorted(
            self.labels, key=lambda r: (_DATASETS.index(r.dataset), _BANDS.index(r.band))
        )
        return self._grouped(ordered, lambda r: (r.dataset, r.band))

    def languages(self) -> list[tuple[tuple[Language, Band], dict[Signal, Escalation]]]:
        """Every (language, band) present, its datasets pooled, per signal (zh first)."""
        ordered = sorted(
            self.labels, key=lambda r: (r.dataset.language != "zh", _BANDS.index(r.band))
        )
        return self._grouped(ordered, lambda r: (r.dataset.language, r.band))

    def fold_bands(self) -> list[tuple[tuple[int, Band], dict[Signal, Escalation]]]:
        """Every (SOS-1K fold, band) present, per signal."""
        ordered = sorted(self.folds, key=lambda r: (r.fold or 0, _BANDS.index(r.band)))
        return self._grouped(ordered, lambda r: (r.fold or 0, r.band))

    def goals(self) -> list[GoalResult]:
        """Each goal of :data:`GOALS` for the combined screen: measured, held out, status."""
        combined = Signal.COMBINED
        out = []
        for goal in GOALS:
            measured = held_out = proxy = None
            if goal.select is not None:
                select = goal.select
                measured = self.escalation(combined, select)
                held_out = _pool(
                    (r for r in self.folds if r.fold == HELD_OUT_FOLD and select(r)), combined
                )
            if goal.proxy is not None:
                proxy = self.escalation(combined, goal.proxy)
            out.append(GoalResult(goal, measured, held_out, proxy))
        return out

    def notes(self) -> list[str]:
        """What a reader must know to read the figures honestly."""
        notes = [
            f"lexicon tuning uses SOS-1K folds 1-{HELD_OUT_FOLD - 1}; fold {HELD_OUT_FOLD} "
            "is held out for it",
        ]
        if self.scorer is ScorerMode.IN_SAMPLE:
            notes.append(
                "scorer: in-sample (the shipped model on its own training data, "
                "optimistic); --cv gives out-of-fold figures"
            )
        elif self.scorer is ScorerMode.CROSS_VALIDATED:
            notes.append("scorer: cross-validated (out-of-fold scores, 4 folds)")
        else:
            notes.append("scorer: not run; combined is the lexicon alone")
        return notes

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON values (keys documented in ``docs/risk.md``)."""

        def cells(by_signal: Mapping[Signal, Escalation]) -> list[dict[str, Any]]:
            return [{"signal": str(s), **e.to_json()} for s, e in by_signal.items()]

        return {
            "signals": [str(s) for s in self.signals],
            "scorer": None if self.scorer is None else str(self.scorer),
            "held_out_fold": HELD_OUT_FOLD,
            "notes": self.notes(),
            "summary": [
                {"dataset": str(d), "language": d.language, "band": str(b), **cell}
                for (d, b), by_signal in self.summary()
                for cell in cells(by_signal)
            ],
            "languages": [
                {"language": lang, "band": str(b), **cell}
                for (lang, b), by_signal in self.languages()
                for cell in cells(by_signal)
            ],
            "labels": [
                {
                    "dataset": str(row.dataset),
                    "language": row.dataset.language,
                    "label": row.label,
                    "band": str(row.band),
                    **cell,
                }
                for row in self.labels
                for cell in cells({s: row.of(s) for s in self.signals})
            ],
            "folds": [
                {"fold": fold, "band": str(b), **cell}
                for (fold, b), by_signal in self.fold_bands()
                for cell in cells(by_signal)
            ],
            "goals": [g.to_json() for g in self.goals()],
            "terms": [
                {
                    "term": row.entry.term,
                    "kind": str(row.entry.kind),
                    "category": None if row.entry.category is None else str(row.entry.category),
                    "weight": row.entry.weight,
                    "origin": row.entry.origin,
                    "source": row.entry.source,
                    "total": row.total,
                    "hits": {f"{d}:{label}": n for (d, label), n in sorted(row.hits.items())},
                }
                for row in self.terms
            ],
        }


def _label_rows(
    totals: Counter[tuple[Dataset, int, int | None]],
    escalated: Mapping[Signal, Counter[tuple[Dataset, int, int | None]]],
    signals: Sequence[Signal],
    *,
    by_fold: bool,
) -> tuple[LabelStats, ...]:
    texts: Counter[tuple[Dataset, int, int | None]] = Counter()
    counts: dict[Signal, Counter[tuple[Dataset, int, int | None]]] = {s: Counter() for s in signals}
    for key, n in totals.items():
        dataset, label, fold = key
        if by_fold and fold is None:
            continue
        target = (dataset, label, fold if by_fold else None)
        texts[target] += n
        for s in signals:
            counts[s][target] += escalated[s][key]
    order = sorted(texts, key=lambda k: (k[2] or 0, _DATASETS.index(k[0]), k[1]))
    return tuple(
        LabelStats(
            d, label, texts[(d, label, f)], {s: counts[s][(d, label, f)] for s in signals}, f
        )
        for d, label, f in order
    )


def build_report(
    gate: L0Gate,
    texts: Iterable[LabelledText],
    *,
    screen: ScreenModel | None = None,
    scores: Sequence[float] | None = None,
) -> LexiconReport:
    """Scan every text with ``gate`` and count escalations by signal and label, hits by entry.

    With ``screen`` the learned scorer is a signal too: flagged at its language's
    threshold, on ``screen``'s own scores (in-sample) or, when given, on ``scores``
    (out-of-fold, one per text in order: cross-validated).

    Raises:
        ValueError: ``scores`` without ``screen``, or not one per text.
    """
    items = list(texts)
    if scores is not None and (screen is None or len(scores) != len(items)):
        raise ValueError("scores need a screen (for its thresholds) and one score per text")
    signals = (Signal.LEXICON, Signal.COMBINED) if screen is None else tuple(Signal)
    totals: Counter[tuple[Dataset, int, int | None]] = Counter()
    escalated: dict[Signal, Counter[tuple[Dataset, int, int | None]]] = {
        s: Counter() for s in signals
    }
    hits: dict[LexiconEntry, Counter[tuple[Dataset, int]]] = {
        entry: Counter() for entry in gate.lexicon.entries
    }
    for n, item in enumerate(items):
        key = (item.dataset, item.label, item.fold)
        result = gate.scan(item.text)
        flagged = None
        if screen is not None:
            value = screen.score(item.text) if scores is None else float(scores[n])
            flagged = value >= screen.threshold(item.text)
        totals[key] += 1
        for signal, on in signals_of(result, flagged).items():
            escalated[signal][key] += on
        found = {gate.keys[match.term] for match in result.matches}
        found.update(gate.keys[k] for k in result.dampened_by)
        for entry in found:
            hits[entry][(item.dataset, item.label)] += 1
    terms = sorted(
        (TermStats(entry, dict(counts)) for entry, counts in hits.items()),
        key=lambda row: -row.total,
    )
    mode = None
    if screen is not None:
        mode = ScorerMode.IN_SAMPLE if scores is None else ScorerMode.CROSS_VALIDATED
    return LexiconReport(
        labels=_label_rows(totals, escalated, signals, by_fold=False),
        terms=tuple(terms),
        folds=_label_rows(totals, escalated, signals, by_fold=True),
        signals=signals,
        scorer=mode,
    )


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
