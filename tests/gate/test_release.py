from __future__ import annotations

import dataclasses

import pytest

from foureyes.core.digest import sha256_hex
from foureyes.core.locale import Locale
from foureyes.core.policy import GenerationPolicy
from foureyes.core.reasons import ReasonCode
from foureyes.gate import (
    PART_SEPARATOR,
    Decision,
    DeliveryRefused,
    Outcome,
    PartKind,
    Release,
    Verdict,
    VerdictDecision,
    compose_release,
    decide,
    deliver,
    fallback_text,
)
from foureyes.risk.resources import render_resources

DRAFT_A = "I hear you. That sounds like a lot to carry."
DRAFT_B = "Here is something else entirely."
NORMAL = GenerationPolicy.NORMAL


def approved(text: str = DRAFT_A, policy: GenerationPolicy = NORMAL) -> Decision:
    digest = sha256_hex(text)
    verdict = Verdict(candidate_sha256=digest, decision=VerdictDecision.APPROVE)
    return decide(policy, candidate_sha256=digest, findings=(), verdict=verdict, failure=None)


def compose(
    decision: Decision,
    candidate: str | None = DRAFT_A,
    policy: GenerationPolicy = NORMAL,
    region: str | None = "HK",
) -> Release:
    return compose_release(decision, candidate, policy=policy, locale=Locale.EN, region=region)


def restricted_release() -> Release:
    restricted = GenerationPolicy.RESTRICTED
    return compose(approved(policy=restricted), policy=restricted)


def test_an_approved_candidate_is_delivered_as_is() -> None:
    delivery = deliver(compose(approved()))
    assert delivery.text == DRAFT_A and delivery.outcome is Outcome.RELEASED
    assert delivery.sha256 == delivery.candidate_sha256 == sha256_hex(DRAFT_A)


def test_draft_a_approved_and_draft_b_handed_over_is_a_mismatch() -> None:
    release = compose(approved(DRAFT_A), DRAFT_B)
    delivery = deliver(release)
    assert delivery.reason is ReasonCode.VERDICT_MISMATCH
    assert delivery.text == fallback_text(ReasonCode.VERDICT_MISMATCH, Locale.EN)
    assert DRAFT_B not in delivery.text and delivery.candidate_sha256 is None


def test_no_candidate_under_an_approval_is_a_mismatch() -> None:
    assert compose(approved(), None).decision.reason is ReasonCode.VERDICT_MISMATCH


def test_restricted_releases_carry_code_rendered_resources() -> None:
    release = restricted_release()
    delivery = deliver(release)
    resources = render_resources(Locale.EN, "HK")
    assert delivery.text == DRAFT_A + PART_SEPARATOR + resources
    assert [p.kind for p in release.parts] == [PartKind.CANDIDATE, PartKind.RESOURCES]
    assert delivery.candidate_sha256 == sha256_hex(DRAFT_A) != delivery.sha256


def test_a_prohibition_turns_even_a_released_decision_into_the_crisis_reply() -> None:
    release = compose(approved(), policy=GenerationPolicy.PROHIBITED)
    delivery = deliver(release)
    assert delivery.reason is ReasonCode.GENERATION_PROHIBITED
    assert DRAFT_A not in delivery.text
    assert delivery.text == PART_SEPARATOR.join(
        [
            fallback_text(ReasonCode.GENERATION_PROHIBITED, Locale.EN),
            render_resources(Locale.EN, "HK"),
        ]
    )


@pytest.mark.parametrize("reason", [r for r in ReasonCode if r.is_fallback], ids=str)
def test_every_fallback_is_code_rendered(reason: ReasonCode) -> None:
    delivery = deliver(compose(Decision.fallback(reason), DRAFT_A))
    assert delivery.text == fallback_text(reason, Locale.EN)
    assert DRAFT_A not in delivery.text


def tamper(release: Release, name: str, value: object) -> None:
    object.__setattr__(release, name, value)


def test_delivery_refuses_anything_but_a_release() -> None:
    with pytest.raises(DeliveryRefused):
        deliver(DRAFT_A)  # type: ignore[arg-type]


def test_a_release_cannot_be_built_or_edited() -> None:
    with pytest.raises(Exception, match="minted by the gate"):
        Release()
    with pytest.raises(AttributeError):
        compose(approved()).text = DRAFT_B  # type: ignore[misc]


def test_a_candidate_swapped_inside_a_release_is_refused() -> None:
    release = compose(approved())
    [part] = release.parts
    forged = dataclasses.replace(part, text=DRAFT_B, sha256=sha256_hex(DRAFT_B))
    tamper(release, "_parts", (forged,))
    with pytest.raises(DeliveryRefused, match="not the approved digest"):
        deliver(release)


def test_a_part_whose_text_changed_is_refused() -> None:
    release = compose(approved())
    tamper(release, "_parts", (dataclasses.replace(release.parts[0], text=DRAFT_B),))
    with pytest.raises(DeliveryRefused, match="does not match its digest"):
        deliver(release)


def test_forged_resources_are_refused() -> None:
    release = restricted_release()
    fake = "Call 555-0100."
    forged = dataclasses.replace(release.parts[1], text=fake, sha256=sha256_hex(fake))
    tamper(release, "_parts", (release.parts[0], forged))
    with pytest.raises(DeliveryRefused, match="not what code renders"):
        deliver(release)


def test_a_dropped_resource_block_is_refused() -> None:
    release = restricted_release()
    tamper(release, "_parts", release.parts[:1])
    with pytest.raises(DeliveryRefused, match="parts are not the ones"):
        deliver(release)


def test_a_forged_fallback_is_refused() -> None:
    release = compose(Decision.fallback(ReasonCode.REJECTED))
    forged = dataclasses.replace(release.parts[0], text=DRAFT_A, sha256=sha256_hex(DRAFT_A))
    tamper(release, "_parts", (forged,))
    with pytest.raises(DeliveryRefused, match="not what code renders"):
        deliver(release)


def test_a_release_under_a_prohibition_is_refused() -> None:
    release = compose(approved())
    tamper(release, "_policy", GenerationPolicy.PROHIBITED)
    with pytest.raises(DeliveryRefused):
        deliver(release)


def test_a_changed_whole_digest_is_refused() -> None:
    release = compose(approved())
    tamper(release, "_sha256", sha256_hex(DRAFT_B))
    with pytest.raises(DeliveryRefused, match="not the text that was minted"):
        deliver(release)
