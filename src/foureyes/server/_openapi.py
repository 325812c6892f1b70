"""What the app's OpenAPI document says beyond what each route declares.

A path parameter is one segment of the path: Starlette routes the decoded path, so a
``/`` in a value (``%2F`` on the wire) splits it and names another route, or none (a 404
or a redirect the operation never declares); an empty one leaves a ``//``; and ``.`` or
``..`` is a dot-segment, which clients remove from the path before sending it (RFC 3986,
5.2.4). Every text path parameter's schema says so: its ``pattern``
(:data:`SEGMENT_PATTERN`) takes one segment, without NUL, and no other.
"""

from __future__ import annotations

from typing import Any

from foureyes.wire.text import TEXT_PATTERN

__all__ = ["SEGMENT_PATTERN", "one_segment_parameters"]

SEGMENT_PATTERN = r"^(?:[^/.\u0000][^/\u0000]*|\.[^/.\u0000][^/\u0000]*|\.\.[^/\u0000]+)$"
"""The ``pattern`` of a text path parameter: :data:`~foureyes.wire.text.TEXT_PATTERN`,
not empty, without ``/``, and neither ``.`` nor ``..`` (no lookahead: every engine reads
it alike)."""


def one_segment_parameters(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with :data:`SEGMENT_PATTERN` on every text path parameter (in place).

    A parameter with a pattern of its own (hex digits, say) keeps it: that pattern is its
    route's to get right.
    """
    for item in document.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", ()):
                schema = parameter.get("schema", {})
                if parameter.get("in") == "path" and schema.get("pattern") == TEXT_PATTERN:
                    schema["pattern"] = SEGMENT_PATTERN
    return document
