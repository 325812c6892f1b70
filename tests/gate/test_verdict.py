from __future__ import annotations

import json
from typing import Any

import pytest

from foureyes.core.digest import sha256_hex
from foureyes.core.errors import ContractError
from foureyes.core.reasons import ReasonCode
from foureyes.gate import RuleCatalogue, Verdict, VerdictDecision, check_verdict, verdict_sha256
from foureyes.llm.structured import ParseFailure, parse_structured

CANDIDATE = "I hear you. That sounds hard."
DIGEST = sha256_hex(CANDIDATE)
CATALOGUE = RuleCatalogue.builtin()


def parse(**fields: Any) -> Verdict:
    body = {"candidate_sha256": DIGEST, "decision": "approve", **fields}
    return parse_structured(json.dumps(body), Verdict)


def check(verdict: Verdict) -> ReasonCode | None:
    problem = check_verdict(
        verdict, candidate=CANDIDATE, candidate_sha256=DIGEST, catalogue=CATALOGUE
    )
    return None if problem is None else problem.reason


def test_a_pinned_verdict_parses() -> None:
    verdict = parse(
        decision="reject",
        violations=[{"rule": "dismissive", "span": [0, 11], "note": "cold"}],
        missing=[],
    )
    assert verdict.decision is VerdictDecision.REJECT
    assert verdict.violations[0].span == (0, 11)
    assert check(verdict) is None


def test_missing_lists_default_to_empty() -> None:
    assert parse().violations == () and parse().missing == ()


@pytest.mark.parametrize(
    ("fields", "failure"),
    [
        ({"decision": "approved"}, ParseFailure.ENUM_INVALID),
        ({"decision": "APPROVE"}, ParseFailure.ENUM_INVALID),
        ({"candidate_sha256": DIGEST.upper()}, ParseFailure.SCHEMA_INVALID),
        ({"candidate_sha256": DIGEST[:63]}, ParseFailure.SCHEMA_INVALID),
        ({"confidence": 0.9}, ParseFailure.EXTRA_FIELDS),
        ({"violations": [{"rule": "dismissive", "span": [0, "5"], "note": ""}]}, None),
        ({"decision": "reject", "violations": []}, ParseFailure.SCHEMA_INVALID),
        ({"decision": "insufficient"}, ParseFailure.SCHEMA_INVALID),
        (
            {"violations": [{"rule": "dismissive", "span": [0, 1], "note": "x"}]},
            ParseFailure.SCHEMA_INVALID,
        ),
        ({"decision": "insufficient", "missing": [""]}, ParseFailure.SCHEMA_INVALID),
        ({"decision": "insufficient", "missing": ["x"] * 11}, ParseFailure.SCHEMA_INVALID),
        (
            {"decision": "reject", "violations": [{"rule": "dismissive", "span": [0, 1]}]},
            ParseFailure.SCHEMA_INVALID,
        ),
        (
            {"decision": "reject", "violations": [{"rule": "x", "span": [0, 1, 2], "note": ""}]},
            ParseFailure.SCHEMA_INVALID,
        ),
    ],
)
def test_a_verdict_off_contract_is_a_typed_failure(
    fields: dict[str, Any], failure: ParseFailure | None
) -> None:
    with pytest.raises(ContractError) as caught:
        parse(**fields)
    if failure is not None:
        assert caught.value.reason == failure


@pytest.mark.parametrize(
    ("violation", "reason"),
    [
        ({"rule": "be_nicer", "span": [0, 1]}, ReasonCode.REVIEW_MALFORMED),
        ({"rule": "dismissive", "span": [0, len(CANDIDATE) + 1]}, ReasonCode.REVIEW_MALFORMED),
        ({"rule": "dismissive", "span": [-1, 3]}, ReasonCode.REVIEW_MALFORMED),
        ({"rule": "dismissive", "span": [4, 4]}, ReasonCode.REVIEW_MALFORMED),
        ({"rule": "dismissive", "span": [5, 2]}, ReasonCode.REVIEW_MALFORMED),
        ({"rule": "dismissive", "span": [0, len(CANDIDATE)]}, None),
    ],
)
def test_rules_and_spans_must_fit_the_catalogue_and_candidate(
    violation: dict[str, Any], reason: ReasonCode | None
) -> None:
    verdict = parse(decision="reject", violations=[{**violation, "note": ""}])
    assert check(verdict) is reason


def test_a_verdict_for_other_text_is_a_mismatch_before_anything_else() -> None:
    verdict = parse(
        candidate_sha256=sha256_hex("other text"),
        decision="reject",
        violations=[{"rule": "be_nicer", "span": [0, 999], "note": ""}],
    )
    problem = check_verdict(
        verdict, candidate=CANDIDATE, candidate_sha256=DIGEST, catalogue=CATALOGUE
    )
    assert problem is not None and problem.reason is ReasonCode.VERDICT_MISMATCH
    assert DIGEST in problem.detail


def test_the_verdict_digest_covers_its_canonical_content() -> None:
    a = parse_structured(f'{{"decision": "approve", "candidate_sha256": "{DIGEST}"}}', Verdict)
    b = parse_structured(f'{{"candidate_sha256":"{DIGEST}","decision":"approve"}}', Verdict)
    assert verdict_sha256(a) == verdict_sha256(b)
    assert verdict_sha256(a) != verdict_sha256(parse(decision="insufficient", missing=["x"]))
