"""Evidence-bound durable facts: the model selects, the application writes.

A selector (a model) answers only ``{"selections": [{"kind", "evidence_ref"}]}``. Code
judges each selection against an authoritative :class:`Catalog` and a :class:`KindRegistry`,
renders the accepted ones from the evidence itself, and the :class:`DurableOwner` rebuilds,
re-judges and re-renders everything before it persists anything (docs/design.md 4, invariant 8).
Free model text for the user is a :class:`UserExplanation`, never a fact.

Importing this package registers the offline selector with the offline engine.
"""

from foureyes.evidence import offline as _offline  # noqa: F401  (registers the responder)
from foureyes.evidence.catalog import (
    SOURCE_KIND_PATTERN,
    Catalog,
    CatalogError,
    CatalogSource,
    EvidenceItem,
    catalog_from_json,
    catalog_from_mapping,
)
from foureyes.evidence.contract import Acceptance, Validation, check_selections
from foureyes.evidence.durable import Claim, CommitResult, CommitStatus, DurableOwner, Owner
from foureyes.evidence.facts import TRACE_KIND, FactsOutcome, FactsRequest, select_facts
from foureyes.evidence.kinds import ITEM_SLOTS, KindRegistry, ObservationKind, Template
from foureyes.evidence.remote import OwnerCommit, RemoteOwner
from foureyes.evidence.render import (
    RENDERER_VERSION,
    Observation,
    render,
    render_template,
    slot_text,
)
from foureyes.evidence.selection import (
    REJECT_REASON_NAMES,
    SELECTION_KEYS,
    Rejection,
    RejectReason,
    Selection,
    SelectorOutput,
    requested_schema,
)
from foureyes.evidence.selector import (
    PURPOSE_EXPLAIN,
    PURPOSE_SELECT,
    SELECTOR_FAILURES,
    EvidenceSelector,
    Selected,
    SelectorFailed,
    SelectorFailure,
    UserExplanation,
    explanation_request,
    failure_for,
    selection_request,
)
from foureyes.evidence.sources import (
    ColumnMap,
    ConfiguredEvidence,
    JsonFileCatalogSource,
    SqlCatalogSource,
)

__all__ = [
    "Acceptance",
    "Catalog",
    "CatalogError",
    "CatalogSource",
    "Claim",
    "ColumnMap",
    "CommitResult",
    "CommitStatus",
    "ConfiguredEvidence",
    "DurableOwner",
    "EvidenceItem",
    "EvidenceSelector",
    "FactsOutcome",
    "FactsRequest",
    "ITEM_SLOTS",
    "JsonFileCatalogSource",
    "KindRegistry",
    "Observation",
    "ObservationKind",
    "Owner",
    "OwnerCommit",
    "PURPOSE_EXPLAIN",
    "PURPOSE_SELECT",
    "REJECT_REASON_NAMES",
    "RENDERER_VERSION",
    "RejectReason",
    "Rejection",
    "RemoteOwner",
    "SELECTION_KEYS",
    "SELECTOR_FAILURES",
    "SOURCE_KIND_PATTERN",
    "Selected",
    "Selection",
    "SelectorFailed",
    "SelectorFailure",
    "SelectorOutput",
    "SqlCatalogSource",
    "TRACE_KIND",
    "Template",
    "UserExplanation",
    "Validation",
    "catalog_from_json",
    "catalog_from_mapping",
    "check_selections",
    "explanation_request",
    "failure_for",
    "render",
    "render_template",
    "requested_schema",
    "select_facts",
    "selection_request",
    "slot_text",
]
