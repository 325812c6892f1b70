"""Locale detection: zh-Hans, zh-Hant or en from the text alone."""

from __future__ import annotations

import csv
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.core.locale import (
    _PAIRS,
    _SIMPLIFIED,
    _TRADITIONAL,
    Locale,
    detect_locale,
    identified_language,
    is_covered,
)
from tests.helpers.data import require_data

WEIBO = "risk/zh/sos1k_fold1.tsv"

SIMPLIFIED = [
    "我最近压力很大，晚上总是睡不着觉。",
    "为什么我觉得自己什么都做不好？",
    "谢谢你听我说这些，我现在好多了。",
    "我妈妈说我应该多出去走走，可是我没有力气。",
    "这个学期的考试让我很担心。",
]
TRADITIONAL = [
    "我最近壓力很大，晚上總是睡不著覺。",
    "為什麼我覺得自己什麼都做不好？",
    "謝謝你聽我說這些，我現在好多了。",
    "我媽媽說我應該多出去走走，可是我沒有力氣。",
    "這個學期的考試讓我很擔心。",
]
ENGLISH = [
    "I haven't slept properly in weeks and I feel exhausted.",
    "Thanks for listening, I feel a bit better now.",
    "Why does everything feel so hard lately?",
    "I moved to 北京 last year and I still feel lonely.",
]


@pytest.mark.parametrize("text", SIMPLIFIED)
def test_simplified(text: str) -> None:
    assert detect_locale(text) is Locale.ZH_HANS


@pytest.mark.parametrize("text", TRADITIONAL)
def test_traditional(text: str) -> None:
    assert detect_locale(text) is Locale.ZH_HANT


@pytest.mark.parametrize("text", ENGLISH)
def test_english(text: str) -> None:
    assert detect_locale(text, default=Locale.ZH_HANS) is Locale.EN


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我今天用了ChatGPT写作业，还是很焦虑", Locale.ZH_HANS),
        ("我覺得AI和ML都好難", Locale.ZH_HANT),
        ("ok 我知道了，谢谢", Locale.ZH_HANS),
        ("The word 谢谢 means thank you", Locale.EN),
        ("我好累 😭😭😭 !!!", Locale.ZH_HANS),
        ("这个這個", Locale.ZH_HANS),
        ("這個這个", Locale.ZH_HANT),
    ],
)
def test_mixed_text(text: str, expected: Locale) -> None:
    assert detect_locale(text) is expected


@pytest.mark.parametrize("default", list(Locale))
@pytest.mark.parametrize("text", ["", "   ", "12345 !!! 😭", "…？！"])
def test_no_letters_gives_the_default(text: str, default: Locale) -> None:
    assert detect_locale(text, default=default) is default


@pytest.mark.parametrize("default", list(Locale))
def test_equal_weight_gives_the_default(default: Locale) -> None:
    # Two ideographs against one word weigh the same.
    assert detect_locale("hello 你好", default=default) is default


def test_script_tie_is_simplified_unless_the_default_says_traditional() -> None:
    # 我好想你 holds no character whose form differs between the scripts.
    assert detect_locale("我好想你") is Locale.ZH_HANS
    assert detect_locale("我好想你", default=Locale.ZH_HANS) is Locale.ZH_HANS
    assert detect_locale("我好想你", default=Locale.ZH_HANT) is Locale.ZH_HANT


def test_extension_ideographs_count_as_han() -> None:
    assert detect_locale("\U00020000\U0002a700\u3400") is Locale.ZH_HANS


def test_curated_pairs_are_consistent() -> None:
    assert len(_PAIRS) >= 100
    assert all(len(pair) == 2 and pair[0] != pair[1] for pair in _PAIRS)
    assert not _TRADITIONAL & _SIMPLIFIED
    assert len(_TRADITIONAL) == len(_PAIRS)


def test_locale_values_are_pinned() -> None:
    assert [locale.value for locale in Locale] == ["zh-Hans", "zh-Hant", "en"]


def test_real_weibo_posts_are_simplified_chinese() -> None:
    with require_data(WEIBO).open(newline="", encoding="utf-8") as f:
        posts = [row["comment"] for row in csv.DictReader(f, delimiter="\t")]
    counts = Counter(detect_locale(post) for post in posts)
    assert len(posts) == 200
    # One post of the fold is written in Traditional characters (原來, 燒, 殺, 現).
    assert counts == {Locale.ZH_HANS: 199, Locale.ZH_HANT: 1}


# --- the regular-expression implementation against a plain character loop ---------------

_HAN_RANGES = (
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0x20000, 0x2FA1F),
    (0x30000, 0x323AF),
)


def _reference(text: str, default: Locale) -> Locale:
    """detect_locale as its docstring states it, one character at a time."""
    han = words = traditional = simplified = 0
    in_word = False
    for ch in text:
        if any(lo <= ord(ch) <= hi for lo, hi in _HAN_RANGES):
            han += 1
            traditional += ch in _TRADITIONAL
            simplified += ch in _SIMPLIFIED
            in_word = False
        elif ch.isalpha():
            words += not in_word
            in_word = True
        else:
            in_word = False
    if han == 2 * words:
        return default
    if han < 2 * words:
        return Locale.EN
    if traditional != simplified:
        return Locale.ZH_HANT if traditional > simplified else Locale.ZH_HANS
    return Locale.ZH_HANT if default is Locale.ZH_HANT else Locale.ZH_HANS


# Characters where a regular expression's idea of a word and str.isalpha part ways
# (numeric non-digits, "_", combining marks, digits of other scripts), the edges of the
# Han ranges, both scripts' curated forms, and letters of several alphabets.
_TRICKY = (
    "²½Ⅻ①_\u0301\u0663\u0966٣ßéЖωא\u3400\u4dbf\u4e00\u9fff\uf900\ufaff"
    "\U00020000\U0002fa1f\U00030000\U000323af\u33ff\u4dc0\ufb00 \t\n!？😭"
    + "".join(_TRADITIONAL)
    + "".join(_SIMPLIFIED)
)


@given(
    st.text(alphabet=st.one_of(st.sampled_from(_TRICKY), st.characters()), max_size=60),
    st.sampled_from(list(Locale)),
)
def test_detection_matches_a_character_by_character_count(text: str, default: Locale) -> None:
    assert detect_locale(text, default=default) is _reference(text, default)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A character that is not a letter splits a run: two words (four ideographs'
        # weight) outweigh three ideographs, one word does not.
        ("ab²cd 你好你", Locale.EN),
        ("ab_cd 你好你", Locale.EN),
        ("ab\u0663cd 你好你", Locale.EN),
        ("abcd 你好你", Locale.ZH_HANT),
    ],
)
def test_non_letters_inside_a_word_split_it(text: str, expected: Locale) -> None:
    assert detect_locale(text, default=Locale.ZH_HANT) is expected


@pytest.mark.parametrize(
    "text",
    [
        "I want to die tonight",
        "I'm writing a story and I want to die",
        "Long day at work, but dinner with friends was nice.",
        "我不想活了",
        "我真的好累 so tired",
        "help",
        "",
        "😢😢",
    ],
)
def test_chinese_and_english_are_covered(text: str) -> None:
    assert is_covered(text)


@pytest.mark.parametrize(
    "text",
    [
        "Ich will nicht mehr leben",
        "Quiero morir",
        "No quiero vivir más",
        "Je veux mourir ce soir",
        "Я хочу умереть",
        "死にたい",
    ],
)
def test_other_languages_are_not_covered(text: str) -> None:
    assert not is_covered(text)


def test_the_labelled_chinese_and_english_posts_are_covered() -> None:
    """The screen's own data (risk/ of the data directory) stays covered: few unscreened.

    Two posts are not: lists of links around a few words that name no language ("aku
    slayer 69 depression ... playlist http open spotify com ..."). Unscreened, a model
    reads them, and they are restricted: the safe side of a guess.
    """
    with require_data(WEIBO).open(encoding="utf-8") as f:
        posts = [max(row, key=len) for row in csv.reader(f, delimiter="\t") if row]
    english = require_data("risk/en/sdcnl_combined.csv")
    with english.open(encoding="utf-8") as f:
        posts += [max(row, key=len) for row in csv.reader(f) if row]
    assert len(posts) > 2000
    unscreened = [p[:60] for p in posts if not is_covered(p)]
    assert len(unscreened) <= 2, unscreened


# Sentences written for these tests (not from any probe set): one per language the
# screen does not read, each as someone in distress might write it.
IDENTIFIED_ELSEWHERE = {
    "pt": "Não aguento mais, estou cansado de tudo e de todos",
    "nl": "Ik kan het niet meer aan, alles voelt zo zwaar de laatste tijd",
    "tr": "Artık dayanamıyorum, her şey çok ağır geliyor bana",
    "id": "Aku sudah tidak sanggup lagi, semuanya terasa berat sekali",
    "pl": "Nie daję już rady, wszystko jest dla mnie za ciężkie",
    "tl": "Hindi ko na kaya, sobrang bigat ng lahat para sa akin",
    "sw": "Siwezi tena, kila kitu kinanilemea sana siku hizi",
    "it": "Non ce la faccio più, è tutto troppo pesante per me",
    "ja-kanji": "明日会社行く気力無、全部終了希望、人生疲労困憊",
    "ja": "もう全部やめてしまいたい気持ちです",
    "ko": "이제 더는 못 버티겠어요, 모든 게 너무 무거워요",
}


@pytest.mark.parametrize("language", sorted(IDENTIFIED_ELSEWHERE))
def test_a_language_the_identifier_names_is_not_covered(language: str) -> None:
    text = IDENTIFIED_ELSEWHERE[language]
    assert not is_covered(text)
    if not language.startswith("ja") and language != "ko":
        # Indonesian and Malay are one language to CLD2 (it answers "ms").
        assert identified_language(text) in ({language} | ({"ms"} if language == "id" else set()))


@pytest.mark.parametrize("text", ["明日会社に行きたくない", "이제 그만하고 싶어"])
def test_japanese_and_korean_are_never_read_as_chinese(text: str) -> None:
    assert detect_locale(text) is Locale.EN and not is_covered(text)


@pytest.mark.parametrize(
    "text",
    [
        "hi",
        "kms",
        "i w4nt 2 d1e",
        "I am fine",
        "ngl kinda wanna kms lol",
        "no one would miss me if I was gone",
        "今天工作好累，睡不着。",
        "今天工作好累，睡不著。",
        "😭😭😭",
        "k̷̡i̷̧l̵̂l̷ m̷e̷",
        "tired tired tired tired",
    ],
)
def test_english_and_chinese_in_any_spelling_stay_covered(text: str) -> None:
    assert is_covered(text)
