"""Hypothesis strategies for the values a JSON schema of an OpenAPI 3.1 document allows.

``values(doc, schema)`` draws JSON values that conform to ``schema``, resolving
``#/components/schemas/...`` references in ``doc``. It covers the part of JSON Schema
(2020-12, OpenAPI 3.1's dialect) that FastAPI writes and foureyes' document uses:

- ``$ref`` (recursive ones too: past a few hops, arrays and objects take only what they
  must), ``const``, ``enum``, ``anyOf``, ``oneOf`` and ``allOf`` beside other keywords;
- ``object`` with ``properties``, ``required``, ``additionalProperties`` (``false``, a
  schema, or absent: a few extra members) and ``propertyNames``;
- ``string`` with ``minLength``, ``maxLength``, ``pattern`` (drawn with
  ``st.from_regex``, whole-string) and ``format: date-time`` (RFC 3339);
- ``integer`` and ``number`` with their bounds, ``boolean``, ``null``;
- ``array`` with ``items``, ``minItems`` and ``maxItems``;
- no type at all: any JSON value.

Drawing over-approximates where keywords combine (``oneOf`` branches, two patterns under
``allOf``), so every value is checked against the schema itself with ``jsonschema``
(:func:`conforms`) and only conforming ones are drawn: a strategy that is too loose costs
examples, never a false alarm. Regular expressions are Python's: the document's patterns
must mean the same in ECMA-262, which is what the tests that use this check.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any

import jsonschema
from hypothesis import strategies as st

__all__ = ["JSON_VALUES", "conforms", "values"]

_MAX_HOPS = 4
"""``$ref`` hops after which arrays and objects hold only what their schema requires."""
_MORE_ITEMS = 3
"""Items an array may hold beyond its ``minItems``."""
_MORE_CHARS = 40
"""Characters a string may hold beyond its ``minLength``."""
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated"})

JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
"""Any JSON value, small."""


def conforms(doc: dict[str, Any], schema: dict[str, Any]) -> Callable[[Any], bool]:
    """Whether a value conforms to ``schema`` (its references resolved in ``doc``)."""
    root = {"allOf": [schema], "components": doc.get("components", {})}
    validator = jsonschema.Draft202012Validator(root)
    return validator.is_valid


def values(doc: dict[str, Any], schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """JSON values that conform to ``schema``, references resolved in ``doc``."""
    return _Draw(doc).of(schema, 0).filter(conforms(doc, schema))


def _merge(base: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """One schema requiring both (for the keywords drawing reads; the filter checks the rest)."""
    merged = dict(base)
    for key, value in more.items():
        if key == "required":
            merged[key] = sorted({*merged.get(key, ()), *value})
        elif key == "properties":
            properties = dict(merged.get(key, {}))
            for name, schema in value.items():
                properties[name] = _merge(properties.get(name, {}), schema)
            merged[key] = properties
        elif key == "allOf":
            merged[key] = [*merged.get(key, ()), *value]
        elif key in ("minLength", "minItems", "minimum"):
            merged[key] = max(value, merged.get(key, value))
        elif key in ("maxLength", "maxItems", "maximum"):
            merged[key] = min(value, merged.get(key, value))
        else:
            merged[key] = value
    return merged


def _rfc3339() -> st.SearchStrategy[str]:
    offsets = st.just(dt.UTC) | st.integers(-23 * 60 - 59, 23 * 60 + 59).map(
        lambda minutes: dt.timezone(dt.timedelta(minutes=minutes))
    )
    # Naive bounds, as st.datetimes takes them; each moment drawn gets one of the offsets.
    moments = st.datetimes(
        min_value=dt.datetime(1000, 1, 1),  # noqa: DTZ001
        max_value=dt.datetime(9999, 12, 30),  # noqa: DTZ001
        timezones=offsets,
    )
    return moments.map(lambda moment: moment.isoformat().replace("+00:00", "Z"))


class _Draw:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc

    def resolve(self, ref: str) -> dict[str, Any]:
        if not ref.startswith("#/"):
            raise ValueError(f"only local references: {ref}")
        target: Any = self.doc
        for part in ref[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        assert isinstance(target, dict), ref
        return target

    def of(self, schema: dict[str, Any] | bool, hops: int) -> st.SearchStrategy[Any]:
        if schema is True:
            return JSON_VALUES
        if schema is False:
            return st.nothing()
        if "$ref" in schema:
            rest = {k: v for k, v in schema.items() if k != "$ref" and k not in _ANNOTATIONS}
            return self.of(_merge(self.resolve(schema["$ref"]), rest), hops + 1)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                base = {k: v for k, v in schema.items() if k != key}
                branches = [_merge(base, branch) for branch in schema[key]]
                if hops > _MAX_HOPS:  # deep in a recursion: the branches that end it
                    ending = [b for b in branches if not _grows(b)]
                    branches = ending or branches
                return st.one_of([self.of(branch, hops) for branch in branches])
        if "const" in schema:
            return st.just(schema["const"])
        if "enum" in schema:
            return st.sampled_from(schema["enum"])
        kind = schema.get("type")
        if kind is None and ("properties" in schema or "required" in schema):
            kind = "object"
        lean = hops > _MAX_HOPS
        if kind == "string":
            return self.string(schema)
        if kind == "integer":
            low, high = schema.get("minimum"), schema.get("maximum")
            if "exclusiveMinimum" in schema:
                low = math.floor(schema["exclusiveMinimum"]) + 1
            if "exclusiveMaximum" in schema:
                high = math.ceil(schema["exclusiveMaximum"]) - 1
            return st.integers(
                None if low is None else math.ceil(low), None if high is None else math.floor(high)
            )
        if kind == "number":
            return st.floats(
                schema.get("minimum"),
                schema.get("maximum"),
                allow_nan=False,
                allow_infinity=False,
            )
        if kind == "boolean":
            return st.booleans()
        if kind == "null":
            return st.none()
        if kind == "array":
            low = schema.get("minItems", 0)
            high = low if lean else low + _MORE_ITEMS
            if "maxItems" in schema:
                high = min(high, schema["maxItems"])
            return st.lists(self.of(schema.get("items", True), hops), min_size=low, max_size=high)
        if kind == "object":
            return self.object(schema, hops)
        return JSON_VALUES

    def string(self, schema: dict[str, Any]) -> st.SearchStrategy[str]:
        low = schema.get("minLength", 0)
        high = schema.get("maxLength")
        if schema.get("format") == "date-time":
            return _rfc3339()
        if "pattern" in schema:
            drawn = st.from_regex(schema["pattern"], fullmatch=True)
            return drawn.filter(lambda s: low <= len(s) <= (high if high is not None else len(s)))
        most = low + _MORE_CHARS if high is None else min(high, low + _MORE_CHARS)
        return st.text(min_size=low, max_size=most)

    def object(self, schema: dict[str, Any], hops: int) -> st.SearchStrategy[dict[str, Any]]:
        properties: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", ()))
        lean = hops > _MAX_HOPS
        must = {name: self.of(properties.get(name, True), hops) for name in sorted(required)}
        # ``"not": {"required": [...]}``: members that must stay out.
        banned = set(schema.get("not", {}).get("required", ()))
        may = (
            {}
            if lean
            else {
                name: self.of(sub, hops)
                for name, sub in properties.items()
                if name not in required and name not in banned
            }
        )
        members = st.fixed_dictionaries(must, optional=may)
        extra = schema.get("additionalProperties", True)
        if extra is False or lean:
            return members
        names = self.string({"type": "string", **schema.get("propertyNames", {})}).filter(
            lambda name: name not in properties
        )
        more = st.dictionaries(
            names, self.of(extra, hops), max_size=1 if properties else _MORE_ITEMS
        )
        return st.tuples(members, more).map(lambda pair: {**pair[1], **pair[0]})


def _grows(schema: dict[str, Any]) -> bool:
    """Whether drawing ``schema`` may recurse: a reference, an array or an object."""
    return "$ref" in schema or schema.get("type") in ("array", "object")
