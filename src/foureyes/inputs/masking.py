"""Masking personal data before text reaches a model, and restoring it in the reply.

:func:`mask` replaces the span of every ``pii`` finding with a placeholder that names its
kind and a number (``[PHONE_1]``, ``[EMAIL_2]``); the same value gets the same placeholder
each time, so a model can still tell one number from another. The :class:`Masked` it
returns holds the masked text and, privately, the values behind the placeholders it
issued; :meth:`Masked.restore` puts those values back into a reply, and only those: a
placeholder the model made up (``[PHONE_9]`` when eight were issued, ``[CARD_1]`` when no
card was masked) stays as it is.

A placeholder never collides with text the user wrote: a number is skipped when its
placeholder already appears in the text, so ``[PHONE_1]`` typed by the user is not a
placeholder and is never "restored". An issued placeholder cannot straddle an insertion
either (``[`` occurs in it only first), so ``restore(mask(text).text) == text`` for every
text and every set of spans. The values live only in the :class:`Masked` object: its repr
and :meth:`Masked.as_json` list placeholders and spans, never values. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from foureyes.inputs.check import Finding, FindingReason, InputCategory

__all__ = ["LABELS", "Masked", "mask"]

LABELS: Mapping[str, str] = MappingProxyType(
    {
        FindingReason.PHONE_NUMBER: "PHONE",
        FindingReason.PAYMENT_CARD: "CARD",
        FindingReason.IBAN: "IBAN",
        FindingReason.CN_RESIDENT_ID: "ID",
        FindingReason.EMAIL_ADDRESS: "EMAIL",
    }
)
"""The placeholder label of each built-in reason; any other ``pii`` finding is ``PII``."""
_OTHER = "PII"


@dataclass(frozen=True, slots=True)
class Masked:
    """A text with its personal data replaced by placeholders, and the way back."""

    text: str
    """The masked text: what may go to a model route."""
    spans: tuple[tuple[int, int, str], ...]
    """Each masked span of the original text and the placeholder that replaced it."""
    _values: Mapping[str, str] = field(repr=False)

    @property
    def placeholders(self) -> tuple[str, ...]:
        """The placeholders issued, in order of first use."""
        return tuple(self._values)

    def restore(self, reply: str, *, labels: Iterable[str] | None = None) -> str:
        """``reply`` with each issued placeholder replaced by the user's own value.

        Args:
            reply: text written from the masked text (a model's reply).
            labels: restore only placeholders of these labels (``PHONE``, ``EMAIL``);
                ``None``: all. Others stay placeholders.

        A placeholder that was not issued (the model invented it) is left as it is.
        """
        allowed = None if labels is None else frozenset(labels)
        values = {
            p: v
            for p, v in self._values.items()
            if allowed is None or p[1 : p.rindex("_")] in allowed
        }
        if not values:
            return reply
        pattern = re.compile("|".join(re.escape(p) for p in values))
        return pattern.sub(lambda m: values[m.group()], reply)

    def as_json(self) -> dict[str, Any]:
        """What a trace may record: placeholders and spans, no values."""
        return {
            "placeholders": list(self._values),
            "spans": [[start, end, p] for start, end, p in self.spans],
        }


def mask(text: str, findings: Iterable[Finding]) -> Masked:
    """``text`` with the span of every ``pii`` finding replaced by a placeholder.

    Findings of other categories are ignored, as are empty spans. Overlapping spans are
    masked as one, labelled by the finding that starts first (the longer on a tie).
    Spans must lie inside ``text`` (a scan's findings of this text do).

    Raises:
        ValueError: a finding's span is outside ``text``.
    """
    spans: list[tuple[int, int, str]] = []
    for finding in sorted(
        (f for f in findings if f.category == InputCategory.PII and f.end > f.start),
        key=lambda f: (f.start, -f.end),
    ):
        if not 0 <= finding.start < finding.end <= len(text):
            raise ValueError(f"finding span {finding.span} is outside a text of {len(text)}")
        label = LABELS.get(finding.reason, _OTHER)
        if spans and finding.start < spans[-1][1]:
            start, end, kept = spans[-1]
            spans[-1] = (start, max(end, finding.end), kept)
        else:
            spans.append((finding.start, finding.end, label))
    values: dict[str, str] = {}
    by_value: dict[tuple[str, str], str] = {}
    counters: dict[str, int] = {}
    pieces: list[str] = []
    issued: list[tuple[int, int, str]] = []
    at = 0
    for start, end, label in spans:
        value = text[start:end]
        placeholder = by_value.get((label, value))
        if placeholder is None:
            placeholder = _fresh(text, label, counters)
            by_value[(label, value)] = placeholder
            values[placeholder] = value
        pieces += (text[at:start], placeholder)
        issued.append((start, end, placeholder))
        at = end
    pieces.append(text[at:])
    return Masked("".join(pieces), tuple(issued), MappingProxyType(values))


def _fresh(text: str, label: str, counters: dict[str, int]) -> str:
    """The next ``[LABEL_n]`` that does not occur in ``text``."""
    n = counters.get(label, 0)
    while True:
        n += 1
        placeholder = f"[{label}_{n}]"
        if placeholder not in text:
            counters[label] = n
            return placeholder
