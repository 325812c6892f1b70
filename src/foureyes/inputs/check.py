"""What an input check is, what it finds, and :func:`scan`, which binds findings to bytes.

An :class:`InputCheck` is a :class:`Manifest` (its id, what it detects, the languages it
is written for, whether it is deterministic code or a model, the categories it reports)
and a pure synchronous function of one :class:`CheckInput` returning :class:`Finding` s.
A finding names its check, its category, a ``[start, end)`` span of the text and a reason
code; it never copies the matched text, so a finding can be recorded where the text may
not be.

:func:`scan` runs checks over one text and returns an :class:`InputScan`: the findings
plus the SHA-256 of the text's UTF-8 bytes, so whatever is decided on the scan names the
exact text it judged, and a changed byte is a different text. A text longer than the
configured limit, or one holding an unpaired surrogate (it has no UTF-8 bytes to bind
to), is not scanned: its scan says why (:class:`ScanRefusal`) and is never clean. A check
that raises, or returns anything other than findings of its own id and categories
inside the text, fails closed: it reports each of its categories over the whole text
(reason ``check_failed`` or ``invalid_finding``), because a check that cannot say
"clean" has not said it. Everything here is pure.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeAlias

from foureyes.core.digest import sha256_hex
from foureyes.core.errors import UsageError
from foureyes.core.fold import Normalised, normalise, normalise_digits

__all__ = [
    "CHECK_ID",
    "CheckContext",
    "CheckFunction",
    "CheckInput",
    "CheckKind",
    "DEFAULT_MAX_CHARS",
    "Finding",
    "FindingReason",
    "InputCategory",
    "InputCheck",
    "InputScan",
    "Manifest",
    "REASON",
    "ScanRefusal",
    "run_check",
    "scan",
    "text_bytes",
]

CHECK_ID = re.compile(r"[a-z][a-z0-9_]{0,40}")
"""What a check id is (as a rule id is): lower case, digits and ``_``."""
REASON = re.compile(r"[a-z][a-z0-9_]{0,40}")
"""What a finding's reason code is; the built-in ones are :class:`FindingReason`."""
DEFAULT_MAX_CHARS = 200_000
"""The longest text :func:`scan` judges unless told otherwise (``[input] max_chars``)."""


class InputCategory(StrEnum):
    """What a finding says the text is (the categories of issue 42)."""

    PROMPT_INJECTION = "prompt_injection"
    """Instructions aimed at the model or the system rather than content: overrides,
    impersonated roles, forged markers, hidden or encoded instructions."""
    JAILBREAK = "jailbreak"
    """An attempt to talk the model out of its rules: personas, "no restrictions"."""
    PII = "pii"
    """Personal data: phone numbers, payment cards, IBANs, resident ids, e-mail."""
    UNSAFE_CONTENT = "unsafe_content"
    """Harassment, threats, sexual content involving minors (no built-in check yet)."""
    OFF_TOPIC = "off_topic"
    """Outside the topic the team set (no built-in check yet; team patterns can)."""


class CheckKind(StrEnum):
    """How a check decides."""

    DETERMINISTIC = "deterministic"
    """Code: the same text always gets the same findings."""
    MODEL = "model"
    """A classifier or language model decides (a plugin's local model, say)."""


class FindingReason(StrEnum):
    """The reason codes of the built-in checks and of a check that fails.

    A plugin may use its own codes (:data:`REASON`); these values are pinned.
    """

    TAG_CHARACTERS = "tag_characters"
    """Unicode tag characters (U+E0000 block): ASCII no one sees."""
    BIDI_CONTROL = "bidi_control"
    """Bidirectional embeddings, overrides or isolates (U+202A-U+202E, U+2066-U+2069)."""
    ZERO_WIDTH = "zero_width"
    """Zero-width or invisible format characters where no script needs them."""
    VARIATION_SELECTORS = "variation_selectors"
    """A run of variation selectors (data can be hidden in them)."""
    INVISIBLE_FILLER = "invisible_filler"
    """Blank fillers that render as nothing (Hangul fillers, the blank Braille pattern)."""
    CONTROL_CHARACTER = "control_character"
    """C0 or C1 control characters other than tab and line breaks (terminal escapes)."""
    ENCODED_INSTRUCTIONS = "encoded_instructions"
    """An encoded run (base64, hex, percent-encoding) whose decoded text holds
    instructions, invisible characters or a jailbreak."""
    ENCODING_TOO_DEEP = "encoding_too_deep"
    """Text still encoded past ``[input] encoded_depth`` nested decodings."""
    IGNORE_INSTRUCTIONS = "ignore_instructions"
    """"Ignore previous instructions" and its kin, or "your new instructions are"."""
    ROLE_IMPERSONATION = "role_impersonation"
    """Text posing as the system, the developer or the assistant."""
    FAKE_ROLE_MARKER = "fake_role_marker"
    """Chat-template or tool markers (``<|im_start|>``, ``[INST]``, ``</tool_result>``)."""
    ADDRESSED_TO_MODEL = "addressed_to_model"
    """A note to whatever AI reads the text, or an order to hide something from the user."""
    PROMPT_EXTRACTION = "prompt_extraction"
    """An ask for the model's system prompt or hidden instructions."""
    EXFILTRATION = "exfiltration"
    """An order to send the user's or the conversation's data somewhere."""
    JAILBREAK_PERSONA = "jailbreak_persona"
    """A persona or mode without rules (DAN, "do anything now", "unfiltered AI")."""
    REFUSAL_SUPPRESSION = "refusal_suppression"
    """An order never to refuse."""
    TEAM_PATTERN = "team_pattern"
    """A match of one of the team's configured patterns."""
    PHONE_NUMBER = "phone_number"
    """A valid phone number (``phonenumbers``)."""
    PAYMENT_CARD = "payment_card"
    """A payment card number (a card network's prefix and length, Luhn checksum)."""
    IBAN = "iban"
    """An IBAN (its country's length, mod-97 checksum)."""
    CN_RESIDENT_ID = "cn_resident_id"
    """A Chinese resident identity number (18 characters, GB 11643 checksum, a date)."""
    EMAIL_ADDRESS = "email_address"
    """An e-mail address."""
    CHECK_FAILED = "check_failed"
    """The check raised: the whole text is reported in each of its categories."""
    INVALID_FINDING = "invalid_finding"
    """The check returned something that is not a finding of its own inside the text."""


class ScanRefusal(StrEnum):
    """Why a text was not scanned at all; its scan is never clean."""

    TOO_LONG = "too_long"
    """Longer than the configured ``max_chars``."""
    UNPAIRED_SURROGATE = "unpaired_surrogate"
    """It holds an unpaired surrogate, so it has no UTF-8 bytes to bind a verdict to."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """The catalogue line of a check: what it is, without running it."""

    id: str
    """The check's id (:data:`CHECK_ID`); its entry point's name."""
    detects: str
    """What it detects, one sentence in English."""
    languages: tuple[str, ...]
    """The languages it is written for (``en``, ``zh-Hans``, ``zh-Hant``); ``*``: any."""
    kind: CheckKind
    """Deterministic code or a model."""
    categories: frozenset[InputCategory]
    """The categories its findings may have."""

    def line(self) -> str:
        """``id  kind  categories  languages  detects``, one line of the catalogue."""
        cats = ",".join(sorted(self.categories))
        return f"{self.id}  {self.kind}  {cats}  {','.join(self.languages)}  {self.detects}"

    def as_json(self) -> dict[str, Any]:
        """The manifest as the catalogue lists it in JSON."""
        return {
            "id": self.id,
            "detects": self.detects,
            "languages": list(self.languages),
            "kind": str(self.kind),
            "categories": sorted(self.categories),
        }


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing a check found: where it is and why, never the text itself."""

    check: str
    """The id of the check that found it."""
    category: InputCategory
    """What the check says the span is."""
    start: int
    """Where the span starts (a character offset into the scanned text)."""
    end: int
    """Where it ends (exclusive)."""
    reason: str
    """The reason code (:class:`FindingReason` for the built-ins, :data:`REASON`)."""

    @property
    def span(self) -> tuple[int, int]:
        """``(start, end)``."""
        return self.start, self.end

    def as_json(self) -> dict[str, Any]:
        """The finding as a trace records it."""
        return {
            "check": self.check,
            "category": str(self.category),
            "span": [self.start, self.end],
            "reason": str(self.reason),
        }


@dataclass(frozen=True, slots=True)
class CheckContext:
    """What checks need besides the text. Fields may be added; a check reads what it needs."""

    region: str | None = None
    """The user's region (ISO 3166-1 alpha-2), a hint for numbers in national form."""
    encoded_depth: int = 3
    """How many nested encodings the encoded-payload check decodes."""


@dataclass(frozen=True)
class CheckInput:
    """What a check reads: the text, its folds (computed once, on first use), the context."""

    text: str
    """The text as given; findings' spans index it."""
    context: CheckContext = field(default_factory=CheckContext)
    """Region and limits."""

    @functools.cached_property
    def folded(self) -> Normalised:
        """The keyword fold (:func:`foureyes.core.fold.normalise`) with its map back."""
        return normalise(self.text)

    @functools.cached_property
    def digits(self) -> Normalised:
        """The digit fold (:func:`foureyes.core.fold.normalise_digits`) with its map back."""
        return normalise_digits(self.text)


CheckFunction: TypeAlias = Callable[[CheckInput], Iterable[Finding]]
"""A check's code: pure and synchronous, every finding of its own in the input."""


@dataclass(frozen=True, slots=True)
class InputCheck:
    """One check; a plugin registers one per ``foureyes.checks`` entry point."""

    manifest: Manifest
    """What it is."""
    check: CheckFunction
    """What it runs."""

    @property
    def id(self) -> str:
        """The manifest's id."""
        return self.manifest.id


@dataclass(frozen=True, slots=True)
class InputScan:
    """The findings of the checks on one text, bound to that text's bytes."""

    sha256: str
    """SHA-256 of the text's UTF-8 bytes (:func:`text_bytes`): what was judged."""
    length: int
    """The text's length in characters (spans index it)."""
    checks: tuple[str, ...]
    """The ids of the checks that ran, in order (none when refused)."""
    findings: tuple[Finding, ...] = ()
    """Every finding, ordered by span, then check, then category."""
    refused: ScanRefusal | None = None
    """Why the text was not scanned; ``None``: it was."""

    @property
    def clean(self) -> bool:
        """Scanned, and nothing found."""
        return self.refused is None and not self.findings

    @property
    def categories(self) -> frozenset[InputCategory]:
        """The categories found."""
        return frozenset(f.category for f in self.findings)

    def of(self, category: InputCategory) -> tuple[Finding, ...]:
        """The findings of one category."""
        return tuple(f for f in self.findings if f.category == category)

    def as_json(self) -> dict[str, Any]:
        """The scan as a trace records it: no text, only the digest and the spans."""
        return {
            "sha256": self.sha256,
            "length": self.length,
            "checks": list(self.checks),
            "findings": [f.as_json() for f in self.findings],
            "refused": None if self.refused is None else str(self.refused),
        }


def text_bytes(text: str) -> bytes:
    """The bytes a scan's digest covers: UTF-8, with unpaired surrogates as written.

    A text without unpaired surrogates (every text a server accepts) gives exactly its
    UTF-8 bytes; one with them gives the bytes ``surrogatepass`` writes, so even a refused
    text has a digest of its own.
    """
    return text.encode("utf-8", "surrogatepass")


def scan(
    text: str,
    checks: Iterable[InputCheck],
    *,
    context: CheckContext | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> InputScan:
    """Run ``checks`` on ``text``; the findings and the digest of the exact text judged.

    Args:
        text: the text to judge, exactly as it will be used.
        checks: the checks to run, in order.
        context: the region and limits (defaults: no region, depth 3).
        max_chars: a longer text is not scanned (``refused = too_long``).

    Raises:
        UsageError: ``text`` is not a ``str`` (a caller's bug: bytes must be decoded
            first, so that the digest and the spans agree on what the text is).
    """
    if not isinstance(text, str):
        raise UsageError(f"scan() takes the text as str, not {type(text).__name__}")
    digest = sha256_hex(text_bytes(text))
    if len(text) > max_chars:
        return InputScan(digest, len(text), (), (), ScanRefusal.TOO_LONG)
    if _has_unpaired_surrogate(text):
        return InputScan(digest, len(text), (), (), ScanRefusal.UNPAIRED_SURROGATE)
    item = CheckInput(text, context or CheckContext())
    ran: list[str] = []
    found: list[Finding] = []
    for check in checks:
        ran.append(check.id)
        found.extend(run_check(check, item))
    order = sorted(set(found), key=lambda f: (f.start, f.end, f.check, f.category, f.reason))
    return InputScan(digest, len(text), tuple(ran), tuple(order))


def run_check(check: InputCheck, item: CheckInput) -> list[Finding]:
    """The findings of one check, or each of its categories over the whole text if it fails."""
    try:
        findings = list(check.check(item))
    # A plugin's check is third-party code (a local classifier, say): whatever it raises,
    # the text is not known to be clean, so it fails closed (DESIGN 4.4).
    except Exception:
        return _whole(check, item, FindingReason.CHECK_FAILED)
    if not all(_is_finding_of(check.manifest, f, len(item.text)) for f in findings):
        return _whole(check, item, FindingReason.INVALID_FINDING)
    return findings


def _whole(check: InputCheck, item: CheckInput, reason: FindingReason) -> list[Finding]:
    end = len(item.text)
    return [Finding(check.id, c, 0, end, reason) for c in sorted(check.manifest.categories)]


def _is_finding_of(manifest: Manifest, finding: object, length: int) -> bool:
    return (
        type(finding) is Finding
        and finding.check == manifest.id
        and isinstance(finding.category, InputCategory)
        and finding.category in manifest.categories
        and type(finding.start) is int
        and type(finding.end) is int
        and 0 <= finding.start <= finding.end <= length
        and isinstance(finding.reason, str)
        and REASON.fullmatch(finding.reason) is not None
    )


_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_unpaired_surrogate(text: str) -> bool:
    # A Python str holds code points: a surrogate in one is always unpaired (a pair read
    # from UTF-16 would have been combined into one astral code point).
    return not text.isascii() and _SURROGATE.search(text) is not None
