"""The durable owner: the only writer of observations, trusting no caller.

:meth:`DurableOwner.commit` takes a caller's :class:`Claim` (the raw selections, the
snapshot and digest they were judged against, and optionally the caller's rendering) and
believes none of it. It rebuilds the catalog from its own :class:`CatalogSource`, refuses
the whole commit if the records changed, judges every selection again, renders again,
refuses the whole commit if the caller rendered any other bytes, and writes what it
rendered itself in one transaction. A caller's text never reaches the table; only the
owner's rendering of the cited evidence does (docs/design.md 4, invariant 8).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from foureyes.core.errors import UsageError
from foureyes.core.locale import Locale
from foureyes.evidence.catalog import Catalog, CatalogError, CatalogSource
from foureyes.evidence.contract import Validation, check_selections
from foureyes.evidence.kinds import KindRegistry
from foureyes.evidence.render import RENDERER_VERSION, Observation, slot_texts
from foureyes.evidence.selection import Rejection, RejectReason
from foureyes.store.observations import (
    LOCAL_TENANT,
    EvidenceRecord,
    EvidenceSnapshot,
    KindTemplate,
    KindTemplates,
    NewObservation,
    ObservationBatch,
    SqlObservationLog,
)

__all__ = [
    "Claim",
    "CommitResult",
    "CommitStatus",
    "DurableOwner",
    "Owner",
    "held_kinds",
    "held_snapshot",
]


class CommitStatus(StrEnum):
    """How a commit ended (wire strings). Only ``committed`` persisted anything."""

    COMMITTED = "committed"
    """Every selection the owner accepted is persisted (or was already)."""
    CATALOG_UNAVAILABLE = "catalog_unavailable"
    """The source could not rebuild the named snapshot (unknown, malformed or unreadable);
    nothing persisted."""
    CATALOG_CHANGED = "catalog_changed"
    """The rebuilt catalog's digest differs from the one the selections were judged
    against; nothing persisted."""
    RENDER_MISMATCH = "render_mismatch"
    """The caller's rendering differs from the owner's; nothing persisted."""
    SUBJECT_UNBOUND = "subject_unbound"
    """The rebuilt catalog names no subject, so nothing says whom its records are about;
    nothing persisted."""
    SUBJECT_MISMATCH = "subject_mismatch"
    """The caller named another subject than the one the catalog's records are about;
    nothing persisted."""


class Claim(BaseModel):
    """What a caller asks the owner to persist. Every field is checked, none trusted."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    snapshot_id: str = Field(min_length=1, max_length=256)
    """The snapshot the selections cite."""
    catalog_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """Digest of the catalog the caller judged the selections against."""
    locale: Locale
    """Locale to render in."""
    selections: tuple[JsonValue, ...]
    """The selector's selections exactly as written."""
    rendered: tuple[Observation, ...] | None = None
    """The caller's rendering of the selections it accepted, to be compared byte for byte;
    ``None`` to skip the comparison."""


@dataclass(frozen=True, slots=True)
class CommitResult:
    """The outcome of one commit."""

    status: CommitStatus
    """How it ended."""
    subject: str
    """Whom the observations are about."""
    snapshot_id: str
    """The snapshot named."""
    catalog_sha256: str | None
    """Digest of the catalog the owner rebuilt (``None`` if it could not)."""
    accepted: tuple[Observation, ...] = ()
    """Observations persisted by this commit, as the owner rendered them."""
    rejected: tuple[Rejection, ...] = ()
    """Selections not persisted, with the owner's reasons (``already_recorded`` included)."""
    commit_id: str | None = None
    """Id shared by the rows written (``None`` when none were)."""
    detail: str = ""
    """Why a commit was refused, secret-free."""

    @property
    def ok(self) -> bool:
        """Whether the commit went through."""
        return self.status is CommitStatus.COMMITTED

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form: ``accepted`` and ``rejected`` in their pinned shapes."""
        return {
            "status": self.status.value,
            "subject": self.subject,
            "snapshot_id": self.snapshot_id,
            "catalog_sha256": self.catalog_sha256,
            "commit_id": self.commit_id,
            "renderer_version": RENDERER_VERSION,
            "accepted": [o.model_dump(mode="json") for o in self.accepted],
            "rejected": [r.to_json() for r in self.rejected],
            "detail": self.detail,
        }


def _text(observations: tuple[Observation, ...]) -> list[tuple[str, str, str, str]]:
    return sorted((o.evidence_ref, o.kind, o.label, o.description) for o in observations)


class Owner(Protocol):
    """Who commits observations, in this process or as a service's client.

    :class:`DurableOwner` commits here; :class:`~foureyes.evidence.remote.RemoteOwner`
    asks the owner service (``foureyes owner serve``) to.
    """

    async def commit(
        self,
        subject: str,
        claim: Claim,
        *,
        tenant: str = LOCAL_TENANT,
        trace_id: str | None = None,
    ) -> CommitResult:
        """Persist what ``claim`` supports for ``subject``, or nothing (see DurableOwner)."""
        ...


class DurableOwner:
    """Validates, renders and persists observations, from its own catalog source and kinds.

    Give it the application's :class:`~foureyes.evidence.catalog.CatalogSource`, the kinds
    registry, and the store's observation log
    (:meth:`foureyes.store.observations.SqlObservationLog.of`).
    """

    def __init__(self, source: CatalogSource, kinds: KindRegistry, log: SqlObservationLog) -> None:
        """Rebuild catalogs from ``source``, judge with ``kinds``, write to ``log``."""
        self.source = source
        self.kinds = kinds
        self.log = log

    async def commit(
        self,
        subject: str,
        claim: Claim,
        *,
        tenant: str = LOCAL_TENANT,
        trace_id: str | None = None,
    ) -> CommitResult:
        """Persist the observations ``claim`` supports for ``subject``, or nothing.

        Args:
            subject: whom the observations are about (1 to 256 characters).
            claim: the caller's selections, snapshot, digest and optional rendering.
            tenant: who commits (the server: the API key's tenant); rows are theirs, and
                ``already_recorded`` counts only their own rows.
            trace_id: the traced run committing, stored with each row.

        Returns:
            A :class:`CommitResult`; refused commits (``catalog_unavailable``,
            ``subject_unbound``, ``subject_mismatch``, ``catalog_changed``,
            ``render_mismatch``) persisted nothing. ``subject`` must be the one the
            rebuilt catalog names: the observations are filed under the evidence's
            subject, never under one a caller chose.

        Raises:
            StoreError: the write failed; nothing was persisted.
            UsageError: ``subject`` is empty or longer than 256 characters.
        """
        if not 1 <= len(subject) <= 256:
            raise UsageError("subject must have 1 to 256 characters")
        refused = _Refusal(subject, claim.snapshot_id)
        try:
            catalog = await self.source.snapshot(claim.snapshot_id)
        except CatalogError as exc:
            return refused(CommitStatus.CATALOG_UNAVAILABLE, None, "; ".join(exc.problems))
        if catalog.snapshot_id != claim.snapshot_id:
            # A source answering with another snapshot would make refs mean other records.
            return refused(
                CommitStatus.CATALOG_UNAVAILABLE,
                None,
                f"the source returned snapshot {catalog.snapshot_id!r}",
            )
        if catalog.subject is None:
            return refused(
                CommitStatus.SUBJECT_UNBOUND,
                catalog.sha256,
                "the catalog names no subject (a catalog's `subject`, a table's "
                "[evidence.columns] subject): an observation's subject comes from its evidence",
            )
        if catalog.subject != subject:
            # The subject is the evidence's, never the caller's (issue 37, item 4).
            return refused(
                CommitStatus.SUBJECT_MISMATCH,
                catalog.sha256,
                "the catalog's records are about another subject than the one named",
            )
        if catalog.sha256 != claim.catalog_sha256:
            # The selections were judged against records that no longer exist as they were.
            return refused(
                CommitStatus.CATALOG_CHANGED,
                catalog.sha256,
                f"catalog digest is {catalog.sha256}, the selections were judged "
                f"against {claim.catalog_sha256}",
            )
        validation = check_selections(claim.selections, catalog, self.kinds, claim.locale)
        if claim.rendered is not None and _text(claim.rendered) != _text(validation.accepted):
            # Invariant 8: a caller that would have written other bytes is not trusted with
            # any of them, so the whole commit goes.
            return refused(
                CommitStatus.RENDER_MISMATCH,
                catalog.sha256,
                "the caller's rendering differs from the owner's",
            )
        return await self._persist(subject, claim, catalog, validation, tenant, trace_id)

    async def _persist(
        self,
        subject: str,
        claim: Claim,
        catalog: Catalog,
        validation: Validation,
        tenant: str,
        trace_id: str | None,
    ) -> CommitResult:
        persisted: tuple[Observation, ...] = ()
        repeats: list[Rejection] = []
        commit_id = None
        if validation.acceptances:
            batch = ObservationBatch(
                tenant=tenant,
                subject=subject,
                snapshot_id=catalog.snapshot_id,
                catalog_sha256=catalog.sha256,
                kinds_sha256=self.kinds.sha256,
                renderer_version=RENDERER_VERSION,
                locale=claim.locale.value,
                trace_id=trace_id,
            )
            rows = [
                NewObservation(
                    kind=a.observation.kind,
                    evidence_ref=a.item.ref,
                    evidence_kind=a.item.kind,
                    evidence_sha256=a.item.sha256,
                    label=a.observation.label,
                    description=a.observation.description,
                )
                for a in validation.acceptances
            ]
            recorded = await self.log.record(
                batch, rows, snapshot=held_snapshot(catalog), kinds=held_kinds(self.kinds)
            )
            skipped = set(recorded.already_recorded)
            persisted = tuple(
                a.observation for a in validation.acceptances if a.item.ref not in skipped
            )
            repeats = [
                Rejection(a.index, claim.selections[a.index], RejectReason.ALREADY_RECORDED)
                for a in validation.acceptances
                if a.item.ref in skipped
            ]
            commit_id = recorded.commit_id if persisted else None
        return CommitResult(
            status=CommitStatus.COMMITTED,
            subject=subject,
            snapshot_id=claim.snapshot_id,
            catalog_sha256=catalog.sha256,
            accepted=persisted,
            rejected=tuple(sorted((*validation.rejected, *repeats), key=lambda r: r.index)),
            commit_id=commit_id,
        )


def held_snapshot(catalog: Catalog) -> EvidenceSnapshot:
    """``catalog`` as the store holds it, for the database to render from."""
    return EvidenceSnapshot(
        catalog_sha256=catalog.sha256,
        snapshot_id=catalog.snapshot_id,
        subject=catalog.subject,
        records=[
            EvidenceRecord(
                ref=item.ref,
                sha256=item.sha256,
                kind=item.kind,
                source=item.source,
                admissible=item.admissible,
                slots=slot_texts(item),
            )
            for item in catalog.items
        ],
    )


def held_kinds(kinds: KindRegistry) -> KindTemplates:
    """Every kind of ``kinds`` in every locale, as the store holds them."""
    return KindTemplates(
        kinds_sha256=kinds.sha256,
        renderer_version=RENDERER_VERSION,
        templates=[
            KindTemplate(
                kind=kind.name,
                locale=locale.value,
                label=kind.label[locale],
                template=kind.template[locale],
                record_kinds=kind.sources,
                record_sources=kind.record_sources,
            )
            for kind in kinds
            for locale in Locale
        ],
    )


@dataclass(frozen=True, slots=True)
class _Refusal:
    subject: str
    snapshot_id: str

    def __call__(
        self, status: CommitStatus, catalog_sha256: str | None, detail: str
    ) -> CommitResult:
        return CommitResult(
            status=status,
            subject=self.subject,
            snapshot_id=self.snapshot_id,
            catalog_sha256=catalog_sha256,
            detail=detail,
        )
