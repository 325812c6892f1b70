r"""Personal data found deterministically: phones, payment cards, IBANs, resident ids, e-mail.

Five checks of category ``pii``, each offline and each either a maintained library or a
published checksum, so a finding is a number that *is* one, not one that looks like one:

- :data:`PII_PHONE` (``phone_number``): ``phonenumbers`` at leniency ``VALID`` on the
  text's digit fold (:func:`foureyes.core.fold.normalise_digits`: full-width and Chinese
  digits, odd separators and invisible characters undone), under the request's region, or
  ``CN`` and ``US`` when none is given; a number in international form (``+44 ...``) is
  found under any hint. A digit run that is a card or a resident id is left to those
  checks.
- :data:`PII_PAYMENT_CARD` (``payment_card``): 13 to 19 digits, single spaces or dashes
  between them allowed, with a card network's prefix and length (Visa, Mastercard, Amex,
  Discover, JCB, UnionPay, Diners) and a valid Luhn checksum.
- :data:`PII_IBAN` (``iban``): a country code the IBAN registry lists, that country's
  length, and the ISO 13616 mod-97 checksum; groups of four separated by spaces allowed.
- :data:`PII_CN_RESIDENT_ID` (``cn_resident_id``): the 18-character citizen identity
  number of GB 11643-1999: a region code, a real date of birth (1900 onwards), a sequence
  number and the ISO 7064 MOD 11-2 check character (``X`` for 10). The 15-digit ids issued
  before 1999 have no checksum and are not reported.
- :data:`PII_EMAIL` (``email_address``): an ASCII address (local part, ``@``, dotted
  domain, a top-level domain of letters); full-width ``＠`` and ``．`` count.

What they miss is in docs/inputs.md (postal addresses, names, 15-digit ids, numbers
spelt out in words, non-ASCII e-mail addresses, national numbers of other regions).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator

import phonenumbers
from phonenumbers import Leniency, PhoneNumberMatcher

from foureyes.inputs.check import (
    CheckInput,
    CheckKind,
    Finding,
    FindingReason,
    InputCategory,
    InputCheck,
    Manifest,
)

__all__ = [
    "DEFAULT_PHONE_REGIONS",
    "PII_CHECKS",
    "PII_CN_RESIDENT_ID",
    "PII_EMAIL",
    "PII_IBAN",
    "PII_PAYMENT_CARD",
    "PII_PHONE",
    "cn_resident_id_valid",
    "iban_valid",
    "luhn_valid",
]

DEFAULT_PHONE_REGIONS = ("CN", "US")
"""The region hints for numbers in national form when the request names no region."""

_LANGUAGES = ("en", "zh-Hans", "zh-Hant")
_PII = frozenset({InputCategory.PII})


# --- checksums --------------------------------------------------------------------------


def luhn_valid(digits: str) -> bool:
    """Whether a string of ASCII digits passes the Luhn checksum (ISO/IEC 7812-1)."""
    if not digits.isascii() or not digits.isdigit():
        return False
    total = 0
    for i, char in enumerate(reversed(digits)):
        n = int(char)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


# Each country's IBAN length (the SWIFT IBAN registry).
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
    "BH": 22, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28,
    "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
    "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24,
    "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SC": 31,
    "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24,
    "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip


def iban_valid(iban: str) -> bool:
    """Whether ``iban`` (no spaces, upper case) has its country's length and mod 97 = 1."""
    if _IBAN_LENGTHS.get(iban[:2]) != len(iban) or not iban.isascii() or not iban.isalnum():
        return False
    if not iban[2:4].isdigit():
        return False
    moved = iban[4:] + iban[:4]
    number = "".join(str(int(c, 36)) for c in moved)
    return int(number) % 97 == 1


_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


def cn_resident_id_valid(number: str, *, today: dt.date | None = None) -> bool:
    """Whether ``number`` is a well-formed 18-character resident id (GB 11643-1999).

    Its first digit is a region's (1-8), its date of birth real and not after ``today``
    (when given; a pure function reads no clock), and its last character the MOD 11-2
    check of the first 17 (``X`` standing for 10; lower case accepted).
    """
    if len(number) != 18 or not number[:17].isascii() or not number[:17].isdigit():
        return False
    if number[0] not in "12345678":
        return False
    try:
        born = dt.date(int(number[6:10]), int(number[10:12]), int(number[12:14]))
    except ValueError:
        return False
    if born.year < 1900 or (today is not None and born > today):
        return False
    total = sum(int(d) * w for d, w in zip(number[:17], _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11] == number[17].upper()


# --- finders ----------------------------------------------------------------------------

_DIGIT_RUN = re.compile(r"(?<![0-9A-Za-z])\d(?: ?\d)+(?![0-9A-Za-z])", re.ASCII)
_CARD_PREFIXES = (
    # (prefix low, prefix high, number of prefix digits, allowed lengths)
    (4, 4, 1, (13, 16, 19)),  # Visa
    (51, 55, 2, (16,)),  # Mastercard
    (2221, 2720, 4, (16,)),  # Mastercard 2-series
    (34, 34, 2, (15,)),  # American Express
    (37, 37, 2, (15,)),
    (6011, 6011, 4, (16, 19)),  # Discover
    (644, 649, 3, (16, 19)),
    (65, 65, 2, (16, 19)),
    (3528, 3589, 4, (16, 19)),  # JCB
    (62, 62, 2, (16, 17, 18, 19)),  # UnionPay
    (300, 305, 3, (14,)),  # Diners Club
    (36, 36, 2, (14,)),
    (38, 39, 2, (14, 16)),
)


def _card_network(digits: str) -> bool:
    return any(
        low <= int(digits[:size]) <= high and len(digits) in lengths
        for low, high, size, lengths in _CARD_PREFIXES
    )


def _card_spans(item: CheckInput) -> list[tuple[int, int]]:
    folded = item.digits
    spans = []
    for found in _DIGIT_RUN.finditer(folded.text):
        digits = found.group().replace(" ", "")
        if 13 <= len(digits) <= 19 and _card_network(digits) and luhn_valid(digits):
            spans.append(folded.covering_span(*found.span()))
    return spans


_ID = re.compile(r"(?<![0-9A-Za-z])\d{6} ?\d{8} ?\d{3}[\dXxＸｘ](?![0-9A-Za-z])", re.ASCII)


def _id_spans(item: CheckInput) -> list[tuple[int, int]]:
    folded = item.digits
    spans = []
    for found in _ID.finditer(folded.text):
        number = found.group().replace(" ", "").replace("Ｘ", "X").replace("ｘ", "x")
        if cn_resident_id_valid(number):
            spans.append(folded.covering_span(*found.span()))
    return spans


_IBAN = re.compile(r"(?<![A-Z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _iban_spans(text: str) -> Iterator[tuple[int, int]]:
    view = text.translate(_ASCII_UPPER)  # one for one: spans stay
    for found in _IBAN.finditer(view):
        length = _IBAN_LENGTHS.get(found.group()[:2])
        if length is None:
            continue
        # Take the country's number of characters, wherever the spaces fall, and end there.
        taken, end = 0, found.start()
        while end < found.end() and taken < length:
            if view[end] != " ":
                taken += 1
            end += 1
        compact = view[found.start() : end].replace(" ", "")
        after = view[end : end + 1]
        if taken == length and not after.isalnum() and iban_valid(compact):
            yield found.start(), end


_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![A-Za-z0-9-])"
)
_EMAIL_FORMS = str.maketrans({"＠": "@", "．": ".", "｡": "."})


def _phone_regions(item: CheckInput) -> tuple[str, ...]:
    region = item.context.region
    return (region,) if region else DEFAULT_PHONE_REGIONS


def _overlaps(span: tuple[int, int], others: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in others)


def _phones(item: CheckInput) -> Iterator[Finding]:
    folded = item.digits
    if not any(c.isdigit() for c in folded.text):
        return
    taken = _card_spans(item) + _id_spans(item)
    spans: set[tuple[int, int]] = set()
    for region in _phone_regions(item):
        if phonenumbers.region_code_for_country_code(
            phonenumbers.country_code_for_region(region)
        ) in ("ZZ", None):
            continue
        for match in PhoneNumberMatcher(folded.text, region, Leniency.VALID):
            spans.add(folded.covering_span(match.start, match.end))
    for span in _merge(spans):
        if not _overlaps(span, taken):
            yield Finding("pii_phone", InputCategory.PII, *span, FindingReason.PHONE_NUMBER)


def _merge(spans: set[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _cards(item: CheckInput) -> Iterator[Finding]:
    for span in _card_spans(item):
        yield Finding("pii_payment_card", InputCategory.PII, *span, FindingReason.PAYMENT_CARD)


def _ibans(item: CheckInput) -> Iterator[Finding]:
    for span in _iban_spans(item.text):
        yield Finding("pii_iban", InputCategory.PII, *span, FindingReason.IBAN)


def _ids(item: CheckInput) -> Iterator[Finding]:
    for span in _id_spans(item):
        yield Finding("pii_cn_resident_id", InputCategory.PII, *span, FindingReason.CN_RESIDENT_ID)


def _emails(item: CheckInput) -> Iterator[Finding]:
    view = item.text.translate(_EMAIL_FORMS)  # one for one: spans stay
    if "@" not in view:
        return
    for found in _EMAIL.finditer(view):
        yield Finding("pii_email", InputCategory.PII, *found.span(), FindingReason.EMAIL_ADDRESS)


def _manifest(check: str, detects: str, languages: tuple[str, ...] = _LANGUAGES) -> Manifest:
    return Manifest(check, detects, languages, CheckKind.DETERMINISTIC, _PII)


PII_PHONE = InputCheck(
    _manifest(
        "pii_phone",
        "valid phone numbers (phonenumbers; full-width and Chinese digits too), national "
        "form under the request's region or CN and US",
    ),
    _phones,
)
"""Phone numbers (see the module docstring)."""
PII_PAYMENT_CARD = InputCheck(
    _manifest(
        "pii_payment_card",
        "payment card numbers: a network's prefix and length, Luhn checksum",
        ("*",),
    ),
    _cards,
)
"""Payment card numbers."""
PII_IBAN = InputCheck(
    _manifest("pii_iban", "IBANs: the country's length, mod-97 checksum", ("*",)), _ibans
)
"""IBANs."""
PII_CN_RESIDENT_ID = InputCheck(
    _manifest(
        "pii_cn_resident_id",
        "Chinese resident identity numbers (18 characters, GB 11643 checksum, a real date)",
        ("*",),
    ),
    _ids,
)
"""Chinese resident identity numbers."""
PII_EMAIL = InputCheck(_manifest("pii_email", "ASCII e-mail addresses", ("*",)), _emails)
"""E-mail addresses."""

PII_CHECKS = (PII_PHONE, PII_PAYMENT_CARD, PII_IBAN, PII_CN_RESIDENT_ID, PII_EMAIL)
"""The PII checks, in catalogue order."""
