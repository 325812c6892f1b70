"""The first-character look-ahead of rule patterns finds exactly what the pattern finds."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.gate import _patterns
from foureyes.gate._scan import fast_scanner, first_characters

# Letters with case quirks (dotted and dotless i, long s, the Kelvin and Angstrom signs),
# Han characters, spaces and punctuation: the characters a look-ahead could get wrong.
ALPHABET = "aAbBiIkKsSyY İıſ\u212a\u212bÅå你我是.'’-\n"


@st.composite
def patterns(draw: st.DrawFn, depth: int = 0) -> str:
    """A random pattern of literals, sets, classes, assertions, groups and repeats."""
    atoms = [
        st.sampled_from(list("abiksy你我 ")).map(re.escape),
        st.sampled_from(["[ab]", "[i-k]", "[^a]", r"\w", r"\d", ".", "[你我]", r"\s"]),
        st.sampled_from([r"\b", r"\B", "^", "$", "(?=a)", "(?!b)", "(?<=a)", "(?<!i)"]),
        st.sampled_from(["(?i:a)", "(?-i:K)", r"(a)\1"]),
    ]
    if depth < 2:
        inner = patterns(depth + 1)
        atoms += [
            inner.map(lambda p: f"(?:{p})"),
            inner.map(lambda p: f"({p})"),
            st.tuples(inner, inner).map(lambda ps: f"{ps[0]}|{ps[1]}"),
            st.tuples(inner, st.sampled_from(["?", "*", "+", "{2}", "{0,2}", "??", "+?"])).map(
                lambda pq: f"(?:{pq[0]}){pq[1]}"
            ),
        ]
    parts = draw(st.lists(st.one_of(atoms), min_size=1, max_size=4))
    return "".join(parts)


def spans(
    pattern: re.Pattern[str], text: str
) -> list[tuple[tuple[int, int], tuple[str | None, ...]]]:
    return [(found.span(), found.groups()) for found in pattern.finditer(text)]


@settings(max_examples=400, deadline=None)
@given(
    patterns(),
    st.sampled_from(["", "(?i)", "(?m)", "(?x)", "(?a)", "(?ai)", "(?is)"]),
    st.text(ALPHABET, max_size=40),
)
def test_a_pattern_with_its_look_ahead_matches_as_the_pattern_does(
    source: str, flags: str, text: str
) -> None:
    try:
        pattern = re.compile(flags + source)
    except re.error:
        return  # a generated pattern Python refuses (a look-behind of varying width)
    assert spans(fast_scanner(pattern), text) == spans(pattern, text)


@pytest.mark.parametrize("name", _patterns.__all__)
@settings(max_examples=100, deadline=None)
@given(text=st.text(ALPHABET + "youhavedprsinotmwegu保证你说得对忽略", max_size=60))
def test_every_built_in_pattern_gets_a_look_ahead_that_changes_no_match(
    name: str, text: str
) -> None:
    pattern = getattr(_patterns, name)
    scanner = fast_scanner(pattern)
    assert scanner is not pattern  # the built-ins all start with known characters
    assert spans(scanner, text) == spans(pattern, text)


@pytest.mark.parametrize(
    ("source", "first"),
    [
        (r"(?i)\bI am", {"I"}),
        (r"a?b|c", {"a", "b", "c"}),
        (r"(?<!x)\b(?:[a-c]|你)z", {"a", "b", "c", "你"}),
        (r"(?:ab)+|x{1,3}", {"a", "x"}),
        (r"(?x) a  b  # a comment", {"a"}),
        # Unknown or open first characters: no look-ahead.
        (r".x", None),
        (r"\wx", None),
        (r"[^a]x", None),
        (r"a*", None),  # matches the empty string
        (r"(?i:a)b", None),  # scoped flags
        (r"[\x00-\uffff]", None),  # too wide to list
    ],
)
def test_the_first_characters_are_read_from_the_parsed_pattern(
    source: str, first: set[str] | None
) -> None:
    pattern = re.compile(source)
    assert first_characters(pattern) == (None if first is None else frozenset(first))
    assert (fast_scanner(pattern) is pattern) is (first is None)


def test_a_verbose_pattern_ending_in_a_comment_still_compiles_with_its_look_ahead() -> None:
    pattern = re.compile(r"(?x) a \s b  # the two letters")
    scanner = fast_scanner(pattern)
    assert scanner is not pattern
    assert (
        spans(scanner, "xa b a\tb") == spans(pattern, "xa b a\tb") == [((1, 4), ()), ((5, 8), ())]
    )
