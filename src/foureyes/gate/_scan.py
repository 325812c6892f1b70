r"""A rule pattern that finds exactly what it finds, faster: a first-character look-ahead.

Python's regex engine tries every alternative of a pattern such as ``\byou ...|\bI ...``
at every position of the text, which is most of a rule's cost. Prefixed with a look-ahead
for the characters a match can start with, the engine skips the positions where none of
them stands, and a zero-width look-ahead changes no span, no group and no match.

The characters are read from the parsed pattern: literals and character sets at the start
of each alternative, past zero-width assertions and optional parts. Anything whose first
character is not a plain literal or set (``.``, ``\w``, a negated set, a back-reference,
a group that changes flags, a pattern that can match the empty string) keeps the pattern
as it is: the look-ahead only ever narrows where the engine starts, never what it accepts.
The look-ahead is compiled with the pattern's own flags, so under ``IGNORECASE`` it
accepts the same case variants as the literals it names.
"""

from __future__ import annotations

import functools
import re
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any

__all__ = ["fast_scanner", "first_characters"]

# Wider ranges are not worth listing in a look-ahead: give up instead.
_MAX_RANGE = 512
_GLOBAL_FLAGS = re.compile(r"^(?:\(\?[aiLmsux]+\))+")


class _Open(Exception):
    """The first character is not known from literals and sets alone."""


def _sequence(items: Any) -> tuple[set[str], bool]:
    """The first characters of a sequence of parsed items, and whether it can be empty."""
    chars: set[str] = set()
    for op, av in items:
        first, empty = _item(op, av)
        chars |= first
        if not empty:
            return chars, False
    return chars, True


def _members(av: Any) -> set[str]:
    chars: set[str] = set()
    for op, value in av:
        if op is sre.LITERAL:
            chars.add(chr(value))
        elif op is sre.RANGE and value[1] - value[0] <= _MAX_RANGE:
            chars.update(chr(code) for code in range(value[0], value[1] + 1))
        else:  # a negation, a category (\w, \d) or a wide range
            raise _Open
    return chars


def _item(op: Any, av: Any) -> tuple[set[str], bool]:
    if op is sre.LITERAL:
        return {chr(av)}, False
    if op is sre.IN:
        return _members(av), False
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):  # zero width: look past it
        return set(), True
    if op is sre.SUBPATTERN:
        _group, add_flags, del_flags, sub = av
        if add_flags or del_flags:  # (?i:...) and the like match under other rules
            raise _Open
        return _sequence(sub)
    if op is sre.ATOMIC_GROUP:
        return _sequence(av)
    if op is sre.BRANCH:
        chars, empty = set(), False
        for branch in av[1]:
            first, can_be_empty = _sequence(branch)
            chars |= first
            empty = empty or can_be_empty
        return chars, empty
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        least, _most, sub = av
        first, empty = _sequence(sub)
        return first, empty or least == 0
    raise _Open


def first_characters(pattern: re.Pattern[str]) -> frozenset[str] | None:
    """The characters every match of ``pattern`` starts with, or ``None`` if not known."""
    try:
        chars, empty = _sequence(_parser.parse(pattern.pattern, pattern.flags))
    except (_Open, re.error, RecursionError):
        return None
    return None if empty or not chars else frozenset(chars)


@functools.lru_cache(maxsize=512)
def fast_scanner(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """``pattern`` with a look-ahead for its first characters, or itself if none is known.

    Both find the same matches with the same spans and groups in any text.
    """
    chars = first_characters(pattern)
    if chars is None:
        return pattern
    # Global inline flags must open an expression; the pattern's flags carry them.
    body = _GLOBAL_FLAGS.sub("", pattern.pattern, count=1)
    if pattern.flags & re.VERBOSE:
        body += "\n"  # a trailing comment must not swallow the closing parenthesis
    members = "".join(re.escape(char) for char in sorted(chars))
    try:
        return re.compile(f"(?=[{members}])(?:{body})", pattern.flags)
    except re.error:
        return pattern
