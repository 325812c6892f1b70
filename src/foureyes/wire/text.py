r"""Text a request may carry, checked where requests are validated.

JSON can spell strings that no store or model can take: ``"\ud83d"`` is an unpaired
UTF-16 surrogate, which is not Unicode text and cannot be encoded as UTF-8, and
``"\u0000"`` (NUL) is refused by PostgreSQL in text and JSON columns. Retrying such a
request can never succeed, so it is bad input: every text field of a request body, query
or path has one of the types here, and such a value is a 422 naming the field (type
``invalid_text``), before any handler, store or model sees it.

- :data:`Text`: a text field (ids, filters, names, settings).
- :data:`MessageText`: text a person wrote to be triaged. When it is refused, the error
  handler still screens a repaired copy (:func:`repair_text`) with L0, and a message
  that L0 escalates gets the crisis resources in the 422 (:func:`crisis_resources`).
- :data:`JsonObject`: a free-form JSON object (a review session's messages and tools);
  every string in it, keys included, is checked and the error names its path.
- :data:`JsonText`: a :data:`Text` holding a JSON document (a tool call's ``arguments``),
  refused the same way when a string the document spells holds an unpaired surrogate
  (``"\\ud800"`` is ASCII, but decodes to one); JSON that is otherwise not strict is left
  to the handler, which names the call.

A request refused for invalid text still has its people's words screened: besides the
refused message texts, the server screens the user messages of a gateway or assessment
body (the readable ones too) with L0 (:func:`foureyes.server.text.screen_refused_text`,
through :func:`crisis_resources`).

The OpenAPI document says so at the depth of these types, so that a request conforming to
``/openapi.json`` cannot carry a NUL: every string a :data:`TEXT_CHECK` (or
:data:`MESSAGE_TEXT_CHECK`) covers has the ``pattern`` :data:`TEXT_PATTERN` (under
``allOf`` beside a field's own pattern), and a free-form object's keys have it too while
its members are :data:`TextJsonValue`, a JSON value whose strings have it at any depth.
An unpaired surrogate needs no pattern: it is not Unicode text, so no JSON text a schema
describes holds one (I-JSON, RFC 7493, forbids it); the 422 descriptions name it.
Validation is the check's alone: the schema only describes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, Union

from pydantic import (
    AfterValidator,
    BeforeValidator,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    TypeAdapter,
    ValidationError,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, InitErrorDetails, PydanticCustomError
from typing_extensions import TypeAliasType

from foureyes.core.locale import Locale, detect_locale
from foureyes.core.strict_json import UnpairedSurrogate, loads_strict
from foureyes.risk.l0 import L0Gate
from foureyes.risk.resources import ResourceRegistry, render_resources

__all__ = [
    "INVALID_TEXT",
    "JsonObject",
    "JsonText",
    "MESSAGE_TEXT_CHECK",
    "MessageText",
    "TEXT_CHECK",
    "TEXT_PATTERN",
    "Text",
    "TextJsonValue",
    "crisis_resources",
    "repair_text",
    "text_members",
    "text_problem",
]

INVALID_TEXT = "invalid_text"
"""The pydantic error type of a refused text; its context says whether to ``screen`` it."""

TEXT_PATTERN = r"^[^\u0000]*$"
"""The JSON-schema ``pattern`` (ECMA-262, as Python's ``re`` reads it too) of every text:
no NUL. It only describes :func:`text_problem`'s rule; requests are never matched by it."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_NUL = "\x00"


def text_problem(value: str) -> str | None:
    """Why ``value`` is not text a store or model can take, or ``None`` when it is.

    The reason names the character's code point and position, never the text around it.
    """
    if not value.isascii():
        surrogate = _SURROGATE.search(value)
        if surrogate is not None:
            code = ord(surrogate.group())
            return f"an unpaired surrogate (U+{code:04X}) at position {surrogate.start()}"
    position = value.find(_NUL)
    if position >= 0:
        return f"a NUL character at position {position}"
    return None


def repair_text(value: str) -> str:
    """``value`` with unpaired surrogates replaced by U+FFFD and NUL characters removed.

    Only for screening a refused text: the repaired copy is never stored or answered.
    """
    return _SURROGATE.sub("\ufffd", value).replace(_NUL, "")


def _walk(value: Any, path: tuple[int | str, ...], screen: bool) -> Iterable[InitErrorDetails]:
    if isinstance(value, str):
        problem = text_problem(value)
        if problem is not None:
            error = PydanticCustomError(
                INVALID_TEXT,
                "holds {problem}, which is not valid text",
                {"problem": problem, "screen": screen},
            )
            yield InitErrorDetails(type=error, loc=path, input=value)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(key, (*path, "<key>"), False)
            yield from _walk(item, (*path, str(key)), screen)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk(item, (*path, index), screen)


def _checker(*, screen: bool) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        # Runs on the raw value before the field's own validation, so a refused text
        # gets this reason rather than a constraint's or a union branch's, and the error
        # names the path inside the field (a text part's index, a JSON member).
        errors = list(_walk(value, (), screen))
        if errors:
            raise ValidationError.from_exception_data("text", errors)
        return value

    return check


@dataclass(frozen=True, slots=True)
class _Described:
    """Only for the document: what :func:`_describe` says of a type checked elsewhere."""

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return _describe(handler(core_schema), handler)


if TYPE_CHECKING:  # mypy reads no recursive TypeAliasType; pydantic.JsonValue does the same
    TextJsonValue: TypeAlias = Union[
        str, int, float, bool, None, list["TextJsonValue"], dict[str, "TextJsonValue"]
    ]
else:
    TextJsonValue = TypeAliasType(
        "TextJsonValue",
        Annotated[
            Union[str, int, float, bool, None, list["TextJsonValue"], dict[str, "TextJsonValue"]],
            _Described(),
        ],
    )
"""A JSON value whose strings, object keys included, at any depth, are text: only for the
document (``#/components/schemas/TextJsonValue``), where a free-form object's members are
these. It validates nothing: :data:`TEXT_CHECK` checks free-form objects."""
_TEXT_JSON_VALUE_SCHEMA = TypeAdapter(TextJsonValue).core_schema


def _describe(schema: JsonSchemaValue, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
    """``schema`` with :data:`TEXT_PATTERN` on every string and free-form object it describes.

    A ``$ref`` is left as it is: the model or value it names describes its own fields.
    """
    if not isinstance(schema, dict) or "$ref" in schema:
        return schema
    described = dict(schema)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(schema.get(key), list):
            described[key] = [_describe(branch, handler) for branch in schema[key]]
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            described[key] = _describe(schema[key], handler)
    if isinstance(schema.get("properties"), dict):
        described["properties"] = {
            name: _describe(value, handler) for name, value in schema["properties"].items()
        }
    kind = schema.get("type")
    if kind == "string":
        _add_pattern(described)
    elif kind == "object" and "properties" not in schema:  # free-form: keys are text too
        described["propertyNames"] = _add_pattern(dict(schema.get("propertyNames", {})))
        if schema.get("additionalProperties", True) is True:
            described["additionalProperties"] = handler(_TEXT_JSON_VALUE_SCHEMA)
    return described


def text_members(schema: JsonSchemaValue, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
    """A model's JSON ``schema`` whose members, ignored ones included, are text at any depth.

    For a model used only inside a field :data:`TEXT_CHECK` covers, which checks every key
    and value of the raw object: call it from the model's ``__get_pydantic_json_schema__``.
    """
    target = handler.resolve_ref_schema(schema)
    target["propertyNames"] = _add_pattern(dict(target.get("propertyNames", {})))
    if target.get("additionalProperties", True) is True:
        target["additionalProperties"] = handler(_TEXT_JSON_VALUE_SCHEMA)
    return schema


def _add_pattern(schema: dict[str, Any]) -> dict[str, Any]:
    pattern = schema.get("pattern")
    if pattern is None:
        schema["pattern"] = TEXT_PATTERN
    elif pattern != TEXT_PATTERN and {"pattern": TEXT_PATTERN} not in schema.get("allOf", []):
        # A field's own pattern stays as it is; the document requires both.
        schema["allOf"] = [*schema.get("allOf", []), {"pattern": TEXT_PATTERN}]
    return schema


@dataclass(frozen=True, slots=True)
class _TextCheck:
    """A ``BeforeValidator`` that says what it refuses in the JSON schema (:func:`_describe`)."""

    validator: BeforeValidator

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return self.validator.__get_pydantic_core_schema__(source, handler)

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return _describe(handler(core_schema), handler)


TEXT_CHECK = _TextCheck(BeforeValidator(_checker(screen=False)))
"""The check of :data:`Text`: every string in the raw value (at any depth) is text.

Put it on a field whose type is a union or a container, so the check runs before any
branch is tried. In the JSON schema, every string it covers has :data:`TEXT_PATTERN`."""
MESSAGE_TEXT_CHECK = _TextCheck(BeforeValidator(_checker(screen=True)))
"""The check of :data:`MessageText`, for a field holding a message's text or its parts."""

Text = Annotated[str, TEXT_CHECK]
"""A string without unpaired surrogates or NUL characters."""
MessageText = Annotated[str, MESSAGE_TEXT_CHECK]
"""A :data:`Text` that a person wrote; refused, it is still screened for a crisis."""
JsonObject = Annotated[dict[str, Any], TEXT_CHECK]
"""A JSON object whose strings, keys included, at any depth, are all :data:`Text`."""


def _json_text(value: str) -> str:
    # Only an escape spells a surrogate here: one as it is was refused as text already.
    if "\\u" not in value:
        return value
    try:
        loads_strict(value)
    except UnpairedSurrogate as exc:
        problem = f"an unpaired surrogate (U+{exc.code_point:04X}) in a string of its JSON"
        raise PydanticCustomError(
            INVALID_TEXT,
            "holds {problem}, which is not valid text",
            {"problem": problem, "screen": False},
        ) from None
    except (ValueError, RecursionError):
        pass  # not strict JSON otherwise: the handler refuses it, naming the call
    return value


JsonText = Annotated[str, TEXT_CHECK, AfterValidator(_json_text)]
"""A :data:`Text` holding JSON whose decoded strings are text too, where it is JSON."""


def crisis_resources(
    gate: L0Gate,
    texts: Iterable[str],
    *,
    locale: Locale | None,
    region: str | None,
    registry: ResourceRegistry | None = None,
) -> str | None:
    """The crisis resources for refused message texts that L0 escalates, else ``None``.

    A text refused as invalid is still a person's words: its repaired copy is screened
    by L0 (pure, no model, nothing stored), and when any escalates, the resources are
    rendered by code, in ``locale`` (else the text's), for ``region``.
    """
    for text in texts:
        repaired = repair_text(text)
        if gate.scan(repaired).escalate:
            return render_resources(locale or detect_locale(repaired), region, registry)
    return None
