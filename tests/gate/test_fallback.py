from __future__ import annotations

import re

import pytest

from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale, detect_locale
from foureyes.core.reasons import ReasonCode
from foureyes.gate import FallbackFamily, fallback_text, family_of
from foureyes.risk.resources import find_phone_numbers

FALLBACKS = [r for r in ReasonCode if r.is_fallback]


@pytest.mark.parametrize("reason", FALLBACKS, ids=str)
@pytest.mark.parametrize("locale", list(Locale))
def test_every_fallback_reason_has_text_in_every_locale(reason: ReasonCode, locale: Locale) -> None:
    text = fallback_text(reason, locale)
    assert text.strip()
    assert detect_locale(text) is locale
    assert find_phone_numbers(text) == ()
    assert not re.search(r"(?i)therap|diagnos|治疗|治療|诊断|診斷", text)


def test_reasons_map_to_families() -> None:
    assert family_of(ReasonCode.INSUFFICIENT) is FallbackFamily.CANNOT_JUDGE
    assert family_of(ReasonCode.GENERATION_PROHIBITED) is FallbackFamily.PROHIBITED
    held = {r for r in FALLBACKS if family_of(r) is FallbackFamily.HELD_BACK}
    assert held == {
        ReasonCode.REJECTED,
        ReasonCode.RULE_VIOLATION,
        ReasonCode.TOOL_NOT_ALLOWED,
        ReasonCode.VERDICT_MISMATCH,
        ReasonCode.INPUT_BLOCKED,
        ReasonCode.INPUT_RESTRICTED,
    }
    assert family_of(ReasonCode.INPUT_UNCHECKED) is FallbackFamily.UNAVAILABLE
    assert {r for r in FALLBACKS if r.is_review_failure} <= {
        r for r in FALLBACKS if family_of(r) is FallbackFamily.UNAVAILABLE
    }


@pytest.mark.parametrize("locale", list(Locale))
def test_an_insufficient_fallback_asks_instead_of_assuming(locale: Locale) -> None:
    text = fallback_text(ReasonCode.INSUFFICIENT, locale)
    assert text != fallback_text(ReasonCode.REJECTED, locale)
    assert "?" in text or "？" in text


def test_approved_has_no_fallback() -> None:
    with pytest.raises(UsageError):
        fallback_text(ReasonCode.APPROVED, Locale.EN)
