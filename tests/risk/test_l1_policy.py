"""When L1 runs: ``risk.l1_policy`` and the messages the screen does not cover (issue 14)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foureyes.config import Config
from foureyes.core.errors import RouteTimeout
from foureyes.core.policy import GenerationPolicy
from foureyes.core.roles import Role
from foureyes.llm.calls import ModelCaller
from foureyes.llm.routes import Routes
from foureyes.risk.assess import Assessment, Tier, Turn, parse_assessment
from foureyes.risk.l0 import L0Gate
from foureyes.risk.levels import RiskLevel, RiskStatus
from foureyes.risk.lexicon_report import load_risk_data
from foureyes.risk.offline import offline_report
from foureyes.risk.triage import ScreenPath, Triage, TriageRequest, conversation_score, outcome
from foureyes.store import Store
from tests.helpers.answers import answer
from tests.helpers.data import require_data
from tests.risk._support import ScriptedProvider
from tests.risk.conftest import MakeTriage

L1 = Role.RISK_L1
CALM = "Long day at work, but dinner with friends was nice."
# Light L0 terms (each below the escalation threshold), spread over a conversation.
LIGHT = ("I feel so hopeless", "I feel like a burden")
HISTORY = [Turn("user", LIGHT[0]), Turn("assistant", "I'm here with you."), Turn("user", LIGHT[1])]
CURRENT = "I feel worthless"
UNCOVERED = ("Ich will nicht mehr leben", "Quiero morir", "Je veux mourir ce soir")


def request(text: str, history: list[Turn] | None = None) -> TriageRequest:
    return TriageRequest(text=text, conversation_id="c1", history=history or [])


def test_the_light_terms_do_not_escalate_alone_but_add_up(lexicon_gate: L0Gate) -> None:
    # The lexicon alone (the learned scorer escalates some of these phrasings by itself).
    gate = lexicon_gate
    assert not any(gate.scan(t).escalate for t in (*LIGHT, CURRENT))
    current = gate.scan(CURRENT)
    assert conversation_score(gate, current, HISTORY, 10) >= 1.0
    # Only user turns count, and only the last ``turns`` of them.
    assert (
        conversation_score(gate, current, HISTORY, 1) == current.score + gate.scan(LIGHT[1]).score
    )
    assert conversation_score(gate, current, HISTORY, 0) == current.score
    assistant = [Turn("assistant", t) for t in LIGHT]
    assert conversation_score(gate, current, assistant, 10) == current.score


async def test_escalated_policy_leaves_spread_light_signals_at_l0(
    make_triage: MakeTriage, provider: ScriptedProvider, lexicon_gate: L0Gate
) -> None:
    result = await make_triage(gate=lexicon_gate).assess(request(CURRENT, HISTORY))
    assert (result.status, result.level, result.tier, result.path) == (
        RiskStatus.OK,
        RiskLevel.LOW,
        Tier.L0,
        None,
    )
    assert provider.calls(L1) == []


async def test_screened_policy_sends_a_conversation_whose_light_signals_add_up_to_l1(
    make_triage: MakeTriage, provider: ScriptedProvider, lexicon_gate: L0Gate
) -> None:
    # The lexicon alone: with the scorer, its lower threshold could take these first.
    triage = make_triage(l1_policy="screened", gate=lexicon_gate)
    provider.enqueue(L1, answer("medium", 0.8))
    screening = triage.screen(request(CURRENT, HISTORY))
    assert screening.escalates and screening.path is ScreenPath.CONVERSATION
    result = await triage.finish(screening)
    assert (result.status, result.level, result.tier) == (RiskStatus.OK, RiskLevel.MEDIUM, Tier.L1)
    assert result.as_dict(with_evidence=False)["path"] == "conversation"
    assert len(provider.calls(L1)) == 1
    # The same message without the conversation behind it stays at L0.
    assert not triage.screen(request(CURRENT)).escalates


def _scored_between_thresholds(gate: L0Gate, lexicon: L0Gate) -> str:
    """A calibration text that no L0 signal escalates, scored above ``screened``.

    From the training data in ../shared (SOS-1K folds 1-4, the English sets).
    """
    screen = gate.screen
    assert screen is not None
    for item in load_risk_data(require_data("risk")):
        text = item.text[:2000]
        result = gate.scan(text)
        if (
            not result.escalate
            and not lexicon.scan(text).escalate
            and result.screen_score is not None
            and result.screen_score >= screen.threshold(text, "screened")
        ):
            return text
    raise AssertionError("no calibration text between the two thresholds")


async def test_screened_policy_sends_a_message_above_the_scorers_lower_threshold_to_l1(
    make_triage: MakeTriage,
    provider: ScriptedProvider,
    store: Store,
    gate: L0Gate,
    lexicon_gate: L0Gate,
) -> None:
    text = _scored_between_thresholds(gate, lexicon_gate)
    provider.enqueue(L1, answer("medium", 0.8))
    triage = make_triage(l1_policy="screened")
    screening = triage.screen(request(text))
    assert not screening.l0.escalate and screening.l0.signals == frozenset()
    assert screening.escalates and screening.path is ScreenPath.SCORER
    result = await triage.finish(screening)
    assert (result.status, result.level, result.tier) == (RiskStatus.OK, RiskLevel.MEDIUM, Tier.L1)
    assert result.as_dict(with_evidence=False)["path"] == "scorer"
    [row] = await store.assessments.for_conversation(result.conversation_key)
    assert row.detail["path"] == "scorer"
    assert len(provider.calls(L1)) == 1
    # The other policies leave it at L0; the lexicon alone has no score to go by.
    assert not make_triage().screen(request(text)).escalates
    lexicon_only = make_triage(l1_policy="screened", gate=lexicon_gate)
    assert lexicon_only.screen(request(text)).path is not ScreenPath.SCORER


async def test_always_policy_sends_a_calm_message_to_l1(
    make_triage: MakeTriage, provider: ScriptedProvider
) -> None:
    provider.enqueue(L1, answer("high", 0.9)).enqueue(Role.RISK_L2, answer("high", 0.9))
    triage = make_triage(l1_policy="always")
    screening = triage.screen(request(CALM))
    assert screening.escalates and screening.path is ScreenPath.ALWAYS
    result = await triage.finish(screening)
    assert (result.level, result.tier) == (RiskLevel.HIGH, Tier.L2)
    assert result.policy is GenerationPolicy.RESTRICTED
    assert not make_triage().screen(request(CALM)).escalates


async def test_always_policy_with_a_failing_l1_is_unknown_not_low(
    make_triage: MakeTriage, provider: ScriptedProvider
) -> None:
    provider.enqueue(L1, RouteTimeout("scripted", 1.0))
    result = await make_triage(l1_policy="always").assess(request(CALM))
    assert (result.status, result.level) == (RiskStatus.UNKNOWN, None)
    assert result.policy is GenerationPolicy.RESTRICTED


@pytest.mark.parametrize("text", UNCOVERED)
async def test_an_uncovered_message_goes_to_a_model_l1(
    text: str, make_triage: MakeTriage, provider: ScriptedProvider
) -> None:
    provider.enqueue(L1, answer("high", 0.9)).enqueue(Role.RISK_L2, answer("high", 0.9))
    triage = make_triage()
    screening = triage.screen(request(text))
    assert not screening.covered and not screening.l0.escalate
    assert screening.escalates and screening.path is ScreenPath.UNSCREENED
    result = await triage.finish(screening)
    assert (result.status, result.level) == (RiskStatus.OK, RiskLevel.HIGH)
    assert result.as_dict(with_evidence=False)["covered"] is False
    assert len(provider.calls(L1)) == 1


@pytest.fixture
def offline_triage(store: Store, gate: L0Gate) -> Triage:
    config = Config()
    caller = ModelCaller(Routes.build(config, {}), ledger=store.ledger, trace=store.traces)
    return Triage(config, caller, store.assessments, gate)


@pytest.mark.parametrize("text", UNCOVERED)
async def test_an_uncovered_message_with_the_offline_l1_is_unscreened_and_restricted(
    text: str, offline_triage: Triage, store: Store
) -> None:
    result = await offline_triage.assess(request(text))
    assert (result.status, result.level, result.confirmed) == (RiskStatus.UNSCREENED, None, False)
    assert result.policy is GenerationPolicy.RESTRICTED
    assert result.risk_block()["status"] == "unscreened"
    [row] = await store.assessments.for_conversation(result.conversation_key)
    assert row.status == "unscreened" and row.level is None


async def test_a_covered_message_with_the_offline_l1_is_ok(offline_triage: Triage) -> None:
    result = await offline_triage.assess(request(CALM))
    assert (result.status, result.level, result.tier) == (RiskStatus.OK, RiskLevel.LOW, Tier.L0)


_EN = st.sampled_from(
    ["I", "feel", "tired", "and", "the", "day", "was", "long", "you", "want", "to", "sleep"]
)
_ZH = st.text(alphabet="我今天很累想睡觉朋友吃饭", min_size=1, max_size=30)
_FOREIGN = st.sampled_from(
    [*UNCOVERED, "No quiero vivir más", "Ich kann nicht mehr", "Я хочу умереть", "死にたい"]
)

_PAD = st.sampled_from(["", " ", "!", " ...", " 😢", " 123"])
_FIXTURE = [HealthCheck.function_scoped_fixture]


def _assessments(text: str) -> st.SearchStrategy[Assessment | None]:
    # What the offline assessor returns for the text: its report, marked offline.
    report = parse_assessment(offline_report(text, source="offline"), Tier.L1)
    offline = dataclasses.replace(report, offline=True)
    return st.sampled_from([None, offline])


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), english=st.lists(_EN, min_size=1, max_size=12), zh=_ZH)
def test_a_covered_message_is_never_unscreened(
    data: st.DataObject, english: list[str], zh: str, offline_triage: Triage
) -> None:
    text = data.draw(st.sampled_from([" ".join(english), zh]))
    screening = offline_triage.screen(request(text))
    assert screening.covered
    l1 = data.draw(_assessments(text))
    status, _ = outcome(screening.escalates, screening.covered, l1, None)
    assert status is not RiskStatus.UNSCREENED


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.data(),
    foreign=st.lists(_FOREIGN, min_size=1, max_size=4),
    pad=st.sampled_from(["", " ", "!", " ...", " 😢"]),
)
def test_an_uncovered_message_is_never_ok_and_low(
    data: st.DataObject, foreign: list[str], pad: str, offline_triage: Triage
) -> None:
    text = ". ".join(foreign) + pad
    screening = offline_triage.screen(request(text))
    assert not screening.covered and screening.escalates
    l1 = data.draw(_assessments(text))
    assert outcome(screening.escalates, screening.covered, l1, None) != (
        RiskStatus.OK,
        RiskLevel.LOW,
    )
