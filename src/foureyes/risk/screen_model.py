r"""A small learned risk screen: logistic regression over hashed n-grams of the folded text.

The lexicon of :mod:`foureyes.risk.l0` only finds the phrasings it lists; this scorer is
trained on the labelled public sets of ``risk/`` in the third-party data (see
:mod:`foureyes.risk.lexicon_report`) to catch phrasings it does not. It is built by
``foureyes risk train-screen`` and shipped as two files under ``foureyes/risk/data``:

- ``screen_weights.json``: the bias and ``2**16`` float16 weights (little-endian, base64);
- ``screen_manifest.json``: the feature version, the SHA-256 of the weights file and of every
  training file, the features, the labels, the training settings, the per-language
  thresholds (``escalate`` and ``screened``) and the cross-validated metrics.

**Features, version 2** (the specification; ``tests/risk/test_screen_model.py`` checks the
fast code against a plain reimplementation of it). The text is folded once,
``s = foureyes.core.fold.normalise(text).text``. A character is *Han* when its code point
lies in U+3400-U+4DBF, U+4E00-U+9FFF, U+F900-U+FAFF or U+20000-U+3134F; a *word* is a
maximal run of characters that are word characters of Python's ``re`` (``\w``: letters,
digits, ``_``) and not Han. The features are a multiset, each a kind ``K``, a length ``n``
and a sequence of code points ``x``, made from the text's *distinct* words and *distinct*
Han n-grams (so repeating a sentence adds nothing: a text repeated ``k`` times scores as
the text once):

- every distinct character ``n``-gram, ``n`` = 1, 2, 3, of the maximal runs of Han
  characters (``K = 1``, ``n`` the gram's length), once however often it occurs;
- every distinct word ``w`` gives itself (``K = 2``, ``n = 0``) and the character
  ``n``-grams of ``" " + w + " "``, ``n`` = 2, 3, 4 (``K = 3``): ``3 * len(w) + 1``
  features (two distinct words may give the same n-gram; each counts).

(Word bigrams, which version 1 had, are left out: they cost as much time as everything
else together and the budget of L0 has no room for them.)

A feature's bucket, all arithmetic modulo ``2**64``::

    h = sum(x[j] * P**j for j in range(len(x)))   # P = 0x100000001B3
    z = h + (16 * K + n) * Q                       # Q = 0x9E3779B97F4A7C15
    bucket = ((z ^ (z >> 32)) * R) >> 48           # R = 0xD6E8FEB86659FD93

(:data:`BUCKETS` = ``2**16`` buckets). The score is the logistic of the bias plus the sum
of the weights of the buckets of the features divided by the square root of their number
(the bias alone for a text without features): a float in ``(0, 1)``.

The code computes this without building the strings: the weight a word's own features
add up to is computed once per model and kept (up to :data:`MEMO_SIZE` words; words
repeat), ASCII text is split into words with ``bytes.translate``, and Han n-grams are
hashed all at once with numpy in ``uint64`` (and made distinct by their 64-bit hash
before bucketing, sorted rather than with ``np.unique``, which costs ten times more).
Version 1 hashed the feature strings with CRC-32 in pure Python; it was several times too
slow for L0's budget. Version 2 counted every occurrence, so a long text of one calm
sentence repeated scored ever further from the bias and escalated.

Labels: SOS-1K grade 4 and up is positive (a wish to die or more, by the grade definitions
in ``sos1k_levels.py.txt``; 0-3 are pain without a wish to die), twitter ``intention`` 1,
SDCNL ``is_suicide`` 1 (r/SuicideWatch against r/depression). Training is deterministic:
full-batch Adam on the class- and language-balanced log loss with L2, a fixed number of
steps, no randomness but the seeded 4-fold split of the English sets (SOS-1K comes in
folds 1-4). Two thresholds per language, both chosen on the out-of-fold scores
(:mod:`foureyes.risk.screen_train`): ``escalate``, at or above which the scorer alone
escalates L0 (:data:`ESCALATE_FALSE_RATE`), and ``screened``, the lower one of
``risk.l1_policy = "screened"`` (:data:`TARGET_RECALL`).

Loading fails closed: a missing, unreadable or malformed file, another feature version,
or a weights file whose digest is not the manifest's raises
:class:`~foureyes.core.errors.ConfigError`; it never turns into "no signal".
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import math
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from foureyes.core.errors import ConfigError
from foureyes.core.fold import normalise

__all__ = [
    "BUCKETS",
    "ESCALATE_FALSE_RATE",
    "FEATURE_VERSION",
    "Language",
    "Level",
    "MANIFEST_FILE",
    "MEMO_SIZE",
    "PACKAGED_DIR",
    "ScreenManifest",
    "ScreenModel",
    "ScreenThresholds",
    "TARGET_RECALL",
    "WEIGHTS_FILE",
    "default_screen_model",
    "feature_buckets",
    "language_of",
    "load_screen_model",
    "score",
]

FEATURE_VERSION = 3
"""Bumped whenever the features change; a model of another version won't load."""
BUCKETS = 2**16
"""Hash buckets (weights) of the model."""
TARGET_RECALL = 0.9
"""Out-of-fold recall each language's ``screened`` threshold keeps."""
ESCALATE_FALSE_RATE = 0.1
"""Out-of-fold false escalation each language's ``escalate`` threshold stays within."""
MANIFEST_FILE = "screen_manifest.json"
WEIGHTS_FILE = "screen_weights.json"
PACKAGED_DIR = Path(str(resources.files("foureyes.risk") / "data"))
"""Where the packaged screen's two files are."""
MEMO_SIZE = 2**16
"""Words whose features' weight a model keeps; further words are computed on each call."""

Language = Literal["zh", "en"]
Level = Literal["escalate", "screened"]
"""Which threshold: the scorer alone escalates L0, or the lower one of ``screened``."""

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_HAN_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3134F))
_WORD = re.compile(rf"[^\W{_HAN}]+")
_HAN_ANY = re.compile(rf"[{_HAN}]")

_P = 0x100000001B3
_Q = 0x9E3779B97F4A7C15
_R = 0xD6E8FEB86659FD93
_MOD = 2**64 - 1
_HAN_KIND, _WORD_KIND, _CHAR_KIND = 1, 2, 3
_SPACE = 0x20


def _bucket(h: int, kind: int, n: int) -> int:
    """The bucket of a feature of polynomial hash ``h`` (see the module docstring)."""
    z = (h + (16 * kind + n) * _Q) & _MOD
    return (((z ^ (z >> 32)) * _R) & _MOD) >> 48


def _poly(codes: Sequence[int]) -> int:
    h, power = 0, 1
    for code in codes:
        h = (h + code * power) & _MOD
        power = (power * _P) & _MOD
    return h


def _word_buckets(word: str) -> list[int]:
    """The buckets of a word's own features: itself, the 2-4-grams of ``" " + word + " "``."""
    codes = [_SPACE, *map(ord, word), _SPACE]
    found = [_bucket(_poly(codes[1:-1]), _WORD_KIND, 0)]
    for n in (2, 3, 4):
        found += (
            _bucket(_poly(codes[i : i + n]), _CHAR_KIND, n) for i in range(len(codes) - n + 1)
        )
    return found


_U64 = np.uint64
_HAN_LIMIT = 0x31350
_HAN_TABLE = np.zeros(_HAN_LIMIT + 1, dtype=np.bool_)
for _lo, _hi in _HAN_RANGES:
    _HAN_TABLE[_lo : _hi + 1] = True
_P1, _P2 = _U64(_P), _U64(_P * _P & _MOD)
_SALTS = tuple(_U64((16 * _HAN_KIND + n) * _Q & _MOD) for n in (1, 2, 3))
_SHIFT_32, _SHIFT_48, _R64 = _U64(32), _U64(48), _U64(_R)
_FIRST = np.ones(1, dtype=np.bool_)


def _han_buckets(folded: str) -> npt.NDArray[np.intp]:
    """The buckets of the Han n-grams of ``folded``, vectorised (empty when it has no Han)."""
    # surrogatepass: a lone surrogate (not text, but a str may hold one) is its code point,
    # which is no Han character, instead of an error in a function that must be total.
    codes = np.frombuffer(folded.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    han = _HAN_TABLE[np.minimum(codes, _HAN_LIMIT)]
    wide = codes.astype(_U64)
    two = wide[:-1] + wide[1:] * _P1
    two_ok = han[:-1] & han[1:]
    three = two[:-1] + wide[2:] * _P2
    three_ok = two_ok[:-1] & han[2:]
    z = np.sort(
        np.concatenate(
            (wide[han] + _SALTS[0], two[two_ok] + _SALTS[1], three[three_ok] + _SALTS[2])
        )
    )
    if len(z) > 1:
        z = z[np.concatenate((_FIRST, z[1:] != z[:-1]))]  # each distinct n-gram once
    buckets: npt.NDArray[np.intp] = ((z ^ (z >> _SHIFT_32)) * _R64 >> _SHIFT_48).astype(np.intp)
    return buckets


_ASCII_WORD = frozenset(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_ASCII_SPLIT = bytes(c if c in _ASCII_WORD else _SPACE for c in range(256))


def _words(folded: str) -> list[str] | list[bytes]:
    """The words of ``folded``: ASCII bytes when it is ASCII (the same words, faster)."""
    if folded.isascii():
        return folded.encode("ascii").translate(_ASCII_SPLIT).split()
    words: list[str] = _WORD.findall(folded)
    return words


def feature_buckets(text: str) -> list[int]:
    """The buckets of the features of ``text``, sorted, repeats kept.

    Two features may share a bucket, and two distinct words an n-gram. Feature version
    :data:`FEATURE_VERSION`: what the weights are summed over.
    """
    folded = normalise(text).text
    found = [b for word in dict.fromkeys(_WORD.findall(folded)) for b in _word_buckets(word)]
    if language_of(folded) == "zh":
        found += _han_buckets(folded).tolist()
    return sorted(found)


def language_of(text: str) -> Language:
    """``zh`` when the text has a Han character, else ``en`` (which threshold applies)."""
    # ASCII text has no Han character: no need to scan it (L0 asks this of every message).
    return "zh" if not text.isascii() and _HAN_ANY.search(text) else "en"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class ScreenThresholds(_Strict):
    """One language's two thresholds (scores in ``(0, 1)``)."""

    escalate: float = Field(gt=0.0, lt=1.0)
    """At or above it, the scorer alone escalates L0."""
    screened: float = Field(gt=0.0, lt=1.0)
    """At or above it, ``risk.l1_policy = "screened"`` sends the message to L1; at most
    ``escalate``."""

    @model_validator(mode="after")
    def _ordered(self) -> ScreenThresholds:
        if self.screened > self.escalate:
            raise ValueError("the screened threshold must not exceed the escalate threshold")
        return self


class ScreenManifest(_Strict):
    """What ``screen_manifest.json`` holds (written by ``foureyes risk train-screen``)."""

    format: Literal["foureyes-screen-manifest"]
    """Names the file's kind."""
    feature_version: int
    """The :data:`FEATURE_VERSION` the weights were trained with."""
    buckets: int
    """Number of weights."""
    weights_file: str
    """Name of the weights file, next to the manifest."""
    weights_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """SHA-256 of the weights file's bytes."""
    features: dict[str, Any]
    """How the features are made (documentation; the module docstring is the specification)."""
    labels: dict[str, str]
    """What counts as positive in each training set."""
    data: dict[str, str]
    """SHA-256 of each training file, by its path under the data directory."""
    training: dict[str, Any]
    """Training settings, the folds and the command that reproduces the files."""
    thresholds: dict[Language, ScreenThresholds]
    """Each language's thresholds; both languages must be there."""
    cv: dict[str, Any]
    """Cross-validated (out-of-fold) metrics per language at each threshold."""


class _Weights(_Strict):
    format: Literal["foureyes-screen-weights"]
    feature_version: int
    buckets: int
    dtype: Literal["float16-le"]
    bias: float
    weights: str


def _logistic(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


@dataclass(frozen=True, slots=True)
class ScreenModel:
    """A loaded screen: its weights and manifest; :meth:`score` is pure and cheap.

    Thread-safe: the memo of word features only ever grows (to :data:`MEMO_SIZE`), one
    dictionary operation at a time, and holds values that do not depend on when they were
    computed.
    """

    bias: float
    weights: tuple[float, ...]
    manifest: ScreenManifest
    _array: npt.NDArray[np.float64] = field(init=False, repr=False, compare=False)
    _word_sums: dict[str | bytes, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_array", np.asarray(self.weights, dtype=np.float64))
        object.__setattr__(self, "_word_sums", {})

    def score(self, text: str) -> float:
        """The model's probability that ``text`` is at risk, in ``(0, 1)``."""
        return self.score_folded(normalise(text).text)

    def score_folded(self, folded: str) -> float:
        """:meth:`score` of a text already folded (``normalise(text).text``): L0 folds once."""
        total, count = 0.0, 0
        words: set[str] | set[bytes] = set(_words(folded))  # type: ignore[assignment]
        if words:
            sums = self._word_sums
            missing = words.difference(sums)
            if missing:
                sums = self._remember(missing)
            total += sum(map(sums.__getitem__, words))
            count += 3 * sum(map(len, words)) + len(words)
        if language_of(folded) == "zh":
            han = _han_buckets(folded)
            total += float(self._array[han].sum())
            count += len(han)
        return _logistic(self.bias + (total / math.sqrt(count) if count else 0.0))

    def _remember(self, words: set[str] | set[bytes]) -> dict[str | bytes, float]:
        """``words``' sums added to the memo (or, when it is full, to a copy of it)."""
        weights = self.weights
        new: dict[str | bytes, float] = {
            word: math.fsum(
                weights[b]
                for b in _word_buckets(word.decode("ascii") if isinstance(word, bytes) else word)
            )
            for word in words
        }
        if len(self._word_sums) + len(new) <= MEMO_SIZE:
            self._word_sums.update(new)
            return self._word_sums
        return {**self._word_sums, **new}

    def threshold(self, text: str, level: Level = "escalate") -> float:
        """The ``level`` threshold of ``text``'s language."""
        return self.threshold_of(language_of(text), level)

    def threshold_of(self, language: Language, level: Level = "escalate") -> float:
        """The ``level`` threshold of ``language``."""
        thresholds = self.manifest.thresholds[language]
        return thresholds.escalate if level == "escalate" else thresholds.screened

    def flags(self, text: str) -> bool:
        """Whether ``text`` scores at or above its language's ``escalate`` threshold."""
        return self.score(text) >= self.threshold(text)

    def flags_screened(self, text: str) -> bool:
        """Whether ``text`` scores at or above its language's ``screened`` threshold."""
        return self.score(text) >= self.threshold(text, "screened")


def _problems(exc: ValidationError) -> list[str]:
    return [
        f"{'.'.join(str(part) for part in e['loc']) or '(object)'}: {e['msg']}"
        for e in exc.errors(include_input=False, include_url=False)
    ]


def _read_json(path: Path, what: str) -> tuple[bytes, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError([f"risk screen {what} {str(path)!r}: cannot be read: {exc}"]) from None
    try:
        return raw, json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError([f"risk screen {what} {str(path)!r}: not JSON: {exc}"]) from None


def load_screen_model(directory: Path | None = None) -> ScreenModel:
    """Load the screen from ``directory`` (default: :data:`PACKAGED_DIR`).

    Raises:
        ConfigError: a file is missing, unreadable or malformed, the feature version is not
            :data:`FEATURE_VERSION`, or the weights file's digest is not the manifest's.
    """
    base = directory or PACKAGED_DIR
    _, data = _read_json(base / MANIFEST_FILE, "manifest")
    try:
        manifest = ScreenManifest.model_validate(data)
    except ValidationError as exc:
        raise ConfigError([f"risk screen manifest: {p}" for p in _problems(exc)]) from None
    if manifest.feature_version != FEATURE_VERSION or manifest.buckets != BUCKETS:
        raise ConfigError(
            [
                f"risk screen manifest: feature version {manifest.feature_version} with "
                f"{manifest.buckets} buckets, this code computes version {FEATURE_VERSION} "
                f"with {BUCKETS}: retrain with `foureyes risk train-screen`"
            ]
        )
    if set(manifest.thresholds) != {"zh", "en"}:
        raise ConfigError(["risk screen manifest: thresholds must name zh and en"])
    raw, data = _read_json(base / manifest.weights_file, "weights file")
    digest = hashlib.sha256(raw).hexdigest()
    if digest != manifest.weights_sha256:
        raise ConfigError(
            [
                f"risk screen weights file {manifest.weights_file!r}: SHA-256 {digest} is not "
                f"the manifest's {manifest.weights_sha256}"
            ]
        )
    try:
        weights = _Weights.model_validate(data)
        packed = base64.b64decode(weights.weights, validate=True)
    except ValidationError as exc:
        raise ConfigError([f"risk screen weights: {p}" for p in _problems(exc)]) from None
    except ValueError as exc:
        raise ConfigError([f"risk screen weights: not base64: {exc}"]) from None
    if (
        weights.feature_version != FEATURE_VERSION
        or weights.buckets != BUCKETS
        or len(packed) != 2 * BUCKETS
    ):
        raise ConfigError(
            [f"risk screen weights: not {BUCKETS} float16 weights of version {FEATURE_VERSION}"]
        )
    values = struct.unpack(f"<{BUCKETS}e", packed)
    if not all(math.isfinite(v) for v in values) or not math.isfinite(weights.bias):
        raise ConfigError(["risk screen weights: a weight is not finite"])
    return ScreenModel(weights.bias, values, manifest)


@functools.cache
def default_screen_model() -> ScreenModel:
    """The packaged screen, loaded once (raises :class:`ConfigError` like the loader)."""
    return load_screen_model()


def score(text: str) -> float:
    """:meth:`ScreenModel.score` of the packaged screen."""
    return default_screen_model().score(text)
