"""The offline assessor says less: context cues by rule, negated terms not counted.

Each cue class is checked in English, Simplified and Traditional Chinese through a real
:class:`Triage` on the offline routes (no model anywhere): the flag is set, the parse step's
cap lowers the level to medium, and first-person crisis statements keep their level.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foureyes.core.policy import GenerationPolicy
from foureyes.risk.assess import Tier, parse_assessment
from foureyes.risk.confirm import confirm
from foureyes.risk.l0 import L0Gate, L0Signal
from foureyes.risk.levels import RiskLevel, RiskStatus
from foureyes.risk.offline import JOKE_CUES, offline_report
from foureyes.risk.triage import Triage, TriageRequest

FLAGGED = [
    # third party
    ("third_party", "My friend said she wants to jump off a bridge", RiskLevel.CRITICAL),
    ("third_party", "他说他想死", RiskLevel.HIGH),
    ("third_party", "我朋友說她想跳樓", RiskLevel.CRITICAL),
    # quote
    ("quote", 'The song goes "I want to die"', RiskLevel.HIGH),
    ("quote", "歌词里唱着“我想死”", RiskLevel.HIGH),
    ("quote", "他說：「我想死」", RiskLevel.HIGH),
    # fiction
    ("fiction", "In my novel the character writes a suicide note", RiskLevel.CRITICAL),
    ("fiction", "我小说里的主角想自杀", RiskLevel.HIGH),
    ("fiction", "在我的故事裡，主角寫了遺書", RiskLevel.CRITICAL),
    # joke (the L1 prompt's own developer-slang example)
    ("joke", "this bug makes me want to kill myself lol", RiskLevel.HIGH),
    ("joke", "这个bug让我想死哈哈", RiskLevel.HIGH),
    ("joke", "這個bug讓我想死哈哈哈", RiskLevel.HIGH),
]


@pytest.mark.parametrize(("flag", "text", "reported"), FLAGGED)
async def test_each_cue_sets_its_flag_and_caps_at_medium(
    flag: str, text: str, reported: RiskLevel, offline_triage: Triage
) -> None:
    result = await offline_triage.assess(TriageRequest(text=text, conversation_id="c"))
    assert result.status is RiskStatus.OK and result.l1 is not None and result.l1.offline
    flags = result.l1.report.context_flags.model_dump()
    assert flags[flag], flags
    # The lexicon's reading is kept as the reported level; the cap lowers the effective one.
    assert result.l1.report.risk_level is reported and result.l1.capped
    assert result.level is RiskLevel.MEDIUM and result.tier is Tier.L1 and result.l2 is None
    assert not result.confirmed and result.policy is GenerationPolicy.NORMAL
    assert flag in result.l1.report.evidence


NEGATED = [
    ("I want to die, but I will never jump off a bridge", RiskLevel.HIGH, "plan_means"),
    ("我想死，但我不会烧炭", RiskLevel.HIGH, "plan_means"),
    ("我想死，但我不會燒炭", RiskLevel.HIGH, "plan_means"),
]


@pytest.mark.parametrize(("text", "level", "absent"), NEGATED)
async def test_a_negated_term_counts_for_nothing(
    text: str, level: RiskLevel, absent: str, offline_triage: Triage
) -> None:
    """The schema has no negation flag: the negated term is left out of level and evidence."""
    result = await offline_triage.assess(TriageRequest(text=text, conversation_id="c"))
    assert result.l1 is not None and result.l1.report.risk_level is level
    assert result.level is level and not result.l1.flagged
    assert absent not in result.l1.report.evidence
    assert result.l1.report.dimensions.arranging == 0


@pytest.mark.parametrize("text", ["I would never kill myself", "我永远不会自杀", "我永遠不會自殺"])
async def test_a_wholly_negated_statement_stays_low(text: str, offline_triage: Triage) -> None:
    result = await offline_triage.assess(TriageRequest(text=text, conversation_id="c"))
    # The lexicon does not escalate it; the learned scorer may (it reads no negation), and
    # then the offline L1, which restates the lexicon, keeps it low.
    assert result.level is RiskLevel.LOW
    assert result.tier is Tier.L0 or result.l0.signals == {L0Signal.SCORER}
    assert result.l0.dampened_by


FIRST_PERSON = [
    ("I wrote my suicide note and bought a rope", RiskLevel.CRITICAL),
    ("我已经写好遗书了，明天就去跳楼", RiskLevel.CRITICAL),
    ("我已經寫好遺書了，明天就去跳樓", RiskLevel.CRITICAL),
    # a first-person statement beside a third party, a quote, a story or a joke
    ("My friend wants to jump off a bridge and I want to die too", RiskLevel.CRITICAL),
    ("My friend wrote a suicide note. I do too", RiskLevel.CRITICAL),
    ("他想死，我也想死", RiskLevel.HIGH),
    ("她說她想死，其實我也想死", RiskLevel.HIGH),
    ('I keep thinking "I want to die"', RiskLevel.HIGH),
    ("The song goes I want to die, me too", RiskLevel.HIGH),
    ("the song goes I want to die and I do too", RiskLevel.HIGH),
    ("歌里唱着我想死，其实我也是", RiskLevel.HIGH),
    ("我住233房间，我想死", RiskLevel.HIGH),  # 233 is also a number
    ("“我想死”这句话一直在我脑子里", RiskLevel.HIGH),
    ("I'm writing a story and I want to die", RiskLevel.HIGH),
    ("this is killing me lol... I want to die", RiskLevel.HIGH),
    ("哈哈。我想死", RiskLevel.HIGH),
    ("I'm dying, I want to die", RiskLevel.HIGH),
]


@pytest.mark.parametrize(("text", "level"), FIRST_PERSON)
async def test_first_person_crisis_keeps_its_level(
    text: str, level: RiskLevel, offline_triage: Triage
) -> None:
    result = await offline_triage.assess(TriageRequest(text=text, conversation_id="c"))
    assert result.l1 is not None and not result.l1.flagged
    assert result.level is level and result.policy is GenerationPolicy.RESTRICTED


@pytest.mark.parametrize(
    "text",
    [
        "妈的，想死",  # a curse, not a mother
        "他妈的想死",
        "她媽的想死",
        "其他人都很好，就是想死",  # 其他: others, said by the writer
        "吉他弹不好，想死",  # 吉他: a guitar
        "long story short, want to die",  # no story
        "game over, want to die",
        "人生就是个故事，想死",
        "生活中的角色太累了，想死",
    ],
)
def test_words_that_only_look_like_a_cue_set_no_flag(text: str) -> None:
    """Unsure is unflagged: a subject-dropped statement is the writer's own."""
    assessment = parse_assessment(offline_report(text, source="a"), Tier.L1, offline=True)
    assert not assessment.flagged and assessment.level is RiskLevel.HIGH


def test_joke_cues_are_cues_of_the_packaged_lexicon(gate: L0Gate) -> None:
    cues = {entry.term for entry in gate.lexicon.entries if entry.kind == "cue"}
    assert cues >= JOKE_CUES


_RISK = ["I want to die", "kill myself", "jump off a bridge", "suicide note", "我想死", "跳樓"]
_OTHERS = ["My friend said she wants to jump off a bridge", "他说他想死", "我朋友想跳楼"]
_CONTEXT = [*_OTHERS, "lol", "哈哈", '"', "“", "」", "the song goes", "in my novel"]
_CONTEXT += ["never", "不会"]
_FRAGMENTS = st.sampled_from([*_RISK, *_CONTEXT, ". ", "，", "。", " ", "\n"]) | st.text(max_size=8)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_FRAGMENTS, max_size=12), threshold=st.floats(0.5001, 1.0))
def test_offline_is_never_sure_enough_to_confirm(parts: list[str], threshold: float) -> None:
    """Whatever the cues, offline confidence stays below any allowed threshold: no confirmation."""
    text = "".join(parts)
    l1 = parse_assessment(offline_report(text, source="a"), Tier.L1, offline=True)
    l2 = parse_assessment(offline_report(text, source="b"), Tier.L2, offline=True)
    assert l1.confidence < threshold and l2.confidence < threshold
    assert not confirm(l1, l2, threshold=threshold).confirmed
    if l1.flagged:
        assert l1.level.rank <= RiskLevel.MEDIUM.rank


@settings(max_examples=200, deadline=None)
@given(
    other=st.sampled_from(_OTHERS),
    own=st.sampled_from(["I want to die", "I wrote my suicide note", "我想死", "我想跳楼了"]),
    joint=st.sampled_from([". ", " and ", "，", "。", "\n", " "]),
    mine_first=st.booleans(),
)
def test_the_writers_own_crisis_beside_someone_elses_is_never_flagged(
    other: str, own: str, joint: str, mine_first: bool
) -> None:
    text = joint.join([own, other] if mine_first else [other, own])
    assessment = parse_assessment(offline_report(text, source="a"), Tier.L1, offline=True)
    assert not assessment.flagged
    assert assessment.level.rank >= RiskLevel.HIGH.rank
