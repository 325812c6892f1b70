"""Normalised overlap and polarity: whether two short statements say the same thing, by code.

One definition, shared by the review ensemble (matching packet items across views) and
the evaluation metrics (whether a packet item restates what the agent already said, for
the unique-delta rate). Two statements can share almost every word and still conclude
the opposite ("the fix is correct", "the fix is not correct"), so a comparison has three
outcomes (:class:`Comparison`): the **same** statement, a **contradiction**, or a
**different** statement.

1. **Fold** each text with :func:`foureyes.core.fold.normalise`: compatibility forms to
   their plain form (NFKC: full-width letters, ligatures), case folded, invisible
   characters removed, separators to spaces (and the spaces between Han characters
   removed).
2. **Tokenise** the folded text (:func:`tokens`): every Han character is one token
   (Chinese writes no spaces between words), every other maximal run of letters and
   digits is one token; everything else (spaces, punctuation, symbols) only separates
   tokens.
3. **Read polarity marks** (:func:`read`): the folded text is scanned once, left to right,
   for the marks of the small rule set below, the longest mark at each place first
   (English marks as whole words, Chinese marks by character, inside words):

   - a **negator** counts one negation: ``not no never none nothing nobody nowhere
     neither nor without cannot unable non``, ``fail(s/ed/ing) to``, the ``n't``
     contractions (``isn't``, ``isn’t`` and ``isnt`` alike; ``can't`` reads ``can``,
     ``won't`` reads ``will``: the verb stays a token); ``nor`` counts only when no
     negator came before it (``neither ... nor`` and ``not ... nor`` are one negation).
     Chinese, Simplified and Traditional: ``不 没 沒 无 無 非 未 别 別 勿 否 莫 毋``;
   - a **reversal word** is the negative side of a conclusion that matters in review and
     counts one negation too; both sides read as the concept's one token, so
     ``incorrect`` and ``correct`` are one token whose polarity differs. Concepts:
     correct (``correct right accurate`` / ``incorrect wrong inaccurate erroneous``;
     ``正确 正確 准确 準確 对的 對的 对了 對了 没错 沒錯`` / ``错误 錯誤 错 錯 不对 不對``), pass
     (``pass(es/ed/ing) succeed(s/ed) success(ful/fully)`` / ``fail(s/ed/ing) failure(s)``;
     ``通过 通過 成功`` / ``失败 失敗``), safe (``safe safely`` / ``unsafe dangerous``; ``安全`` /
     ``危险 危險``), secure / insecure, valid (``valid`` / ``invalid``; ``有效 合法`` / ``无效
     無效 非法``), works (``works working worked`` / ``broken breaks broke breaking``;
     ``正常`` / ``损坏 損壞 崩溃 崩潰``), fixed / unfixed, good / bad (and ``不错 不錯``: "not
     bad", good), complete / incomplete, consistent / inconsistent, necessary /
     unnecessary, handled / unhandled, tested / untested, defined / undefined. ``true``
     and ``false`` are left out: in review they are mostly values of code;
   - a **hedge** counts no negation and only marks the statement as hedged: ``might may
     maybe perhaps possibly probably likely presumably apparently arguably seemingly
     seem(s/ed) appear(s) could``, ``i/we think believe guess suspect``, ``not sure``,
     ``not certain``, ``unsure`` (doubt is a hedge, not a reversal), ``unlikely`` (a hedge
     and one negation); ``可能 也许 也許 或许 或許 大概 似乎 好像 恐怕 估计 估計 应该 應該 看起来
     看起來 我觉得 我覺得 我认为 我認為``;
   - an **exception** is a word that looks negated but is not, read as plain words (its
     characters stay tokens): ``not only``, ``not just``, ``no matter``, ``no doubt``, ``no
     op``; ``不久 不断 不斷 不过 不過 不仅 不僅 不但 不管 不论 不論 不少 无论 無論 无数 無數 非常
     未来 未來 否则 否則 是否 能否 可否 与否 與否``, the questions ``是不是 对不对 對不對 能不能
     会不会 會不會 有没有 有沒有 要不要 行不行``, and the compounds of ``别`` that are no
     command (``别人 别的 特别 区别 分别 类别 级别 识别 差别 个别`` and their Traditional
     forms), and ``针对 針對 相对 相對 绝对 絕對``.

   A statement's **polarity** is negative when it counts an odd number of negations and
   positive otherwise: a double negation ("not incorrect", "不是不对") is positive.
   Polarity is read over the whole statement, which suits the one-clause items of a
   review packet; a statement that joins a positive and a negative clause is negative.
   Forms outside the list (other antonyms, sarcasm, "hardly") are not read.
4. **Content tokens** (:attr:`Reading.content`): the tokens of the text outside the marks,
   plus each reversal word's concept token and each exception's own tokens. Negators and
   hedges are left out, so they never dominate the overlap: "X is correct" and "X is not
   correct" overlap 1.0 and differ in polarity only.
5. **Overlap** (:func:`overlap`) is the Jaccard index of the two content-token *sets*,
   ``|A ∩ B| / |A ∪ B|``, in [0, 1]. When neither text has a content token, it is the
   Jaccard index of their plain tokens (step 2), and when neither has any token, 1.0 when
   they fold to the same text and 0.0 otherwise.
6. **Compare** (:func:`compare`): an overlap below :data:`MATCH_THRESHOLD` (0.5: at least
   half of all the distinct content tokens of the two are shared) is
   :attr:`~Comparison.DIFFERENT`; otherwise the same polarity is
   :attr:`~Comparison.SAME` (a hedged restatement included) and opposite polarities are
   :attr:`~Comparison.CONTRADICTS`. Two texts **match** (:func:`matches`) when they
   compare the same. The threshold is this project's choice, not a published constant;
   paraphrases with little shared wording stay different.

No model judges sameness here: :func:`compare` is the one place a model judge would plug
in (consulted on the pairs the rules leave uncertain) when one is configured; none is
built. Pure and total: every pair of strings compares, the patterns are compiled once at
import and the reading of a text is cached.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from enum import StrEnum

from foureyes.core.fold import normalise

__all__ = [
    "Comparison",
    "MATCH_THRESHOLD",
    "Reading",
    "compare",
    "matches",
    "overlap",
    "read",
    "tokens",
]

MATCH_THRESHOLD = 0.5
"""The least overlap at which two texts count as the same (or the opposite) statement."""

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_TOKEN = re.compile(rf"[{_HAN}]|[^\W_{_HAN}]+")


class Comparison(StrEnum):
    """What two statements are to each other (step 6 of the module doc)."""

    SAME = "same"
    """They overlap enough and conclude alike: one restates the other."""
    CONTRADICTS = "contradicts"
    """They overlap enough and conclude the opposite: a negated or reversed conclusion."""
    DIFFERENT = "different"
    """They overlap too little to be about the same thing."""


@dataclass(frozen=True, slots=True)
class Reading:
    """What the rule set reads in one text (steps 3 and 4 of the module doc)."""

    content: frozenset[str]
    """The content tokens: what the statement is about, without negators and hedges."""
    tokens: frozenset[str]
    """The plain tokens of the folded text (:func:`tokens`)."""
    negations: int
    """Negators and reversal words counted."""
    hedged: bool
    """Whether a hedge was read ("probably", 可能): a hedge never changes the polarity."""

    @property
    def negative(self) -> bool:
        """Whether the polarity is negative: an odd number of negations."""
        return self.negations % 2 == 1


@dataclass(frozen=True, slots=True)
class _Mark:
    negates: int = 0
    """Negations the mark counts (a negator or a reversal word: one)."""
    hedge: bool = False
    tokens: tuple[str, ...] = ()
    """Content tokens the mark stands for (a concept, a contraction's verb, an exception)."""
    negator: bool = False
    """A negator (not a reversal word): what ``nor`` looks back for."""
    nor: bool = False
    """``nor``: counts only when no negator came before it."""


_NEGATOR = _Mark(negates=1, negator=True)
_HEDGE = _Mark(hedge=True)
_EN: dict[str, _Mark] = {}
_ZH: dict[str, _Mark] = {}


def _words(table: dict[str, _Mark], words: str, mark: _Mark) -> None:
    for word in words.split():
        table[word.replace("+", " ")] = mark


# English negators ("+" joins the words of a phrase).
_words(_EN, "not no never none nothing nobody nowhere neither without unable non", _NEGATOR)
_words(_EN, "fail+to fails+to failed+to failing+to", _NEGATOR)
_EN["cannot"] = _Mark(negates=1, tokens=("can",), negator=True)
_EN["nor"] = _Mark(negates=1, negator=True, nor=True)
for _stem, _verb in {
    "is": "is", "are": "are", "was": "was", "were": "were", "do": "do", "does": "does",
    "did": "did", "has": "has", "have": "have", "had": "had", "ca": "can", "could": "could",
    "wo": "will", "would": "would", "should": "should", "must": "must", "need": "need",
    "sha": "shall", "ai": "is", "might": "might",
}.items():  # fmt: skip
    for _apostrophe in ("'", "’", ""):
        _EN[f"{_stem}n{_apostrophe}t"] = _Mark(negates=1, tokens=(_verb,), negator=True)
# English reversal words: the positive side is the concept's token, the negative side too.
for _concept, _positive, _negative in (
    ("correct", "correct correctly right accurate", "incorrect incorrectly wrong wrongly "
     "inaccurate erroneous"),
    ("pass", "pass passes passed passing succeed succeeds succeeded success successful "
     "successfully", "fail fails failed failing failure failures"),
    ("safe", "safe safely", "unsafe dangerous"),
    ("secure", "secure", "insecure"),
    ("valid", "valid", "invalid"),
    ("works", "works working worked", "broken breaks broke breaking"),
    ("fixed", "fixed", "unfixed"),
    ("good", "good", "bad"),
    ("complete", "complete", "incomplete"),
    ("consistent", "consistent", "inconsistent"),
    ("necessary", "necessary", "unnecessary"),
    ("handled", "handled", "unhandled"),
    ("tested", "tested", "untested"),
    ("defined", "defined", "undefined"),
):  # fmt: skip
    _words(_EN, _positive, _Mark(tokens=(_concept,)))
    _words(_EN, _negative, _Mark(negates=1, tokens=(_concept,)))
_words(
    _EN,
    "might may maybe perhaps possibly probably likely presumably apparently arguably "
    "seemingly seem seems seemed appear appears could unsure not+sure not+certain "
    "i+think i+believe i+guess i+suspect we+think we+believe we+guess we+suspect",
    _HEDGE,
)
_EN["unlikely"] = _Mark(negates=1, hedge=True, negator=True)
for _phrase in ("not only", "not just", "no matter", "no doubt", "no op"):
    _EN[_phrase] = _Mark(tokens=tuple(_phrase.split()))

# Chinese, Simplified and Traditional (every entry written in both where they differ).
for _char in "不没沒无無非未别別勿否莫毋":
    _ZH[_char] = _NEGATOR
for _concept, _positive, _negative in (
    ("correct", "正确 正確 准确 準確 对的 對的 对了 對了 没错 沒錯", "错误 錯誤 错 錯 不对 不對"),
    ("pass", "通过 通過 成功", "失败 失敗"),
    ("safe", "安全", "危险 危險"),
    ("valid", "有效 合法", "无效 無效 非法"),
    ("works", "正常", "损坏 損壞 崩溃 崩潰"),
    ("good", "不错 不錯", ""),
):
    _words(_ZH, _positive, _Mark(tokens=(_concept,)))
    _words(_ZH, _negative, _Mark(negates=1, tokens=(_concept,)))
_words(
    _ZH,
    "可能 也许 也許 或许 或許 大概 似乎 好像 恐怕 估计 估計 应该 應該 看起来 看起來 "
    "我觉得 我覺得 我认为 我認為",
    _HEDGE,
)
for _word in (
    "不久 不断 不斷 不过 不過 不仅 不僅 不但 不管 不论 不論 不少 无论 無論 无数 無數 非常 "
    "未来 未來 否则 否則 是否 能否 可否 与否 與否 "
    "是不是 对不对 對不對 能不能 会不会 會不會 有没有 有沒有 要不要 行不行 "
    "别人 別人 别的 別的 特别 特別 区别 區別 分别 分別 类别 類別 级别 級別 识别 識別 "
    "差别 差別 个别 個別 针对 針對 相对 相對 绝对 絕對"
).split():
    _ZH[_word] = _Mark(tokens=tuple(_word))


def _alternation(words: dict[str, _Mark]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=lambda w: (-len(w), w)))


# Latin marks are whole words (no Latin letter or digit on either side); Han marks are not.
_LATIN = rf"[^\W_{_HAN}]"
_MARK = re.compile(rf"(?<!{_LATIN})(?:{_alternation(_EN)})(?!{_LATIN})|(?:{_alternation(_ZH)})")
_MARKS = {**_EN, **_ZH}
del _char, _concept, _negative, _positive, _phrase, _stem, _verb, _apostrophe, _word


def tokens(text: str) -> frozenset[str]:
    """The set of plain tokens of ``text`` once folded (steps 1 and 2 of the module doc)."""
    return frozenset(_TOKEN.findall(normalise(text).text))


@functools.lru_cache(maxsize=4096)
def read(text: str) -> Reading:
    """The content tokens, negations and hedging of ``text`` (steps 3 and 4)."""
    folded = normalise(text).text
    content: set[str] = set()
    negations = 0
    negated = hedged = False
    start = 0
    for found in _MARK.finditer(folded):
        content.update(_TOKEN.findall(folded[start : found.start()]))
        start = found.end()
        mark = _MARKS[found.group()]
        content.update(mark.tokens)
        hedged = hedged or mark.hedge
        if mark.nor and negated:
            continue
        negated = negated or mark.negator
        negations += mark.negates
    content.update(_TOKEN.findall(folded[start:]))
    return Reading(frozenset(content), frozenset(_TOKEN.findall(folded)), negations, hedged)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b)


def overlap(first: str, second: str) -> float:
    """The Jaccard overlap of the content tokens of ``first`` and ``second`` (step 5)."""
    a, b = read(first), read(second)
    if a.content or b.content:
        return _jaccard(a.content, b.content)
    if a.tokens or b.tokens:
        return _jaccard(a.tokens, b.tokens)
    return 1.0 if normalise(first).text.strip() == normalise(second).text.strip() else 0.0


def compare(first: str, second: str, threshold: float = MATCH_THRESHOLD) -> Comparison:
    """Whether ``first`` and ``second`` say the same, the opposite, or something else (step 6).

    Symmetric, and every text is the same as itself. This is the one comparison of
    statements in foureyes: a model judge, once one is configured, would be consulted
    here; none is built, so the rule set of the module doc decides alone.
    """
    if overlap(first, second) < threshold:
        return Comparison.DIFFERENT
    if read(first).negative is read(second).negative:
        return Comparison.SAME
    return Comparison.CONTRADICTS


def matches(first: str, second: str, threshold: float = MATCH_THRESHOLD) -> bool:
    """Whether ``first`` and ``second`` compare :attr:`~Comparison.SAME` (step 6).

    An overlap of at least ``threshold`` with the opposite polarity is a contradiction,
    not a match.
    """
    return compare(first, second, threshold) is Comparison.SAME
