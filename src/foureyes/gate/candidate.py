"""A candidate's tool calls, and the exact bytes a candidate's digest covers.

A candidate is its text and, for a draft a caller or its own model wrote, the tool calls
that come with it (OpenAI's format: an id, a function name, the arguments as a JSON
string). Both are the proposal: the Supervisor reviews both, its verdict names one digest
for both, and a released candidate delivers exactly the tool calls that were digested.

The candidate's bytes (:func:`candidate_bytes`):

- no tool calls: the text in UTF-8, exactly as given (so a text-only candidate's digest
  is the SHA-256 of its text, as for every Counselor draft);
- with tool calls: the text in UTF-8, then the single byte ``0xFF``, then the canonical
  JSON (:func:`foureyes.core.digest.canonical_json`: keys sorted, no whitespace, UTF-8)
  of the list of calls in their order, each ``{"arguments": <the arguments parsed>,
  "id": <id>, "name": <name>}``.

``0xFF`` never occurs in UTF-8, so no text alone has the bytes of a candidate with tool
calls, and the text ends at the first ``0xFF``. A ``null`` content is the empty text.
Arguments are parsed strictly (:func:`foureyes.core.strict_json.loads_strict`: no NaN,
no out-of-range numbers, no repeated keys) and delivered re-serialised canonically, so
the key order and whitespace a model happened to write change neither the digest nor
what is delivered; any change of a name, an id or a value changes the digest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from foureyes.core.digest import canonical_json, sha256_hex
from foureyes.core.errors import UsageError
from foureyes.core.fold import TOOL_NAME
from foureyes.core.strict_json import loads_strict

__all__ = [
    "GivenDraft",
    "TOOL_SEPARATOR",
    "ToolCall",
    "ToolCallProblem",
    "ToolCallRefused",
    "candidate_bytes",
    "candidate_bytes_of",
    "candidate_sha256",
    "tool_calls_json",
]

TOOL_SEPARATOR = b"\xff"
"""The byte between a candidate's text and its tool calls (never part of UTF-8 text)."""

_MAX_FIELD = 256


class ToolCallProblem(StrEnum):
    """Why a tool call cannot be part of a candidate."""

    ARGUMENTS_NOT_JSON = "arguments_not_json"
    """The arguments are not one strict JSON document (prose, truncation, NaN, a
    repeated key, a number out of range)."""
    BAD_NAME = "bad_name"
    """The function name is not one OpenAI accepts: 1 to 64 ASCII letters, digits, ``_``
    or ``-`` (:data:`foureyes.core.fold.TOOL_NAME`). So no name carries a space, a dot
    (``functions.x``), an invisible, full-width or Cyrillic look-alike character."""
    BAD_ID = "bad_id"
    """The call's id is empty, longer than 256 characters, or repeats another call's."""


class ToolCallRefused(UsageError):
    """Raised for a tool call that cannot be part of a candidate.

    Attributes:
        problem: why, as a :class:`ToolCallProblem`.
        index: the call's position in the draft.
    """

    def __init__(self, problem: ToolCallProblem, index: int, detail: str = "") -> None:
        self.problem = problem
        self.index = index
        super().__init__(f"tool call {index}: {problem.value}" + (f" ({detail})" if detail else ""))


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of a candidate, its arguments parsed (build with :meth:`parse`)."""

    id: str
    """The call's id, as the drafting model gave it."""
    name: str
    """The function called."""
    arguments: Any
    """The arguments, parsed from their JSON."""

    @classmethod
    def parse(cls, id: str, name: str, arguments: str, *, index: int = 0) -> ToolCall:
        """The call with ``arguments`` (a JSON string) parsed strictly.

        Raises:
            ToolCallRefused: the arguments are not strict JSON, the name is not a
                valid function name (:attr:`ToolCallProblem.BAD_NAME`), or the id is
                empty or longer than 256 characters.
        """
        if not TOOL_NAME.fullmatch(name):
            raise ToolCallRefused(ToolCallProblem.BAD_NAME, index)
        if not id or len(id) > _MAX_FIELD:
            raise ToolCallRefused(ToolCallProblem.BAD_ID, index)
        try:
            value = loads_strict(arguments)
        except (ValueError, RecursionError) as exc:
            raise ToolCallRefused(
                ToolCallProblem.ARGUMENTS_NOT_JSON, index, type(exc).__name__
            ) from None
        return cls(id=id, name=name, arguments=value)

    def as_json(self) -> dict[str, Any]:
        """The call as its digest covers it: ``{"arguments", "id", "name"}``."""
        return {"arguments": self.arguments, "id": self.id, "name": self.name}

    @property
    def arguments_json(self) -> str:
        """The arguments re-serialised canonically (what is delivered)."""
        return canonical_json(self.arguments).decode("utf-8")

    def openai(self) -> dict[str, Any]:
        """The call in OpenAI's format, as it is delivered."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments_json},
        }


def _unique_ids(calls: Sequence[ToolCall]) -> None:
    seen: set[str] = set()
    for index, call in enumerate(calls):
        if call.id in seen:
            raise ToolCallRefused(ToolCallProblem.BAD_ID, index, "repeated id")
        seen.add(call.id)


def tool_calls_json(tool_calls: Sequence[ToolCall]) -> str:
    """The canonical JSON of ``tool_calls`` that a digest covers; ``""`` when there are none."""
    if not tool_calls:
        return ""
    return canonical_json([call.as_json() for call in tool_calls]).decode("utf-8")


def candidate_bytes(text: str, tool_calls: Sequence[ToolCall] = ()) -> bytes:
    """The bytes a candidate's digest covers (see the module docstring)."""
    return candidate_bytes_of(text, tool_calls_json(tool_calls))


def candidate_bytes_of(text: str, tool_calls_json: str) -> bytes:
    """:func:`candidate_bytes` of a text and its calls' canonical JSON (``""``: none)."""
    raw = text.encode("utf-8")
    if not tool_calls_json:
        return raw
    return raw + TOOL_SEPARATOR + tool_calls_json.encode("utf-8")


def candidate_sha256(text: str, tool_calls: Sequence[ToolCall] = ()) -> str:
    """SHA-256 of :func:`candidate_bytes`, as 64 lowercase hex characters."""
    return sha256_hex(candidate_bytes(text, tool_calls))


@dataclass(frozen=True, slots=True)
class GivenDraft:
    """A draft the caller already has: its text and its tool calls (build with :meth:`of`)."""

    text: str
    """The text (``""`` for a draft of tool calls only)."""
    tool_calls: tuple[ToolCall, ...]
    """The tool calls, in order."""
    unusable: str | None = None
    """Why the draft cannot be judged whole (a streamed draft cut off, or a line of its
    stream that is no chunk), or ``None``: an unusable draft is never released, the gate
    falls back with ``draft_failed`` and records this (build with :meth:`cut`)."""

    @classmethod
    def cut(cls, why: str) -> GivenDraft:
        """A draft that arrived incomplete or broken, ``why`` saying how (no text, no calls)."""
        return cls("", (), unusable=why)

    @classmethod
    def of(cls, text: str | None, tool_calls: Sequence[ToolCall] = ()) -> GivenDraft:
        """A draft of ``text`` (``None``: none) and ``tool_calls``.

        Raises:
            ToolCallRefused: two calls share an id.
            UsageError: the draft has neither text nor tool calls.
        """
        if not text and not tool_calls:
            raise UsageError("a draft has text or tool calls")
        _unique_ids(tool_calls)
        return cls(text or "", tuple(tool_calls))

    @classmethod
    def of_openai(cls, text: str | None, tool_calls: Sequence[dict[str, Any]]) -> GivenDraft:
        """A draft from OpenAI's assistant message fields (``content``, ``tool_calls``).

        Each call is ``{"id", "type": "function", "function": {"name", "arguments"}}``.

        Raises:
            ToolCallRefused: a call is malformed or its arguments are not strict JSON.
            UsageError: the draft has neither text nor tool calls.
        """
        calls = []
        for index, raw in enumerate(tool_calls):
            function = raw.get("function")
            if raw.get("type", "function") != "function" or not isinstance(function, dict):
                raise ToolCallRefused(ToolCallProblem.BAD_NAME, index, "not a function call")
            name, arguments = function.get("name"), function.get("arguments")
            call_id = raw.get("id")
            if not isinstance(arguments, str):
                raise ToolCallRefused(ToolCallProblem.ARGUMENTS_NOT_JSON, index, "not a string")
            calls.append(
                ToolCall.parse(
                    call_id if isinstance(call_id, str) else "",
                    name if isinstance(name, str) else "",
                    arguments,
                    index=index,
                )
            )
        return cls.of(text, calls)

    @property
    def sha256(self) -> str:
        """The candidate's digest (:func:`candidate_sha256`)."""
        return candidate_sha256(self.text, self.tool_calls)

    def __repr__(self) -> str:
        names = [call.name for call in self.tool_calls]
        unusable = "" if self.unusable is None else f", unusable={self.unusable!r}"
        return f"GivenDraft(chars={len(self.text)}, tool_calls={names!r}{unusable})"
