import re
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.core.fold import (
    _digit_table,
    _fold_table,
    fold_char,
    fold_digit_char,
    normalise,
    normalise_digits,
)


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


# --- the digit fold ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("", ""),
        ("Call 988.", "Call 988."),
        ("400-161-9995", "400 161 9995"),
        ("400\u2009161\u202f9995", "400 161 9995"),
        ("400\u2007161\u2002\u200a9995", "400 161 9995"),
        ("400\t\t161\r\n9995", "400 161 9995"),
        ("400·161・9995", "400 161 9995"),
        ("400\u2013161\u2212999\u20145", "400 161 999 5"),
        ("4\u200b0\u20600\u202e1\u2066", "4001"),
        ("4\u03010\u20e3", "40"),
        ("四零零 一六一 九九九五", "400 161 9995"),
        ("〇一二三四五六七八九", "0123456789"),
        ("幺幺零", "110"),
        ("肆零零壹陆壹", "400161"),
        ("０１０－８２９５", "010 8295"),
        ("٠١٢ ۳۴ ४५ 𝟔𝟕", "012 34 45 67"),
        ("①②③", "123"),
        ("＋８６（１０）", "+86(10)"),
        ("Hello, World！", "Hello, World！"),
    ],
)
def test_digit_folds(text: str, folded: str) -> None:
    assert normalise_digits(text).text == folded


def test_the_digit_table_agrees_with_the_specification_for_every_character() -> None:
    table, _ = _digit_table()
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code < 0xE000:
            continue
        char = chr(code)
        expected = fold_digit_char(char)
        assert table.get(char, char) == expected, f"U+{code:04X}"
    assert all(len(value) <= 1 for value in table.values())


def test_every_unicode_space_and_separator_folds_to_a_space_and_no_mark_survives() -> None:
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        category = unicodedata.category(char)
        if category in {"Zs", "Zl", "Zp", "Pd"} or char.isspace():
            assert fold_digit_char(char) == " ", f"U+{code:04X}"
        elif category in {"Cf", "Mn", "Me"}:
            assert fold_digit_char(char) == "", f"U+{code:04X}"
        elif category == "Nd":
            assert fold_digit_char(char) == str(unicodedata.decimal(char)), f"U+{code:04X}"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_the_digit_fold_is_the_character_fold_with_runs_of_spaces_joined(text: str) -> None:
    n = normalise_digits(text)
    by_char = "".join(fold_digit_char(c) for c in text)
    assert n.text == re.sub(" {2,}", " ", by_char)
    origins = [n.origin(q) for q in range(len(n.text))]
    assert all(0 <= o < len(text) for o in origins)
    assert origins == sorted(set(origins))  # one folded character per original one, at most
    for q, o in enumerate(origins):
        assert n.text[q] == fold_digit_char(text[o])
