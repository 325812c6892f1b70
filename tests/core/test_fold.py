import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.core.fold import _fold_table, fold_char, normalise


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("", ""),
        ("Hello World", "hello world"),
        ("ＫＩＬＬ　ｍｙｓｅｌｆ", "kill myself"),
        ("𝐤𝐢𝐥𝐥", "kill"),
        ("Straße", "strasse"),
        ("ﬁne", "fine"),
        ("İstanbul", "istanbul"),
        ("想 死", "想死"),
        ("想\u200b死", "想死"),
        ("想 \u200b\u3000死", "想死"),
        ("我 想\n死 了", "我想死了"),
        ("k i l l me", "kill me"),
        ("K-I-L-L me", "kill me"),
        ("a b", "a b"),
        ("self-harm", "self harm"),
        ("ab  cd\t\tef", "ab cd ef"),
        ("x\x00y\x7f", "xy"),
        ("z\u0336a\u0336l\u0336g\u0336o\u0336", "zalgo"),
        ("don't", "don't"),
        ("❤️", "❤"),
        ("我，哈哈…", "我，哈哈…"),
        ("㊙", "秘"),
    ],
)
def test_folds(text: str, folded: str) -> None:
    assert normalise(text).text == folded


def test_spans_map_back_across_every_step() -> None:
    text = "Ｉ\u200b  ｗａｎｔ\u3000ﬁ 想 死"
    n = normalise(text)
    assert n.text == "i want fi 想死"
    assert n.original_span(2, 6) == (4, 8)  # "want" <- "ｗａｎｔ"
    assert n.original_span(7, 9) == (9, 10)  # "fi" <- "ﬁ"
    assert n.original_span(7, 8) is None  # "f" is half of "ﬁ"
    assert n.original_span(8, 9) is None
    assert n.original_span(10, 12) == (11, 14)  # "想死" <- "想 死"


def test_format_characters_are_all_removed() -> None:
    # Checked against this Python's Unicode database, so a new Cf character fails here.
    missing = [
        f"U+{code:04X}"
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) == "Cf" and fold_char(chr(code)) != ""
    ]
    assert missing == []


def test_the_fold_table_agrees_with_the_specification_for_every_character() -> None:
    table, _ = _fold_table()
    for code in range(0x30000):
        if 0xD800 <= code < 0xE000:
            continue
        char = chr(code)
        expected = fold_char(char)
        assert normalise(char).text == (" " if expected == " " else expected), f"U+{code:04X}"
        assert (char in table) == (expected != char.lower()) or char.isascii(), f"U+{code:04X}"
    assert all(value.lower() == value for value in table.values())


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_fast_paths_agree_with_folding_character_by_character(text: str) -> None:
    by_char = "".join(fold_char(c) for c in text)
    assert normalise(text).text == normalise(by_char).text


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_every_folded_position_maps_into_the_original_in_order(text: str) -> None:
    n = normalise(text)
    origins = [n.origin(q) for q in range(len(n.text))]
    assert all(0 <= o < len(text) for o in origins)
    assert origins == sorted(origins)


def test_a_covering_span_widens_a_match_to_whole_characters() -> None:
    n = normalise("a ﬁ\u200bne day")
    assert n.text == "a fine day"
    assert n.original_span(3, 6) is None  # "ine": starts inside "ﬁ"
    assert n.covering_span(3, 6) == (2, 6)  # "ﬁ\u200bne"
    assert n.covering_span(2, 6) == n.original_span(2, 6) == (2, 6)
    assert normalise("plain").covering_span(1, 3) == (1, 3)
