from foureyes.risk.l0 import L0Gate
from foureyes.risk.result import l0_summary

TEXT = "I feel hopeless lol, honestly I want to die"


def test_records_keep_no_word_of_the_user_only_categories_spans_and_counts() -> None:
    l0 = L0Gate.default().scan(TEXT)
    assert l0.escalate and l0.dampened_by
    recorded = l0_summary(l0, with_terms=False)
    assert "dampened_by" not in recorded
    assert recorded["dampened"] == len(l0.dampened_by)
    assert all("term" not in m for m in recorded["matches"])
    for word in ("lol", "want to die", "feel"):
        assert word not in str(recorded)


def test_the_caller_who_asked_sees_terms_and_cues() -> None:
    l0 = L0Gate.default().scan(TEXT)
    shown = l0_summary(l0, with_terms=True)
    assert shown["dampened_by"] == sorted(str(d) for d in l0.dampened_by)
    assert all("term" in m for m in shown["matches"])


def test_the_record_says_which_signals_escalated_and_the_scorers_score() -> None:
    l0 = L0Gate.default().scan(TEXT)
    recorded = l0_summary(l0, with_terms=False)
    assert (
        recorded["signals"] == sorted(str(s) for s in l0.signals)
        and "lexicon" in recorded["signals"]
    )
    assert l0.screen_score is not None
    assert recorded["screen_score"] == round(l0.screen_score, 4)
