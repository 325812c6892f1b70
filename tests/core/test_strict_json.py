import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.core.strict_json import NotStrictJson, loads_strict

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
