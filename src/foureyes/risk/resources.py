"""The verified crisis-resource registry, the phone-number scanner, and code-rendered resources.

Crisis numbers reach a user only two ways: rendered by code from this registry, or inside
a model's text that the gate's rules found to hold no number outside it. The registry is a
packaged JSON file of real, public hotlines, each with the public page it was checked
against, the day it was checked and a review period; :func:`stale_entries` reports entries
whose check is older than their review period (or a configured age), so a deployment
notices before a number goes out of date. An entry checked only against a secondary
page (a news report, a reference work) says so (``source_kind``), and
:func:`secondary_entries` lists those for an operator to confirm. ``[risk]
resources_file`` replaces or extends the packaged registry (:func:`registry_from_file`,
validated at start-up). A user whose region the registry does not serve (or whose region
is not known) is told so and given international guidance instead of another country's
lines.

:func:`find_phone_numbers` finds every phone number in a text. It reads the text's digit
fold (:func:`foureyes.core.fold.normalise_digits`): every Unicode space and separator, dash
and middle dot a plain space, invisible and combining marks removed, full-width, other
decimal and Chinese digits (``四零零``) ASCII digits; so a number split by thin spaces or
zero-width characters, or written in Chinese numerals, is still one number. On that text it
runs the ``phonenumbers`` matcher at leniency ``POSSIBLE`` under several region hints, plus
a code-side pattern for short codes (988, 12356, 1925, 110, 120, 999, ...), which the matcher
does not report; every span is mapped back to the original text.
:func:`unverified_numbers` keeps the ones the registry does not list for the user's region.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import phonenumbers
from phonenumbers import Leniency, PhoneNumberMatcher
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from foureyes.core.errors import ConfigError
from foureyes.core.fold import normalise_digits
from foureyes.core.locale import Locale

if TYPE_CHECKING:
    from foureyes.config import RiskConfig

__all__ = [
    "PhoneMention",
    "ResourceEntry",
    "ResourceKind",
    "ResourceRegistry",
    "SourceKind",
    "configured_registry",
    "default_registry",
    "find_phone_numbers",
    "load_registry",
    "registry_from_file",
    "render_resources",
    "resources_for",
    "secondary_entries",
    "stale_entries",
    "unverified_numbers",
]

Region = Annotated[str, StringConstraints(pattern=r"^[A-Z]{2}$")]
"""An ISO 3166-1 alpha-2 region code, upper case (``CN``, ``HK``, ``TW``, ``US``, ``GB``)."""

_PACKAGED = "data/resources.json"


class ResourceKind(StrEnum):
    """What a resource is."""

    CRISIS_LINE = "crisis_line"
    """A suicide-prevention or psychological crisis hotline."""
    EMERGENCY = "emergency"
    """The region's emergency number (police, ambulance)."""


class SourceKind(StrEnum):
    """Who wrote the text an entry was checked against."""

    OFFICIAL = "official"
    """The line's operator, a government body, or a recognised directory (IASP,
    Befrienders Worldwide, findahelpline, WHO), also where another site carries that
    text as issued (a government press release on a wire service)."""
    SECONDARY = "secondary"
    """Anyone else (a news report, a reference work, a third party's list): the entry
    stands until an official page confirms it, and ``foureyes config check`` lists it."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def _every_locale(texts: dict[Locale, str], what: str) -> None:
    missing = [locale.value for locale in Locale if not texts.get(locale, "").strip()]
    if missing:
        raise ValueError(f"{what} lacks locale(s) {', '.join(missing)}")


class ResourceEntry(_Frozen):
    """One verified resource: a hotline or an emergency number of one region."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")
    """Stable id, recorded in traces when the entry is rendered."""
    region: Region
    """Region it serves."""
    kind: ResourceKind
    """Crisis line or emergency number."""
    name: dict[Locale, str]
    """Its name in every locale."""
    numbers: tuple[str, ...] = Field(min_length=1)
    """Numbers as dialled inside the region, e.g. ``010-82951332`` or ``116 123``."""
    hours: dict[Locale, str]
    """When it answers, in every locale."""
    always_open: bool = False
    """Whether it answers at every hour of every day, as its source says. Omitted, it is
    not taken to: a region none of whose crisis lines is always open gets a line saying
    what to do when they are closed, so the reply never promises what a line does not
    give."""
    languages: tuple[Locale, ...] = ()
    """Locales of ours its staff answer in (none when they answer only in others)."""
    source: str = Field(min_length=1)
    """The public page or official listing the entry was checked against (a URL)."""
    source_kind: SourceKind = SourceKind.SECONDARY
    """Whether ``source`` is an official page or a secondary one (see :class:`SourceKind`).
    Omitted, it is ``secondary``: an entry is taken as officially sourced only when its file
    says so, and ``foureyes config check`` lists the others."""
    checked: dt.date
    """The day it was last checked against its source."""
    review_days: int = Field(default=180, ge=1, le=3650)
    """Days after ``checked`` by which the entry must be checked again; past them
    :func:`stale_entries` reports it."""

    @model_validator(mode="after")
    def _complete(self) -> ResourceEntry:
        _every_locale(self.name, f"entry {self.id} name")
        _every_locale(self.hours, f"entry {self.id} hours")
        for number in self.numbers:
            if not re.fullmatch(r"[0-9][0-9 -]*[0-9]", number):
                raise ValueError(f"entry {self.id} number {number!r} is not digits, spaces, dashes")
        return self

    @functools.cached_property
    def dial_digits(self) -> frozenset[str]:
        """The digits of each number as dialled inside the region."""
        return frozenset(_digits(n) for n in self.numbers)

    @functools.cached_property
    def e164(self) -> frozenset[str]:
        """Each number in international form (``+85223892222``)."""
        return frozenset(_e164(phonenumbers.parse(n, self.region)) for n in self.numbers)


class ResourceRegistry(_Frozen):
    """The verified resources, and the localised names of the regions they serve."""

    regions: dict[Region, dict[Locale, str]]
    """Region names in every locale."""
    entries: tuple[ResourceEntry, ...] = Field(min_length=1)
    """The resources, in display order."""

    @model_validator(mode="after")
    def _consistent(self) -> ResourceRegistry:
        ids = [e.id for e in self.entries]
        if len(set(ids)) != len(ids):
            raise ValueError("entry ids must be unique")
        for region, names in self.regions.items():
            _every_locale(names, f"region {region}")
        unnamed = sorted({e.region for e in self.entries} - set(self.regions))
        if unnamed:
            raise ValueError(f"regions without names: {', '.join(unnamed)}")
        return self

    def served_regions(self) -> tuple[str, ...]:
        """The regions with at least one entry, by code: those a user can be shown a line of.

        A region named in :attr:`regions` with no entry is not served (its users get the
        region-less guidance, as a user of an unlisted region does).
        """
        return tuple(sorted({e.region for e in self.entries}))

    def entries_for(self, region: str | None) -> tuple[ResourceEntry, ...]:
        """The entries of ``region``; every entry when ``region`` is ``None``."""
        return tuple(e for e in self.entries if region is None or e.region == region)

    def lists(self, mention: PhoneMention, region: str | None) -> bool:
        """Whether the registry lists ``mention`` for ``region`` (any region when ``None``).

        A number written in international form matches by country code and national
        number; any other matches by its digits exactly as a registry number is dialled.
        """
        for entry in self.entries_for(region):
            if mention.e164 is not None and mention.e164 in entry.e164:
                return True
            if mention.digits in entry.dial_digits:
                return True
        return False


@dataclass(frozen=True, slots=True)
class PhoneMention:
    """A phone number found in a text."""

    start: int
    """Offset of its first character in the text scanned."""
    end: int
    """Offset just past its last character in the text scanned."""
    text: str
    """The number as written, invisible characters and odd separators included."""
    digits: str
    """Its digits in ASCII (full-width, other decimal and Chinese digits converted)."""
    e164: str | None
    """Its international form when written with a leading ``+``, else ``None``."""


def _read(path: Path | None) -> Any:
    try:
        source = resources.files("foureyes.risk").joinpath(_PACKAGED) if path is None else path
        return json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError([f"resource registry {path or 'packaged'}: {exc}"]) from None


def _validated(raw: Any, path: Path | None) -> ResourceRegistry:
    try:
        return ResourceRegistry.model_validate(raw)
    except ValidationError as exc:
        where = path or "packaged"
        problems = [
            f"resource registry {where}: {'.'.join(map(str, e['loc']))}: {e['msg']}"
            for e in exc.errors()
        ]
        raise ConfigError(problems) from None


def load_registry(path: Path | None = None) -> ResourceRegistry:
    """Load and validate a registry file (the packaged one when ``path`` is ``None``).

    Raises:
        ConfigError: the file cannot be read, is not JSON, or breaks the schema.
    """
    return _validated(_read(path), path)


def configured_registry(risk: RiskConfig) -> ResourceRegistry:
    """The registry ``[risk] resources_file`` and ``resources_mode`` configure.

    Raises:
        ConfigError: the file is missing, is not JSON, or the result breaks the schema.
    """
    return registry_from_file(risk.resources_file, extend=risk.resources_mode == "extend")


def registry_from_file(path: Path | None, *, extend: bool) -> ResourceRegistry:
    """The registry ``[risk] resources_file`` configures.

    Without a file, the packaged registry. With ``extend``, the file's regions and
    entries are added to the packaged ones, an entry with a packaged entry's id
    replacing it in place; otherwise the file is the whole registry. Either way the
    result is validated as one registry (every entry with its source and check date).

    Raises:
        ConfigError: the file is missing, is not JSON, or the result breaks the schema.
    """
    if path is None:
        return default_registry()
    raw = _read(path)
    if not extend:
        return _validated(raw, path)
    if not isinstance(raw, dict):
        raise ConfigError([f"resource registry {path}: not a JSON object"])
    packaged = _read(None)
    added = raw.get("entries", [])
    if not isinstance(added, list) or not all(isinstance(e, dict) for e in added):
        raise ConfigError([f"resource registry {path}: entries: not a list of objects"])
    by_id = {e.get("id"): e for e in added}
    entries = [by_id.pop(e["id"], e) for e in packaged["entries"]]
    regions = raw.get("regions", {})
    if not isinstance(regions, dict):
        raise ConfigError([f"resource registry {path}: regions: not an object"])
    merged = {
        **{k: v for k, v in raw.items() if k not in ("regions", "entries")},
        "regions": {**packaged["regions"], **regions},
        "entries": [*entries, *by_id.values()],
    }
    return _validated(merged, path)


@functools.cache
def default_registry() -> ResourceRegistry:
    """The packaged registry, loaded once."""
    return load_registry()


def stale_entries(
    registry: ResourceRegistry, *, today: dt.date, max_age_days: int | None = None
) -> tuple[ResourceEntry, ...]:
    """Entries checked longer ago than their review period (or ``max_age_days``, if shorter)."""
    return tuple(
        e
        for e in registry.entries
        if (today - e.checked).days > min(e.review_days, max_age_days or e.review_days)
    )


def secondary_entries(registry: ResourceRegistry) -> tuple[ResourceEntry, ...]:
    """Entries checked only against a secondary source, for an operator to confirm."""
    return tuple(e for e in registry.entries if e.source_kind is SourceKind.SECONDARY)


# --- finding numbers --------------------------------------------------------------------

# The patterns below read the digit fold, where digits are ASCII and every space, dash
# and middle dot is one plain space.
# Any three digits close together; text without them holds no phone number, and
# skipping the matcher then keeps the scan of an ordinary reply in microseconds.
_MAYBE_NUMBER = re.compile(r"[0-9](?:[^0-9]{0,3}[0-9]){2}")
# What may stand between the digit groups of one number: a space (any space or dash
# in the original), a dot, or a dot and a space.
_SEP = r"[ .]"
_SEPARATOR = re.compile(_SEP + "{1,2}")
# Digits written as one number: groups joined by single separators (``116 123``).
_DIGIT_GROUP = re.compile(rf"(?<![0-9])[0-9]+(?:{_SEP}{{1,2}}[0-9]+)*(?![0-9])")
# Seven digits or more in one group are a phone number wherever they appear; shorter
# groups (and the matcher's short finds, such as a year it takes for a UK number) count
# when they are a known crisis or emergency code, or stand next to a word about calling.
_LONG_DIGITS = 7
_SHORT_MATCH_DIGITS = 5
_MIN_DIGITS = 3
_KNOWN_SHORT_CODES = frozenset(
    "000 024 109 110 111 112 119 120 122 911 988 995 999 1737 1767 1925 1980 1995 "
    "1771 3114 12320 12355 12356 14416 15555 85258 116111 116123 741741".split()
)
_CONTEXT_CHARS = 16
_PHONE_WORDS = re.compile(
    # English, then the verbs and nouns of calling of other languages a reply may be
    # written in (a crisis line's number is fabricated whatever language presents it).
    r"(?i)\b(?:call|dial|phone|tel|text|ring|hotline|helpline|line|number|reach|contact"
    r"|whatsapp|sms|toll[- ]free"
    r"|llam[ae]\w*|marc[ae]\w*|tel[eé]fono|n[uú]mero|ligu?e\w*|ligar|disque|telefone"
    r"|appel\w*|compos\w*|t[eé]l[eé]phone|num[eé]ro|anruf\w*|ruf|w[aä]hl\w*|telefon\w*"
    r"|nummer|chiam\w*|bel\w*|hubungi|telepon|nomor|ara\w*|numara|tawag\w*|tumawag"
    r"|zadzwo\w*|numer)\b"
    r"|电话|電話|热线|熱線|专线|專線|拨打|撥打|致电|致電|号码|號碼|求助|短信|簡訊|联系|聯繫|聯絡"
    r"|ダイヤル|かけて|番号|전화|번호"
)
# A number presented as one to reach, whatever the words around it: after a colon or
# "at" ("reach them at 4141"), or alone on its line.
_PRESENTED = re.compile(r"(?:[:：]|\bat)\s*$", re.IGNORECASE)
# English number words, read as digits: "one eight hundred", "nine one one".
_NUMBER_WORDS = {
    "zero": "0",
    "oh": "0",
    "o": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
}
_NUMBER_WORD = "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))
_SPELLED = re.compile(
    rf"(?i)\b(?:{_NUMBER_WORD}|double|triple)(?:(?:[\s,-]+)(?:{_NUMBER_WORD}|double|triple"
    r"|hundred|thousand))+\b"
)
_HINT_REGIONS = ("CN", "HK", "TW", "US", "GB")


def _digits(text: str) -> str:
    return "".join(str(unicodedata.decimal(c)) for c in text if c.isdecimal())


def _e164(number: phonenumbers.PhoneNumber) -> str:
    return f"+{number.country_code}{number.national_number}"


def _international(text: str, region: str) -> str | None:
    if not text.lstrip().startswith("+"):  # the digit fold has made ＋ a +
        return None
    try:
        return _e164(phonenumbers.parse(text, region))
    except phonenumbers.NumberParseException:
        return None


def _is_phone_like(
    text: str, start: int, end: int, *, threshold: int, digits: str | None = None
) -> bool:
    digits = _digits(text[start:end]) if digits is None else digits
    if len(digits) >= threshold or digits in _KNOWN_SHORT_CODES:
        return True
    if len(digits) < _MIN_DIGITS:
        return False
    near = text[max(0, start - _CONTEXT_CHARS) : end + _CONTEXT_CHARS]
    if _PHONE_WORDS.search(near) is not None:
        return True
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    before = text[line_start:start]
    after = text[end : len(text) if line_end < 0 else line_end]
    alone = not before.strip(" -*•·") and not after.strip(" .。!！")
    return alone or _PRESENTED.search(before) is not None


def _spelled_digits(words: str) -> str:
    """The digits a run of English number words spells ("one eight hundred" → 1800)."""
    digits: list[str] = []
    repeat = 1
    for word in re.split(r"[\s,-]+", words.lower()):
        if word in ("double", "triple"):
            repeat = 2 if word == "double" else 3
        elif word == "hundred":
            digits.append("00")
        elif word == "thousand":
            digits.append("000")
        elif word in _NUMBER_WORDS:
            digits.append(_NUMBER_WORDS[word] * repeat)
            repeat = 1
    return "".join(digits)


def _spelled_numbers(text: str) -> list[PhoneMention]:
    """Numbers written in English number words that read as phone numbers."""
    found = []
    for match in _SPELLED.finditer(text):
        digits = _spelled_digits(match.group())
        if _is_phone_like(text, match.start(), match.end(), threshold=_LONG_DIGITS, digits=digits):
            found.append(PhoneMention(match.start(), match.end(), match.group(), digits, None))
    return found


def _merged(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans, and spans split only by a separator (``2389 2222``), joined."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and (start <= merged[-1][1] or _SEPARATOR.fullmatch(text[merged[-1][1] : start])):
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def find_phone_numbers(text: str, *, regions: Iterable[str] = ()) -> tuple[PhoneMention, ...]:
    """Every phone number in ``text``, in order, overlapping finds merged.

    The numbers are found in the digit fold of ``text`` (see the module docstring); each
    mention's span is in ``text`` and covers the number whole, the invisible characters
    and separators inside it included.

    Args:
        text: the text to scan.
        regions: region hints for numbers written in national form, besides the regions
            of the registry (``CN``, ``HK``, ``TW``, ``US``, ``GB``).
    """
    spelled = _spelled_numbers(text) if _SPELLED.search(text) else []
    folded = normalise_digits(text)
    chars = folded.text
    if not _MAYBE_NUMBER.search(chars):
        return tuple(spelled)
    hints = tuple(dict.fromkeys([*regions, *_HINT_REGIONS]))
    spans = [
        (m.start, m.end)
        for region in hints
        for m in PhoneNumberMatcher(chars, region, Leniency.POSSIBLE)
        if _is_phone_like(chars, m.start, m.end, threshold=_SHORT_MATCH_DIGITS)
    ]
    spans += [
        (m.start(), m.end())
        for m in _DIGIT_GROUP.finditer(chars)
        if _is_phone_like(chars, m.start(), m.end(), threshold=_LONG_DIGITS)
    ]
    mentions = list(spelled)
    for start, end in _merged(chars, spans):
        first, last = folded.covering_span(start, end)
        mentions.append(
            PhoneMention(
                start=first,
                end=last,
                text=text[first:last],
                digits=_digits(chars[start:end]),
                e164=_international(chars[start:end], hints[0]),
            )
        )
    return tuple(sorted(mentions, key=lambda m: m.start))


def unverified_numbers(
    text: str, *, region: str | None, registry: ResourceRegistry | None = None
) -> tuple[PhoneMention, ...]:
    """The phone numbers in ``text`` that the registry does not list for ``region``.

    With ``region`` ``None`` a number listed for any region is accepted.
    """
    listing = registry or default_registry()
    hints = () if region is None else (region,)
    return tuple(m for m in find_phone_numbers(text, regions=hints) if not listing.lists(m, region))


# --- rendering --------------------------------------------------------------------------

_HEADER = {
    Locale.EN: "If you are thinking about suicide or feel you might be in danger, "
    "please contact someone now:",
    Locale.ZH_HANS: "如果你有自杀的想法，或觉得自己可能有危险，请现在就联系：",
    Locale.ZH_HANT: "如果你有自殺的想法，或覺得自己可能有危險，請現在就聯繫：",
}
_FOOTER = {
    Locale.EN: "If none of these serves where you are, please call your local emergency number.",
    Locale.ZH_HANS: "如果以上都不在你所在的地区，请拨打当地的紧急电话。",
    Locale.ZH_HANT: "如果以上都不在你所在的地區，請撥打當地的緊急電話。",
}
_UNKNOWN_REGION = {
    Locale.EN: "We do not have verified crisis lines for where you are.",
    Locale.ZH_HANS: "我们没有你所在地区经过核实的危机热线。",
    Locale.ZH_HANT: "我們沒有你所在地區經過核實的危機熱線。",
}
_INTERNATIONAL = {
    Locale.EN: "- If you are in danger now, call your local emergency number.\n"
    "- To find a crisis line where you are, see the international directory "
    "at findahelpline.com, or ask a doctor or someone you trust to help you find one.",
    Locale.ZH_HANS: "- 如果你现在有危险，请拨打当地的紧急电话。\n"
    "- 要查找你所在地区的危机热线，可访问国际求助热线目录 findahelpline.com，"
    "或请医生或你信任的人帮你找到。",
    Locale.ZH_HANT: "- 如果你現在有危險，請撥打當地的緊急電話。\n"
    "- 要查找你所在地區的危機熱線，可瀏覽國際求助熱線目錄 findahelpline.com，"
    "或請醫生或你信任的人幫你找到。",
}
_WHEN_CLOSED = {
    Locale.EN: "These lines are not open at every hour: when they are closed, please call "
    "the emergency number.",
    Locale.ZH_HANS: "以上热线并非全天开放：不在服务时间时，请拨打紧急电话。",
    Locale.ZH_HANT: "以上熱線並非全天開放：不在服務時間時，請撥打緊急電話。",
}
# "110 / 120" reads to the phone matcher as one number; a word keeps the numbers apart.
_OR = {Locale.EN: " or ", Locale.ZH_HANS: " 或 ", Locale.ZH_HANT: " 或 "}
_LINE = {
    Locale.EN: "- {name} ({region}): {numbers} ({hours})",
    Locale.ZH_HANS: "- {name}（{region}）：{numbers}（{hours}）",
    Locale.ZH_HANT: "- {name}（{region}）：{numbers}（{hours}）",
}


def resources_for(
    locale: Locale, region: str | None, registry: ResourceRegistry | None = None
) -> tuple[ResourceEntry, ...]:
    """The entries shown to a user: their region's, crisis lines first.

    None when the region is unknown or the registry has nothing for it: another
    country's lines would not answer there (``locale`` does not change that).
    """
    del locale  # the entries shown depend on the region alone
    listing = registry or default_registry()
    chosen = listing.entries_for(region) if region is not None else ()
    order = list(ResourceKind)
    return tuple(sorted(chosen, key=lambda e: order.index(e.kind)))


def render_resources(
    locale: Locale, region: str | None, registry: ResourceRegistry | None = None
) -> str:
    """The resource block for a user, rendered by code from the registry alone.

    For a region the registry does not serve (or no region), the block says so and
    gives international guidance and the advice to call the local emergency number,
    with no number of another country.
    """
    listing = registry or default_registry()
    entries = resources_for(locale, region, listing)
    if not entries:
        return "\n".join([_HEADER[locale], _UNKNOWN_REGION[locale], _INTERNATIONAL[locale]])
    lines = [_HEADER[locale]]
    for entry in entries:
        lines.append(
            _LINE[locale].format(
                name=entry.name[locale],
                region=listing.regions[entry.region][locale],
                numbers=_OR[locale].join(entry.numbers),
                hours=entry.hours[locale],
            )
        )
    crisis_lines = [e for e in entries if e.kind is ResourceKind.CRISIS_LINE]
    if crisis_lines and not any(e.always_open for e in crisis_lines):
        lines.append(_WHEN_CLOSED[locale])
    lines.append(_FOOTER[locale])
    return "\n".join(lines)
