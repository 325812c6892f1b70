"""Pydantic's validation errors in a user's words: the one translator.

Pydantic reports in its own words: "Value error, ..." before a message of ours, "Input
should be a valid tuple" for a list, a field's raw regex, and one error per member of a
union (a message's ``content`` is a string *or* a list of parts, so a bad part gets an
error for the string too). :func:`explain_errors` turns its errors into
:class:`ValidationProblem` values: the field (dotted), what it expects, what was given,
and for a misspelt key or value the closest allowed name ("did you mean ..."). A union's
errors become those of the member the input was meant for (the one validation went
furthest in), or one problem naming every member's form; a part whose ``type`` is not
allowed is that one problem, not also its missing keys.

The edges that show validation errors use it, each once: config loading
(:func:`foureyes.config.validation_problems`), the API's 422 answers
(:mod:`foureyes.server.errors`) and :class:`foureyes.Guard`'s ``invalid_input`` errors.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

__all__ = ["ValidationProblem", "closest_name", "explain_errors"]

_UNION = "union"
"""The type of a problem that names every member of a union the input fits none of."""

_PATTERNS: dict[str, str] = {
    r"^[A-Z]{2}$": "a region code: two capital letters (ISO 3166-1 alpha-2), such as CN, HK, "
    "TW or GB",
    r"^[0-9a-f]{32}$": "an id of 32 lowercase hex digits",
    r"^[0-9a-f]{64}$": "a SHA-256 digest: 64 lowercase hex digits",
    r"^[a-z][a-z0-9_-]*$": "a name of lowercase letters, digits, '_' or '-', starting with a "
    "letter",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "an environment variable name: letters, digits and '_', not "
    "starting with a digit",
    r"^[A-Za-z_][A-Za-z0-9_]{0,62}$": "an identifier: 1 to 63 letters, digits or '_', not "
    "starting with a digit",
    r"^https?://[^\s/]+(/\S*)?$": "an http:// or https:// URL without spaces",
    r"^[a-z0-9][a-z0-9-]{0,63}$": "an id of lowercase letters, digits and '-' (1 to 64, "
    "starting with a letter or digit)",
    r"^[A-Za-z0-9_-]{1,64}$": "a name of 1 to 64 letters, digits, '_' or '-'",
    r"^[a-z0-9][a-z0-9_.-]{0,63}$": "an id of lowercase letters, digits, '_', '.' or '-' (1 to "
    "64, starting with a letter or digit)",
    r"^[^/#]+$": "text without '/' or '#'",
    r'^[^"\r\n]*$': "text without double quotes or line breaks",
    r'^[^"\r\n]{1,200}$': "1 to 200 characters without double quotes or line breaks",
}
"""What each pattern a field of ours has means, in words (a regex is not an explanation)."""

_KIND_OF_TAGS = frozenset(
    {"str", "int", "float", "bool", "none", "bytes", "list", "dict", "tuple", "set"}
)
_ANY = object()
"""The type of a location the walk cannot follow (no model given, or a type it does not know)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ValidationProblem:
    """One thing wrong with an input, in words a user reads.

    Attributes:
        path: the field at fault, dotted (``gate.region``, ``messages.0.content.1.type``);
            empty for the input as a whole.
        type: pydantic's error type (``missing``, ``extra_forbidden``, ``literal_error``,
            ...), or ``union`` for an input that fits no member of a union.
        expected: what the field takes (``a whole number of at least 1``), or when
            ``own`` the message itself.
        given: what kind of value was given (``a string``, ``a list``, ``nothing``).
        value: the value given, when it is short and plain (a key, a number, a short
            string, credentials in a URL masked); ``None`` otherwise.
        suggestion: for a misspelt key or value, the closest allowed one.
        own: ``expected`` is a message of our code's own (a validator's), said as is.
        ctx: pydantic's context of the error (``min_length``, ``ge``, ...), for an edge
            that words the problem in another language.
    """

    path: str
    type: str
    expected: str
    given: str
    value: str | None = None
    suggestion: str | None = None
    own: bool = False
    ctx: Mapping[str, Any] = dataclasses.field(default_factory=dict, hash=False, compare=False)

    def message(self, *, echo: bool = True) -> str:
        """The problem in one line of English.

        Args:
            echo: say the value given (config files: the user's own); the API and the
                library say only its kind, since a request's values may be a user's words.
        """
        hint = f"; did you mean {self.suggestion!r}?" if self.suggestion else ""
        if self.type == "extra_forbidden":
            return f"unknown key {self.path!r}{hint}"
        where = f"{self.path}: " if self.path else ""
        if self.type == "missing":
            return f"{where}required, but not given"
        if self.own:
            return f"{where}{self.expected}"
        got = self.value if echo and self.value is not None else self.given
        return f"{where}expected {self.expected}, got {got}{hint}"

    def __str__(self) -> str:
        return self.message()


def explain_errors(
    errors: ValidationError | Iterable[Mapping[str, Any]],
    model: type[BaseModel] | None = None,
    *,
    prefix: Sequence[str] = (),
) -> list[ValidationProblem]:
    """The problems of a failed validation, a union's noise folded, duplicates dropped.

    Args:
        errors: pydantic's error, or its ``errors()`` (FastAPI's ``RequestValidationError``
            gives those).
        model: the model that was validated; with it, a misspelt key gets the closest
            field's name, and a union is told apart from a mapping's keys for sure.
        prefix: leading location parts that are not the model's (FastAPI's ``body``).
    """
    raw = errors.errors() if isinstance(errors, ValidationError) else list(errors)
    located: list[_Located] = []
    for error in raw:
        loc = tuple(error.get("loc", ()))
        if prefix and loc[: len(prefix)] == tuple(prefix):
            loc = loc[len(prefix) :]
        located.append(_locate(error, loc, model))
    chosen = _fold_unions(located)
    chosen = _drop_under_bad_type(chosen)
    problems: list[ValidationProblem] = []
    seen: set[ValidationProblem] = set()
    for item in chosen:
        problem = _explain(item, model)
        if problem not in seen:
            seen.add(problem)
            problems.append(problem)
    return problems


@dataclasses.dataclass(frozen=True, slots=True)
class _Located:
    error: Mapping[str, Any]
    path: tuple[str | int, ...]
    """The location without union member tags."""
    union_at: int | None
    """How many parts of ``path`` lead to the first union, if the location crosses one."""
    branch: str | None
    """That union's member tag."""


def _locate(
    error: Mapping[str, Any], loc: tuple[Any, ...], model: type[BaseModel] | None
) -> _Located:
    path: list[str | int] = []
    union_at: int | None = None
    branch: str | None = None
    node: object = model if model is not None else _ANY
    for part in loc:
        if isinstance(part, str) and _is_tag(part, node):
            if union_at is None:
                union_at, branch = len(path), part
            node = _member(node, part)
            continue
        path.append(part)
        node = _step(node, part)
    return _Located(error, tuple(path), union_at, branch)


def _fold_unions(located: list[_Located]) -> list[_Located]:
    """Each union's errors: those of the member validation went furthest in, or one."""
    groups: dict[tuple[str | int, ...], list[_Located]] = {}
    for item in located:
        if item.union_at is not None:
            groups.setdefault(item.path[: item.union_at], []).append(item)
    out: list[_Located] = []
    done: set[tuple[str | int, ...]] = set()
    for item in located:
        if item.union_at is None:
            out.append(item)
            continue
        where = item.path[: item.union_at]
        if where in done:
            continue
        done.add(where)
        members = groups[where]
        deepest = max(len(m.path) for m in members)
        if deepest > len(where):
            # The member validation went furthest in is the one the input was meant for.
            branch = next(m.branch for m in members if len(m.path) == deepest)
            out += [dataclasses.replace(m, union_at=None) for m in members if m.branch == branch]
            continue
        # The input is none of the members' forms at all: one problem naming each.
        forms: list[str] = []
        for member in members:
            form = _expected(member.error)
            if form not in forms:
                forms.append(form)
        error = {
            "type": _UNION,
            "loc": where,
            "input": item.error.get("input"),
            "msg": " or ".join(forms),
        }
        out.append(_Located(error, where, None, None))
    return out


def _drop_under_bad_type(located: list[_Located]) -> list[_Located]:
    """A part whose ``type`` is not allowed is that problem alone, not its other keys too."""
    bad_types = {
        item.path[:-1]
        for item in located
        if item.error.get("type") == "literal_error" and item.path and item.path[-1] == "type"
    }
    return [
        item
        for item in located
        if not any(
            item.path[: len(where)] == where and item.path != (*where, "type")
            for where in bad_types
        )
    ]


def _explain(item: _Located, model: type[BaseModel] | None) -> ValidationProblem:
    error = item.error
    kind = str(error.get("type", "value_error"))
    given = error.get("input")
    path = ".".join(str(part) for part in item.path)
    ctx = {k: v for k, v in (error.get("ctx") or {}).items() if isinstance(v, str | int | float)}
    if kind == "extra_forbidden":
        key = str(item.path[-1]) if item.path else ""
        names = _field_names(model, item.path[:-1])
        suggestion = closest_name(key, names)
        return ValidationProblem(path, kind, "a known key", _kind(given), key, suggestion, ctx=ctx)
    if kind == "missing":
        return ValidationProblem(path, kind, "a value", "nothing", ctx=ctx)
    expected = _expected(error)
    # Any type pydantic has no words for here is a message of our own code (a validator's).
    own = kind not in _KNOWN and not str(error.get("msg", "")).startswith("Input should be")
    suggestion = None
    if kind in ("literal_error", "enum") and isinstance(given, str):
        suggestion = closest_name(given, re.findall(r"'([^']*)'", str(ctx.get("expected", ""))))
    elif kind == "string_pattern_mismatch" and isinstance(given, str):
        pattern = str(ctx.get("pattern", ""))
        for variant in (given.strip().upper(), given.strip().lower(), given.strip()):
            if variant != given and _matches(pattern, variant):
                suggestion = variant
                break
    return ValidationProblem(
        path, kind, expected, _kind(given), _shown(given), suggestion, own, ctx=ctx
    )


_EXPECTED: dict[str, str] = {
    "string_type": "a string",
    "string_sub_type": "a string",
    "string_unicode": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "frozen_set_type": "a list",
    "iterable_type": "a list",
    "dict_type": "a table of keys and values",
    "model_type": "a table of keys and values",
    "model_attributes_type": "a table of keys and values",
    "dataclass_type": "a table of keys and values",
    "none_required": "nothing (null)",
    "bytes_type": "bytes",
    "date_type": "a date (YYYY-MM-DD)",
    "date_parsing": "a date (YYYY-MM-DD)",
    "date_from_datetime_parsing": "a date (YYYY-MM-DD)",
    "datetime_type": "a date and time with a zone (ISO 8601, such as 2026-12-01T12:00:00Z)",
    "datetime_parsing": "a date and time with a zone (ISO 8601, such as 2026-12-01T12:00:00Z)",
    "datetime_from_date_parsing": "a date and time with a zone (ISO 8601)",
    "timezone_aware": "a date and time with a zone (ISO 8601)",
    "url_type": "a URL",
    "url_parsing": "a URL",
    "url_scheme": "a URL",
    "json_invalid": "valid JSON",
    "json_type": "JSON text",
    "frozen_instance": "no change (the value is frozen)",
    "frozen_field": "no change (the field is frozen)",
}
_TEMPLATES: dict[str, str] = {
    "string_too_short": "a string of at least {min_length} character(s)",
    "string_too_long": "a string of at most {max_length} characters",
    "too_short": "at least {min_length} item(s)",
    "too_long": "at most {max_length} items",
    "greater_than": "a number greater than {gt}",
    "greater_than_equal": "a number of at least {ge}",
    "less_than": "a number less than {lt}",
    "less_than_equal": "a number of at most {le}",
    "multiple_of": "a multiple of {multiple_of}",
}


_KNOWN = frozenset(
    {*_EXPECTED, *_TEMPLATES, _UNION, "literal_error", "enum", "string_pattern_mismatch"}
)


def _expected(error: Mapping[str, Any]) -> str:
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    msg = str(error.get("msg", ""))
    if kind in _EXPECTED:
        return _EXPECTED[kind]
    if kind in _TEMPLATES:
        try:
            return _TEMPLATES[kind].format(**ctx)
        except (KeyError, IndexError):
            pass
    if kind in ("literal_error", "enum"):
        expected = str(ctx.get("expected", ""))
        return f"one of {expected}" if ", " in expected else expected
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        return _PATTERNS.get(pattern, f"a string of the form {pattern}")
    if kind == _UNION:
        return msg
    if msg.startswith("Input should be "):
        return msg.removeprefix("Input should be ").replace("a valid ", "a ", 1)
    for noise in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(noise)
    return msg or "a valid value"


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string" if value else "an empty string"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _shown(value: object) -> str | None:
    """``value`` as it may be shown back: short scalars only, URL credentials masked."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        masked = re.sub(r"://[^/@\s]*@", "://***@", value)
        return repr(masked if len(masked) <= 60 else masked[:57] + "...")
    return None


def closest_name(word: str, choices: Iterable[str]) -> str | None:
    """The allowed name ``word`` most likely misspells, if one is close enough."""
    import difflib  # only when a problem has a name to suggest

    names = [c for c in choices if c]
    if not word or not names:
        return None
    folded = {name.lower(): name for name in names}
    if word.lower() in folded and folded[word.lower()] != word:
        return folded[word.lower()]
    match = difflib.get_close_matches(word.lower(), list(folded), n=1, cutoff=0.6)
    return folded[match[0]] if match else None


def _matches(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


# The walk along a location through the model's types: which keys a model takes, and
# where a location crosses a union (pydantic puts the member's tag in the location).


def _strip(node: object) -> object:
    while get_origin(node) is Annotated:
        node = get_args(node)[0]
    return node


def _members(node: object) -> list[object]:
    node = _strip(node)
    if get_origin(node) in (Union, types.UnionType):
        return [m for m in get_args(node) if m is not type(None)]
    return [node]


def _is_tag(part: str, node: object) -> bool:
    if node is _ANY:
        # No model to tell: pydantic's tags are type names (str, list[TextContent],
        # function-after[...], a model's class name).
        return (
            "[" in part
            or part[:1].isupper()
            or part in _KIND_OF_TAGS
            or part.startswith(("constrained-", "function-", "lax-or-", "json-or-"))
        )
    members = _members(node)
    return len(members) > 1


def _member(node: object, tag: str) -> object:
    for member in _members(node):
        stripped = _strip(member)
        if _name(stripped) == tag:
            return stripped
        if isinstance(stripped, type) and issubclass(stripped, BaseModel):
            discriminator = stripped.model_fields.get("type")
            if discriminator is not None and tag in get_args(discriminator.annotation):
                return stripped
    return _ANY


def _name(node: object) -> str:
    origin = get_origin(node)
    if origin is not None and origin is not Literal:
        inner = ", ".join(_name(_strip(arg)) for arg in get_args(node) if arg is not Ellipsis)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return getattr(node, "__name__", str(node))


def _step(node: object, part: str | int) -> object:
    if node is _ANY:
        return _ANY
    for member in _members(node):
        found = _step_one(_strip(member), part)
        if found is not _ANY:
            return found
    return _ANY


def _step_one(node: object, part: str | int) -> object:
    if isinstance(node, type) and issubclass(node, BaseModel):
        for name, field in node.model_fields.items():
            if part in (name, field.alias):
                return field.annotation
        return _ANY
    origin = get_origin(node)
    args = get_args(node)
    if origin is not None and isinstance(origin, type):
        if issubclass(origin, Mapping) and len(args) == 2:
            return args[1]
        if issubclass(origin, Sequence | set | frozenset) and args and isinstance(part, int):
            return args[0]
    return _ANY


def _field_names(model: type[BaseModel] | None, path: Sequence[str | int]) -> list[str]:
    node: object = model if model is not None else _ANY
    for part in path:
        node = _step(node, part)
    names: list[str] = []
    for member in _members(node) if node is not _ANY else []:
        stripped = _strip(member)
        if isinstance(stripped, type) and issubclass(stripped, BaseModel):
            names += [field.alias or name for name, field in stripped.model_fields.items()]
    return names
