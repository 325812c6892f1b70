"""The native session format: JSONL, one event per line, written by the session model itself.

The first line is a header, ``{"format":"foureyes-session","system":[...],"tools":[...],
"version":1}``; every further line is one event as
:meth:`~foureyes.review.session.Session.lines` writes it (canonical JSON: sorted keys,
no spaces, UTF-8). :func:`dumps` and :func:`loads` round-trip exactly: ``loads(dumps(s))
== s`` and ``dumps(loads(text)) == text`` for any text :func:`dumps` wrote. Blank lines
are ignored when reading. Hosts that record sessions as they happen append one line per
event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from foureyes.review.session import (
    NATIVE_FORMAT,
    NATIVE_VERSION,
    Event,
    FormatProblem,
    Session,
    SessionFormatError,
)

__all__ = ["FORMAT", "dumps", "is_native", "loads"]

FORMAT = "native"
"""The format's name in :class:`~foureyes.review.importers.SessionFormat` and errors."""

_EVENT: TypeAdapter[Event] = TypeAdapter(Event)
_HEADER_KEYS = {"format", "system", "tools", "version"}


def dumps(session: Session) -> str:
    """``session`` as native JSONL (each line ends with a newline)."""
    return session.to_jsonl()


def is_native(text: str) -> bool:
    """Whether ``text`` starts with a native header line."""
    first = text.lstrip().split("\n", 1)[0]
    try:
        header = json.loads(first)
    except ValueError:
        return False
    return isinstance(header, Mapping) and header.get("format") == NATIVE_FORMAT


def loads(text: str) -> Session:
    """The session a native JSONL text holds.

    Raises:
        SessionFormatError: a line is not JSON (``not_json``), the header is wrong
            (``wrong_shape``), a line is not a valid event (``invalid_event``) or the
            events break the session's structure (``broken_structure``).
    """
    lines = [(n, line) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]
    if not lines:
        raise SessionFormatError(FORMAT, FormatProblem.WRONG_SHAPE, "empty input: no header")
    system, tools = _header(lines[0][1])
    events: list[Event] = []
    for n, line in lines[1:]:
        try:
            events.append(_EVENT.validate_json(line))
        except ValidationError as exc:
            problem = FormatProblem.INVALID_EVENT
            if any(e["type"] == "json_invalid" for e in exc.errors()):
                problem = FormatProblem.NOT_JSON
            detail = exc.errors()[0]["msg"]
            raise SessionFormatError(FORMAT, problem, f"line {n}: {detail}") from None
    return Session(events=tuple(events), system=system, tools=tools)


def _header(line: str) -> tuple[tuple[str, ...], tuple[Mapping[str, Any], ...]]:
    try:
        header = json.loads(line)
    except ValueError as exc:
        raise SessionFormatError(FORMAT, FormatProblem.NOT_JSON, f"line 1: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != NATIVE_FORMAT:
        raise SessionFormatError(
            FORMAT, FormatProblem.WRONG_SHAPE, f'line 1: not a "{NATIVE_FORMAT}" header'
        )
    system, tools = header.get("system"), header.get("tools")
    if (
        set(header) != _HEADER_KEYS
        or header.get("version") != NATIVE_VERSION
        or not isinstance(system, list)
        or not all(isinstance(s, str) for s in system)
        or not isinstance(tools, list)
        or not all(isinstance(t, dict) for t in tools)
    ):
        detail = f"line 1: header must be exactly {sorted(_HEADER_KEYS)}, version {NATIVE_VERSION}"
        raise SessionFormatError(FORMAT, FormatProblem.WRONG_SHAPE, detail)
    return tuple(system), tuple(tools)
