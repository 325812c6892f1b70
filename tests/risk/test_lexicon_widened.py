"""The lexicon widened from published indicator families (issue 14): examples and folds."""

from collections.abc import Callable

import pytest

from foureyes.risk._lexicon import EntryKind, Lexicon
from foureyes.risk.l0 import ESCALATION_THRESHOLD, L0Gate

LEXICON = Lexicon.packaged()
GATE = L0Gate(LEXICON)

# The messages of issue 14 that came back `low`, and paraphrases of each.
ISSUE_EXAMPLES = [
    "I took all my pills an hour ago",
    "I wrote goodbye letters to my family",
    "我已经把药都吃了",
    "活着没意思",
    "I want to disappear forever",
]
PARAPHRASES = [
    "i took all of my tablets",
    "I swallowed the whole bottle",
    "药都吃完了",
    "活着没有意思",
    "我想永远消失",
    "wrote goodbye notes for everyone",
    "I just wanna disappear forever",
]
# Acts in progress: each must match a strong term (it escalates whatever else is said).
ACTS_IN_PROGRESS = [
    "I took pills just now",
    "I swallowed tablets just now",
    "took tablets just now",
    "刚吃了一整瓶药",
    "我吞了一整瓶安眠药",
]


@pytest.mark.parametrize("text", ISSUE_EXAMPLES + PARAPHRASES)
def test_issue_examples_and_paraphrases_escalate(text: str) -> None:
    assert GATE.scan(text).escalate


@pytest.mark.parametrize("text", ACTS_IN_PROGRESS)
def test_acts_in_progress_are_strong(text: str) -> None:
    result = GATE.scan(text)
    assert any(m.weight >= ESCALATION_THRESHOLD and not m.negated for m in result.matches)


@pytest.mark.parametrize(
    "family",
    [
        "suicidal_ideation",
        "plan_means",
        "past_attempt",
        "farewell",
        "burden",
        "trapped",
    ],
)
def test_published_sources_cover_each_family_in_both_languages(family: str) -> None:
    for language in ("en.txt", "zh.txt"):
        sourced = [
            e
            for e in LEXICON.entries
            if e.kind is EntryKind.TERM
            and e.category == family
            and e.origin.startswith(language)
            and e.source in ("cssrs", "is-path-warm")
        ]
        assert sourced, (family, language)


def _full_width(text: str) -> str:
    # English: every character full-width; Chinese: full-width punctuation between them.
    if not text.isascii():
        return "\uff0d".join(text)
    return "".join(
        chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else "\u3000" if c == " " else c for c in text
    )


def _separated(text: str) -> str:
    # Chinese: a separator between every two characters; English: the longest word letter-spaced.
    if not text.isascii():
        return "·".join(text)
    words = text.split()
    longest = max(range(len(words)), key=lambda i: len(words[i]))
    words[longest] = " ".join(words[longest])
    return " ".join(words)


def _dotted(text: str) -> str:
    return ".".join(text) if not text.isascii() else text.replace(" ", "-")


@pytest.mark.parametrize("fold", [_full_width, _separated, _dotted])
@pytest.mark.parametrize("text", ISSUE_EXAMPLES + PARAPHRASES + ACTS_IN_PROGRESS)
def test_new_terms_match_through_the_folds(text: str, fold: Callable[[str], str]) -> None:
    folded = fold(text)
    assert folded != text
    assert GATE.scan(folded).escalate, folded
