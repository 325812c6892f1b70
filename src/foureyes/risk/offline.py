"""The offline engine's L1 and L2 assessors: the L0 lexicon, honestly reported.

With no model, an assessment can only say what the keyword lexicon found. Both responders
read the text from ``request.subject["text"]``, map the lexicon's categories to a level
and the IS PATH WARM dimensions, and always report :data:`OFFLINE_CONFIDENCE`, which is
below the lowest confirmation threshold the config allows (``risk.confirm_confidence``
must exceed 0.5). So offline mode can show crisis resources, but it can never confirm a
crisis and so never alert anyone (docs/design.md 4, invariant 5). The evidence says it is a
lexicon match and names categories and flags only, never the user's words.

**Context.** The assessor says less than the match where rules can tell, and nothing
where they cannot. A term L0 found negated ("I would never kill myself", 我不会自杀) counts
for neither the level nor the dimensions (the schema has no negation flag). The context
flags of the schema are set by rules, each only when it holds for *every* counted term,
so the parse step's cap (invariant 6) lowers the level to ``medium``:

- ``joke``: a laughter or joke cue of the L0 lexicon (:data:`JOKE_CUES`: "lol", 哈哈, 笑死)
  in the term's sentence ("this bug makes me want to kill myself lol");
- ``third_party``: a third person ("she", 他, "my friend") before the term in its sentence;
- ``fiction``: a story, novel, character or role-play named before the term in its sentence;
- ``quote``: the term inside quotation marks with a source named outside them ("said",
  歌词), or after a song's words are introduced ("the song goes", 歌里唱).

The last three also need a text with no first person left once the phrases that name
someone else are taken out ("my friend", 我妈, "told me", "my novel"): a first-person
statement beside a mention of someone else ("my friend wants to die and so do I") sets
no flag, so the model-free path never hides the writer's own crisis behind another's.

L2 here is the same lexicon, not an independent reviewer; its evidence says so.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence

from foureyes.core.errors import RouteBadResponse
from foureyes.core.roles import Role
from foureyes.llm.offline import offline_responder
from foureyes.llm.provider import ChatRequest
from foureyes.risk.l0 import L0Category, L0Gate, L0Match, L0Result, Lexicon
from foureyes.risk.levels import RiskLevel

__all__ = ["JOKE_CUES", "OFFLINE_CONFIDENCE", "context_flags", "offline_report"]

OFFLINE_CONFIDENCE = 0.4
"""The confidence of every offline assessment: a lexicon is never sure."""

_CRITICAL = frozenset({L0Category.PLAN_MEANS, L0Category.FAREWELL})
_HIGH = frozenset({L0Category.SUICIDAL_IDEATION, L0Category.SELF_HARM, L0Category.PAST_ATTEMPT})

_DIMENSIONS: dict[str, frozenset[L0Category]] = {
    "depression": _HIGH,
    "anxiety": frozenset(),
    "loneliness": frozenset({L0Category.BURDEN}),
    "hopelessness": frozenset({L0Category.HOPELESSNESS}),
    "trapped": frozenset({L0Category.TRAPPED}),
    "farewell": frozenset({L0Category.FAREWELL}),
    "arranging": frozenset({L0Category.FAREWELL, L0Category.PLAN_MEANS}),
    "agitation": frozenset(),
}

JOKE_CUES = frozenset(
    {
        *("lol", "lmao", "lmfao", "rofl", "haha", "hahaha", "hahah", "hehe", "jk", "xd"),
        *("just kidding", "just joking", "i'm joking", "😂", "🤣"),
        *("哈哈", "笑死", "笑死我了", "hhh", "开玩笑", "开个玩笑", "逗你的"),
        *("[笑cry]", "[二哈]", "[doge]", "[哈哈]", "[偷笑]"),
    }
)
"""The L0 cues (as their source lists write them) that mark a joke, not mere hyperbole.

Hyperbole cues ("killing me", "i'm dying", 累死了), crying (😭, 💀) and 233 (also a mere
number) are left out: said beside a real wish to die they do not make it a joke.
"""

# Sentences: split at end punctuation, ellipses and line breaks; commas do not split.
_SENTENCE_END = re.compile(r"[.!?。！？；;…\n]+")
_QUOTED = re.compile(r'"[^"]*"|“[^”]*”|「[^」]*」|『[^』]*』|＂[^＂]*＂')

_RELATIONS_EN = (
    r"(?:best |close |older |younger |little |big |ex[- ]?)?(?:friend|girlfriend|boyfriend|"
    r"mom|mum|mother|dad|father|brother|sister|son|daughter|wife|husband|partner|roommate|"
    r"classmate|coworker|colleague|cousin|aunt|uncle|grandma|grandpa|grandmother|"
    r"grandfather|neighbou?r|student|patient|client|kid|child|teacher|boss)s?"
)
_RELATIONS_ZH = (
    "(?:朋友|好友|闺蜜|閨蜜|室友|同学|同學|同事|妈妈|媽媽|妈|媽|爸爸|爸|哥哥|哥|姐姐|姐|"
    "弟弟|弟|妹妹|妹|老公|老婆|男朋友|女朋友|男友|女友|儿子|兒子|女儿|女兒|孩子|表哥|表姐|"
    "学生|學生|邻居|鄰居|老师|老師)"
)
# Works of fiction, and the frames that place words inside one. A bare "story", "game" or
# 故事 is no frame ("long story short", "game over", 我的故事): it only names the writer's.
_WORKS_EN = (
    r"(?:novel|story|book|fanfic|fan fiction|script|screenplay|game|chapter|movie|film|"
    r"show|character|characters|protagonist|oc)"
)
_WORKS_ZH = "(?:小说|小說|故事|剧本|劇本|角色|同人)"
_FICTION = re.compile(
    rf"\bin (?:my|the|a|this|our) {_WORKS_EN}\b|"
    r"\b(?:the|my|this|a) (?:character|protagonist|narrator|villain|heroine)\b|"
    r"\brole-?play(?:ing)?\b|\bfan ?fic(?:tion)?\b|"
    "(?:小说|小說|故事|剧本|劇本|剧情|劇情|游戏|遊戲)[里裡裏中]|主角|主人公|同人|角色扮演|人设|人設",
    re.IGNORECASE,
)

_FIRST_PERSON = re.compile(
    r"\b(?:i|me|my|mine|myself|we|us|our|ours|ourselves|im|ive)\b|我|咱|俺|本人", re.IGNORECASE
)
# Phrases naming someone or something else that hold a first-person word.
_OTHERS_EN = rf"\bmy {_RELATIONS_EN}\b|\b(?:told|tells|texted|asked|messaged|called) me\b"
_OTHERS_ZH = f"我的?好?{_RELATIONS_ZH}|(?:告诉|告訴)我|(?:跟|对|對|和)我(?:说|說)"
_NOT_ME: dict[str, re.Pattern[str]] = {
    "third_party": re.compile(f"{_OTHERS_EN}|{_OTHERS_ZH}", re.IGNORECASE),
    "fiction": re.compile(
        rf"{_OTHERS_EN}|\bmy {_WORKS_EN}\b|\bi(?:'m| am) writing\b|\bi wrote\b|"
        f"{_OTHERS_ZH}|我的?(?:在)?(?:写的|寫的)?{_WORKS_ZH}|我在(?:写|寫)|我(?:写|寫)的",
        re.IGNORECASE,
    ),
}
# A quote is named by whoever or whatever it comes from, a story included.
_NOT_ME["quote"] = _NOT_ME["fiction"]
# In Chinese only 他/她 outside 其他, 吉他, 他人 and the curse 他妈的, or "my" relative: a
# bare 妈 or 哥 is as often an interjection or a curse (妈的) as a person.
_THIRD_PERSON = re.compile(
    rf"\b(?:he|she|they|him|her|his|them|someone|somebody|{_RELATIONS_EN})\b|"
    f"(?<![其吉])[他她](?![人妈媽])|我的?好?{_RELATIONS_ZH}",
    re.IGNORECASE,
)
_SOURCE = re.compile(
    r"\b(?:song|songs|lyric|lyrics|line|lines|quote|quoted|poem|book|movie|film|show|meme|"
    r"title|says|said|goes|sings|sang|wrote|writes)\b|歌|唱|台词|台詞|臺詞|名言|诗|詩|书|書|"
    "电影|電影|剧|劇|说|說|写道|寫道|梗",
    re.IGNORECASE,
)
# Words of a song introduced without quotation marks run to the end of the sentence.
_SONG_FRAME = re.compile(
    r"\b(?:song|lyrics?|line|chorus|verse)\s+(?:goes|says|reads|is)\b:?|"
    "(?:歌词|歌詞|歌里|歌裡|歌中)(?:唱|写|寫|是|说|說)?(?:着|著|道|的)?[:：]?",
    re.IGNORECASE,
)

_SONG_END = re.compile(
    r"[,，、:：]|\b(?:and|but|so|too|also|honestly|really)\b|但|可是|其实|其實|也", re.IGNORECASE
)


@functools.cache
def _gate() -> L0Gate:
    # The lexicon alone: the offline reading restates its terms; the learned scorer's
    # score carries no category to restate.
    return L0Gate(Lexicon.packaged())


def _sentences(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for end_mark in _SENTENCE_END.finditer(text):
        spans.append((start, end_mark.start()))
        start = end_mark.end()
    spans.append((start, len(text)))
    return spans


def _sentence_of(match: L0Match, sentences: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """The span of the sentence ``match`` starts in (widened to hold all of it)."""
    for start, end in sentences:
        if start <= match.start < end:
            return start, max(end, match.end)
    return match.start, match.end  # a term starting on a separator: only itself


def _about_others(text: str, flag: str) -> bool:
    """Whether ``text`` has no first person left once phrases naming others are removed."""
    return _FIRST_PERSON.search(_NOT_ME[flag].sub(" ", text)) is None


def _quoted_spans(text: str, sentences: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    spans = [m.span() for m in _QUOTED.finditer(text)]
    for frame in _SONG_FRAME.finditer(text):
        end = next((e for s, e in sentences if s <= frame.end() <= e), len(text))
        # Unmarked words end at a comma or a joining word: what follows is the writer's.
        own = _SONG_END.search(text, frame.end(), end)
        spans.append((frame.end(), own.start() if own else end))
    return spans


def _outside(text: str, spans: Sequence[tuple[int, int]]) -> str:
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def context_flags(text: str, result: L0Result) -> dict[str, bool]:
    """The schema's context flags for ``text``, by rules over L0's ``result`` of it.

    Each flag is set only when it holds for every term L0 found un-negated (see the
    module docstring); with no such term, none is set.
    """
    flags = {"fiction": False, "quote": False, "third_party": False, "joke": False}
    counted = [m for m in result.matches if not m.negated]
    if not counted:
        return flags
    sentences = _sentences(text)
    around = [_sentence_of(m, sentences) for m in counted]
    jokes = [c for c in result.cues if c.term in JOKE_CUES]
    flags["joke"] = all(any(start <= c.start < end for c in jokes) for start, end in around)
    before = [text[start : m.start] for m, (start, _) in zip(counted, around, strict=True)]
    flags["third_party"] = _about_others(text, "third_party") and all(
        _THIRD_PERSON.search(part) for part in before
    )
    flags["fiction"] = _about_others(text, "fiction") and all(
        _FICTION.search(part) for part in before
    )
    quoted = _quoted_spans(text, sentences)
    outside = _outside(text, quoted)
    flags["quote"] = (
        bool(quoted)
        and _about_others(outside, "quote")
        and (_SOURCE.search(outside) is not None or any(_SONG_FRAME.finditer(text)))
        and all(any(s <= m.start and m.end <= e for s, e in quoted) for m in counted)
    )
    return flags


def _level(escalate: bool, categories: frozenset[L0Category]) -> RiskLevel:
    if not escalate:
        return RiskLevel.LOW
    if categories & _CRITICAL:
        return RiskLevel.CRITICAL
    if categories & _HIGH:
        return RiskLevel.HIGH
    return RiskLevel.MEDIUM


def offline_report(text: str, *, source: str) -> str:
    """The offline assessment of ``text`` as the JSON a model would answer.

    ``source`` opens the evidence: it says where the reading came from.
    """
    result = _gate().scan(text)
    weights: dict[L0Category, float] = {}
    for match in result.matches:
        if not match.negated:  # a negated term is not what the writer says
            weights[match.category] = max(weights.get(match.category, 0.0), match.weight)
    flags = context_flags(text, result)
    categories = sorted(c.value for c in weights)
    evidence = f"{source}: " + (", ".join(categories) or "no match")
    if any(flags.values()):
        evidence += "; " + ", ".join(name for name, on in flags.items() if on)
    report = {
        "risk_level": _level(result.escalate, frozenset(weights)).value,
        "confidence": OFFLINE_CONFIDENCE,
        "dimensions": {
            name: round(max((weights.get(c, 0.0) for c in cats), default=0.0), 3)
            for name, cats in _DIMENSIONS.items()
        },
        "evidence": evidence[:100],
        "context_flags": flags,
    }
    return json.dumps(report, ensure_ascii=False)


def _text(request: ChatRequest) -> str:
    text = request.subject.get("text")
    if text is None:
        raise RouteBadResponse("offline", "the offline assessor needs subject['text']")
    return text


@offline_responder(Role.RISK_L1)
def _assess_l1(request: ChatRequest) -> str:
    """L1 offline: the lexicon's reading of the current text."""
    return offline_report(_text(request), source="offline lexicon")


@offline_responder(Role.RISK_L2)
def _assess_l2(request: ChatRequest) -> str:
    """L2 offline: the same lexicon (so no independent review), said so in the evidence."""
    return offline_report(_text(request), source="offline lexicon, not independent")
