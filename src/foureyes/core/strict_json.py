"""Strict JSON: the decoder every parser of untrusted JSON in foureyes uses.

Python's ``json`` module accepts things JSON does not (``NaN``, ``Infinity``) and settles
a repeated key silently by keeping the last value. For text written by a model or handed in
by a caller, either is a guess about what was meant, so both are refused here.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["NotStrictJson", "STRICT_DECODER", "loads_strict"]


class NotStrictJson(ValueError):
    """Valid to Python's decoder, but not JSON foureyes accepts (NaN, 1e400, duplicate keys)."""


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


STRICT_DECODER = json.JSONDecoder(
    parse_float=_finite_float, parse_constant=_reject_constant, object_pairs_hook=_unique_keys
)
"""A decoder refusing NaN/Infinity, non-finite numbers and duplicate keys; use ``raw_decode``
to read a value at an offset."""


def loads_strict(text: str | bytes) -> Any:
    """Decode one JSON document strictly (bytes must be UTF-8).

    Raises:
        ValueError: the bytes are not UTF-8 (``UnicodeDecodeError``), the text is not JSON
            (``json.JSONDecodeError``), or it is JSON that foureyes refuses
            (:class:`NotStrictJson`).
    """
    return STRICT_DECODER.decode(text.decode("utf-8") if isinstance(text, bytes) else text)
