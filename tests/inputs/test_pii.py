"""The PII detectors: phones via phonenumbers, cards by Luhn, IBAN by mod 97, resident ids."""

from __future__ import annotations

import datetime as dt

import pytest

from foureyes.inputs import CheckContext, FindingReason, InputCategory, scan
from foureyes.inputs.pii import (
    PII_CHECKS,
    PII_CN_RESIDENT_ID,
    PII_EMAIL,
    PII_IBAN,
    PII_PAYMENT_CARD,
    PII_PHONE,
    cn_resident_id_valid,
    iban_valid,
    luhn_valid,
)

R = FindingReason


def spans(text: str, region: str | None = None) -> list[tuple[str, str]]:
    result = scan(text, PII_CHECKS, context=CheckContext(region=region))
    assert all(f.category == InputCategory.PII for f in result.findings)
    return [(f.reason, text[f.start : f.end]) for f in result.findings]


# --- phones


@pytest.mark.parametrize(
    ("text", "number", "region"),
    [
        ("我的手机号是13812345678，快递员联系不上我", "13812345678", None),
        ("手机：138 1234 5678", "138 1234 5678", None),
        ("手机 １３８１２３４５６７８ 谢谢", "１３８１２３４５６７８", None),
        ("电话 一三八一二三四五六七八", "一三八一二三四五六七八", None),
        ("call me at (415) 555-2671 after 5", "(415) 555-2671", None),
        ("UK office +44 20 7946 0958.", "+44 20 7946 0958", None),
        ("my number 07911 123456", "07911 123456", "GB"),
        ("手機 0912 345 678", "0912 345 678", "TW"),
        ("138\u200b1234\u200b5678", "138\u200b1234\u200b5678", None),
    ],
)
def test_phone_numbers(text: str, number: str, region: str | None) -> None:
    assert spans(text, region) == [(R.PHONE_NUMBER, number)]


@pytest.mark.parametrize(
    ("text", "region"),
    [
        ("订单号20240512123456还没发货", None),
        ("the tracking number is 1Z999AA10123456784", None),
        ("room 12, floor 3, 2024", None),
        ("手機 0912 345 678", None),  # Taiwan national form with no Taiwan hint: missed
        ("my number 07911 123456", None),  # UK national form with no UK hint: missed
        ("call 110 or 120", None),  # emergency short codes are not personal data
    ],
)
def test_not_phone_numbers(text: str, region: str | None) -> None:
    assert [r for r, _ in spans(text, region) if r == R.PHONE_NUMBER] == []


# --- cards


@pytest.mark.parametrize(
    "number",
    [
        "4111111111111111",
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "5555555555554444",
        "2223003122003222",
        "378282246310005",
        "6011111111111117",
        "3530111333300000",
        "6200000000000005",
        "30569309025904",
        "４１１１１１１１１１１１１１１１",
    ],
)
def test_payment_cards(number: str) -> None:
    text = f"card {number} please refund"
    [finding] = scan(text, [PII_PAYMENT_CARD]).findings
    assert text[finding.start : finding.end] == number and finding.reason == R.PAYMENT_CARD


@pytest.mark.parametrize(
    "number",
    [
        "4111111111111112",  # Luhn off by one
        "1234567812345670",  # Luhn valid, no network has prefix 12
        "411111111111111",  # Visa prefix, 15 digits
        "37828224631000",  # Amex prefix, 14 digits
        "4111 1111 1111 1111 5",  # one digit too many in the run
        "0000000000000000",
    ],
)
def test_not_payment_cards(number: str) -> None:
    assert scan(f"card {number} please", [PII_PAYMENT_CARD]).clean


def test_luhn_edge_cases() -> None:
    assert luhn_valid("0") and luhn_valid("18") and luhn_valid("59")
    assert not luhn_valid("") and not luhn_valid("4111 1111") and not luhn_valid("١٢")
    assert not luhn_valid("19")


# --- IBAN


@pytest.mark.parametrize(
    "iban",
    [
        "GB82WEST12345698765432",
        "GB82 WEST 1234 5698 7654 32",
        "gb82 west 1234 5698 7654 32",
        "DE89370400440532013000",
        "FR1420041010050500013M02606",
        "NL91ABNA0417164300",
        "BE68539007547034",
        "CH9300762011623852957",
        "NO9386011117947",
    ],
)
def test_ibans(iban: str) -> None:
    text = f"IBAN: {iban}."
    [finding] = scan(text, [PII_IBAN]).findings
    assert text[finding.start : finding.end] == iban


@pytest.mark.parametrize(
    "iban",
    [
        "GB82WEST12345698765433",  # checksum
        "GB83WEST12345698765432",  # check digits
        "GB82WEST1234569876543",  # one short for GB
        "XX82WEST12345698765432",  # no such country
        "DE8937040044053201300012",  # followed by more characters
    ],
)
def test_not_ibans(iban: str) -> None:
    assert scan(f"IBAN: {iban}.", [PII_IBAN]).clean


def test_iban_valid_wants_the_compact_upper_case_form() -> None:
    assert iban_valid("GB82WEST12345698765432")
    assert not iban_valid("GB82 WEST 1234 5698 7654 32") and not iban_valid("")


# --- Chinese resident identity numbers


@pytest.mark.parametrize(
    "number",
    ["11010519491231002X", "11010519491231002x", "440306199003071232", "310104200002294568"],
)
def test_resident_ids(number: str) -> None:
    text = f"身份证号{number}，谢谢"
    [finding] = scan(text, [PII_CN_RESIDENT_ID]).findings
    assert text[finding.start : finding.end] == number and finding.reason == R.CN_RESIDENT_ID


def test_a_resident_id_is_not_also_a_phone_number() -> None:
    assert spans("身份证 440306199003071232") == [(R.CN_RESIDENT_ID, "440306199003071232")]


@pytest.mark.parametrize(
    "number",
    [
        "110105194912310021",  # wrong check character
        "310104200102294561",  # 29 February 2001 does not exist
        "910105194912310028",  # region code 9
        "11010518991231002X",  # born 1899
        "11010519491231002",  # 17 characters
        "110105491231002",  # a 15-digit id of before 1999: no checksum, not reported
    ],
)
def test_not_resident_ids(number: str) -> None:
    assert scan(f"号码 {number} 结束", [PII_CN_RESIDENT_ID]).clean


def test_a_birth_date_after_today_is_refused_when_today_is_given() -> None:
    assert cn_resident_id_valid("310104200002294568", today=dt.date(2024, 1, 1))
    assert not cn_resident_id_valid("310104200002294568", today=dt.date(1999, 1, 1))


# --- e-mail


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("mail me: john.doe+x@example.co.uk.", "john.doe+x@example.co.uk"),
        ("邮箱是abc@qq.com谢谢", "abc@qq.com"),
        ("信箱 chen.mei＠example．tw 謝謝", "chen.mei＠example．tw"),
    ],
)
def test_email_addresses(text: str, address: str) -> None:
    [finding] = scan(text, [PII_EMAIL]).findings
    assert text[finding.start : finding.end] == address


@pytest.mark.parametrize(
    "text", ["@everyone hello", "a@b", "user@localhost", "x@1.2.3.4", "用户@例子.中国"]
)
def test_not_email_addresses(text: str) -> None:
    assert scan(text, [PII_EMAIL]).clean


def test_the_phone_check_uses_the_request_region() -> None:
    text = "my number 07911 123456"
    assert scan(text, [PII_PHONE], context=CheckContext(region="GB")).findings
    assert scan(text, [PII_PHONE]).clean
