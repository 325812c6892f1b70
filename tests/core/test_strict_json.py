import datetime as dt
import enum
import json
import math
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.core.strict_json import NotStrictJson, UnpairedSurrogate, dumps, loads_strict

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


@given(JSON)
def test_agrees_with_json_on_plain_json(value: object) -> None:
    text = json.dumps(value)
    assert loads_strict(text) == json.loads(text)
    assert loads_strict(text.encode("utf-8")) == json.loads(text)


@pytest.mark.parametrize(
    "text", ['{"a": NaN}', "[Infinity]", "-Infinity", "1e400", '{"a": 1, "a": 2}']
)
def test_refuses_what_python_would_guess(text: str) -> None:
    with pytest.raises(NotStrictJson):
        loads_strict(text)


@pytest.mark.parametrize("raw", [b"\xff\xfe{}", b'{"a": "\xe9"}'])
def test_refuses_bytes_that_are_not_utf8(raw: bytes) -> None:
    with pytest.raises(ValueError):
        loads_strict(raw)


# --- dumps: json.dumps' document, written by orjson where orjson writes the same one.


class Colour(enum.Enum):
    RED = "red"


class Level(enum.StrEnum):
    LOW = "low"


class Tagged(dict):  # type: ignore[type-arg]
    pass


class Opaque:
    """Neither encoder knows it: ``default`` writes it (or refuses it)."""

    def __init__(self, value: object) -> None:
        self.value = value


def _write_opaque(item: object) -> object:
    if isinstance(item, Opaque):
        return {"opaque": item.value}
    raise TypeError(f"{type(item).__name__} is not JSON")


ODD = (
    st.floats()  # NaN and infinities included
    | st.integers(min_value=-(2**70), max_value=2**70)  # past orjson's 64 bits
    | st.text()  # lone surrogates included, which orjson refuses
    | st.sampled_from([Colour.RED, Level.LOW, uuid.UUID(int=7), dt.date(2026, 1, 2)])
    | st.builds(Opaque, st.floats() | st.text(max_size=3))
)
ANY = st.recursive(
    st.none() | st.booleans() | ODD,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=4), inner, max_size=4)
        | st.dictionaries(st.integers(-3, 3) | st.none(), inner, max_size=2)
        | st.builds(Tagged, st.dictionaries(st.text(max_size=4), inner, max_size=2))
    ),
    max_leaves=12,
)


def _outcome(write: Any) -> tuple[str, Any]:
    """What ``write()`` gave: the document it reads back as, or the type of what it raised.

    NaN and the infinities read back as strings, so that documents holding them compare.
    """
    try:
        text = write()
    except (TypeError, ValueError) as exc:
        return "raised", type(exc)
    return "wrote", json.loads(text, parse_constant=lambda name: f"constant {name}")


@given(ANY, st.booleans(), st.booleans())
def test_dumps_writes_the_document_json_writes_or_refuses_as_it_does(
    value: object, allow_nan: bool, ensure_ascii: bool
) -> None:
    options: dict[str, Any] = {
        "allow_nan": allow_nan,
        "ensure_ascii": ensure_ascii,
        "default": _write_opaque,
    }
    assert _outcome(lambda: dumps(value, **options)) == _outcome(
        lambda: json.dumps(value, **options)
    )


def test_dumps_is_written_by_orjson_when_the_documents_agree() -> None:
    document = {"a": [1, 2.5, None, True], "b": {"c": "ü"}, "d": Level.LOW}

    text = dumps(document, allow_nan=False)

    assert text == '{"a":[1,2.5,null,true],"b":{"c":"ü"},"d":"low"}'  # orjson's spacing


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ({"x": math.nan}, '{"x":NaN}'),
        ({"x": 2**64}, '{"x":18446744073709551616}'),
        ({1: "a"}, '{"1":"a"}'),
        ({"x": "\ud800"}, '{"x":"\\ud800"}'),
        (Tagged(x=1), '{"x":1}'),
        ({"x": Opaque(math.inf)}, '{"x":{"opaque":Infinity}}'),
    ],
    ids=["nan", "big-int", "int-key", "lone-surrogate", "dict-subclass", "default-writes-inf"],
)
def test_what_orjson_would_write_otherwise_is_written_by_json(value: object, written: str) -> None:
    assert dumps(value, default=_write_opaque) == written


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"x": math.nan}, ValueError),
        ({"x": Opaque(math.nan)}, ValueError),
        ({"x": object()}, TypeError),
        ({"x": Colour.RED}, TypeError),
        ({"x": uuid.UUID(int=1)}, TypeError),
        ({"x": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)}, TypeError),
    ],
    ids=["nan", "default-writes-nan", "object", "enum", "uuid", "datetime"],
)
def test_what_json_refuses_is_refused(value: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        dumps(value, allow_nan=False, default=_write_opaque)


def test_a_cycle_is_refused_as_json_refuses_it() -> None:
    loop: list[object] = []
    loop.append({"again": loop})

    with pytest.raises(ValueError, match="Circular"):
        dumps(loop)


@pytest.mark.parametrize(
    ("document", "code_point"),
    [
        ('"\\ud800"', 0xD800),
        ('{"a": ["ok", {"b": "x\\udfff"}]}', 0xDFFF),
        ('{"\\udc00": 1}', 0xDC00),  # a key
        ('["\\ude00\\ud83d"]', 0xDE00),  # a pair in the wrong order is two lone halves
    ],
)
def test_a_string_with_an_unpaired_surrogate_is_refused_with_its_code_point(
    document: str, code_point: int
) -> None:
    with pytest.raises(UnpairedSurrogate) as caught:
        loads_strict(document)
    assert caught.value.code_point == code_point
    assert isinstance(caught.value, NotStrictJson)


def test_an_escaped_pair_is_one_character() -> None:
    assert loads_strict('{"k": "\\ud83d\\ude00"}') == {"k": "\U0001f600"}


def test_a_document_nested_deeply_is_walked_without_recursion() -> None:
    depth = 500  # below the decoder's limit; the surrogate walk is iterative
    with pytest.raises(UnpairedSurrogate):
        loads_strict("[" * depth + '"\\ud800"' + "]" * depth)
