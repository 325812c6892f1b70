import re
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.core.fold import (
    _digit_table,
    _fold_table,
    _han_gap,
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
        ("我，哈哈…", "我哈哈…"),
        ("自.杀", "自杀"),
        ("自/杀", "自杀"),
        ("自~杀", "自杀"),
        ("自，杀", "自杀"),
        ("自 。 ~ 杀", "自杀"),
        ("a，b", "a,b"),
        ("kill－myself", "kill myself"),
        ("ｋｉｌｌ＿ｍｅ！", "kill me!"),
        ("Hi，you", "hi,you"),
        ("I w a n t t o d i e", "iwanttodie"),
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


# --- evasions: separators between Han characters, full-width punctuation, letter-spacing ----

_HAN_CHARS = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
# What people put between the characters of a word, as typed (before step 1 folds it).
_GAP_CHARS = st.one_of(
    st.sampled_from(" .,/~\\|!?;:+*^#-_…。，、．／～｜！？；：·•❤★☆♡🔪😭\u3000\uff0d\u200b"),
    # Every punctuation and symbol of the BMP, and the emoji and symbol blocks.
    st.characters(
        categories=["Po", "Pd", "Ps", "Pe", "Sm", "So", "Sk", "Zs"], max_codepoint=0xFFFF
    ),
    st.characters(min_codepoint=0x1F000, max_codepoint=0x1FAFF),
)
_FULL_WIDTH_PUNCTUATION = [
    chr(code)
    for code in range(0xFF01, 0xFF5F)
    if not unicodedata.normalize("NFKC", chr(code)).isalnum()
]


@settings(max_examples=300, deadline=None)
@given(_HAN_CHARS, st.lists(_GAP_CHARS, min_size=1, max_size=4).map("".join), _HAN_CHARS)
def test_separators_between_two_han_characters_are_removed(
    first: str, gap: str, second: str
) -> None:
    n = normalise(first + gap + second)
    if any(folded.isalnum() for c in gap for folded in fold_char(c)):
        return  # a symbol that folds to a letter or digit (a circled one) is not a separator
    assert n.text == first + second
    assert n.covering_span(0, 2) == (0, len(gap) + 2)
    assert n.original_span(1, 2) == (len(gap) + 1, len(gap) + 2)


def test_punctuation_between_other_characters_stays() -> None:
    assert normalise("ok，好.a").text == "ok,好.a"
    assert _han_gap().search("a.b") is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=10), st.sampled_from(_FULL_WIDTH_PUNCTUATION), st.text(max_size=10))
def test_full_width_punctuation_folds_like_its_ascii_form(
    before: str, char: str, after: str
) -> None:
    ascii_form = unicodedata.normalize("NFKC", char)
    assert ascii_form.isascii()
    assert fold_char(char) == (" " if fold_char(ascii_form) == " " else ascii_form)
    assert normalise(before + char + after).text == normalise(before + ascii_form + after).text


_WORDS = st.lists(st.text(alphabet="abcdefghjklmnopqrstuvwxyz", min_size=1, max_size=6), min_size=1)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from("iIaA"), _WORDS, st.sampled_from([" ", "  ", "-", " - "]))
def test_a_one_letter_word_before_spaced_letters_stays_a_word_break(
    word: str, words: list[str], separator: str
) -> None:
    letters = "".join(words)
    text = f"{word} {separator.join(letters)}"
    n = normalise(text)
    if len(letters) < 2:
        return  # no run of three single letters: nothing is joined
    assert n.text == word.lower() + letters
    assert n.word_breaks == {1} | ({len(letters)} if letters[-1] == "a" else set())
    assert n.original_span(1, len(n.text)) == (len(word) + 1, len(text))


def test_word_breaks_before_a_final_one_letter_word() -> None:
    n = normalise("so k i l l m y s e l f I")
    assert n.text == "so killmyselfi"
    assert n.word_breaks == {13}
    assert normalise("k i l l").word_breaks == frozenset()
    assert normalise("m u s i c").word_breaks == frozenset()


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
