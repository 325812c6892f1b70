"""Locales: the languages user-facing text comes in, and detecting one from a message.

:func:`detect_locale` is a pure function of the text, cheap enough to run on every
message: no dictionary, no model, no I/O. It answers only the question foureyes needs
(which of its three locales to reply in), not "what language is this". That question is
:func:`is_covered`'s, for the crisis screen: it asks a maintained language identifier
(CLD2, through ``pycld2``, whose models are compiled into its wheel) and falls back on
function words only where the identifier cannot tell.
"""

from __future__ import annotations

import re
from enum import StrEnum

import pycld2

__all__ = ["Locale", "detect_locale", "identified_language", "is_covered"]


class Locale(StrEnum):
    """A language foureyes writes user-facing text in (templates, fallbacks, resources)."""

    ZH_HANS = "zh-Hans"
    """Chinese in Simplified characters."""
    ZH_HANT = "zh-Hant"
    """Chinese in Traditional characters."""
    EN = "en"
    """English."""


# Frequent characters whose Traditional and Simplified forms differ, as (Traditional,
# Simplified). A pair is left out when either form is also ordinary in the other script
# (后/後, 里/裡, 台/臺, 著/着, 泪/淚...), because such a character would vote for the
# wrong script.
_PAIRS = (
    "這这 說说 個个 們们 會会 對对 時时 來来 還还 為为 麼么 麽么 國国 過过 沒没 讓让 覺觉 "
    "應应 開开 關关 樣样 學学 動动 問问 間间 聽听 見见 現现 點点 實实 經经 與与 發发 話话 "
    "長长 東东 車车 電电 頭头 愛爱 錢钱 買买 賣卖 讀读 寫写 書书 氣气 飛飞 認认 識识 變变 "
    "歡欢 難难 幫帮 樂乐 親亲 邊边 當当 從从 壓压 傷伤 嗎吗 謝谢 請请 給给 無无 處处 總总 "
    "誰谁 該该 媽妈 聯联 條条 隨随 題题 試试 語语 記记 許许 論论 訴诉 談谈 講讲 辦办 進进 "
    "運运 遠远 選选 醫医 門门 雖虽 離离 飯饭 殺杀 獨独 盡尽 確确 聲声 腦脑 舊旧 藥药 錯错 "
    "憂忧 慮虑 煩烦 緒绪 擔担 絕绝 遺遗 歲岁 於于"
).split()
_TRADITIONAL = frozenset(pair[0] for pair in _PAIRS)
_SIMPLIFIED = frozenset(pair[1] for pair in _PAIRS)

# CJK Unified Ideographs and their extensions, plus the compatibility ideographs.
_HAN_CLASS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f\U00030000-\U000323af"
_HAN_RUN = re.compile(f"[{_HAN_CLASS}]+")
# Word characters that are neither digits, "_" nor Han: every letter (str.isalpha) that is
# not an ideograph, and the rare numeric characters that are not decimal digits (², ½,
# Ⅻ), which do not count as letters; a run holding one is split on it.
_WORDISH = re.compile(f"[^\\W\\d_{_HAN_CLASS}]+")
# Kana and Hangul: a text holding them is Japanese or Korean, whatever its ideographs.
_KANA_HANGUL = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f\u1100-\u11ff\uac00-\ud7af]")
_TRADITIONAL_RE = re.compile("[" + "".join(sorted(_TRADITIONAL)) + "]")
_SIMPLIFIED_RE = re.compile("[" + "".join(sorted(_SIMPLIFIED)) + "]")

# An alphabetic word carries about as much as two Chinese characters (Chinese words
# average under two characters), so a few English terms in a Chinese sentence, or a
# place name in an English one, do not flip the result.
_CHARS_PER_WORD = 2


def _count(runs: re.Pattern[str], text: str) -> int:
    """How many characters of ``text`` the character class of ``runs`` matches.

    Counted by runs: a few matches instead of one per character.
    """
    return sum(map(len, runs.findall(text)))


def _words(text: str) -> int:
    """How many runs of letters other than ideographs ``text`` holds."""
    count = 0
    for run in _WORDISH.findall(text):
        if run.isalpha():
            count += 1
            continue
        in_word = False
        for ch in run:
            count += ch.isalpha() and not in_word
            in_word = ch.isalpha()
    return count


def _word_weight(text: str, han: int) -> int:
    """The weight of ``text``'s other words, as it compares with its ``han`` ideographs.

    Exact where the comparison needs it; otherwise a value on the same side of ``han``,
    found without the costly count: each word is at least one character that is not an
    ideograph, so where the ideographs outweigh all other characters (most Chinese
    messages) that bound is below ``han``; with no ideograph, one word decides.
    """
    bound = (len(text) - han) * _CHARS_PER_WORD
    if bound < han:
        return bound
    if not han:
        first = _WORDISH.search(text)
        if first is None:
            return 0
        if first.group().isalpha():
            return _CHARS_PER_WORD
    return _words(text) * _CHARS_PER_WORD


def detect_locale(text: str, default: Locale = Locale.EN) -> Locale:
    """Detect which of foureyes' locales ``text`` is written in.

    The text is Chinese when its Han ideographs outweigh its other words (each run of
    non-Han letters counts as one word worth two ideographs) and it holds no kana or
    Hangul (Japanese and Korean get English); digits, punctuation and emoji do not count.
    Chinese text is Traditional when it holds more characters from a curated set of
    Traditional-only forms than from their Simplified counterparts.

    Args:
        text: the message to classify.
        default: the answer when the text gives no signal: it has no letters at all,
            or its Han and other letters weigh the same. A Chinese ``default`` also
            decides between the scripts when their counts tie; otherwise a tie (such as
            text with no distinguishing character) is Simplified.

    Returns:
        ``zh-Hans``, ``zh-Hant`` or ``en``.
    """
    han = _count(_HAN_RUN, text)
    weight = _word_weight(text, han)
    if han == weight:
        return default
    if han < weight or _KANA_HANGUL.search(text) is not None:
        # Japanese and Korean are not Chinese, however many ideographs they hold.
        return Locale.EN
    traditional = len(_TRADITIONAL_RE.findall(text))
    simplified = len(_SIMPLIFIED_RE.findall(text))
    if traditional > simplified:
        return Locale.ZH_HANT
    if simplified > traditional or default != Locale.ZH_HANT:
        return Locale.ZH_HANS
    return Locale.ZH_HANT


# Frequent function words (and the commonest verb forms of wanting and being) of the
# Latin-script languages nearest to English that foureyes does not screen. A word that is
# also an English word ("will", "die", "me", "no", "a"...) is left out of them, so it never
# votes against English.
_ENGLISH_WORDS = frozenset(
    "i me my you your he she it we they them is am are was were be been have has had do "
    "does did not no and or but if the a an of to in on at for with from this that these "
    "what who why how when can can't cannot will would should could just so very want "
    "feel im i'm don't dont it's its there here all any some about like".split()
)
_OTHER_WORDS = (
    frozenset(
        # German
        "ich du er sie wir ihr nicht nichts kein keine mehr und oder aber ist bin bist sind "
        "war habe hast hat haben mein meine mich mir dich dir der das den dem des ein eine "
        "einen zu mit von auf für ohne auch noch schon nur wie was wer warum wenn weil ja "
        "leben sterben möchte heute immer alles".split()
        # Spanish
        + "yo tú tu él ella nosotros ellos ella no quiero quiere quieres estoy estás está soy "
        "eres es son y o pero el la los las un una unos de del que qué en con sin por para "
        "mi mis me te se muy más ya nada todo vivir morir hoy siempre".split()
        # French
        + "je tu il elle nous vous ils elles ne pas plus et ou mais le la les un une des du "
        "de que qui en avec sans pour sur mon ma mes moi toi suis es est sommes sont veux "
        "veut vivre mourir aujourd'hui toujours rien tout".split()
    )
    - _ENGLISH_WORDS
)
_LATIN_WORD = re.compile(r"[a-zà-ɏ]+(?:['’][a-zà-ɏ]+)?", re.IGNORECASE)
_LATIN_LETTER = re.compile(r"[A-Za-zÀ-ɏ]")


_COMBINING = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
# Letters that are neither Latin nor Han (Cyrillic, Arabic, kana, Hangul, Greek...): few
# or none in the messages the screen reads, so counting them is cheap.
_OTHER_LETTER_RUN = re.compile(f"[^\\W\\d_A-Za-zÀ-ɏ{_HAN_CLASS}]+")
_LATIN_RUN = re.compile(r"[A-Za-zÀ-ɏ]+")


_IDENTIFIED_CHARS = 200
"""The identifier reads this many characters at most (a language shows in fewer)."""


def identified_language(text: str) -> str | None:
    """The language CLD2 reliably finds ``text`` in (an ISO 639 code), or ``None``.

    ``None`` when it finds none, or is not sure (short or mixed text). Its models are in
    the ``pycld2`` wheel: no I/O. About 6 µs (it reads at most 200 characters; benchmarks/l0.py).
    """
    sample = text[:_IDENTIFIED_CHARS]
    try:
        reliable, _, details = pycld2.detect(sample)
    except pycld2.error:
        # CLD2 refuses bytes that are not valid UTF-8 (a lone surrogate): no answer.
        return None
    code = str(details[0][1]) if details else "un"
    if not reliable or code in ("un", "xxx"):
        return None
    return code


def is_covered(text: str) -> bool:
    """Whether ``text`` is in a language the crisis screen reads: Chinese or English.

    Chinese: text whose Han ideographs outweigh its other words (as in
    :func:`detect_locale`), unless it holds kana or Hangul or the identifier
    (:func:`identified_language`) finds it Japanese or Korean. English: Latin-script text
    the identifier finds English; where it cannot tell (short or odd text: "kms", "tired
    tired tired"), text whose English function words are at least as many as those of
    German, Spanish and French. Not covered: text mostly in another script (Cyrillic,
    Arabic, kana, Hangul...), Latin-script text the identifier finds in another language
    (Portuguese, Dutch, Turkish, Indonesian, Polish, Tagalog, Swahili...), and text it
    cannot place whose German, Spanish or French function words lead. Text with no
    letters is covered: nothing in it says it is another language.

    A pure function of the text, cheap enough for every message (the triage uses it to
    mark an uncovered message ``unscreened``: :mod:`foureyes.risk.triage`).
    """
    if text.isascii():  # the common case, without the counts below
        if _LATIN_LETTER.search(text) is None:
            return True
    else:
        han = _count(_HAN_RUN, text)
        if han and han >= _word_weight(text, han):
            if _KANA_HANGUL.search(text) is not None:
                return False
            return identified_language(text) not in ("ja", "ko")
        if _COMBINING.search(text) is not None:
            text = _COMBINING.sub("", text)  # stacked marks ("zalgo") hide their letters
        other = _count(_OTHER_LETTER_RUN, text)
        if other and other > _count(_LATIN_RUN, text):
            # Mostly letters of another script.
            return False
        if not (han or other) and _LATIN_LETTER.search(text) is None:
            return True  # no letters at all
    identified = identified_language(text)
    if identified is not None:
        return identified == "en"
    words = _LATIN_WORD.findall(text.lower().replace("’", "'"))
    english = sum(map(_ENGLISH_WORDS.__contains__, words))
    return english >= sum(map(_OTHER_WORDS.__contains__, words))
