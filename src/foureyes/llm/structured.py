"""Structured output: the one parser every model answer with a schema goes through.

The contract (docs/design.md 4, invariant 3): an answer that did not complete normally
(:func:`finish_failure`, the one rule every model answer is held to) is refused; from
one that did, take the one JSON object in the answer (an answer holding two objects, or
a broken one before a whole one, says two things and is refused), validate it strictly
against a pydantic model that forbids extra keys, accept enum values only from their
whitelist, clamp numbers only where a field is declared :class:`Clamped`, retry once, and
otherwise fail with a typed :class:`ContractError`.
Nothing here ever fills in, coerces or guesses a value.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from collections.abc import Awaitable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationError
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from foureyes.core.errors import ContractError, UsageError
from foureyes.core.strict_json import STRICT_DECODER, NotStrictJson
from foureyes.llm.provider import ChatMessage, ChatRequest, ChatResult, JsonSchemaFormat

__all__ = [
    "ChatCall",
    "Clamped",
    "ParseFailure",
    "StructuredFailure",
    "StructuredSuccess",
    "check_finished",
    "complete_structured",
    "finish_failure",
    "json_schema_format",
    "parse_structured",
]

M = TypeVar("M", bound=BaseModel)


class ChatCall(Protocol):
    """One model call: the caller's provider wrapped with its deadline, budget, ledger and trace.

    Any ``async def call(request: ChatRequest) -> ChatResult`` satisfies it.
    """

    def __call__(self, request: ChatRequest, /) -> Awaitable[ChatResult]:
        """Complete ``request``; failures of the route are raised, not returned."""
        ...


class ParseFailure(StrEnum):
    """Why a model answer broke its contract; the ``reason`` of the :class:`ContractError`."""

    EMPTY = "empty"
    """The answer was empty or only whitespace."""
    TRUNCATED = "truncated"
    """The endpoint cut the answer off at its token limit (``finish_reason == "length"``)."""
    CONTENT_FILTERED = "content_filtered"
    """The endpoint's content filter stopped or withheld the answer
    (``finish_reason == "content_filter"``)."""
    UNEXPECTED_TOOL_CALLS = "unexpected_tool_calls"
    """The answer called tools (or finished with ``tool_calls``) where no tool call was asked."""
    UNFINISHED = "unfinished"
    """The answer did not end with a normal stop: no finish reason at all, or one that is
    neither ``stop`` nor (when tools were asked) ``tool_calls``."""
    NO_JSON = "no_json"
    """The answer holds no ``{`` at all: prose only."""
    NOT_OBJECT = "not_object"
    """The whole answer is JSON, but an array, string, number or literal, not an object."""
    INVALID_JSON = "invalid_json"
    """Braces appear, but no complete, valid JSON object starts at any of them: an object
    that never closes (truncated), malformed syntax, ``NaN``/``Infinity``, duplicate keys."""
    ENUM_INVALID = "enum_invalid"
    """A field holds a value outside its whitelist of allowed values."""
    EXTRA_FIELDS = "extra_fields"
    """The object has keys the schema does not declare."""
    SCHEMA_INVALID = "schema_invalid"
    """The object breaks the schema otherwise: a missing field, a wrong type, a number out
    of a range that is not declared clampable, a failed model check."""
    SEVERAL_OBJECTS = "several_objects"
    """The answer holds more than one JSON object (an ``approve`` and then a ``reject``),
    or an object that breaks off before a whole one: it says two things, and which one the
    model meant is a guess."""
    EXTRA_TEXT = "extra_text"
    """Where the whole answer must be the object (``parse_structured(..., whole=True)``):
    something besides whitespace and one code fence surrounds it, such as prose or a
    second JSON value."""


_RETRY_PROBLEMS = {
    ParseFailure.EMPTY: "it was empty",
    ParseFailure.TRUNCATED: "it was cut off at the length limit, so keep it shorter",
    ParseFailure.CONTENT_FILTERED: "it was stopped by the content filter",
    ParseFailure.UNEXPECTED_TOOL_CALLS: "it called tools, which this answer must not do",
    ParseFailure.UNFINISHED: "it did not finish normally",
    ParseFailure.NO_JSON: "it contained no JSON object",
    ParseFailure.NOT_OBJECT: "it was JSON, but not a single JSON object",
    ParseFailure.INVALID_JSON: "it did not contain a complete, valid JSON object",
    ParseFailure.ENUM_INVALID: "a field used a value outside its allowed values",
    ParseFailure.EXTRA_FIELDS: "it had keys that the schema does not allow",
    ParseFailure.SCHEMA_INVALID: "it did not match the schema (a field was missing or mistyped)",
    ParseFailure.SEVERAL_OBJECTS: "it contained more than one JSON object",
    ParseFailure.EXTRA_TEXT: "it had text besides the one JSON object",
}
# The note is fixed per failure and never quotes the error detail: field paths can hold
# keys the model wrote, and model text in a prompt is data, not instructions (invariant 7).
_RETRY_NOTE = (
    "Your previous answer could not be used: {problem}. Answer again with only one JSON "
    "object that follows the requested schema exactly: no other text, no code fence, no "
    "extra keys, and only the allowed values."
)

_MAX_DETAIL_ERRORS = 5
_MAX_LOC_PART = 40


@dataclass(frozen=True, slots=True)
class Clamped:
    """Field annotation: a finite number that is clamped into ``[lo, hi]``.

    Use it as ``Annotated[float, Clamped(0, 1)]`` for scores a model reports: ``1.2``
    becomes ``1.0``, ``-0.1`` becomes ``0.0``. It never coerces: booleans, strings, ``NaN``
    and infinities are rejected, whatever the validation mode. The JSON schema shows the
    range, so a prompt asks for exactly what the parser keeps.

    Raises:
        UsageError: when the bounds are not finite with ``lo <= hi``, or the annotated
            type is not ``float``.
    """

    lo: float
    """Lower bound (inclusive)."""
    hi: float
    """Upper bound (inclusive)."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi) and self.lo <= self.hi):
            raise UsageError(f"Clamped needs finite bounds with lo <= hi, got {self!r}")

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        if source is not float:
            raise UsageError(f"Clamped applies to float fields, not {source!r}")
        return core_schema.no_info_after_validator_function(
            self._clamp, core_schema.float_schema(strict=True, allow_inf_nan=False)
        )

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema.update(minimum=self.lo, maximum=self.hi)
        return json_schema

    def _clamp(self, value: float) -> float:
        return float(min(max(value, self.lo), self.hi))


_FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*)```", re.DOTALL | re.IGNORECASE)
"""One Markdown code fence around a whole answer: ```` ``` ```` or ```` ```json ````, a line
break, the body, the closing ```` ``` ````."""


def _unfenced(text: str) -> str:
    """``text`` without one surrounding Markdown code fence, if it has one."""
    fenced = _FENCE.fullmatch(text)
    return fenced.group(1).strip() if fenced else text


def _whole_value(text: str) -> tuple[bool, Any]:
    """Whether ``text`` is exactly one JSON value, and that value."""
    try:
        value, end = STRICT_DECODER.raw_decode(text)
    except (ValueError, RecursionError):
        return False, None
    return not text[end:].strip(), value


_OBJECT_START = re.compile(r'\{\s*"')
"""Where an object with a key begins: a broken one is an answer, not prose's brace."""


def _object_at(text: str, start: int, schema: str) -> int | json.JSONDecodeError:
    """The end of the JSON object starting at ``start``, or why none does.

    Raises:
        ContractError: ``invalid_json`` for an object that is not strict JSON (NaN, a
            repeated key, an unpaired surrogate) or is nested too deeply.
    """
    try:
        return STRICT_DECODER.raw_decode(text, start)[1]
    except json.JSONDecodeError as exc:
        return exc
    except NotStrictJson as exc:
        raise ContractError(schema, ParseFailure.INVALID_JSON, str(exc)) from None
    except RecursionError:
        raise ContractError(schema, ParseFailure.INVALID_JSON, "nested too deeply") from None


def _first_object(text: str, schema: str) -> str:
    """The source text of the one complete JSON object in ``text``.

    A brace that opens no object (``{name}`` in prose) is skipped. An object with a key
    that breaks off before the object that parses, or a second object after it, makes
    the answer say two things: ``several_objects``.

    Raises:
        ContractError: ``empty``, ``not_object``, ``no_json``, ``invalid_json`` or
            ``several_objects``.
    """
    stripped = text.strip()
    if not stripped:
        raise ContractError(schema, ParseFailure.EMPTY)
    whole, value = _whole_value(_unfenced(stripped))
    if whole and not isinstance(value, dict):
        raise ContractError(schema, ParseFailure.NOT_OBJECT, f"got a JSON {type(value).__name__}")
    start = text.find("{")
    if start < 0:
        raise ContractError(schema, ParseFailure.NO_JSON)
    first_error = ""
    broken_at: int | None = None
    while start >= 0:
        end = _object_at(text, start, schema)
        if isinstance(end, json.JSONDecodeError):
            first_error = first_error or f"{end.msg} at offset {end.pos}"
            if broken_at is None and _OBJECT_START.match(text, start):
                broken_at = start
            # A brace inside an object that began earlier and then broke is never a
            # candidate: a truncated answer must not yield one of its inner objects.
            start = text.find("{", max(end.pos, start + 1))
            continue
        if broken_at is not None:
            detail = f"an object broken off at offset {broken_at} before the one at {start}"
            raise ContractError(schema, ParseFailure.SEVERAL_OBJECTS, detail)
        _no_second_object(text, end, schema)
        return text[start:end]
    raise ContractError(schema, ParseFailure.INVALID_JSON, first_error)


def _no_second_object(text: str, after: int, schema: str) -> None:
    """Raise ``several_objects`` if a JSON object starts anywhere in ``text[after:]``."""
    start = text.find("{", after)
    while start >= 0:
        try:
            end = _object_at(text, start, schema)
        except ContractError:
            end = start  # an object, if not a strict one: a second thing said
        if not isinstance(end, json.JSONDecodeError):
            detail = f"a second JSON object at offset {start}"
            raise ContractError(schema, ParseFailure.SEVERAL_OBJECTS, detail)
        start = text.find("{", max(end.pos, start + 1))


def _only_object(text: str, schema: str) -> str:
    """The source text of ``text`` when it is one JSON object, in at most one code fence.

    Raises:
        ContractError: as :func:`_first_object`, or ``extra_text`` when anything but
            whitespace surrounds the object (prose, a second value).
    """
    body = _unfenced(text.strip())
    source = _first_object(body, schema)
    if source != body:
        detail = f"{len(body) - len(source)} characters besides the object"
        raise ContractError(schema, ParseFailure.EXTRA_TEXT, detail)
    return source


def _failure_of(err: ValidationError) -> ParseFailure:
    types = {e["type"] for e in err.errors()}
    if "json_invalid" in types:
        return ParseFailure.INVALID_JSON
    if types & {"enum", "literal_error"}:
        return ParseFailure.ENUM_INVALID
    if "extra_forbidden" in types:
        return ParseFailure.EXTRA_FIELDS
    return ParseFailure.SCHEMA_INVALID


def _describe(err: ValidationError) -> str:
    errors = err.errors(include_input=False, include_url=False)
    parts = []
    for e in errors[:_MAX_DETAIL_ERRORS]:
        where = ".".join(str(p)[:_MAX_LOC_PART] for p in e["loc"]) or "(object)"
        parts.append(f"{where}: {e['msg']}")
    if len(errors) > _MAX_DETAIL_ERRORS:
        parts.append(f"(+{len(errors) - _MAX_DETAIL_ERRORS} more)")
    return "; ".join(parts)


@functools.cache
def _closed_json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of ``schema``, checked to forbid extra keys at every level."""
    json_schema = schema.model_json_schema()
    pending: list[Any] = [json_schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if "properties" in node and node.get("additionalProperties") is not False:
                raise UsageError(
                    f"{schema.__name__} must forbid extra keys at every level "
                    f"(model_config extra='forbid'); {node.get('title', 'an object')} does not"
                )
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return json_schema


def parse_structured(text: str, schema: type[M], *, whole: bool = False) -> M:
    """Parse a model's answer into ``schema``, strictly.

    The one complete JSON object in ``text`` is taken; prose before and after it and a
    Markdown code fence around it are ignored, a second object (or an object that breaks
    off before the one that parses) is ``several_objects``. With ``whole`` the
    answer must be that object and nothing else: whitespace and one code fence
    (```` ``` ```` or ```` ```json ````) around it are allowed, and any other text or a
    second value is ``extra_text``. It is validated in
    strict mode: no string-to-number or number-to-bool coercion, enum values only from
    their whitelist, no extra keys, every required field present. Numbers are clamped
    only in fields annotated with :class:`Clamped`.

    Args:
        text: the model's visible answer.
        schema: a pydantic model whose ``model_config`` (and every nested model's) sets
            ``extra="forbid"``.
        whole: whether the whole answer must be the one object.

    Returns:
        The validated instance.

    Raises:
        ContractError: the answer breaks the contract; ``reason`` is a :class:`ParseFailure`
            value and ``detail`` names the fields at fault.
        UsageError: ``schema`` allows extra keys somewhere.
    """
    _closed_json_schema(schema)
    find = _only_object if whole else _first_object
    source = find(text, schema.__name__)
    try:
        return schema.model_validate_json(source, strict=True)
    except ValidationError as exc:
        raise ContractError(schema.__name__, _failure_of(exc), _describe(exc)) from exc


def json_schema_format(schema: type[BaseModel], *, strict: bool = False) -> JsonSchemaFormat:
    """The ``response_format`` asking an endpoint for ``schema``: the one the parser enforces.

    Args:
        schema: a pydantic model that forbids extra keys at every level.
        strict: ask the endpoint to enforce the schema itself (not all can); answers are
            parsed with :func:`parse_structured` either way.

    Raises:
        UsageError: ``schema`` allows extra keys somewhere.
    """
    name = re.sub(r"[^A-Za-z0-9_-]", "_", schema.__name__)[:64]
    # A copy, so no caller can alter the cached schema the parser checks against.
    json_schema = copy.deepcopy(_closed_json_schema(schema))
    return JsonSchemaFormat(name=name, schema=json_schema, strict=strict)


@dataclass(frozen=True, slots=True)
class StructuredSuccess(Generic[M]):
    """A structured call whose answer met its contract."""

    value: M
    """The validated value."""
    calls: tuple[ChatResult, ...]
    """Every call made, in order; the last one gave ``value``."""
    ok: Literal[True] = field(default=True, init=False)
    """Discriminator: always ``True``."""

    @property
    def text(self) -> str:
        """The raw answer ``value`` was parsed from."""
        return self.calls[-1].text

    @property
    def attempts(self) -> int:
        """How many calls it took (1, or more after retries)."""
        return len(self.calls)


@dataclass(frozen=True, slots=True)
class StructuredFailure:
    """A structured call whose every attempt broke its contract. There is no value."""

    error: ContractError
    """The failure of the last attempt."""
    calls: tuple[ChatResult, ...]
    """Every call made, in order."""
    ok: Literal[False] = field(default=False, init=False)
    """Discriminator: always ``False``."""

    @property
    def reason(self) -> ParseFailure:
        """Why the last attempt failed."""
        return ParseFailure(self.error.reason)

    @property
    def attempts(self) -> int:
        """How many calls were made."""
        return len(self.calls)

    @property
    def finish_reason(self) -> str | None:
        """The finish reason the endpoint reported for the last attempt."""
        return self.calls[-1].finish_reason if self.calls else None


def finish_failure(result: ChatResult, *, tools_asked: bool = False) -> ParseFailure | None:
    """Why ``result`` did not complete normally, or ``None`` when it did: the one rule.

    A normal completion finishes with ``stop``, or, only when the caller asked for tool
    calls, with ``tool_calls``. Anything else means the text may not be the whole answer
    and is never read as one, however well it parses: what a cut-off or filtered rest
    would have said (a correction, a second object, a warning) is unknown (invariant 4).
    A missing finish reason is not a normal stop either: the offline engine, the
    simulator and the OpenAI-compatible servers we target all report one for a complete
    answer, and without it a complete answer cannot be told from one that was cut (as a
    stream that ends without a finish reason is).

    Args:
        result: the call's result.
        tools_asked: whether a tool call is an answer the caller accepts. Off for every
            structured call, draft and review, which must answer in text.

    Returns:
        ``TRUNCATED`` for ``length``, ``CONTENT_FILTERED`` for ``content_filter``,
        ``UNEXPECTED_TOOL_CALLS`` for tool calls (or ``tool_calls``) nobody asked for,
        ``UNFINISHED`` for a missing or any other finish reason; ``None`` otherwise.
    """
    finish = result.finish_reason
    if finish == "length":
        return ParseFailure.TRUNCATED
    if finish == "content_filter":
        return ParseFailure.CONTENT_FILTERED
    if not tools_asked and (result.tool_calls or finish == "tool_calls"):
        return ParseFailure.UNEXPECTED_TOOL_CALLS
    if finish == "stop" or (finish == "tool_calls" and result.tool_calls):
        return None
    return ParseFailure.UNFINISHED


def check_finished(result: ChatResult, schema: str, *, tools_asked: bool = False) -> None:
    """Raise unless ``result`` completed normally (:func:`finish_failure`).

    Args:
        result: the call's result.
        schema: the contract's name, for the error.
        tools_asked: whether a tool call is an answer the caller accepts.

    Raises:
        ContractError: ``reason`` is the :class:`ParseFailure`, ``detail`` names the
            finish reason the endpoint reported (``None`` when it reported none).
    """
    failure = finish_failure(result, tools_asked=tools_asked)
    if failure is not None:
        detail = f"finish_reason is {result.finish_reason!r}"
        if result.tool_calls:
            detail += f", {len(result.tool_calls)} tool call(s)"
        raise ContractError(schema, failure, detail)


def _parse_result(result: ChatResult, schema: type[M]) -> M:
    check_finished(result, schema.__name__)
    return parse_structured(result.text, schema)


def _retry_request(request: ChatRequest, bad: ChatResult, error: ContractError) -> ChatRequest:
    turns = list(request.messages)
    if bad.text:
        turns.append(ChatMessage(role="assistant", content=bad.text))
    problem = _RETRY_PROBLEMS[ParseFailure(error.reason)]
    turns.append(ChatMessage.user(_RETRY_NOTE.format(problem=problem)))
    return request.model_copy(update={"messages": tuple(turns)})


async def complete_structured(
    call: ChatCall, request: ChatRequest, schema: type[M], *, retries: int = 1
) -> StructuredSuccess[M] | StructuredFailure:
    """Call a model and parse its answer into ``schema``, retrying a broken answer.

    An answer that did not complete normally (:func:`finish_failure`: cut off at the
    token limit, stopped by a content filter, calling tools, no finish reason), or one
    :func:`parse_structured` rejects, is retried: the retry repeats ``request`` with the
    bad answer as an assistant turn and a short user note saying what was wrong. After
    ``retries`` retries the result is a :class:`StructuredFailure`; no value is ever guessed.

    Args:
        call: makes one model call.
        request: the request, usually with ``response_format=json_schema_format(schema)``.
        schema: the pydantic model to parse into.
        retries: how many times to retry a broken answer (one by default).

    Returns:
        :class:`StructuredSuccess` or :class:`StructuredFailure`, with every call made;
        tell them apart by ``ok`` (or ``isinstance``).

    Raises:
        RouteError: whatever ``call`` raises (timeouts, HTTP errors, ...) propagates
            untouched, as do budget and deadline errors; the caller maps them to its
            reason codes. Only contract failures are caught here.
        UsageError: ``retries`` is negative, or ``schema`` allows extra keys.
    """
    if retries < 0:
        raise UsageError(f"retries must be zero or more, got {retries}")
    _closed_json_schema(schema)
    calls: list[ChatResult] = []
    attempt = request
    while True:
        result = await call(attempt)
        calls.append(result)
        try:
            value = _parse_result(result, schema)
        except ContractError as error:
            if len(calls) > retries:
                return StructuredFailure(error=error, calls=tuple(calls))
            attempt = _retry_request(request, result, error)
            continue
        return StructuredSuccess(value=value, calls=tuple(calls))
