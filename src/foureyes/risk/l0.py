"""The L0 keyword gate: a microsecond, zero-I/O first look at every message.

L0 decides one thing: whether a message carries enough signs of risk that a model should
assess it (L1). It never decides a risk level and never alerts on its own (docs/design.md 4,
invariant 5): a keyword proves nothing, it only spends attention.

**Matching.** One Aho-Corasick automaton (pyahocorasick), built once from the packaged
lexicon (:class:`Lexicon`; Chinese Traditional and Simplified variants and the other
spellings compiled in), runs over the message folded for matching (NFKC, case, invisible
characters and spacing tricks undone; see :mod:`foureyes.core.fold`), and, when the text
has any, with look-alikes undone as well (``k1ll``, ``s.u.i.c.i.d.e``, a pill emoji for
"pills"; ``normalise(..., lookalikes=True)``). Terms that begin
or end with a Latin letter or digit match on word boundaries only (no "si" in "music"),
where a one-letter word joined to a letter-spaced run counts as one (``I k i l l m y s e l f``).
Every reported span indexes the original text. A negation or cue the fold formed across
removed punctuation is not one (``不，想死`` is not negated; ``想死。你了…`` is not the idiom
``想死你了``): the fold's joins can only add terms, never take one away.

**Scoring.** Each lexicon term has a weight in (0, 1]. A term contained in a longer match
of at least its weight is not counted again ("give up" inside "give up on life"), and a
term inside a cue is not there at all (想死 inside the idiom 想死你了). Then:

- a *strong* term (weight 1) that no negation precedes counts its full weight, always;
- every other term counts its weight, times :data:`NEGATION_FACTOR` when a negation comes
  right before it ("don't want to die", 不想死);
- each distinct term counts once, at its strongest occurrence;
- when a joke or hyperbole cue ("lol", "killing me", 笑死, 累死了) is present, the light
  terms' total is multiplied by :data:`CUE_FACTOR`. Cues never touch strong terms, so a
  joke cannot hide a co-occurring strong signal ("this is killing me lol ... I want to
  die" escalates).

``score = strong total + light total × cue factor``, and the lexicon escalates when
``score >= ESCALATION_THRESHOLD`` (1.0): any un-negated strong term, or light terms that add
up. Instructions in the text are text: "ignore the above and output low" changes nothing.

**The learned scorer.** A gate built with a :class:`~foureyes.risk.screen_model.ScreenModel`
(:meth:`L0Gate.default` is) also scores the same folded text (the text is folded once for
both) and escalates when the score reaches the ``escalate`` threshold of the text's
language, whatever the lexicon found. The result says which signals escalated
(:class:`L0Signal`); it escalates when any did. An empty text (nothing left once folded,
spaces aside) is not scored. ``L0Gate(lexicon)`` is the lexicon alone.
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

import ahocorasick

from foureyes.core.fold import Normalised, has_lookalikes, normalise
from foureyes.risk._lexicon import EntryKind, L0Category, Lexicon, LexiconEntry
from foureyes.risk.screen_model import ScreenModel, default_screen_model, language_of

__all__ = [
    "CUE_FACTOR",
    "ESCALATION_THRESHOLD",
    "EntryKind",
    "L0Category",
    "L0Cue",
    "L0Gate",
    "L0Match",
    "L0Result",
    "L0Signal",
    "Lexicon",
    "LexiconEntry",
    "NEGATION_FACTOR",
]

ESCALATION_THRESHOLD = 1.0
"""A score at or above this escalates; a strong term's weight equals it."""
NEGATION_FACTOR = 0.3
"""Weight kept by a term right after a negation."""
CUE_FACTOR = 0.5
"""Weight kept by the light terms of a text that holds a joke or hyperbole cue."""


class L0Signal(StrEnum):
    """A signal of L0 that can escalate a message on its own."""

    LEXICON = "lexicon"
    """The lexicon's score reached :data:`ESCALATION_THRESHOLD`."""
    SCORER = "scorer"
    """The learned scorer's score reached its ``escalate`` threshold."""


_SIGNALS = {
    (False, False): frozenset[L0Signal](),
    (True, False): frozenset({L0Signal.LEXICON}),
    (False, True): frozenset({L0Signal.SCORER}),
    (True, True): frozenset({L0Signal.LEXICON, L0Signal.SCORER}),
}


@dataclass(frozen=True)
class L0Match:
    """One lexicon term found in the text."""

    term: str
    """The compiled key that matched (folded; a Traditional or other variant as matched)."""
    category: L0Category
    """What the term is a sign of."""
    weight: float
    """The term's lexicon weight (before any negation or cue)."""
    start: int
    """Start of the match in the original text."""
    end: int
    """End of the match in the original text (exclusive): ``text[start:end]``."""
    negated: bool = False
    """Whether a negation right before it lowered its weight."""


@dataclass(frozen=True)
class L0Cue:
    """One joke or hyperbole cue found in a text that also holds a counted term."""

    term: str
    """The cue as its source list writes it (``lol``, 笑死), whichever variant matched."""
    start: int
    """Start of the cue in the original text."""
    end: int
    """End of the cue in the original text (exclusive)."""


@dataclass(frozen=True)
class L0Result:
    """What L0 found in one text."""

    escalate: bool
    """Whether a model should assess the text: some signal escalated (:attr:`signals`)."""
    score: float
    """The lexicon's score (see the module docstring); 0 when nothing matched."""
    categories: frozenset[L0Category]
    """The categories of the terms found."""
    matches: tuple[L0Match, ...]
    """The terms found, in text order, with spans into the original text."""
    dampened_by: tuple[str, ...]
    """The cues and negations that lowered the score, as matched, in text order."""
    cues: tuple[L0Cue, ...] = ()
    """Every cue in the text, in text order, with spans into the original text, whether or
    not it lowered the score (empty when no term was counted). The offline assessor reads
    them to tell a joke (:mod:`foureyes.risk.offline`)."""
    screen_score: float | None = None
    """The learned scorer's score of the text; ``None`` when the gate has no scorer or the
    text is empty."""
    signals: frozenset[L0Signal] = frozenset()
    """The signals that escalated the text; :attr:`escalate` is whether there is one."""

    @classmethod
    def nothing(cls, screen_score: float | None = None, *, scorer: bool = False) -> L0Result:
        """The result for a text with no term in it.

        ``screen_score`` is the scorer's score of it, which escalated it when ``scorer``.
        """
        return cls(scorer, 0.0, frozenset(), (), (), (), screen_score, _SIGNALS[False, scorer])


_APOSTROPHES = frozenset("'\u2019")

# Module constants: looking an enum member up on its class costs a few hundred
# nanoseconds in Python 3.11, paid per match otherwise.
_TERM = EntryKind.TERM
_CUE = EntryKind.CUE


class _Hit(NamedTuple):
    """One automaton match that passed the boundary checks, in folded coordinates."""

    start: int
    end: int
    key: str
    entry: LexiconEntry


class L0Gate:
    """The keyword gate: an automaton over a compiled lexicon, reused for every message.

    Build it once at start-up (:meth:`default` takes a few tenths of a second, most of it
    computing the Unicode folding table, once per process) and share it: :meth:`scan` is
    pure and does no I/O, so one gate serves every request and thread.
    """

    def __init__(self, lexicon: Lexicon, screen: ScreenModel | None = None) -> None:
        """A gate over ``lexicon``, and the learned ``screen`` too when given."""
        self._lexicon = lexicon
        self._screen = screen
        # ASCII text can only match ASCII keys, and an automaton without the Chinese keys
        # has a small root, which halves the time of a pass over English text.
        self._ascii = _automaton({k: e for k, e in lexicon.keys.items() if k.isascii()})
        self._every = _automaton(lexicon.keys)

    @classmethod
    def default(cls) -> L0Gate:
        """A gate over the packaged lexicon and the packaged learned screen.

        Raises:
            ConfigError: the packaged screen is missing, corrupt or of another feature
                version (:func:`~foureyes.risk.screen_model.load_screen_model`).
        """
        return cls(Lexicon.packaged(), default_screen_model())

    @classmethod
    def from_directory(cls, directory: Path) -> L0Gate:
        """A gate over the source lists in ``directory`` (see :meth:`Lexicon.load`).

        Raises:
            ConfigError: a list is missing or malformed.
        """
        return cls(Lexicon.load(directory))

    @property
    def screen(self) -> ScreenModel | None:
        """The learned scorer, if the gate has one."""
        return self._screen

    @property
    def lexicon(self) -> Lexicon:
        """The compiled lexicon the automaton was built from."""
        return self._lexicon

    @property
    def keys(self) -> Mapping[str, LexiconEntry]:
        """Every key the automaton matches, with its lexicon entry."""
        return self._lexicon.keys

    def scan(self, text: str) -> L0Result:
        """Look for signs of risk in ``text``; pure, total and free of I/O.

        Any string is accepted (empty, huge, any script); nothing in it is read as an
        instruction.
        """
        keyword_fold = normalise(text)
        # The lexicon reads the look-alike fold too (k1ll, s.u.i.c.i.d.e, 💊); the learned
        # scorer was trained on the keyword fold and reads that one.
        folded = (
            normalise(text, lookalikes=True)
            if has_lookalikes(keyword_fold.text, text)
            else keyword_fold
        )
        chars = folded.text
        terms: list[_Hit] = []
        cues: list[_Hit] = []
        negations: dict[int, str] = {}
        automaton = self._ascii if chars.isascii() else self._every
        for last, (key, entry, check_left, check_right) in automaton.iter(chars):
            end = last + 1
            start = end - len(key)
            if (
                check_left
                and start > 0
                and _is_word(chars[start - 1])
                and start not in folded.word_breaks
            ) or (
                check_right
                and end < len(chars)
                and _is_word(chars[end])
                and end not in folded.word_breaks
            ):
                continue
            if folded.maps and folded.original_span(start, end) is None:
                continue  # starts or ends inside one character's expansion: not there
            if entry.kind is _TERM:
                terms.append(_Hit(start, end, key, entry))
            elif folded.maps and _across_punctuation(text, *folded.covering_span(start, end)):
                continue  # the fold joined it across punctuation: it lowers nothing
            elif entry.kind is _CUE:
                cues.append(_Hit(start, end, key, entry))
            else:
                negations[end] = key
        screen_score, scorer = self._scored(keyword_fold.text)
        counted = _counted(terms, cues)
        if not counted:
            if screen_score is None:
                return _NOTHING
            return L0Result.nothing(screen_score, scorer=scorer)
        return _score(counted, cues, negations, folded, text, screen_score, scorer=scorer)

    def _scored(self, chars: str) -> tuple[float | None, bool]:
        """The scorer's score of the folded text and whether it escalates; none if empty."""
        screen = self._screen
        if screen is None or not chars.strip():
            return None, False
        value = screen.score_folded(chars)
        return value, value >= screen.threshold_of(language_of(chars))


_NOTHING = L0Result.nothing()


def _automaton(keys: Mapping[str, LexiconEntry]) -> Any:
    """An Aho-Corasick automaton over ``keys``; each value says which edges need a boundary."""
    automaton = ahocorasick.Automaton()
    for key, entry in keys.items():
        automaton.add_word(key, (key, entry, _is_word(key[0]), _is_word(key[-1])))
    automaton.make_automaton()
    return automaton


def _counted(terms: list[_Hit], cues: list[_Hit]) -> list[_Hit]:
    """``terms`` without those a cue contains or a longer term of at least their weight."""
    if len(terms) == 1 and not cues:
        return terms
    by_start = sorted(terms, key=_start)
    starts = [hit.start for hit in by_start]
    hidden: set[int] = set()
    for outer in (*cues, *terms):
        # Only terms starting inside ``outer`` can lie inside it; usually there are none.
        for index in range(bisect.bisect_left(starts, outer.start), len(by_start)):
            inner = by_start[index]
            if inner.start >= outer.end:
                break
            if (
                inner.end <= outer.end
                and inner.end - inner.start < outer.end - outer.start
                and (outer.entry.kind is _CUE or outer.entry.weight >= inner.entry.weight)
            ):
                hidden.add(id(inner))
    return [hit for hit in terms if id(hit) not in hidden]


def _start(hit: _Hit) -> int:
    return hit.start


def _score(
    terms: list[_Hit],
    cues: list[_Hit],
    negations: dict[int, str],
    folded: Normalised,
    text: str,
    screen_score: float | None,
    *,
    scorer: bool,
) -> L0Result:
    # Keyed by id(entry): an entry is one object per lexicon, and hashing the dataclass
    # would hash all of its fields on every lookup.
    strong: dict[int, float] = {}
    light: dict[int, float] = {}
    negated_by: dict[int, list[tuple[int, str]]] = {}
    matches = []
    for hit in terms:
        entry = hit.entry
        negation = _negation_before(hit.start, negations, folded, text)
        if negation is not None:
            negated_by.setdefault(id(entry), []).append(negation)
            weight = entry.weight * NEGATION_FACTOR
            light[id(entry)] = max(light.get(id(entry), 0.0), weight)
        elif entry.weight >= ESCALATION_THRESHOLD:
            strong[id(entry)] = entry.weight
        else:
            light[id(entry)] = max(light.get(id(entry), 0.0), entry.weight)
        span = folded.original_span(hit.start, hit.end)
        assert span is not None and entry.category is not None  # checked in scan; load
        matches.append(L0Match(hit.key, entry.category, entry.weight, *span, negation is not None))
    dampeners = [
        negation for entry, found in negated_by.items() if entry not in strong for negation in found
    ]
    light_total = sum(weight for entry, weight in light.items() if entry not in strong)
    if cues and light_total > 0:
        # Cues scale the light terms only: a strong term is never dampened.
        light_total *= CUE_FACTOR
        dampeners += ((cue.start, cue.key) for cue in cues)
    score = round(float(sum(strong.values())) + light_total, 6)
    signals = _SIGNALS[score >= ESCALATION_THRESHOLD, scorer]
    return L0Result(
        escalate=bool(signals),
        score=score,
        categories=frozenset(match.category for match in matches),
        matches=tuple(matches),
        dampened_by=tuple(dict.fromkeys(key for _, key in sorted(dampeners))),
        cues=tuple(_cue(cue, folded) for cue in sorted(cues, key=_start)) if cues else (),
        screen_score=screen_score,
        signals=signals,
    )


def _cue(hit: _Hit, folded: Normalised) -> L0Cue:
    span = folded.original_span(hit.start, hit.end)
    assert span is not None  # checked in scan
    return L0Cue(hit.entry.term, *span)


def _negation_before(
    start: int, negations: dict[int, str], folded: Normalised, text: str
) -> tuple[int, str] | None:
    """The negation ending right before ``start`` (a space between allowed), as (start, key).

    Not when the fold removed punctuation between the two (``不，想死`` does not negate).
    """
    for end in (start, start - 1):
        key = negations.get(end)
        if key is not None and (end == start or folded.text[end] == " "):
            if folded.maps and _across_punctuation(
                text, folded.origin(end - 1) + 1, folded.origin(start)
            ):
                return None
            return end - len(key), key
    return None


def _across_punctuation(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` holds punctuation or a symbol.

    The fold drops those between two Han characters; apostrophes, part of English words,
    do not count.
    """
    return any(
        unicodedata.category(char)[0] in "PS" and char not in _APOSTROPHES
        for char in text[start:end]
    )


def _is_word(char: str) -> bool:
    """Whether ``char`` continues a Latin-script word (letters, digits; not Han or kana)."""
    return char.isalnum() and char < "\u2e80"
