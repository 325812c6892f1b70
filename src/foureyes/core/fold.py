"""Folded views of a text, with a map from folded offsets back to the original.

Code that looks for something in text a user or a model wrote (a keyword, a forbidden
phrase, a phone number) never looks at the raw string alone: the usual ways of writing it
so that a plain matcher misses it are undone first, and what is found in the folded view
is reported with a span of the *original* text. Two folds share that machinery
(:class:`Normalised`); :func:`fold_char` and :func:`fold_digit_char` are their per-character
specifications, which the fast paths follow and the tests check character by character.

**Keyword fold** (:func:`normalise`; the L0 gate, the gate's phrase rules, packet items):

1. Per character:

   - invisible characters are removed: format characters (``Cf``: zero-width space and
     joiners, bidi controls, soft hyphen, tags), combining marks used for strike-through and
     "zalgo" text, variation selectors, invisible fillers, control characters;
   - separators (white space, ``-``, ``_``, ``*``, ``·``) become a plain space;
   - compatibility forms fold to their plain form (NFKC): full-width ``ｋｉｌｌ``, math
     alphanumerics, circled digits, ligatures (``ﬁ`` → ``fi``), CJK compatibility
     ideographs, the ideographic space. Only characters whose folded form holds a letter,
     digit or space are folded, and those whose folded form is one ASCII punctuation
     character (full-width ``－``, ``，``, ``！``, small forms): ``－`` becomes a ``-`` and
     so a space. Other punctuation (``。``, ``…``) is left alone;
   - case folds (``str.casefold``).

2. Spacing tricks are undone: spaces, punctuation and symbols between two Han characters
   are removed (``想 死``, ``自.杀``, ``自，杀``, ``自~杀`` → ``想死``, ``自杀``; Chinese
   words have no spaces, so a separator inside one is an evasion), a run of three or more
   single Latin letters is joined (``k i l l`` → ``kill``), and any other run of spaces
   becomes one space. A joined run that begins or ends with a one-letter word (``i``,
   ``a``) keeps a word break there (:attr:`Normalised.word_breaks`): ``I k i l l`` folds
   to ``ikill`` and a matcher that wants word boundaries still finds ``kill``.

   Removing punctuation joins the ends of two sentences (``好想死。你了解吗``); a matcher
   for which that matters checks the original between its match's ends (L0 reads no
   negation or joke cue across removed punctuation).

**Look-alike fold** (``normalise(text, lookalikes=True)``; the L0 lexicon only, when
:func:`has_lookalikes` says it can change the text): after step 1, emoji standing for a
means become the word for it (a pill emoji reads ``pills``, or 药 beside a Han character),
Latin letters lose their marks (pinyin with tones: ``zì shā`` → ``zi sha``), and digits and
symbols written for letters (``0 1 3 4 5 7 @ $ !``; ``11`` reads ``ll``) become those letters
inside a word (``k1ll``, ``pi11s``, ``$uicide``; not ``5am``, ``1st``, ``mp3``, ``b4``) and in a
dotted or spaced run of single characters (``s.u.i.c.i.d.e``, ``k 1 l l``), whose dots become
spaces for step 2 to join. Other callers (the gate's rules, tool names, the learned screen)
keep the keyword fold: ``tool1`` and ``tooli`` are not one name.

Apostrophes are kept: the lexicon compiles each term with and without them instead
(``don't``, ``don’t``, ``dont``), which keeps them off the hot path.

**Digit fold** (:func:`normalise_digits`; the phone-number scanner):

1. Per character: every invisible character the keyword fold removes, and every other
   format character, combining mark and control character, is removed; every Unicode
   space and separator (``Zs``, ``Zl``, ``Zp``, tabs and line breaks), dash (``Pd``, minus
   signs), connector (``Pc``) and middle dot becomes a plain space; every decimal digit
   (full-width, Arabic-Indic, mathematical, ...), every character whose compatibility form
   is a digit (``①``, ``¹``) and the Chinese numerals ``〇零一二三四五六七八九`` (with ``幺``,
   the "one" of numbers read out, and the financial forms ``壹贰叁肆伍陆柒捌玖``) become
   ASCII digits; the compatibility forms of ``+ ( ) . /`` (``＋``, ``（``, ``．``) become
   those. Nothing else changes, case included.
2. Any run of spaces becomes one space.

So ``400`` and ``161`` joined by a thin space, a tab or a ``·``, with a zero-width space
between two digits, fold to ``400 161``; ``四零零一六一`` folds to ``400161``. The phone scanner
runs ``phonenumbers`` on the folded text.

Every step records where its output came from, so a match in the folded text maps back to a
span of the original text: :meth:`Normalised.original_span` refuses a match that starts or
ends inside the expansion of one original character (so a reported span's slice folds back
to exactly what matched), and :meth:`Normalised.covering_span` widens such a match to the
whole characters it came from.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from dataclasses import dataclass

__all__ = [
    "Normalised",
    "TOOL_NAME",
    "fold_char",
    "fold_digit_char",
    "has_lookalikes",
    "normalise",
    "normalise_digits",
    "tool_name_key",
]

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a tool (function) name may be: OpenAI's own pattern for function names."""
_NOT_KEY = re.compile(r"[^0-9a-z]")

# Every character with a compatibility decomposition or a non-trivial case folding lies in
# planes 0-2; plane 14 holds the tag characters and the variation selectors supplement.
_SCAN = (range(0x80, 0xD800), range(0xE000, 0x30000), range(0xE0000, 0xE01F0))
_FOLD_ROUNDS = 3

_HAN = "\u3400-\u4dbf\u4e00-\u9fff"
# Removed: format characters (Cf; a test checks the list against the Unicode database),
# strike-through and "zalgo" combining marks, variation selectors, invisible fillers, and
# control characters that are not white space.
_DROP = re.compile(
    "[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f"
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
    "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
    "\ufe00-\ufe0f\U000e0100-\U000e01ef"
    "\u115f\u1160\u3164\uffa0\u2800]"
)
_SEPARATOR = re.compile(r"[\s\-_*\u00b7\u2027\u30fb]")
_ASCII_SEPARATOR = re.compile(r"[\t\n\r\x0b\x0c\x1c-\x1f\-_*]")
_SPACES = re.compile(" {2,}")
# A run preceded by a space, or at the very start: two patterns, because an alternation
# in front would cost the regex engine its fast scan for the leading space.
_LETTER_RUN = re.compile(r" ([a-z](?: +[a-z]){2,})(?![a-z0-9])")
_LETTER_RUN_HINT = re.compile(r" [a-z] +[a-z] ")  # cheaper to scan for; most texts have none
_LETTER_RUN_AT_START = re.compile(r"[a-z](?: +[a-z]){2,}(?![a-z0-9])")
_RUN_GAP = re.compile(" +")
_ONE_LETTER_WORDS = frozenset("ia")

# The look-alike fold (normalise(..., lookalikes=True)). Digits and symbols written for the
# letter they look like; "11" reads "ll" (pi11s), a single "1" reads "i" (k1ll).
_LEET = {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i"}
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")
_WORD_CHARS = _LETTERS | frozenset("0123456789@$!")
_INNER_LOOKALIKE = re.compile("[a-z][0-9@$!]+[a-z]")
_EDGE_LOOKALIKE = re.compile("[0-9@$!]?[a-z]+[0-9@$!]?")
# A run of three or more single letters or look-alikes, dotted or spaced (k.i.l.l, k 1 l l).
_SINGLE_RUN = re.compile(r"(?<![a-z0-9@$])[a-z0-9@$](?:[ .]+[a-z0-9@$]){2,}(?![a-z0-9@$])")
# A dotted single character (k.i.l.l): the look-alike fold may join the run it is in.
_DOTTED = re.compile(r"\.[a-z0-9@$]\.")
# Emoji that stand for a means, and the word each is read as (English, Chinese). The words
# are the lexicon's own: "pills" and 药 are in its phrases (took all my 💊, 吞了一整瓶💊).
_MEANS_EMOJI = {
    "\U0001f48a": ("pills", "药"),  # pill
    "\U0001f52a": ("knife", "刀"),  # kitchen knife
    "\U0001f5e1": ("knife", "刀"),  # dagger
    "\U0001f52b": ("gun", "枪"),  # pistol
    "\U0001faa2": ("rope", "绳子"),  # knot
    "\U0001fa78": ("blood", "血"),  # drop of blood
    "\U0001fa92": ("razor", "刀片"),  # razor
    "\U0001f489": ("needle", "针"),  # syringe
    "\U0001f309": ("bridge", "桥"),  # bridge at night
    "\U0001f682": ("train", "火车"),  # locomotive
    "\U0001f686": ("train", "火车"),  # train
    "\U0001f684": ("train", "火车"),  # high-speed train
    "\U0001f688": ("train", "火车"),  # light rail
}
# Latin letters with a mark (the tone marks of pinyin among them) and their base letter.
_ACCENT_BASE = {
    c: base
    for c in map(chr, [*range(0xC0, 0x250), *range(0x1E00, 0x1F00)])
    if (base := unicodedata.normalize("NFD", c)[0]) != c
    and base.isascii()
    and base.isalpha()
    and c.lower() == c
}
_ACCENTED = re.compile("[" + "".join(_ACCENT_BASE) + "]")
_MEANS_EMOJI_PATTERN = re.compile("[" + "".join(_MEANS_EMOJI) + "]")
_FIRST_MEANS_EMOJI = min(_MEANS_EMOJI)
_HAN_CHAR = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]")

# The digit fold. Removed besides _DROP: every other format character, combining mark
# and control character that is not white space (categories, checked per character).
_DIGIT_DROP_CATEGORIES = frozenset({"Cf", "Mn", "Me", "Cc"})
# Read as spaces besides white space and the Z, Pd and Pc categories: minus signs, middle dots
# and bullets that can stand between digit groups, and the katakana prolonged sound mark
# (a dash to phonenumbers).
_DIGIT_SEPARATORS = frozenset(
    "\u00b7\u0387\u2022\u2027\u2043\u2212\u2219\u22c5\u2e31\u30fb\u30fc\uff65\uff70"
)
_DIGIT_SEPARATOR_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Pd", "Pc"})
_DIGIT_CATEGORIES = _DIGIT_DROP_CATEGORIES | _DIGIT_SEPARATOR_CATEGORIES
# What phonenumbers reads in a number besides digits and spaces; a compatibility form
# (``＋``, ``（``, ``．``) becomes its ASCII character. Other punctuation stays as it is.
_NUMBER_PUNCTUATION = frozenset("+()./")
_HAN_DIGITS = {
    **dict.fromkeys("〇零", "0"),
    **dict.fromkeys("一幺壹", "1"),
    **dict.fromkeys("二贰貳", "2"),
    **dict.fromkeys("三叁參", "3"),
    **dict.fromkeys("四肆", "4"),
    **dict.fromkeys("五伍", "5"),
    **dict.fromkeys("六陆陸", "6"),
    **dict.fromkeys("七柒", "7"),
    **dict.fromkeys("八捌", "8"),
    **dict.fromkeys("九玖", "9"),
}
"""Chinese numerals as digits are written in a number read out one digit at a time."""

_Edit = tuple[int, int, str]
"""Replace ``text[start:end]`` by the string, which may be empty."""


@dataclass(frozen=True, slots=True)
class _OffsetMap:
    """Piecewise map from positions in a rewritten string back to its source string.

    Segment ``i`` starts at output position ``out[i]``; a position ``q`` in it maps to
    ``src[i] + step[i] * (q - out[i])``: ``step`` is 1 for copied text and 0 for the
    output of one replacement, all of whose characters map to the character it replaced.
    """

    out: tuple[int, ...]
    src: tuple[int, ...]
    step: tuple[int, ...]

    def __call__(self, q: int) -> int:
        i = bisect.bisect_right(self.out, q) - 1
        return self.src[i] + self.step[i] * (q - self.out[i])


@dataclass(frozen=True, slots=True)
class Normalised:
    """A text folded for matching, and the way back to the original's offsets."""

    text: str
    """The folded text matchers run over."""
    maps: tuple[_OffsetMap, ...] = ()
    """The offset maps of the steps that changed positions, first step first."""
    word_breaks: frozenset[int] = frozenset()
    """Folded positions inside a joined run of single letters that are word boundaries
    all the same: after the run's first letter and before its last when that letter is a
    one-letter word (``i``, ``a``), so ``I w a n t`` folds to ``iwant`` with a break at 1."""

    def origin(self, q: int) -> int:
        """The original position the folded position ``q`` came from."""
        for offsets in reversed(self.maps):
            q = offsets(q)
        return q

    def covering_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text whose characters the folded span came from.

        ``[start, end)`` must be non-empty. The result runs from the original character of
        the span's first folded character to that of its last, both whole; characters
        removed inside the span (a zero-width space between two letters) lie inside it,
        those removed at its edges do not.
        """
        if not self.maps:
            return start, end
        return self.origin(start), self.origin(end - 1) + 1

    def original_span(self, start: int, end: int) -> tuple[int, int] | None:
        """Map the folded span ``[start, end)`` (non-empty) to a span of the original text.

        Returns:
            :meth:`covering_span`; ``None`` when the folded span starts or ends inside the
            expansion of one original character (half of ``ﬁ``), so that no slice of the
            original folds to exactly the folded span.
        """
        first, end_of_last = self.covering_span(start, end)
        if self.maps:
            if start > 0 and self.origin(start - 1) == first:
                return None
            if end < len(self.text) and self.origin(end) == end_of_last - 1:
                return None
        return first, end_of_last


def normalise(text: str, *, lookalikes: bool = False) -> Normalised:
    """Fold ``text`` for keyword matching (see the module docstring for the steps).

    With ``lookalikes``, step 1 is followed by the look-alike fold (:func:`has_lookalikes`
    says whether it can change anything): emoji standing for a means become its word, and
    digits and symbols written for letters inside words, or in a dotted or spaced run of
    single characters, become those letters.

    Pure and total: every string folds, the empty string to itself.
    """
    maps: list[_OffsetMap] = []
    if text.isascii():
        folded = _ASCII_SEPARATOR.sub(" ", text.lower())
        if not folded.isprintable():  # control characters left: the general path drops them
            folded = _fold_characters(text, maps)
    else:
        folded = _fold_characters(text, maps)
    if lookalikes:
        folded = _fold_lookalikes(folded, maps)
    deletions, breaks = _spacing_deletions(folded)
    if deletions:
        folded = _apply(folded, deletions, maps)
    if breaks:
        return Normalised(folded, tuple(maps), _shifted(breaks, deletions))
    return Normalised(folded, tuple(maps))


def has_lookalikes(folded: str, text: str) -> bool:
    """Whether the look-alike fold could change ``text`` (``folded`` is its keyword fold).

    Cheap: most messages have no digit or symbol beside a letter, no dotted letters and no
    means emoji, and :class:`~foureyes.risk.l0.L0Gate` folds them only once.
    """
    return (
        _lookalike_hint(folded)
        or _has_means_emoji(text)
        or (not folded.isascii() and _ACCENTED.search(folded) is not None)
    )


def _fold_lookalikes(text: str, maps: list[_OffsetMap]) -> str:
    """The look-alike fold of step 1's output (see :func:`normalise`)."""
    if _has_means_emoji(text):
        edits = [
            (m.start(), m.end(), _emoji_word(text, m.start(), m.end()))
            for m in _MEANS_EMOJI_PATTERN.finditer(text)
        ]
        text = _apply(text, edits, maps)
    if not text.isascii() and _ACCENTED.search(text):
        # Pinyin written with its tones (zì shā): the letters without their marks.
        text = _ACCENTED.sub(_unaccented, text)
    if not _lookalike_hint(text):
        return text
    chars = list(text)  # every replacement is one character for one: positions stay
    for run in _SINGLE_RUN.finditer(text):
        body = run.group()
        if sum(c.isalpha() for c in body) >= 2 and any(c in _LEET or c == "." for c in body):
            for i in range(run.start(), run.end()):
                chars[i] = " " if text[i] == "." else _LEET.get(text[i], text[i])
    for start, end in _leet_words(text):
        for i, c in enumerate(text[start:end].replace("11", "ll"), start):
            chars[i] = _LEET.get(c, c)
    return "".join(chars)


def _leet_words(text: str) -> list[tuple[int, int]]:
    """The words of letters and look-alikes that read as letters (trailing ``!`` left out).

    A word qualifies with look-alikes between two letters (``k1ll``, ``pi11s``) and two
    letters or more, or with one at either edge of four letters or more (``0verdose``,
    ``$uicide``); not ``5am``, ``1st``, ``mp3``, ``b4``, ``20yearold``.
    """
    words: list[tuple[int, int]] = []
    end = 0
    for start in _lookalike_positions(text):
        if start < end or not (
            text[start - 1 : start] in _LETTERS or text[start + 1 : start + 2] in _LETTERS
        ):
            continue  # inside a word already read, or no letter beside it (a number, "!")
        while start > 0 and text[start - 1] in _WORD_CHARS:
            start -= 1
        end = start + 1
        while end < len(text) and text[end] in _WORD_CHARS:
            end += 1
        body = text[start:end].rstrip("!")
        letters = sum(c.isalpha() for c in body)
        if letters == len(body):
            continue  # only a trailing "!": punctuation
        if (letters >= 2 and _INNER_LOOKALIKE.search(body)) or (
            letters >= 4 and _EDGE_LOOKALIKE.fullmatch(body)
        ):
            words.append((start, start + len(body)))
    return words


def _lookalike_positions(text: str) -> list[int]:
    """Where the look-alike characters are, in order.

    ``str.find`` per character: most texts have none or few, and a character-class search
    would read every position.
    """
    positions: list[int] = []
    for char in _LEET:
        i = text.find(char)
        while i != -1:
            positions.append(i)
            i = text.find(char, i + 1)
    positions.sort()
    return positions


def _lookalike_hint(folded: str) -> bool:
    if positions := _lookalike_positions(folded):
        if _leet_words(folded):
            return True
        for i in positions:  # spaced among letters: k 1 l l
            if folded[i - 1 : i] == " " == folded[i + 1 : i + 2] and (
                _single_letter(folded, i - 2) or _single_letter(folded, i + 2)
            ):
                return True
    return "." in folded and _DOTTED.search(folded) is not None


def _single_letter(text: str, i: int) -> bool:
    """Whether ``text[i]`` is a letter standing alone (spaces or the text's ends around it)."""
    return (
        0 <= i < len(text)
        and text[i].isalpha()
        and (i == 0 or not text[i - 1].isalnum())
        and (i + 1 == len(text) or not text[i + 1].isalnum())
    )


def _has_means_emoji(text: str) -> bool:
    # Every means emoji is astral: ``max`` (a C loop) rules most texts out at once.
    return (
        not text.isascii()
        and max(text) >= _FIRST_MEANS_EMOJI
        and (_MEANS_EMOJI_PATTERN.search(text) is not None)
    )


def _unaccented(match: re.Match[str]) -> str:
    return _ACCENT_BASE[match.group()]


def _emoji_word(text: str, start: int, end: int) -> str:
    """The word a means emoji stands for: Chinese beside a Han character, else English."""
    english, chinese = _MEANS_EMOJI[text[start:end]]
    beside = text[:start].rstrip()[-1:] or text[end:].lstrip()[:1]
    if _HAN_CHAR.match(beside):
        return chinese
    # Spaced off only from what it touches: a reported span never ends inside an expansion.
    left = " " if start > 0 and not text[start - 1].isspace() else ""
    right = " " if end < len(text) and not text[end].isspace() else ""
    return f"{left}{english}{right}"


def fold_char(char: str) -> str:
    """What step 1 makes of one character (the specification the fast paths follow)."""
    if _DROP.fullmatch(char):
        return ""
    if _SEPARATOR.fullmatch(char):
        return " "
    folded = unicodedata.normalize("NFKC", char)
    for _ in range(_FOLD_ROUNDS):  # Greek iota subscripts need more than one round
        folded = unicodedata.normalize("NFKC", folded.casefold())
    # The last step is ``lower`` (cheaper than ``casefold`` and what the fast path runs):
    # Cherokee case-folds to upper case, and a few composed Greek forms fold apart again.
    folded = folded.lower()
    if folded.lower() != folded or unicodedata.normalize("NFKC", folded) != folded:
        folded = unicodedata.normalize("NFKD", folded)
    folded = _DROP.sub("", folded)
    if folded and not any(c.isalnum() or c.isspace() for c in folded):
        if len(folded) == 1 and folded.isascii() and char != folded:
            # Full-width and small forms of ASCII punctuation fold to it (``－`` is a ``-``).
            return _SEPARATOR.sub(" ", folded)
        # Other punctuation look-alikes stay; no keyword contains punctuation.
        return char.casefold() if len(char.casefold()) == 1 else char
    return _SEPARATOR.sub(" ", folded)


def normalise_digits(text: str) -> Normalised:
    """Fold ``text`` for finding numbers (the digit fold of the module docstring).

    Pure and total: every string folds, the empty string to itself.
    """
    maps: list[_OffsetMap] = []
    folded = _replace_characters(text, *_digit_table(), maps)
    if "  " in folded:
        runs = [(m.start() + 1, m.end(), "") for m in _SPACES.finditer(folded)]
        folded = _apply(folded, runs, maps)
    return Normalised(folded, tuple(maps))


def fold_digit_char(char: str) -> str:
    """What step 1 of the digit fold makes of one character (its specification)."""
    category = unicodedata.category(char)
    if char.isspace() or category in _DIGIT_SEPARATOR_CATEGORIES or char in _DIGIT_SEPARATORS:
        return " "
    if _DROP.fullmatch(char) or category in _DIGIT_DROP_CATEGORIES:
        return ""
    if char in _HAN_DIGITS:
        return _HAN_DIGITS[char]
    decimal = unicodedata.decimal(char, None)
    if decimal is not None:
        return str(decimal)
    compatible = unicodedata.normalize("NFKC", char)
    if (
        compatible != char
        and len(compatible) == 1
        and (compatible.isdigit() or compatible in _NUMBER_PUNCTUATION)
    ):
        return fold_digit_char(compatible)
    return char


def _fold_characters(text: str, maps: list[_OffsetMap]) -> str:
    # Every character whose fold differs from its lower case is in the table, and the
    # table's replacements are lower case already: lowering afterwards keeps positions.
    return _replace_characters(text, *_fold_table(), maps).lower()


def _replace_characters(
    text: str, table: dict[str, str], pattern: re.Pattern[str], maps: list[_OffsetMap]
) -> str:
    """``text`` with every character ``pattern`` finds in ``table`` replaced by its value."""
    edits = [
        (m.start(), m.end(), folded)
        for m in pattern.finditer(text)
        if (folded := table.get(m.group())) is not None
    ]
    if any(len(replacement) != 1 for _, _, replacement in edits):
        text = _apply(text, edits, maps)
    elif edits:  # one-for-one replacements keep every position
        pieces: list[str] = []
        p = 0
        for start, end, replacement in edits:
            pieces += (text[p:start], replacement)
            p = end
        pieces.append(text[p:])
        text = "".join(pieces)
    return text


def _spacing_deletions(text: str) -> tuple[list[_Edit], list[int]]:
    """The spacing edits of step 2 and the word breaks of the letter runs they join.

    The breaks are positions in ``text`` (see :attr:`Normalised.word_breaks`).
    """
    deletions: list[tuple[int, int]] = []
    breaks: list[int] = []
    if not text.isascii():
        deletions += (m.span(1) for m in _han_gap().finditer(text))
    if "  " in text:
        deletions += ((m.start() + 1, m.end()) for m in _SPACES.finditer(text))
    runs = [m.span(1) for m in _LETTER_RUN.finditer(text)] if _LETTER_RUN_HINT.search(text) else []
    if at_start := _LETTER_RUN_AT_START.match(text):
        # The other pattern finds the tail of this run again, from its second letter.
        runs = [at_start.span(), *(run for run in runs if run[0] >= at_start.end())]
    for start, end in runs:
        gaps = [g.span() for g in _RUN_GAP.finditer(text, start, end)]
        deletions += gaps
        if text[start] in _ONE_LETTER_WORDS:
            breaks.append(gaps[0][1])
        if text[end - 1] in _ONE_LETTER_WORDS:
            breaks.append(end - 1)
    deletions.sort()
    merged: list[_Edit] = []
    for start, end in deletions:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]), "")
        else:
            merged.append((start, end, ""))
    return merged, breaks


def _shifted(positions: list[int], deletions: list[_Edit]) -> frozenset[int]:
    """``positions`` (none of them deleted) after the deletions are applied."""
    ends = [end for _, end, _ in deletions]
    removed = [0]
    for start, end, _ in deletions:
        removed.append(removed[-1] + end - start)
    return frozenset(p - removed[bisect.bisect_right(ends, p)] for p in positions)


def _apply(text: str, edits: list[_Edit], maps: list[_OffsetMap]) -> str:
    """``text`` with every edit applied (in order, not overlapping); records the offset map."""
    pieces: list[str] = []
    out: list[int] = []
    src: list[int] = []
    step: list[int] = []
    q = p = 0
    for start, end, replacement in edits:
        if start > p:
            out.append(q)
            src.append(p)
            step.append(1)
            pieces.append(text[p:start])
            q += start - p
        if replacement:
            out.append(q)
            src.append(start)
            step.append(0)
            pieces.append(replacement)
            q += len(replacement)
        p = end
    out.append(q)
    src.append(p)
    step.append(1)
    pieces.append(text[p:])
    maps.append(_OffsetMap(tuple(out), tuple(src), tuple(step)))
    return "".join(pieces)


@functools.cache
def _han_gap() -> re.Pattern[str]:
    """Spaces, punctuation and symbols between two Han characters (step 2 removes them).

    The gap's characters are the space, every punctuation (``P*``) and symbol (``S*``)
    character of the BMP that step 1 leaves (``，``, ``。``, ``/``, ``~``, ``❤``), and the
    emoji and symbol blocks U+1F000-U+1FAFF (one range: a class of many astral ranges
    would cost the regex engine a comparison per range on every character). Computed
    once per process from the running Python's Unicode database.
    """
    table, _ = _fold_table()
    every = "".join(map(chr, range(0x21, 0x10000)))
    gap = [
        char
        for char, category in zip(every, map(unicodedata.category, every), strict=True)
        if category[0] in "PS" and char not in table and not 0xD800 <= ord(char) < 0xE000
    ]
    return re.compile(f"[{_HAN}]((?:[ \U0001f000-\U0001faff]|{_char_class(gap)})+)(?=[{_HAN}])")


@functools.cache
def _fold_table() -> tuple[dict[str, str], re.Pattern[str]]:
    """Every character whose fold is not its lower case, and a pattern that finds them.

    Computed once per process from the running Python's Unicode database (about 0.1 s).
    """
    chars = [chr(code) for block in _SCAN for code in block]
    lowers = list(map(str.lower, chars))
    # Candidates, found with C-level calls mapped over all characters: the removed and the
    # separators, those with a decomposition, and those whose case folding is special.
    # Every other character folds to its lower case (a test checks this exhaustively).
    every = "".join(chars)
    candidates = {*_DROP.findall(every), *_SEPARATOR.findall(every), *map(chr, range(0x80))}
    candidates.update(
        char
        for char, lower, folded, decomposition in zip(
            chars,
            lowers,
            map(str.casefold, chars),
            map(unicodedata.decomposition, chars),
            strict=True,
        )
        if decomposition or lower != folded or len(lower) != 1
    )
    table: dict[str, str] = {}
    for char in candidates:
        folded = fold_char(char)
        if folded != char.lower():
            table[char] = folded
    return table, _table_pattern(table)


@functools.cache
def _digit_table() -> tuple[dict[str, str], re.Pattern[str]]:
    """Every character the digit fold changes, and a pattern that finds them.

    Computed once per process from the running Python's Unicode database. The candidates
    are the characters :func:`fold_digit_char` can change: by category, by decimal value,
    the Chinese numerals, and those with a compatibility decomposition.
    """
    every = "".join(map(chr, range(0x80))) + "".join(chr(c) for block in _SCAN for c in block)
    # C-level passes over every character: decimal digits and white space by pattern, the
    # rest by category or decomposition.
    candidates = {*re.findall(r"[\d\s]", every), *_DROP.findall(every), *_HAN_DIGITS}
    candidates.update(_DIGIT_SEPARATORS)
    candidates.update(
        char
        for char, category, decomposition in zip(
            every,
            map(unicodedata.category, every),
            map(unicodedata.decomposition, every),
            strict=True,
        )
        if decomposition or category in _DIGIT_CATEGORIES
    )
    table = {char: folded for char in candidates if (folded := fold_digit_char(char)) != char}
    return table, _table_pattern(table)


def _table_pattern(table: dict[str, str]) -> re.Pattern[str]:
    """A pattern for the table's characters: its BMP ones listed, every astral one a candidate.

    A character class with hundreds of astral ranges would make the regex engine try each
    range on every character; an astral character the table lacks is looked up and kept.
    """
    bmp = sorted(c for c in table if ord(c) < 0x10000)
    return re.compile(_char_class(bmp)[:-1] + "\U00010000-\U0010ffff]")


def _char_class(chars: list[str]) -> str:
    ranges: list[tuple[int, int]] = []
    for code in map(ord, chars):
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    body = "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )
    return f"[{body}]"


def tool_name_key(name: str) -> str:
    """What a tool name is once folded: the letters and digits of its keyword fold.

    Two names with one key differ only by case, separators (``_``, ``-``, spaces), width,
    invisible characters or the other spellings :func:`normalise` undoes, so allow and
    deny lists compare keys, and a call whose name is not exactly a declared one but has
    a declared one's key is a look-alike. Letters outside ASCII that survive the fold (a
    Cyrillic ``о``) are dropped from the key rather than kept: such a name is never a
    valid one (:data:`TOOL_NAME`), so it is refused before any list is consulted.
    """
    return _NOT_KEY.sub("", normalise(name).text)
