"""Normalised overlap: whether two short statements say the same thing, by code alone.

One definition, shared by the review ensemble (matching packet items across views) and
the evaluation metrics (whether a packet item restates what the agent already said, for
the unique-delta rate):

1. **Fold** each text with :func:`foureyes.core.fold.normalise`: compatibility forms to
   their plain form (NFKC: full-width letters, ligatures), case folded, invisible
   characters removed, separators to spaces.
2. **Tokenise** the folded text: every Han character is one token (Chinese writes no
   spaces between words), every other maximal run of letters and digits is one token;
   everything else (spaces, punctuation, symbols) only separates tokens.
3. **Overlap** is the Jaccard index of the two token *sets*, ``|A ∩ B| / |A ∪ B|``, in
   [0, 1]. Two texts without any token overlap 1.0 when they fold to the same text and
   0.0 otherwise.
4. Two texts **match** when their overlap is at least :data:`MATCH_THRESHOLD` (0.5: at
   least half of all the distinct tokens of the two are shared). The threshold is this
   project's choice, not a published constant; paraphrases with little shared wording
   stay different, since no model judges sameness here.

Pure and total: every pair of strings has an overlap.
"""

from __future__ import annotations

import re

from foureyes.core.fold import normalise

__all__ = ["MATCH_THRESHOLD", "matches", "overlap", "tokens"]

MATCH_THRESHOLD = 0.5
"""The least overlap at which two texts count as the same statement."""

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_TOKEN = re.compile(rf"[{_HAN}]|[^\W_{_HAN}]+")


def tokens(text: str) -> frozenset[str]:
    """The set of tokens of ``text`` once folded (steps 1 and 2 of the module doc)."""
    return frozenset(_TOKEN.findall(normalise(text).text))


def overlap(first: str, second: str) -> float:
    """The Jaccard overlap of the token sets of ``first`` and ``second`` (step 3)."""
    a, b = tokens(first), tokens(second)
    if not a and not b:
        return 1.0 if normalise(first).text.strip() == normalise(second).text.strip() else 0.0
    return len(a & b) / len(a | b)


def matches(first: str, second: str, threshold: float = MATCH_THRESHOLD) -> bool:
    """Whether ``first`` and ``second`` overlap at least ``threshold`` (step 4)."""
    return overlap(first, second) >= threshold
