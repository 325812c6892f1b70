"""Masking and restoring personal data within a request."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.inputs import Finding, FindingReason, InputCategory, InputChecks, mask

R = FindingReason
PII = InputCategory.PII
CHECKS = InputChecks.builtin().only([PII])


def pii(start: int, end: int, reason: str = R.PHONE_NUMBER) -> Finding:
    return Finding("test", PII, start, end, reason)


def test_masking_the_detectors_findings_and_restoring_the_reply() -> None:
    text = "Call 13812345678 or mail a@example.com; again 13812345678, card 4111 1111 1111 1111."
    masked = mask(text, CHECKS.scan(text).findings)
    assert masked.text == "Call [PHONE_1] or mail [EMAIL_1]; again [PHONE_1], card [CARD_1]."
    assert masked.placeholders == ("[PHONE_1]", "[EMAIL_1]", "[CARD_1]")
    reply = "We will call [PHONE_1] and refund [CARD_1]."
    assert masked.restore(reply) == "We will call 13812345678 and refund 4111 1111 1111 1111."
    assert masked.restore(masked.text) == text


def test_the_masked_text_holds_no_value_and_neither_does_its_record() -> None:
    text = "id 11010519491231002X, phone 13812345678"
    masked = mask(text, CHECKS.scan(text).findings)
    for view in (masked.text, repr(masked), str(masked.as_json())):
        assert "11010519491231002X" not in view and "13812345678" not in view
    assert masked.as_json() == {
        "placeholders": ["[ID_1]", "[PHONE_1]"],
        "spans": [[3, 21, "[ID_1]"], [29, 40, "[PHONE_1]"]],
    }


def test_a_placeholder_the_model_invented_is_left_as_it_is() -> None:
    masked = mask("my phone 13812345678", CHECKS.scan("my phone 13812345678").findings)
    reply = "Noted [PHONE_1]; is [PHONE_2] yours, or [CARD_1], or [PHONE_1 ]?"
    assert (
        masked.restore(reply)
        == "Noted 13812345678; is [PHONE_2] yours, or [CARD_1], or [PHONE_1 ]?"
    )


def test_placeholders_never_collide_with_text_that_looks_like_one() -> None:
    text = "I literally typed [PHONE_1] and [PHONE_2] here; my real number is 13812345678"
    masked = mask(text, CHECKS.scan(text).findings)
    assert masked.placeholders == ("[PHONE_3]",)
    assert masked.text.endswith("my real number is [PHONE_3]")
    # The user's own "[PHONE_1]" echoed by the model is not restored to anything.
    assert masked.restore("You typed [PHONE_1]; we call [PHONE_3].") == (
        "You typed [PHONE_1]; we call 13812345678."
    )


def test_restore_can_be_limited_to_some_labels() -> None:
    text = "card 4111111111111111 phone 13812345678"
    masked = mask(text, CHECKS.scan(text).findings)
    assert masked.restore("[CARD_1] / [PHONE_1]", labels=["PHONE"]) == "[CARD_1] / 13812345678"
    assert masked.restore("[CARD_1] / [PHONE_1]", labels=[]) == "[CARD_1] / [PHONE_1]"


def test_overlapping_findings_are_masked_once_by_the_first() -> None:
    masked = mask("abcdefgh", [pii(1, 4), pii(2, 6, R.EMAIL_ADDRESS), pii(7, 8, "other_pii")])
    assert masked.text == "a[PHONE_1]g[PII_1]"
    assert masked.restore(masked.text) == "abcdefgh"


def test_other_categories_and_empty_spans_are_not_masked() -> None:
    injection = Finding("x", InputCategory.PROMPT_INJECTION, 0, 3, "ignore_instructions")
    masked = mask("abcdef", [injection, pii(2, 2)])
    assert masked.text == "abcdef" and masked.placeholders == ()
    assert masked.restore("anything [PHONE_1]") == "anything [PHONE_1]"


@pytest.mark.parametrize("bad", [pii(0, 10), pii(-1, 2)])
def test_a_span_outside_the_text_is_refused(bad: Finding) -> None:
    with pytest.raises(ValueError, match="outside a text of 5"):
        mask("hello", [bad])


placeholder_like = st.sampled_from(
    ["[PHONE_1]", "[PHONE_2]", "[EMAIL_1]", "[CARD_1]", "[PII_1]", "[", "]", "_1]", "[PHONE_"]
)
texts = st.lists(st.one_of(st.text(max_size=12), placeholder_like), max_size=12).map("".join)
reasons = st.sampled_from([R.PHONE_NUMBER, R.EMAIL_ADDRESS, R.PAYMENT_CARD, "custom_pii"])


@st.composite
def text_and_findings(draw: st.DrawFn) -> tuple[str, list[Finding]]:
    text = draw(texts)
    findings = []
    for _ in range(draw(st.integers(0, 6))):
        start = draw(st.integers(0, len(text)))
        end = draw(st.integers(start, len(text)))
        findings.append(pii(start, end, draw(reasons)))
    return text, findings


@settings(max_examples=400, deadline=None)
@given(text_and_findings())
def test_restore_of_mask_is_the_text_for_any_text_and_spans(
    case: tuple[str, list[Finding]],
) -> None:
    text, findings = case
    masked = mask(text, findings)
    assert masked.restore(masked.text) == text
    for placeholder in masked.placeholders:
        assert placeholder not in text  # never one the text already had


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=10),
            placeholder_like,
            st.sampled_from(
                ["13812345678", " a@example.com ", "4111111111111111", "(415) 555-2671"]
            ),
        ),
        max_size=10,
    ).map(" ".join)
)
def test_restore_of_mask_is_the_text_with_the_detectors_findings(text: str) -> None:
    masked = mask(text, CHECKS.scan(text).findings)
    assert masked.restore(masked.text) == text
