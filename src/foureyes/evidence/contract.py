"""The evidence contract: judge each selection against the catalog and the kinds, purely.

:func:`check_selections` is a plain function of its arguments (no I/O, no clock), so the
selector's side and the durable owner run the very same judgement, and the owner can redo
it from scratch on a catalog it rebuilt itself. Time is linear in the number of
selections: every check is a dictionary or set lookup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from foureyes.core.locale import Locale
from foureyes.evidence.catalog import Catalog, EvidenceItem
from foureyes.evidence.kinds import KindRegistry
from foureyes.evidence.render import Observation, render
from foureyes.evidence.selection import SELECTION_KEYS, Rejection, RejectReason

__all__ = ["Acceptance", "Validation", "check_selections"]


@dataclass(frozen=True, slots=True)
class Acceptance:
    """One accepted selection: where it was, the record it cites, and its rendering."""

    index: int
    """Its position in the selector's ``selections`` list."""
    item: EvidenceItem
    """The cited record."""
    observation: Observation
    """The observation code rendered from the record."""


@dataclass(frozen=True, slots=True)
class Validation:
    """The judgement of a list of selections."""

    acceptances: tuple[Acceptance, ...]
    """Accepted selections, in the order they were selected."""
    rejected: tuple[Rejection, ...]
    """Refused selections with their reasons, in the order they were selected."""

    @property
    def accepted(self) -> tuple[Observation, ...]:
        """The accepted selections' observations, rendered by code, in selection order."""
        return tuple(a.observation for a in self.acceptances)


def check_selections(
    selections: Sequence[JsonValue], catalog: Catalog, kinds: KindRegistry, locale: Locale
) -> Validation:
    """Judge ``selections`` one by one and render the accepted ones in ``locale``.

    A selection is accepted only when it is an object with exactly the keys ``kind`` and
    ``evidence_ref``, both strings, naming a registered kind and a record of ``catalog``
    not cited before, admissible, of a record kind that kind may cite, from a source it
    accepts, and renderable. The
    first failing check, in :class:`~foureyes.evidence.selection.RejectReason` order, is
    the reason given.

    A ref counts as cited once a selection with a registered kind named it, whatever
    became of that selection, so a record is never cited twice under different kinds.
    """
    acceptances: list[Acceptance] = []
    rejected: list[Rejection] = []
    cited: set[str] = set()
    for index, selection in enumerate(selections):
        outcome = _judge(selection, catalog, kinds, locale, cited)
        if isinstance(outcome, RejectReason):
            rejected.append(Rejection(index=index, selection=selection, reason=outcome))
        else:
            item, observation = outcome
            acceptances.append(Acceptance(index=index, item=item, observation=observation))
    return Validation(acceptances=tuple(acceptances), rejected=tuple(rejected))


def _judge(
    selection: JsonValue, catalog: Catalog, kinds: KindRegistry, locale: Locale, cited: set[str]
) -> tuple[EvidenceItem, Observation] | RejectReason:
    if not isinstance(selection, dict):
        return RejectReason.MALFORMED
    # Invariant 8: a key besides kind and ref is the model trying to write text; the
    # whole selection goes, whatever its kind and ref, so no author channel exists.
    if selection.keys() - SELECTION_KEYS:
        return RejectReason.EXTRA_FIELDS
    kind_name, ref = selection.get("kind"), selection.get("evidence_ref")
    if not isinstance(kind_name, str) or not isinstance(ref, str):
        return RejectReason.MALFORMED
    kind = kinds.get(kind_name)
    if kind is None:
        return RejectReason.UNKNOWN_KIND
    item = catalog.get(ref)
    if item is None:
        return RejectReason.UNKNOWN_REF
    if ref in cited:
        return RejectReason.DUPLICATE_REF
    cited.add(ref)
    if not item.admissible:
        return RejectReason.INADMISSIBLE
    if not kind.may_cite(item.kind):
        return RejectReason.KIND_INCOMPATIBLE
    if not kind.accepts_source(item.source):
        return RejectReason.SOURCE_INCOMPATIBLE
    observation = render(item, kind, locale)
    if observation is None:
        return RejectReason.UNRENDERABLE
    return item, observation
