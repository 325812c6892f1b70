r"""Encoded payloads: base64, hex and percent-encoded runs whose decoded text carries orders.

An instruction a filter would catch in plain text can be handed to a model encoded, with
"decode this and do what it says" beside it. :data:`ENCODED_PAYLOADS` finds the runs that
look encoded:

- base64 and base64url: 24 characters or more of the alphabet (``=`` padding allowed),
  bounded by characters outside it;
- hex: 24 hex digits or more in one run, or eight ``\xNN`` escapes or more, or eight
  space-separated byte pairs or more (a hex dump);
- percent-encoding: a run of URL characters holding three ``%NN`` escapes or more.

It decodes each run and keeps only what decodes to text (valid UTF-8, at least 12
characters, nine in ten of them printable): a hash, an image or a key decodes to bytes and
is left alone, and so is a base64 string in a developer's question that decodes to
ordinary text. The decoded text is scanned by the instruction and jailbreak heuristics
(:mod:`foureyes.inputs.instructions`) and the invisible-character check, and decoded again,
to ``encoded_depth`` levels in all (``[input] encoded_depth``). A finding spans the outer
run in the original text: ``encoded_instructions`` in the category of what was found
inside, or ``encoding_too_deep`` when text that decodes to text is still there at the last
level.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from urllib.parse import unquote_to_bytes

from foureyes.inputs.characters import INVISIBLE_CHARACTERS
from foureyes.inputs.check import (
    CheckContext,
    CheckInput,
    CheckKind,
    Finding,
    FindingReason,
    InputCategory,
    InputCheck,
    Manifest,
)
from foureyes.inputs.instructions import heuristic_findings

__all__ = ["ENCODED_PAYLOADS", "decoded_runs"]

_B64 = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{24,}={0,2}(?![A-Za-z0-9+/=_-])")
_HEX = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){12,}(?![0-9A-Fa-f])")
_HEX_ESCAPES = re.compile(r"(?:\\x[0-9A-Fa-f]{2}){8,}")
_HEX_DUMP = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2} ){7,}[0-9A-Fa-f]{2}(?![0-9A-Fa-f])")
_PERCENT = re.compile(r"(?<![A-Za-z0-9._~+%-])[A-Za-z0-9._~+%-]*%[0-9A-Fa-f]{2}[A-Za-z0-9._~+%-]*")
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_MIN_DECODED_CHARS = 12
_MIN_PERCENT_ESCAPES = 3
_PRINTABLE_SHARE = 0.9


def _text(raw: bytes) -> str | None:
    """``raw`` as text, if it is UTF-8 and mostly printable."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < _MIN_DECODED_CHARS or "\x00" in text:
        return None
    printable = sum(c.isprintable() or c in "\t\n\r" for c in text)
    return text if printable >= _PRINTABLE_SHARE * len(text) else None


def _base64(run: str) -> bytes | None:
    body = run.rstrip("=")
    url = "-" in body or "_" in body
    if url and ("+" in body or "/" in body):
        return None
    padded = body + "=" * (-len(body) % 4)
    try:
        if url:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None


def _hex(run: str) -> bytes | None:
    digits = run.replace("\\x", "").replace("\\X", "").replace(" ", "")
    try:
        return bytes.fromhex(digits)
    except ValueError:
        return None


def _percent(run: str) -> bytes | None:
    if len(_PERCENT_ESCAPE.findall(run)) < _MIN_PERCENT_ESCAPES:
        return None
    return unquote_to_bytes(run.replace("+", " "))


def decoded_runs(text: str) -> Iterator[tuple[int, int, str]]:
    """Every run of ``text`` that looks encoded and decodes to text: its span and the text.

    Runs are found per encoding; a hex run is also a base64 run and is decoded as hex.
    """
    hex_spans: set[tuple[int, int]] = set()
    for pattern in (_HEX, _HEX_ESCAPES, _HEX_DUMP):
        for found in pattern.finditer(text):
            hex_spans.add(found.span())
            raw = _hex(found.group())
            decoded = None if raw is None else _text(raw)
            if decoded is not None:
                yield found.start(), found.end(), decoded
    for found in _B64.finditer(text):
        if found.span() in hex_spans:
            continue
        raw = _base64(found.group())
        decoded = None if raw is None else _text(raw)
        if decoded is not None:
            yield found.start(), found.end(), decoded
    if "%" in text:
        for found in _PERCENT.finditer(text):
            raw = _percent(found.group())
            decoded = None if raw is None else _text(raw)
            if decoded is not None:
                yield found.start(), found.end(), decoded


def _inside(text: str, depth: int) -> tuple[frozenset[InputCategory], bool]:
    """What decoded ``text`` holds: the categories found, and whether it is too deep.

    ``depth`` counts the levels left, the decoding that gave ``text`` included: at the
    last one, any run in it that still decodes to text is too deep.
    """
    item = CheckInput(text, CheckContext(encoded_depth=depth))
    found = {f.category for f in heuristic_findings(item, "encoded_payloads")}
    found |= {f.category for f in INVISIBLE_CHARACTERS.check(item)}
    too_deep = False
    for _, _, inner in decoded_runs(text):
        if depth <= 1:
            too_deep = True
            break
        categories, deeper = _inside(inner, depth - 1)
        found |= categories
        too_deep = too_deep or deeper
    return frozenset(found), too_deep


def _encoded(item: CheckInput) -> Iterator[Finding]:
    depth = item.context.encoded_depth
    for start, end, decoded in decoded_runs(item.text):
        categories, too_deep = _inside(decoded, depth)
        for category in sorted(categories):
            yield Finding(
                "encoded_payloads", category, start, end, FindingReason.ENCODED_INSTRUCTIONS
            )
        if too_deep:
            yield Finding(
                "encoded_payloads",
                InputCategory.PROMPT_INJECTION,
                start,
                end,
                FindingReason.ENCODING_TOO_DEEP,
            )


ENCODED_PAYLOADS = InputCheck(
    Manifest(
        id="encoded_payloads",
        detects="base64, hex and percent-encoded runs whose decoded text (to a bounded "
        "depth) holds instructions, a jailbreak or invisible characters",
        languages=("en", "zh-Hans", "zh-Hant"),
        kind=CheckKind.DETERMINISTIC,
        categories=frozenset({InputCategory.PROMPT_INJECTION, InputCategory.JAILBREAK}),
    ),
    _encoded,
)
"""Encoded payloads (see the module docstring)."""
