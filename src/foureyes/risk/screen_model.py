"""A small learned risk screen: logistic regression over hashed n-grams of the folded text.

The lexicon of :mod:`foureyes.risk.l0` only finds the phrasings it lists; this scorer is
trained on the labelled public sets of ``risk/`` in the third-party data (see
:mod:`foureyes.risk.lexicon_report`) to catch phrasings it does not. It is built by
``foureyes risk train-screen`` and shipped as two files under ``foureyes/risk/data``:

- ``screen_weights.json``: the bias and ``2**16`` float16 weights (little-endian, base64);
- ``screen_manifest.json``: the feature version, the SHA-256 of the weights file and of every
  training file, the features, the labels, the training settings, the per-language
  thresholds and the cross-validated metrics.

Features (version 1), over ``foureyes.core.fold.normalise(text).text``: runs of Han
characters give character 1- to 3-grams; every other word (a run of letters or digits)
gives itself, its character 2- to 4-grams with a space either side, and a bigram with the
word before it when that was also such a word. Each distinct feature string, prefixed by
its kind, is hashed with CRC-32 (``zlib.crc32`` of its UTF-8 bytes; stable across
processes, unlike ``hash()``) into ``2**16`` buckets; a text's features are binary and
scaled by one over the square root of their number. The score is the logistic of the bias
plus the weighted sum, a float in ``(0, 1)``; scoring is pure Python.

Labels: SOS-1K grade 4 and up is positive (a wish to die or more, by the grade definitions
in ``sos1k_levels.py.txt``; 0-3 are pain without a wish to die), twitter ``intention`` 1,
SDCNL ``is_suicide`` 1 (r/SuicideWatch against r/depression). Training is deterministic:
full-batch Adam on the class- and language-balanced log loss with L2, a fixed number of
steps, no randomness but the seeded 4-fold split of the English sets (SOS-1K comes in
folds 1-4). Thresholds are per language: the highest out-of-fold score that keeps
out-of-fold recall at :data:`TARGET_RECALL` or above.

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
import zlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from foureyes.core.errors import ConfigError
from foureyes.core.fold import normalise

__all__ = [
    "BUCKETS",
    "FEATURE_VERSION",
    "Language",
    "MANIFEST_FILE",
    "ScreenManifest",
    "ScreenModel",
    "TARGET_RECALL",
    "WEIGHTS_FILE",
    "default_screen_model",
    "feature_buckets",
    "feature_strings",
    "language_of",
    "load_screen_model",
    "score",
]

FEATURE_VERSION = 1
"""Bumped whenever :func:`feature_buckets` changes; a model of another version won't load."""
BUCKETS = 2**16
"""Hash buckets (weights) of the model."""
TARGET_RECALL = 0.9
"""Out-of-fold recall each language's threshold keeps."""
MANIFEST_FILE = "screen_manifest.json"
WEIGHTS_FILE = "screen_weights.json"

Language = Literal["zh", "en"]

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_TOKEN = re.compile(rf"(?P<han>[{_HAN}]+)|(?P<word>[^\W{_HAN}]+)")
_HAN_ANY = re.compile(rf"[{_HAN}]")
_HAN_NGRAMS = (1, 3)
_LATIN_NGRAMS = (2, 4)


def _features(folded: str) -> set[str]:
    found: set[str] = set()
    previous: str | None = None
    lo_h, hi_h = _HAN_NGRAMS
    lo_c, hi_c = _LATIN_NGRAMS
    for match in _TOKEN.finditer(folded):
        run = match.group("han")
        if run is not None:
            previous = None
            for n in range(lo_h, hi_h + 1):
                found.update("h:" + run[i : i + n] for i in range(len(run) - n + 1))
            continue
        word = match.group("word")
        found.add("w:" + word)
        if previous is not None:
            found.add(f"b:{previous} {word}")
        previous = word
        padded = f" {word} "
        for n in range(lo_c, hi_c + 1):
            found.update("c:" + padded[i : i + n] for i in range(len(padded) - n + 1))
    return found


def feature_strings(folded: str) -> set[str]:
    """The features of folded text as prefixed strings: the specification of the hashing."""
    return _features(folded)


_MASK = BUCKETS - 1
_CRC = {prefix: zlib.crc32(prefix.encode()) for prefix in ("h:", "w:", "b:", "c:")}


@functools.lru_cache(maxsize=2**15)
def _word_crcs(word: str) -> frozenset[int]:
    """The CRCs of a word's own features (itself, its character n-grams); words repeat."""
    crc32, c = zlib.crc32, _CRC["c:"]
    crcs = {crc32(word.encode(), _CRC["w:"])}
    padded = f" {word} "
    if padded.isascii():
        raw = padded.encode()
        crcs.update(crc32(raw[i : i + n], c) for n in (2, 3, 4) for i in range(len(raw) - n + 1))
    else:
        crcs.update(
            crc32(padded[i : i + n].encode(), c)
            for n in (2, 3, 4)
            for i in range(len(padded) - n + 1)
        )
    return frozenset(v & _MASK for v in crcs)


def feature_buckets(text: str) -> list[int]:
    """The sorted distinct buckets of ``text``'s features (version :data:`FEATURE_VERSION`).

    Each is ``zlib.crc32`` of the UTF-8 of a string of :func:`feature_strings`, modulo
    :data:`BUCKETS`; computed from the prefix's CRC and byte slices, without building the
    strings, each word's own once per process (a word's features do not depend on its
    neighbours).
    """
    return sorted(_bucket_set(text))


def _bucket_set(text: str) -> set[int]:
    crc32 = zlib.crc32
    h, b = _CRC["h:"], _CRC["b:"]
    found: set[int] = set()
    previous: bytes | None = None
    for match in _TOKEN.finditer(normalise(text).text):
        run = match.group("han")
        if run is not None:
            previous = None
            found.update(
                crc32(run[i : i + n].encode(), h) & _MASK
                for n in (1, 2, 3)
                for i in range(len(run) - n + 1)
            )
            continue
        text_word = match.group("word")
        word = text_word.encode()
        found.update(_word_crcs(text_word))
        if previous is not None:
            found.add(crc32(b" " + word, crc32(previous, b)) & _MASK)
        previous = word
    return found


def language_of(text: str) -> Language:
    """``zh`` when the text has a Han character, else ``en`` (which threshold applies)."""
    return "zh" if _HAN_ANY.search(text) else "en"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


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
    """How the features are made (documentation; the code is the specification)."""
    labels: dict[str, str]
    """What counts as positive in each training set."""
    data: dict[str, str]
    """SHA-256 of each training file, by its path under the data directory."""
    training: dict[str, Any]
    """Training settings and the command that reproduces the files."""
    thresholds: dict[Language, float]
    """Score at or above which a text of each language is flagged."""
    cv: dict[str, Any]
    """Cross-validated metrics per language at its threshold."""


class _Weights(_Strict):
    format: Literal["foureyes-screen-weights"]
    feature_version: int
    buckets: int
    dtype: Literal["float16-le"]
    bias: float
    weights: str


@dataclass(frozen=True, slots=True)
class ScreenModel:
    """A loaded screen: its weights and manifest; :meth:`score` is pure and cheap."""

    bias: float
    weights: tuple[float, ...]
    manifest: ScreenManifest

    def score(self, text: str) -> float:
        """The model's probability that ``text`` is at risk, in ``(0, 1)``."""
        buckets = _bucket_set(text)
        z = self.bias
        if buckets:
            weights = self.weights
            z += sum(weights[b] for b in buckets) / math.sqrt(len(buckets))
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    def threshold(self, text: str) -> float:
        """The threshold of ``text``'s language."""
        return self.manifest.thresholds[language_of(text)]

    def flags(self, text: str) -> bool:
        """Whether ``text`` scores at or above its language's threshold."""
        return self.score(text) >= self.threshold(text)


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
    """Load the screen from ``directory`` (default: the packaged ``foureyes/risk/data``).

    Raises:
        ConfigError: a file is missing, unreadable or malformed, the feature version is not
            :data:`FEATURE_VERSION`, or the weights file's digest is not the manifest's.
    """
    base = directory or Path(str(resources.files("foureyes.risk") / "data"))
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
