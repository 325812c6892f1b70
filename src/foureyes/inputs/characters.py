"""Characters no reader sees: invisible and tag characters, bidi controls, control codes.

Two checks, both of category ``prompt_injection``: what is in a text but not on the
screen is how an instruction gets past a person to a model (ASCII smuggled in Unicode tag
characters, words split by zero-width characters so a filter misses them, bidi overrides
that show one order and mean another, terminal escapes that rewrite a log).

:data:`INVISIBLE_CHARACTERS` reports, one finding per run of adjacent characters of one
reason:

- ``tag_characters``: the tag block U+E0000-U+E007F, always. It is the channel ASCII is
  smuggled in; its one ordinary use, the three subdivision flags (England, Scotland,
  Wales), is reported too;
- ``bidi_control``: embeddings and overrides U+202A-U+202E, isolates U+2066-U+2069 (the
  marks U+200E, U+200F and U+061C are left alone: right-to-left text uses them);
- ``zero_width``: U+200B, U+2060-U+2064, U+180E, U+034F, U+00AD, U+FEFF (except as the
  very first character, a byte-order mark), and U+200C / U+200D except between an emoji
  and an emoji (ZWJ sequences such as a family emoji) or beside a letter of a script that
  joins (Arabic, Hebrew, Syriac, the Indic scripts, Tibetan, Myanmar, Khmer, Mongolian);
- ``variation_selectors``: two or more variation selectors in a row (one after an emoji
  or an ideograph is ordinary; a run can carry bytes);
- ``invisible_filler``: the Hangul fillers U+115F, U+1160, U+3164, U+FFA0 and the blank
  Braille pattern U+2800.

:data:`CONTROL_CHARACTERS` reports runs of C0 and C1 control characters other than tab,
line feed and carriage return (``control_character``), escape sequences included.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from foureyes.inputs.check import (
    CheckInput,
    CheckKind,
    Finding,
    FindingReason,
    InputCategory,
    InputCheck,
    Manifest,
)

__all__ = ["CONTROL_CHARACTERS", "INVISIBLE_CHARACTERS"]

_CANDIDATES = re.compile(
    "[\u00ad\u034f\u115f\u1160\u180e\u200b-\u200d\u202a-\u202e\u2060-\u2064\u2066-\u2069"
    "\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]+")
_JOINERS = frozenset("\u200c\u200d")
# Scripts whose letters take ZWJ / ZWNJ in ordinary writing.
_JOINING_SCRIPTS = (
    (0x0590, 0x08FF),  # Hebrew, Arabic, Syriac, Thaana, NKo, Samaritan, Mandaic
    (0x0900, 0x0DFF),  # Devanagari ... Sinhala
    (0x0F00, 0x109F),  # Tibetan, Myanmar
    (0x1780, 0x18AF),  # Khmer, Mongolian
    (0xA8E0, 0xA8FF),  # Devanagari extended
    (0xFB1D, 0xFDFF),  # Hebrew and Arabic presentation forms
    (0xFE70, 0xFEFE),  # Arabic presentation forms B
)


def _reason(char: str) -> FindingReason:
    code = ord(char)
    if 0xE0000 <= code <= 0xE007F:
        return FindingReason.TAG_CHARACTERS
    if 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069:
        return FindingReason.BIDI_CONTROL
    if 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:
        return FindingReason.VARIATION_SELECTORS
    if char in "\u115f\u1160\u3164\uffa0\u2800":
        return FindingReason.INVISIBLE_FILLER
    return FindingReason.ZERO_WIDTH


def _is_emoji(char: str) -> bool:
    code = ord(char)
    return (
        0x1F000 <= code <= 0x1FAFF
        or 0x2600 <= code <= 0x27BF
        or 0x2190 <= code <= 0x21FF
        or 0x2B00 <= code <= 0x2BFF
        or char in "\ufe0f\u20e3\u00a9\u00ae\u203c\u2049\u2122\u2139\u231a\u231b\u2328\u23cf"
        or 0x23E9 <= code <= 0x23FA
    )


def _joins(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _JOINING_SCRIPTS)


def _ordinary(text: str, i: int) -> bool:
    """Whether the candidate at ``i`` is one that ordinary text uses there."""
    char = text[i]
    before = text[i - 1] if i > 0 else ""
    after = text[i + 1] if i + 1 < len(text) else ""
    if char == "\ufeff":
        return i == 0
    if char in _JOINERS:
        if char == "\u200d" and before and after and _is_emoji(before) and _is_emoji(after):
            return True
        return bool((before and _joins(before)) or (after and _joins(after)))
    if _reason(char) is FindingReason.VARIATION_SELECTORS:
        # Alone it selects a glyph; in a run (of any length but one) it can carry bytes.
        return not (before and _reason_of(before) is FindingReason.VARIATION_SELECTORS) and not (
            after and _reason_of(after) is FindingReason.VARIATION_SELECTORS
        )
    return False


def _reason_of(char: str) -> FindingReason | None:
    return _reason(char) if _CANDIDATES.fullmatch(char) else None


def _invisible(item: CheckInput) -> Iterator[Finding]:
    text = item.text
    if text.isascii():
        return
    run: tuple[int, int, FindingReason] | None = None
    for found in _CANDIDATES.finditer(text):
        i = found.start()
        if _ordinary(text, i):
            continue
        reason = _reason(text[i])
        if run is not None and run[1] == i and run[2] is reason:
            run = (run[0], i + 1, reason)
            continue
        if run is not None:
            yield _finding("invisible_characters", run)
        run = (i, i + 1, reason)
    if run is not None:
        yield _finding("invisible_characters", run)


def _controls(item: CheckInput) -> Iterator[Finding]:
    text = item.text
    if text.isascii() and text.isprintable():
        return
    for found in _CONTROL.finditer(text):
        yield _finding(
            "control_characters", (found.start(), found.end(), FindingReason.CONTROL_CHARACTER)
        )


def _finding(check: str, run: tuple[int, int, FindingReason]) -> Finding:
    return Finding(check, InputCategory.PROMPT_INJECTION, run[0], run[1], run[2])


INVISIBLE_CHARACTERS = InputCheck(
    Manifest(
        id="invisible_characters",
        detects="Unicode tag characters, bidi overrides, zero-width characters where no "
        "script needs them, runs of variation selectors, blank fillers",
        languages=("*",),
        kind=CheckKind.DETERMINISTIC,
        categories=frozenset({InputCategory.PROMPT_INJECTION}),
    ),
    _invisible,
)
"""Characters that render as nothing (see the module docstring)."""

CONTROL_CHARACTERS = InputCheck(
    Manifest(
        id="control_characters",
        detects="C0 and C1 control characters other than tab and line breaks "
        "(terminal escapes, NUL)",
        languages=("*",),
        kind=CheckKind.DETERMINISTIC,
        categories=frozenset({InputCategory.PROMPT_INJECTION}),
    ),
    _controls,
)
"""Control characters other than ``\\t``, ``\\n``, ``\\r``."""
