"""L0's two signals: the lexicon and the learned scorer (issue 14, item 1)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.core import fold
from foureyes.risk import l0 as l0_module
from foureyes.risk import screen_model
from foureyes.risk.l0 import ESCALATION_THRESHOLD, L0Gate, L0Result, L0Signal, Lexicon
from foureyes.risk.lexicon_report import Dataset, load_risk_data
from foureyes.risk.screen_model import language_of
from foureyes.risk.screen_train import is_positive
from tests.helpers.data import require_data
from tests.helpers.work import lines_run

GATE = L0Gate.default()
LEXICON = L0Gate(Lexicon.packaged())

_TEXTS = st.one_of(
    st.text(max_size=200),
    st.lists(
        st.sampled_from(
            [
                "i",
                "want",
                "to",
                "die",
                "kill",
                "myself",
                "tired",
                "lol",
                "不想",
                "活",
                "了",
                "自杀",
                "累",
                "，",
                " ",
                "pills",
                "goodbye",
            ]
        ),
        max_size=30,
    ).map(" ".join),
)


@given(_TEXTS)
def test_escalate_is_any_signal_and_each_signal_is_its_own_threshold(text: str) -> None:
    result = GATE.scan(text)
    assert result.escalate == bool(result.signals)
    assert (L0Signal.LEXICON in result.signals) == (result.score >= ESCALATION_THRESHOLD)
    screen = GATE.screen
    assert screen is not None
    if not fold.normalise(text).text.strip():
        assert result.screen_score is None and L0Signal.SCORER not in result.signals
        return
    assert result.screen_score == screen.score(text)
    assert (L0Signal.SCORER in result.signals) == (
        result.screen_score >= screen.threshold(text, "escalate")
    )
    # The lexicon's part of the result is the lexicon-alone gate's, whatever the scorer says.
    alone = LEXICON.scan(text)
    assert (alone.score, alone.matches, alone.cues) == (result.score, result.matches, result.cues)
    assert alone.signals == result.signals - {L0Signal.SCORER}


@given(st.text(max_size=100))
def test_the_lexicon_alone_gate_has_no_score_and_only_the_lexicon_signal(text: str) -> None:
    result = LEXICON.scan(text)
    assert LEXICON.screen is None and result.screen_score is None
    assert result.signals <= {L0Signal.LEXICON}
    assert result.escalate == (L0Signal.LEXICON in result.signals)


@pytest.mark.parametrize("text", ["", "   ", "\u200b\u200d", "\t\n"])
def test_an_empty_text_is_not_scored(text: str) -> None:
    assert GATE.scan(text) == L0Result.nothing()


def test_a_text_is_folded_once_for_both_signals(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = fold.normalise

    def counting(text: str) -> fold.Normalised:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(l0_module, "normalise", counting)
    monkeypatch.setattr(screen_model, "normalise", counting)
    result = GATE.scan("I wrote goodbye letters to my family 我不想活了")
    assert result.screen_score is not None
    assert len(calls) == 1


def test_a_calibration_text_the_lexicon_misses_escalates_by_the_scorer_alone() -> None:
    # Look in the training data (SOS-1K folds 1-4 and the English sets in ../shared) for
    # an at-risk text the lexicon does not escalate: the scorer learned it.
    found = None
    for item in load_risk_data(require_data("risk")):
        if not is_positive(item) or LEXICON.scan(item.text).escalate:
            continue
        result = GATE.scan(item.text)
        if result.escalate:
            found = item, result
            break
    assert found is not None
    item, result = found
    assert result.signals == {L0Signal.SCORER}
    assert result.matches == () or result.score < ESCALATION_THRESHOLD
    assert result.screen_score is not None and GATE.screen is not None
    assert result.screen_score >= GATE.screen.threshold(item.text)
    assert language_of(item.text) == ("zh" if item.dataset is Dataset.SOS1K else "en")


@pytest.mark.parametrize(
    "sentence", ["a perfectly ordinary sentence about the weather. ", "今天下雨了，我在家看书。"]
)
def test_the_scorer_does_no_python_work_per_word_or_character(sentence: str) -> None:
    # Words (remembered after their first text) and Han n-grams (numpy) are summed in C:
    # a text a hundred times longer costs the scorer not one more line of Python. (The
    # fold's own work is test_l0's.)
    screen = GATE.screen
    assert screen is not None
    short, long = (fold.normalise(sentence * n).text for n in (21, 2100))
    screen.score_folded(short)
    _, short_work = lines_run(lambda: screen.score_folded(short))
    _, work = lines_run(lambda: screen.score_folded(long))
    assert work == short_work
