"""Training of the risk screen of :mod:`foureyes.risk.screen_model`: `foureyes risk train-screen`.

Deterministic: the same data gives the same files, byte for byte (no timestamps, a fixed
seed for the English folds, full-batch optimisation in a fixed order). Cross-validation
(:func:`out_of_fold_scores`) trains on three folds and scores the fourth, four times
(:func:`cv_fold`; SOS-1K: its folds 1-4; the English sets: a seeded split into four);
each language's two thresholds are then chosen on the pooled out-of-fold scores, and the
shipped model is trained once more on everything:

- ``escalate`` (the scorer alone escalates L0): the lowest threshold, hence the highest
  recall, at which at most :data:`~foureyes.risk.screen_model.ESCALATE_FALSE_RATE` of the
  language's negatives score at or above it, so the scorer adds little false escalation
  of its own to the lexicon's;
- ``screened`` (``risk.l1_policy = "screened"``): the highest threshold that keeps recall
  at :data:`~foureyes.risk.screen_model.TARGET_RECALL`, never above ``escalate``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from foureyes.core.errors import ConfigError
from foureyes.risk.l0 import L0Gate, Lexicon
from foureyes.risk.lexicon_report import DATA_FILES, Dataset, LabelledText, load_risk_data
from foureyes.risk.screen_model import (
    BUCKETS,
    ESCALATE_FALSE_RATE,
    FEATURE_VERSION,
    MANIFEST_FILE,
    TARGET_RECALL,
    WEIGHTS_FILE,
    Language,
    feature_buckets,
    load_screen_model,
)

__all__ = ["TrainingResult", "cv_fold", "is_positive", "out_of_fold_scores", "train_screen"]

SEED = 20261201
"""Seed of the English 4-fold split."""
STEPS = 150
"""Full-batch Adam steps per fit."""
LEARNING_RATE = 0.05
L2 = 1e-5
"""L2 penalty on the weights (not the bias), added to the mean weighted log loss."""
FOLDS = 4
COMMAND = "foureyes risk train-screen"

_Array = npt.NDArray[np.float64]


def is_positive(item: LabelledText) -> bool:
    """Whether a training text counts as at risk: SOS-1K grade 4 and up, else label 1."""
    return item.label >= 4 if item.dataset is Dataset.SOS1K else item.label == 1


def _language(item: LabelledText) -> Language:
    return "zh" if item.dataset is Dataset.SOS1K else "en"


@dataclass(frozen=True)
class _Matrix:
    """Rows of binary features scaled to unit length, in coordinate form."""

    rows: npt.NDArray[np.int64]
    cols: npt.NDArray[np.int64]
    values: _Array
    n: int

    @classmethod
    def of(cls, buckets: Sequence[Sequence[int]]) -> _Matrix:
        lengths = np.array([len(b) for b in buckets], dtype=np.int64)
        rows = np.repeat(np.arange(len(buckets), dtype=np.int64), lengths)
        cols = np.fromiter(
            (c for b in buckets for c in b), dtype=np.int64, count=int(lengths.sum())
        )
        scale = 1.0 / np.sqrt(np.maximum(lengths, 1))
        return cls(rows, cols, scale[rows], len(buckets))

    def select(self, keep: npt.NDArray[np.bool_]) -> _Matrix:
        index = np.cumsum(keep) - 1
        mask = keep[self.rows]
        return _Matrix(index[self.rows[mask]], self.cols[mask], self.values[mask], int(keep.sum()))

    def dot(self, weights: _Array) -> _Array:
        return np.bincount(self.rows, self.values * weights[self.cols], minlength=self.n).astype(
            np.float64, copy=False
        )

    def grad(self, residual: _Array) -> _Array:
        return np.bincount(self.cols, self.values * residual[self.rows], minlength=BUCKETS).astype(
            np.float64, copy=False
        )


def _sigmoid(z: _Array) -> _Array:
    return np.exp(-np.logaddexp(0.0, -z))


def _fit(x: _Matrix, y: _Array, sample: _Array) -> tuple[float, _Array]:
    """Full-batch Adam on the weighted log loss plus L2; returns bias and weights."""
    theta = np.zeros(BUCKETS + 1)
    m = np.zeros_like(theta)
    v = np.zeros_like(theta)
    total = sample.sum()
    for step in range(1, STEPS + 1):
        p = _sigmoid(x.dot(theta[1:]) + theta[0])
        residual = (p - y) * sample / total
        g = np.empty_like(theta)
        g[0] = residual.sum()
        g[1:] = x.grad(residual) + 2 * L2 * theta[1:]
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        theta -= LEARNING_RATE * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return float(theta[0]), theta[1:]


def _balance(y: _Array, languages: npt.NDArray[np.str_]) -> _Array:
    """Sample weights: each language, and each class within it, weighs the same."""
    sample = np.zeros_like(y)
    for language in np.unique(languages):
        for label in (0.0, 1.0):
            mask = (languages == language) & (y == label)
            if mask.any():
                sample[mask] = 1.0 / mask.sum()
    return sample


def cv_fold(texts: Sequence[LabelledText]) -> npt.NDArray[np.int64]:
    """The cross-validation fold (0-3) of each text, in the order given.

    SOS-1K by its file (``sos1k_fold1.tsv`` is fold 0), the English texts by a permutation
    seeded with :data:`SEED`, dealt round-robin into :data:`FOLDS` folds.
    """
    folds = np.zeros(len(texts), dtype=np.int64)
    english = [i for i, t in enumerate(texts) if t.dataset is not Dataset.SOS1K]
    order = np.random.default_rng(SEED).permutation(len(english))
    for rank, position in enumerate(order):
        folds[english[position]] = rank % FOLDS
    for i, t in enumerate(texts):
        if t.dataset is Dataset.SOS1K:
            folds[i] = int(t.source.removeprefix("zh/sos1k_fold").removesuffix(".tsv")) - 1
    return folds


def _escalate_threshold(scores: _Array, y: _Array) -> float:
    """The lowest threshold (rounded up to 1e-4) keeping false escalation in bounds.

    At most ESCALATE_FALSE_RATE of the negatives score at or above it.
    """
    negatives = np.sort(scores[y == 0])[::-1]
    allowed = int(np.floor(ESCALATE_FALSE_RATE * len(negatives)))
    if allowed >= len(negatives):
        return 0.5
    return min(float(np.floor(negatives[allowed] * 10_000 + 1) / 10_000), 0.9999)


def _screened_threshold(scores: _Array, y: _Array) -> float:
    """The highest score keeping recall at TARGET_RECALL or above (rounded down to 1e-4)."""
    positives = np.sort(scores[y == 1])[::-1]
    if not len(positives):
        return 0.5
    needed = int(np.ceil(TARGET_RECALL * len(positives)))
    return float(np.floor(positives[needed - 1] * 10_000) / 10_000)


def _auc(scores: _Array, y: _Array) -> float | None:
    pos, neg = scores[y == 1], scores[y == 0]
    if not len(pos) or not len(neg):
        return None
    ranks = np.empty(len(scores))
    ranks[np.argsort(scores, kind="stable")] = np.arange(1, len(scores) + 1)
    return float((ranks[y == 1].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def _rate(hits: npt.NDArray[np.bool_]) -> float | None:
    return round(float(hits.mean()), 4) if len(hits) else None


@dataclass(frozen=True)
class TrainingResult:
    """What a training run wrote and measured."""

    directory: Path
    manifest: dict[str, Any]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _labels(texts: Sequence[LabelledText]) -> tuple[_Array, npt.NDArray[np.str_]]:
    y = np.array([1.0 if is_positive(t) else 0.0 for t in texts])
    return y, np.array([_language(t) for t in texts])


def _out_of_fold(
    x: _Matrix, y: _Array, languages: npt.NDArray[np.str_], folds: npt.NDArray[np.int64]
) -> _Array:
    oof = np.zeros(len(y))
    for k in range(FOLDS):
        train, test = folds != k, folds == k
        if not test.any():
            continue
        bias, weights = _fit(x.select(train), y[train], _balance(y[train], languages[train]))
        oof[test] = _sigmoid(x.select(test).dot(weights) + bias)
    return oof


def out_of_fold_scores(texts: Sequence[LabelledText]) -> _Array:
    """Each text's score from the model of the fold (:func:`cv_fold`) that did not train on it.

    The same features, labels, folds and settings as :func:`train_screen` (which calls it
    on the non-empty texts of the data); deterministic; in the order given.
    """
    y, languages = _labels(texts)
    x = _Matrix.of([feature_buckets(t.text) for t in texts])
    return _out_of_fold(x, y, languages, cv_fold(texts))


def train_screen(data: Path, out: Path) -> TrainingResult:
    """Cross-validate, train on all of ``data`` and write the two model files into ``out``.

    Raises:
        ConfigError: the data is missing or malformed, or a language has no text of a class.
    """
    texts = [t for t in load_risk_data(data) if t.text.strip()]
    y, languages = _labels(texts)
    for language in ("zh", "en"):
        classes = set(y[languages == language].tolist())
        if classes != {0.0, 1.0}:
            raise ConfigError([f"{data}: the {language} sets need texts of both classes"])
    x = _Matrix.of([feature_buckets(t.text) for t in texts])
    oof = _out_of_fold(x, y, languages, cv_fold(texts))
    lexicon = L0Gate(Lexicon.packaged())  # the lexicon alone, to compare with
    l0 = np.array([lexicon.scan(t.text).escalate for t in texts])
    thresholds: dict[str, dict[str, float]] = {}
    cv: dict[str, Any] = {}
    for language in ("zh", "en"):
        mask = languages == language
        escalate = _escalate_threshold(oof[mask], y[mask])
        screened = min(_screened_threshold(oof[mask], y[mask]), escalate)
        thresholds[language] = {"escalate": escalate, "screened": screened}
        pos, neg = mask & (y == 1), mask & (y == 0)
        auc = _auc(oof[mask], y[mask])
        cv[language] = {
            "texts": int(mask.sum()),
            "positives": int(pos.sum()),
            "auc": None if auc is None else round(auc, 4),
            "l0_recall": _rate(l0[pos]),
            "l0_false_escalation_rate": _rate(l0[neg]),
        }
        for level, threshold in thresholds[language].items():
            flagged = oof >= threshold
            cv[language][level] = {
                "recall": _rate(flagged[pos]),
                "false_escalation_rate": _rate(flagged[neg]),
                "recall_where_l0_silent": _rate(flagged[pos & ~l0]),
                "recall_with_l0": _rate((flagged | l0)[pos]),
                "false_escalation_rate_with_l0": _rate((flagged | l0)[neg]),
            }
    for name in sorted({t.dataset for t in texts}, key=list(Dataset).index):
        mask = np.array([t.dataset is name for t in texts])
        pos, neg = mask & (y == 1), mask & (y == 0)
        cv[str(name)] = {}
        for level in ("escalate", "screened"):
            flagged = flagged_at(oof, languages, {k: v[level] for k, v in thresholds.items()})
            cv[str(name)][level] = {
                "recall": _rate(flagged[pos]),
                "false_escalation_rate": _rate(flagged[neg]),
            }
    bias, weights = _fit(x, y, _balance(y, languages))
    out.mkdir(parents=True, exist_ok=True)
    packed = weights.astype("<f2")
    weights_doc = {
        "format": "foureyes-screen-weights",
        "feature_version": FEATURE_VERSION,
        "buckets": BUCKETS,
        "dtype": "float16-le",
        "bias": round(bias, 6),
        "weights": base64.b64encode(packed.tobytes()).decode("ascii"),
    }
    weights_bytes = (json.dumps(weights_doc, sort_keys=True, indent=1) + "\n").encode()
    (out / WEIGHTS_FILE).write_bytes(weights_bytes)
    manifest = {
        "format": "foureyes-screen-manifest",
        "feature_version": FEATURE_VERSION,
        "buckets": BUCKETS,
        "weights_file": WEIGHTS_FILE,
        "weights_sha256": hashlib.sha256(weights_bytes).hexdigest(),
        "features": {
            "text": "foureyes.core.fold.normalise(text).text",
            "han_char_ngrams": [1, 3],
            "latin_char_ngrams": [2, 4],
            "latin_word_ngrams": [1, 1],
            "hash": "polynomial in uint64 with a kind salt, mixed, top 16 bits "
            "(foureyes.risk.screen_model)",
            "values": "counts of every occurrence, scaled by 1/sqrt(occurrences)",
        },
        "labels": {
            "sos1k": "grade >= 4 (a wish to die or more) positive, 0-3 negative",
            "twitter": "intention 1 positive, 0 negative",
            "sdcnl": "is_suicide 1 (r/SuicideWatch) positive, 0 (r/depression) negative",
        },
        "data": {name: _sha256(data / name) for name in DATA_FILES},
        "training": {
            "command": COMMAND,
            "model": "logistic regression, full-batch Adam, class- and language-balanced",
            "steps": STEPS,
            "learning_rate": LEARNING_RATE,
            "l2": L2,
            "seed": SEED,
            "folds": "sos1k folds 1-4 (by file; fold 5, validation and test never read); "
            "en (twitter, sdcnl) a seeded 4-way split",
            "target_recall": TARGET_RECALL,
            "escalate_false_rate": ESCALATE_FALSE_RATE,
            "thresholds": "escalate: lowest out-of-fold threshold with false escalation <= "
            "escalate_false_rate; screened: highest keeping out-of-fold recall >= "
            "target_recall, at most escalate",
        },
        "thresholds": thresholds,
        "cv": cv,
    }
    (out / MANIFEST_FILE).write_text(
        json.dumps(manifest, sort_keys=True, indent=2, ensure_ascii=False) + "\n", "utf-8"
    )
    load_screen_model(out)  # what was written loads, or training fails here
    return TrainingResult(out, manifest)


def flagged_at(
    scores: _Array, languages: npt.NDArray[np.str_], thresholds: dict[str, float]
) -> npt.NDArray[np.bool_]:
    """Which scores reach the threshold of their text's language."""
    limits = np.array([thresholds[str(language)] for language in languages])
    return np.asarray(scores >= limits)
