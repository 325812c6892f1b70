r"""JSON both ways: the strict decoder of untrusted JSON, and the encoder of what is stored.

The decoder is the one every parser of untrusted JSON in foureyes uses; the encoder writes
the documents foureyes stores and the request bodies it sends.

Python's ``json`` module accepts things JSON does not (``NaN``, ``Infinity``) and settles
a repeated key silently by keeping the last value. For text written by a model or handed in
by a caller, either is a guess about what was meant, so both are refused here. So is a
string (a key or a value) holding an unpaired UTF-16 surrogate (``"\ud800"``): JSON's
grammar allows the escape, but it is not Unicode text, and no UTF-8 encoder (a digest, a
store, a model's request) can take it.

:func:`dumps` writes what ``json.dumps`` writes, as fast as orjson writes it where orjson
writes the same document (benchmarks/README.md, "Documents written by orjson").
"""

from __future__ import annotations

import enum
import json
import math
import re
import uuid
from collections.abc import Callable
from typing import Any

import orjson

__all__ = ["NotStrictJson", "STRICT_DECODER", "UnpairedSurrogate", "dumps", "loads_strict"]


class NotStrictJson(ValueError):
    """Valid to Python's decoder, but not JSON foureyes accepts.

    NaN, 1e400, a duplicate key, or a string holding an unpaired surrogate.
    """


class UnpairedSurrogate(NotStrictJson):
    """A string of the document (a key or a value) holds an unpaired UTF-16 surrogate.

    Attributes:
        code_point: the first such surrogate's code point (``0xD800`` to ``0xDFFF``).
    """

    def __init__(self, code_point: int) -> None:
        super().__init__(f"a string holds an unpaired surrogate (U+{code_point:04X})")
        self.code_point = code_point


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise NotStrictJson(f"number {literal[:20]} is out of range")
    return value


def _reject_constant(literal: str) -> Any:
    raise NotStrictJson(f"{literal} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise NotStrictJson(f"duplicate key {key[:40]!r}")
        obj[key] = value
    return obj


_SURROGATE = re.compile("[\ud800-\udfff]")
_MAYBE_SURROGATE = re.compile("[\ud800-\udfff]|\\\\u[dD][89a-fA-F]")
r"""What a document holding a surrogate must contain: one as it is, or its ``\u`` escape
(a pair's escapes too, so this only says where to look)."""


def _surrogate_in(value: Any) -> str | None:
    """The first unpaired surrogate in a string of the decoded ``value``, or ``None``.

    Keys and values alike, at any depth (iterative: no depth is too deep to walk).
    """
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        item = pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found is not None:
                return found.group()
        elif isinstance(item, dict):
            extend(item)
            extend(item.values())
        elif isinstance(item, list):
            extend(item)
    return None


class _StrictDecoder(json.JSONDecoder):
    def raw_decode(self, s: str, idx: int = 0) -> tuple[Any, int]:
        value, end = super().raw_decode(s, idx)
        if _MAYBE_SURROGATE.search(s, idx, end) is not None:
            surrogate = _surrogate_in(value)
            if surrogate is not None:
                raise UnpairedSurrogate(ord(surrogate))
        return value, end


STRICT_DECODER: json.JSONDecoder = _StrictDecoder(
    parse_float=_finite_float, parse_constant=_reject_constant, object_pairs_hook=_unique_keys
)
"""A decoder refusing NaN/Infinity, non-finite numbers, duplicate keys and strings (keys or
values) holding an unpaired surrogate; use ``raw_decode`` to read a value at an offset."""


def loads_strict(text: str | bytes) -> Any:
    """Decode one JSON document strictly (bytes must be UTF-8).

    Raises:
        ValueError: the bytes are not UTF-8 (``UnicodeDecodeError``), the text is not JSON
            (``json.JSONDecodeError``), or it is JSON that foureyes refuses
            (:class:`NotStrictJson`: NaN, a number out of range, a repeated key; its
            :class:`UnpairedSurrogate` for a string holding an unpaired surrogate).
    """
    return STRICT_DECODER.decode(text.decode("utf-8") if isinstance(text, bytes) else text)


_LEAVES = frozenset({str, int, bool, type(None)})
_COMPACT = (",", ":")
"""``json``'s separators when it writes: the spacing orjson writes."""
_MAX_ITEMS = 100_000
"""A document with more values than this besides strings, integers, booleans and nulls is
written by ``json`` (a cycle ends here too)."""
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
# Types orjson writes and ``json`` hands to ``default``: dataclasses and datetimes are passed
# through to ``default`` by the options above, enum members and UUIDs are caught by _same.
_OWN_TYPES = (dict, list, tuple, float, enum.Enum, uuid.UUID)


def _same(value: Any) -> bool:
    """Whether orjson writes the same document as ``json`` for ``value``, as far as types go.

    It does when every float is finite (orjson writes NaN as ``null``, where ``json``
    refuses it or writes ``NaN``) and every container is a plain dict, list or tuple (a
    subclass may be written differently), with no enum member or UUID (``json`` hands those
    to ``default``). What orjson refuses (big integers, keys that are not strings, text
    that is not valid UTF-8, deep nesting) it says itself.
    """
    stack = [value]
    pop, extend = stack.pop, stack.extend
    budget = _MAX_ITEMS
    while stack:
        item = pop()
        kind = type(item)
        if kind in _LEAVES:
            continue
        budget -= 1
        if budget < 0:
            return False
        if kind is dict:
            extend(item.values())
        elif kind is list or kind is tuple:
            extend(item)
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif isinstance(item, (str, int)):
            continue  # a subclass (a StrEnum or IntEnum member): both write its str or int
        elif isinstance(item, _OWN_TYPES):
            return False
    return True


def _checked(default: Callable[[Any], Any] | None) -> Callable[[Any], Any] | None:
    """``default``, refusing to hand orjson what it would write differently from ``json``."""
    if default is None:
        return None

    def checked(item: Any) -> Any:
        written = default(item)
        if not _same(written):
            raise TypeError("written by json")
        return written

    return checked


def dumps(
    value: Any,
    *,
    allow_nan: bool = True,
    ensure_ascii: bool = True,
    default: Callable[[Any], Any] | None = None,
) -> str:
    """``value`` as JSON: the document ``json.dumps(value, ...)`` writes with these arguments.

    orjson writes it when it writes the same document (see :func:`_same`), about ten times
    faster; otherwise ``json.dumps`` does, so what it refuses is refused as it refuses it
    (``TypeError``, ``ValueError``). Both write without spaces (``json`` with separators
    ``,`` and ``:``); the text may differ from ``json.dumps``' in escapes (orjson writes
    non-ASCII characters as they are, whatever ``ensure_ascii``) and in how a float is
    spelled, never in the document it reads back as.
    """
    if _same(value):
        try:
            return orjson.dumps(value, default=_checked(default), option=_ORJSON_OPTIONS).decode()
        except orjson.JSONEncodeError:
            pass  # what orjson refuses, json may write (or refuse in its own words)
    return json.dumps(
        value, allow_nan=allow_nan, ensure_ascii=ensure_ascii, default=default, separators=_COMPACT
    )
