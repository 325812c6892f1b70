"""The L0 lexicon: one source list per language, compiled into the keys the automaton matches.

The source lists live in ``foureyes/risk/lexicon/`` (``en.txt``, ``zh.txt``); their format is
described at the top of each. Every entry records where it comes from: an ``@source ID``
line applies to the entries after it (until the next one), and ``sources.txt`` holds the
full citation of every ID (:class:`LexiconSource`). Compiling a list
(:meth:`Lexicon.load`) folds every term the way message text is folded
(:func:`~foureyes.core.fold.normalise`) and adds its variants, so that matching never
converts anything at run time:

- Chinese terms, written once in Simplified characters, in every combination of their
  characters' Traditional forms (``zh_traditional.txt``), the Simplified form included;
- terms with apostrophes with a straight one, a curly one and none (``don't``, ``dont``);
- English multi-word terms also without spaces (``killmyself``, the fold of
  ``k i l l m y s e l f``);
- strong English one-word terms of seven letters or more with one typing slip (a letter
  left out or two swapped: ``sucide``, ``suicdal``; not a slip that spells another word);
- strong Chinese terms in their homophone and pinyin forms listed in ``zh_variants.txt``
  (``自刹``, ``zisha``; generated at build time by ``scripts/build_zh_variants.py``), in
  their Traditional forms as well. A variant only adds a key, never replaces one.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from foureyes.core.errors import ConfigError
from foureyes.core.fold import normalise

__all__ = ["EntryKind", "L0Category", "Lexicon", "LexiconEntry", "LexiconSource"]

LANGUAGE_FILES = ("en.txt", "zh.txt")
_ZH_FILE = "zh.txt"
_TRADITIONAL_FILE = "zh_traditional.txt"
_SOURCES_FILE = "sources.txt"
_VARIANTS_FILE = "zh_variants.txt"
_SOURCE_DIRECTIVE = "@source"
_SOURCE_ID = re.compile(r"[a-z0-9][a-z0-9-]*")
_APOSTROPHES = ("'", "\u2019", "", " ")
_MAX_VARIANTS = 256
_TYPO_MIN = 7
# English words one slip away from a strong term (overdoing: overdosing less an s).
_TYPO_WORDS = frozenset({"overdoes", "overdoing", "overdoed"})


class L0Category(StrEnum):
    """What a lexicon term is a sign of (the wire value is the snake_case name)."""

    SUICIDAL_IDEATION = "suicidal_ideation"
    """A wish to die or to end one's life, passive or active ("I want to die", 想死)."""
    PLAN_MEANS = "plan_means"
    """A method, means, place or companion for dying (noose, 烧炭, 约死)."""
    SELF_HARM = "self_harm"
    """Hurting oneself without the aim of dying (cutting, 割腕, 自残)."""
    FAREWELL = "farewell"
    """Saying goodbye or arranging one's affairs (suicide note, 遗书, 交代后事)."""
    PAST_ATTEMPT = "past_attempt"
    """An attempt that happened ("I overdosed", 自杀未遂, 洗胃)."""
    HOPELESSNESS = "hopelessness"
    """No hope, no point, no future (hopeless, 绝望, 活着没意思)."""
    BURDEN = "burden"
    """Feeling a burden to others ("better off without me", 拖累)."""
    TRAPPED = "trapped"
    """Entrapment, no way out, unable to go on (no way out, 走投无路, 撑不下去)."""


class EntryKind(StrEnum):
    """The role of a lexicon entry in scoring."""

    TERM = "term"
    """A sign of risk: carries a category and a weight."""
    CUE = "cue"
    """A joke or hyperbole cue ("lol", 笑死): lowers the weight of light terms."""
    NEGATION = "negation"
    """A negation ("don't", 不): lowers the weight of the term right after it."""


@dataclass(frozen=True)
class LexiconEntry:
    """One line of a source list."""

    term: str
    """The term as written in the source list."""
    kind: EntryKind
    """Its role in scoring."""
    category: L0Category | None
    """What the term is a sign of; ``None`` for cues and negations."""
    weight: float
    """Its weight in the L0 score, in (0, 1]; 0 for cues and negations."""
    origin: str
    """Where it is written: ``file:line``."""
    source: str
    """The ID of the published source (or ``foureyes-calibration``) it comes from; its
    citation is :attr:`Lexicon.sources` ``[source]``."""


@dataclass(frozen=True)
class LexiconSource:
    """One row of ``sources.txt``: where lexicon entries come from."""

    id: str
    """The ID entries name in their ``@source`` line (lowercase letters, digits, ``-``)."""
    citation: str
    """The full citation: authors, title, venue, year, URL or DOI."""


@dataclass(frozen=True)
class Lexicon:
    """A compiled lexicon: its entries and every key the automaton matches for them."""

    entries: tuple[LexiconEntry, ...]
    """Every entry of every source list, in file order."""
    keys: Mapping[str, LexiconEntry] = field(repr=False)
    """Each compiled key (folded text: the term itself and its variants) and its entry."""
    sources: Mapping[str, LexiconSource] = field(repr=False)
    """Every source of ``sources.txt`` by ID."""

    @classmethod
    def packaged(cls) -> Lexicon:
        """The lexicon shipped in ``foureyes/risk/lexicon/``."""
        return cls.load(resources.files("foureyes.risk") / "lexicon")

    @classmethod
    def load(cls, directory: Path | Traversable) -> Lexicon:
        """Read and compile the source lists in ``directory``.

        The directory holds ``en.txt``, ``zh.txt``, ``zh_traditional.txt``,
        ``zh_variants.txt`` and ``sources.txt``, in the format of the packaged ones.

        Raises:
            ConfigError: a file is missing or malformed (each problem names its
                ``file:line``): an unknown section, a weight outside (0, 1], a term that
                folds to nothing, a term listed twice, an entry without a source or
                naming a source ``sources.txt`` does not cite, a variant of something
                that is not a strong term of ``zh.txt``, a Traditional character
                in ``zh.txt`` or a Chinese character the character map does not classify.
        """
        problems: list[str] = []
        sources = _read_sources(_read(directory, _SOURCES_FILE, problems), problems)
        texts = {name: _read(directory, name, problems) for name in LANGUAGE_FILES}
        traditional = _read_traditional(_read(directory, _TRADITIONAL_FILE, problems), problems)
        entries = [
            entry for name, text in texts.items() for entry in _parse(name, text, sources, problems)
        ]
        keys: dict[str, LexiconEntry] = {}
        for entry in entries:
            key = normalise(entry.term).text.strip()
            if not key:
                problems.append(f"{entry.origin}: {entry.term!r} folds to nothing")
            elif key in keys:
                problems.append(f"{entry.origin}: {entry.term!r} repeats {keys[key].origin}")
            else:
                keys[key] = entry
        for entry in entries:
            if entry.origin.startswith(_ZH_FILE):
                problems += _check_chinese(entry, traditional)
            if _variant_count(entry, traditional) > _MAX_VARIANTS:
                problems.append(f"{entry.origin}: {entry.term!r} has too many variants")
                continue
            for variant in _variants(entry, traditional):
                keys.setdefault(normalise(variant).text.strip(), entry)
        for entry in entries:
            for typo in _typos(entry):
                keys.setdefault(typo, entry)
        text = _read(directory, _VARIANTS_FILE, problems)
        for variant, entry in _read_variants(text, entries, problems):
            # In Traditional characters too, as the terms are (自剎 as well as 自刹).
            for spelling in _variants(dataclasses.replace(entry, term=variant), traditional):
                keys.setdefault(normalise(spelling).text.strip(), entry)
        if problems:
            raise ConfigError(problems)
        return cls(tuple(entries), keys, sources)


def _read(directory: Path | Traversable, name: str, problems: list[str]) -> str:
    try:
        return (directory / name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{name}: cannot be read ({type(exc).__name__})")
        return ""


def _lines(text: str) -> Iterator[tuple[int, str]]:
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            yield number, line


def _read_variants(
    text: str, entries: list[LexiconEntry], problems: list[str]
) -> Iterator[tuple[str, LexiconEntry]]:
    """``zh_variants.txt``: ``variant  term`` lines, each term a strong entry of zh.txt.

    A variant only ever adds a key (``setdefault``): it never changes what a key the source
    lists compile matches as.
    """
    strong = {
        e.term: e
        for e in entries
        if e.kind is EntryKind.TERM and e.weight >= 1 and e.origin.startswith(_ZH_FILE)
    }
    for number, line in _lines(text):
        origin = f"{_VARIANTS_FILE}:{number}"
        variant, _, term = line.rpartition("  ")
        entry = strong.get(term.strip())
        if entry is None:
            problems.append(f"{origin}: {term.strip()!r} is not a strong term of {_ZH_FILE}")
        elif not normalise(variant).text.strip():
            problems.append(f"{origin}: {variant!r} folds to nothing")
        else:
            yield variant.strip(), entry


def _read_sources(text: str, problems: list[str]) -> dict[str, LexiconSource]:
    """``sources.txt``: one ``ID  citation`` per line."""
    sources: dict[str, LexiconSource] = {}
    for number, line in _lines(text):
        origin = f"{_SOURCES_FILE}:{number}"
        source_id, _, citation = line.partition(" ")
        if not _SOURCE_ID.fullmatch(source_id) or not citation.strip():
            problems.append(f"{origin}: expected 'id  citation' (id: a-z, 0-9, -)")
        elif source_id in sources:
            problems.append(f"{origin}: source {source_id!r} is listed twice")
        else:
            sources[source_id] = LexiconSource(source_id, citation.strip())
    return sources


def _parse(
    name: str, text: str, sources: Mapping[str, LexiconSource], problems: list[str]
) -> Iterator[LexiconEntry]:
    kind: EntryKind | None = None
    category: L0Category | None = None
    source: str | None = None  # the last @source line's ID
    unknown_source = False  # its entries are left out: the source is reported once
    in_unknown_section = False  # its lines are left out: the section is reported once
    for number, line in _lines(text):
        origin = f"{name}:{number}"
        if line.split(maxsplit=1)[0] == _SOURCE_DIRECTIVE:
            source = line.removeprefix(_SOURCE_DIRECTIVE).strip()
            unknown_source = source not in sources
            if unknown_source:
                problems.append(f"{origin}: unknown source {source!r} (not in {_SOURCES_FILE})")
            continue
        if line.startswith("[[") and line.endswith("]]"):
            section = line[2:-2]
            kind, category = _section(section)
            in_unknown_section = kind is None
            if in_unknown_section:
                problems.append(f"{origin}: unknown section [[{section}]]")
            continue
        if kind is None:
            if not in_unknown_section:
                problems.append(f"{origin}: entry before the first section")
        elif source is None:
            problems.append(f"{origin}: entry without a source (write '@source ID' above it)")
        elif unknown_source:
            continue
        elif kind is EntryKind.TERM:
            weight_text, _, term = line.partition(" ")
            weight = _weight(weight_text)
            if weight is None or not term.strip():
                problems.append(f"{origin}: expected 'weight  term' with a weight in (0, 1]")
            else:
                yield LexiconEntry(term.strip(), kind, category, weight, origin, source)
        else:
            yield LexiconEntry(line, kind, None, 0.0, origin, source)


def _section(name: str) -> tuple[EntryKind | None, L0Category | None]:
    if name in (EntryKind.CUE, EntryKind.NEGATION):
        return EntryKind(name), None
    if name in L0Category._value2member_map_:
        return EntryKind.TERM, L0Category(name)
    return None, None


def _weight(text: str) -> float | None:
    try:
        weight = float(text)
    except ValueError:
        return None
    return weight if 0 < weight <= 1 else None


def _read_traditional(text: str, problems: list[str]) -> dict[str, tuple[str, ...]]:
    """The character map: Simplified character -> Traditional forms (empty: the same)."""
    forms: dict[str, tuple[str, ...]] = {}
    for number, line in _lines(text):
        origin = f"{_TRADITIONAL_FILE}:{number}"
        same: list[tuple[str, tuple[str, ...]]]
        if line.startswith("="):
            same = [(c, ()) for c in line[1:] if not c.isspace()]
        else:
            simplified, *traditional = line.split()
            same = [(simplified, tuple(traditional))]
            if len(simplified) != 1 or not traditional or simplified in traditional:
                problems.append(f"{origin}: expected 'simplified traditional...'")
        for char, mapped in same:
            if char in forms:
                problems.append(f"{origin}: {char} is listed twice")
            forms[char] = mapped
    return forms


def _check_chinese(entry: LexiconEntry, forms: Mapping[str, tuple[str, ...]]) -> list[str]:
    traditional_only = {t for mapped in forms.values() for t in mapped} - forms.keys()
    problems = []
    for char in dict.fromkeys(entry.term):
        if char in traditional_only:
            problems.append(f"{entry.origin}: {char} is Traditional; write it in Simplified")
        elif "\u3400" <= char <= "\u9fff" and char not in forms:
            problems.append(f"{entry.origin}: {char} is not in {_TRADITIONAL_FILE}")
    return problems


def _variants(entry: LexiconEntry, forms: Mapping[str, tuple[str, ...]]) -> Iterator[str]:
    """Every spelling of ``entry.term`` the automaton should also match."""
    options = [_APOSTROPHES if char == "'" else (char, *forms.get(char, ())) for char in entry.term]
    for spelling in itertools.product(*options):
        variant = "".join(spelling)
        yield variant
        if entry.kind is EntryKind.TERM and " " in variant and variant.isascii():
            yield variant.replace(" ", "")


def _typos(entry: LexiconEntry) -> Iterator[str]:
    """Common typing slips of a strong English one-word term (seven letters or more).

    One letter after the first left out (``sucide``) or two swapped (``suicdie``). A slip
    that spells another English word (:data:`_TYPO_WORDS`) is left out.
    """
    term = entry.term
    if (
        entry.kind is not EntryKind.TERM
        or entry.weight < 1
        or len(term) < _TYPO_MIN
        or not (term.isascii() and term.isalpha())
    ):
        return
    forms = {term[:i] + term[i + 1 :] for i in range(1, len(term))}
    forms |= {term[:i] + term[i + 1] + term[i] + term[i + 2 :] for i in range(1, len(term) - 1)}
    yield from sorted(forms - {term} - _TYPO_WORDS)


def _variant_count(entry: LexiconEntry, forms: Mapping[str, tuple[str, ...]]) -> int:
    return math.prod(
        len(_APOSTROPHES) if c == "'" else 1 + len(forms.get(c, ())) for c in entry.term
    )
