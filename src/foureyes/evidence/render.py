"""Deterministic rendering: the only way text of a durable observation comes to exist.

An observation's label is its kind's label, and its description is its kind's template
with each slot filled from the cited record (docs/design.md 4, invariant 8). Same record, same
kind, same locale: same bytes, in every process and on every run. A slot the record cannot
fill (a missing field, a blank string, a boolean, null, an object or a list) makes the
record unrenderable; nothing is ever guessed or left half-filled.

Values are written as they are: strings verbatim, integers in decimal, floats in Python's
shortest round-trip form. :func:`slot_texts` is every slot's text as the store keeps it
beside the record, so the database's own renderer fills the same slots with the same
bytes. Bump :data:`RENDERER_VERSION` whenever any of that changes, so stored observations
say which rules wrote them (version 2: braces only delimit slots).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from foureyes.core.locale import Locale
from foureyes.evidence.catalog import EvidenceItem
from foureyes.evidence.kinds import ITEM_SLOTS, SLOT_PATTERN, ObservationKind, Template

__all__ = [
    "Observation",
    "RENDERER_VERSION",
    "render",
    "render_template",
    "slot_text",
    "slot_texts",
]

RENDERER_VERSION = "2"
"""Version of the rendering rules; stored with every observation."""


class Observation(BaseModel):
    """One accepted selection as code rendered it: the shape of an ``accepted`` entry."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    kind: str
    """The observation kind."""
    evidence_ref: str
    """The cited record."""
    label: str
    """The kind's label in the locale rendered."""
    description: str
    """The kind's template filled from the cited record."""


def slot_text(item: EvidenceItem, slot: str) -> str | None:
    """The text slot ``slot`` takes from ``item``, or ``None`` when it cannot be filled.

    ``value``, ``source`` and ``observed_at`` are the record's own fields; any other name
    is a field of the record's value, when that value is an object.
    """
    if slot in ITEM_SLOTS:
        raw: object = getattr(item, slot)
    elif isinstance(item.value, dict) and slot in item.value:
        raw = item.value[slot]
    else:
        return None
    if isinstance(raw, str):
        return raw if raw.strip() else None
    # bool is an int subclass; "True" is not a restatement any locale would print.
    if isinstance(raw, int) and not isinstance(raw, bool):
        try:
            return str(raw)
        except ValueError:  # more digits than Python will print
            return None
    if isinstance(raw, float):
        return repr(raw)
    return None


def slot_texts(item: EvidenceItem) -> dict[str, str]:
    """Every slot ``item`` can fill, with its text: what a template may cite of it.

    A slot absent from the result is one :func:`slot_text` cannot fill; a field of the
    value whose name no template could write is left out.
    """
    names = set(ITEM_SLOTS)
    if isinstance(item.value, dict):
        names.update(name for name in item.value if SLOT_PATTERN.fullmatch(name))
    texts = {name: slot_text(item, name) for name in sorted(names)}
    return {name: text for name, text in texts.items() if text is not None}


def render_template(template: Template, item: EvidenceItem) -> str | None:
    """``template`` filled from ``item``, or ``None`` when any slot cannot be filled."""
    pieces = []
    for literal, slot in template.parts:
        pieces.append(literal)
        if slot is not None:
            text = slot_text(item, slot)
            if text is None:
                return None
            pieces.append(text)
    return "".join(pieces)


def render(item: EvidenceItem, kind: ObservationKind, locale: Locale) -> Observation | None:
    """The observation of ``kind`` citing ``item`` in ``locale``, or ``None`` if unrenderable.

    It does not check that ``kind`` may cite ``item``; :mod:`foureyes.evidence.contract`
    does, before it renders.
    """
    description = render_template(kind.template_for(locale), item)
    if description is None:
        return None
    return Observation(
        kind=kind.name, evidence_ref=item.ref, label=kind.label[locale], description=description
    )
