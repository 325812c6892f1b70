import hashlib

from hypothesis import given
from hypothesis import strategies as st

from foureyes.core.digest import (
    Proposal,
    canonical_json,
    is_sha256_hex,
    sha256_hex,
    text_fingerprint,
)


def test_sha256_of_known_vector() -> None:
    assert sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_text_is_hashed_exactly_as_given_without_normalisation() -> None:
    assert sha256_hex("hello") != sha256_hex("hello ")
    assert sha256_hex("e\u0301") != sha256_hex("\u00e9")  # NFD vs NFC stay distinct


@given(st.text())
def test_text_proposal_digest_covers_its_exact_utf8_bytes(text: str) -> None:
    p = Proposal.of_text(text, role="counselor", route="r")
    assert p.sha256 == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert is_sha256_hex(p.sha256)


@given(st.dictionaries(st.text(), st.integers() | st.text() | st.booleans()))
def test_canonical_json_ignores_key_order(d: dict[str, object]) -> None:
    reordered = dict(reversed(list(d.items())))
    assert canonical_json(d) == canonical_json(reordered)
    p1 = Proposal.of_json(d, role="supervisor", route="r")
    p2 = Proposal.of_json(reordered, role="supervisor", route="r")
    assert p1.sha256 == p2.sha256


def test_canonical_json_refuses_nan() -> None:
    import pytest

    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


def test_proposal_identity_ignores_meta() -> None:
    a = Proposal.of_text("x", role="counselor", route="r", latency_ms=1)
    b = Proposal.of_text("x", role="counselor", route="r", latency_ms=2)
    assert a == b


def test_is_sha256_hex_accepts_only_lowercase_64_hex() -> None:
    good = sha256_hex("x")
    assert is_sha256_hex(good)
    assert not is_sha256_hex(good.upper())
    assert not is_sha256_hex(good[:-1])
    assert not is_sha256_hex(good + "0")
    assert not is_sha256_hex(None)


def test_fingerprint_depends_on_key_and_is_not_a_bare_hash() -> None:
    a = text_fingerprint("I feel alone", b"k1")
    assert a == text_fingerprint("I feel alone", b"k1")
    assert a != text_fingerprint("I feel alone", b"k2")
    assert a != sha256_hex("I feel alone")
