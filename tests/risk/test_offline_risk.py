"""The offline L1/L2 assessors: lexicon-based, deterministic, never confident enough."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.config import load_config
from foureyes.core.errors import ConfigError, RouteBadResponse
from foureyes.core.policy import GenerationPolicy
from foureyes.core.roles import Role
from foureyes.llm.offline import OfflineProvider, offline_roles
from foureyes.llm.provider import ChatMessage, ChatRequest
from foureyes.risk.assess import Tier, parse_assessment
from foureyes.risk.confirm import confirm
from foureyes.risk.levels import RiskLevel, RiskStatus
from foureyes.risk.offline import OFFLINE_CONFIDENCE, offline_report
from foureyes.risk.triage import Triage, TriageRequest

PLAN_EN = "I wrote my suicide note and bought a rope"
IDEATION_ZH = "我不想活了"
CALM = "今天天气不错，和朋友去吃了火锅"


def test_both_tiers_have_an_offline_responder() -> None:
    assert {Role.RISK_L1, Role.RISK_L2} <= offline_roles()


def test_offline_confidence_is_below_every_allowed_threshold() -> None:
    assert OFFLINE_CONFIDENCE <= 0.5
    with pytest.raises(ConfigError, match="risk.confirm_confidence"):
        load_config(environ={"FOUREYES_RISK__CONFIRM_CONFIDENCE": "0.5"})


@pytest.mark.parametrize(
    ("text", "level"),
    [
        (PLAN_EN, RiskLevel.CRITICAL),
        ("我已经写好遗书了，明天就去跳楼", RiskLevel.CRITICAL),
        (IDEATION_ZH, RiskLevel.HIGH),
        ("I want to die", RiskLevel.HIGH),
        (CALM, RiskLevel.LOW),
        ("", RiskLevel.LOW),
    ],
)
def test_levels_follow_the_lexicon(text: str, level: RiskLevel) -> None:
    for tier in (Tier.L1, Tier.L2):
        a = parse_assessment(offline_report(text, source="offline lexicon"), tier)  # type: ignore[arg-type]
        assert a.level is level and a.confidence == OFFLINE_CONFIDENCE


def test_the_evidence_names_categories_never_the_users_words() -> None:
    report = json.loads(offline_report(PLAN_EN, source="offline lexicon"))
    assert report["evidence"] == "offline lexicon: farewell, plan_means"
    assert "rope" not in json.dumps(report) and report["dimensions"]["farewell"] > 0
    assert not any(report["context_flags"].values())


async def test_a_request_without_its_text_is_refused() -> None:
    provider = OfflineProvider("offline")
    bare = ChatRequest(role=Role.RISK_L1, messages=(ChatMessage.user(IDEATION_ZH),))
    with pytest.raises(RouteBadResponse):
        await provider.complete(bare, timeout_s=1)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300), threshold=st.floats(0.5001, 1.0))
def test_offline_can_never_confirm(text: str, threshold: float) -> None:
    """Invariant 5: the offline engine can show resources but never confirm or alert."""
    l1 = parse_assessment(offline_report(text, source="a"), Tier.L1)
    l2 = parse_assessment(offline_report(text, source="b"), Tier.L2)
    assert not confirm(l1, l2, threshold=threshold).confirmed


@pytest.mark.parametrize("text", [PLAN_EN, "我已经写好遗书了，明天就去跳楼"])
async def test_offline_triage_shows_resources_without_confirming(
    text: str, offline_triage: Triage
) -> None:
    result = await offline_triage.assess(TriageRequest(text=text, conversation_id="c"))
    assert result.status is RiskStatus.OK and result.level is RiskLevel.CRITICAL
    assert result.tier is Tier.L2 and not result.confirmed
    assert result.policy is GenerationPolicy.RESTRICTED
    assert result.l1 is not None and result.l1.offline
    assert result.l2 is not None and result.l2.offline
    assert "not independent" in result.l2.report.evidence


async def test_offline_triage_of_calm_text_stays_at_l0(offline_triage: Triage) -> None:
    result = await offline_triage.assess(TriageRequest(text=CALM, conversation_id="c"))
    assert result.level is RiskLevel.LOW and result.tier is Tier.L0
