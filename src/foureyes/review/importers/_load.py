"""Format detection and the entry points that dispatch to one importer per format."""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from foureyes.review.importers import native, openai_chat, openhands, swe_agent, vcr
from foureyes.review.session import FormatProblem, Session, SessionFormatError

__all__ = ["SessionFormat", "detect_format", "load_session", "parse_session"]


class SessionFormat(StrEnum):
    """The session formats foureyes reads (the values of ``foureyes review --format``)."""

    NATIVE = "native"
    """foureyes' own JSONL (:mod:`foureyes.review.importers.native`)."""
    OPENAI_CHAT = "openai-chat"
    """An OpenAI chat-format message list or request body."""
    SWE_AGENT = "swe-agent"
    """A SWE-agent ``.traj`` file, old or new format."""
    OPENHANDS = "openhands"
    """An OpenHands trajectory (a JSON list of events)."""
    VCR = vcr.FORMAT
    """A VCR cassette (``.yaml``) of chat-completions calls: the last call's messages and
    reply (:mod:`foureyes.review.importers.vcr`)."""


_IMPORTERS = {
    SessionFormat.OPENAI_CHAT: openai_chat.from_json,
    SessionFormat.SWE_AGENT: swe_agent.from_json,
    SessionFormat.OPENHANDS: openhands.from_json,
}


def load_session(path: str | Path, format: SessionFormat | str | None = None) -> Session:
    """Read the session in the file at ``path``.

    Args:
        path: the file (UTF-8).
        format: the format, or ``None`` to detect it.

    Raises:
        OSError: the file cannot be read.
        SessionFormatError: the file is not a session in the (named or detected) format.
    """
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        detail = f"not UTF-8 text: {exc.reason} at byte {exc.start}"
        raise SessionFormatError("session", FormatProblem.NOT_JSON, detail) from None
    return parse_session(text, format)


def parse_session(text: str, format: SessionFormat | str | None = None) -> Session:
    """Read the session in ``text``, in ``format`` or the detected one.

    Raises:
        SessionFormatError: ``text`` is not a session in that format; ``format`` names
            no known format (``unknown_format``).
    """
    chosen = _format(format) if format is not None else None
    if chosen is SessionFormat.NATIVE or (chosen is None and native.is_native(text)):
        return native.loads(text)
    if chosen is SessionFormat.VCR or (chosen is None and vcr.is_cassette(text)):
        return _validated(SessionFormat.VCR, vcr.from_text, text)
    value = _json(text, (chosen or "session").__str__())
    chosen = chosen or detect_format(value)
    if chosen is SessionFormat.NATIVE:
        return native.loads(text)
    return _validated(chosen, _IMPORTERS[chosen], value)


def _validated(chosen: SessionFormat, importer: Callable[[Any], Session], value: Any) -> Session:
    try:
        return importer(value)
    except ValidationError as exc:
        # A field the format allows but the session model does not (an empty call id).
        detail = f"{exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}"
        raise SessionFormatError(chosen.value, FormatProblem.WRONG_SHAPE, detail) from None


def detect_format(value: Any) -> SessionFormat:
    """The format of a decoded JSON value.

    Raises:
        SessionFormatError: it matches no format (``unknown_format``).
    """
    if isinstance(value, dict):
        if "trajectory" in value or ("history" in value and "info" in value):
            return SessionFormat.SWE_AGENT
        if isinstance(value.get("messages"), list):
            return SessionFormat.OPENAI_CHAT
    if isinstance(value, list):
        first = value[0] if value else {}
        if not value or (isinstance(first, dict) and "role" in first):
            return SessionFormat.OPENAI_CHAT
        if (
            isinstance(first, dict)
            and "source" in first
            and ("action" in first or "observation" in first)
        ):
            return SessionFormat.OPENHANDS
    detail = "expected native JSONL, an OpenAI chat list, a SWE-agent .traj or OpenHands events"
    raise SessionFormatError("session", FormatProblem.UNKNOWN_FORMAT, detail)


def _format(name: SessionFormat | str) -> SessionFormat:
    try:
        return SessionFormat(name)
    except ValueError:
        known = ", ".join(f.value for f in SessionFormat)
        detail = f"unknown format {name!r}; known: {known}"
        raise SessionFormatError("session", FormatProblem.UNKNOWN_FORMAT, detail) from None


def _json(text: str, format_name: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise SessionFormatError(format_name, FormatProblem.NOT_JSON, str(exc)) from None
