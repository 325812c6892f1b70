"""The evidence catalog: a frozen, versioned snapshot of the application's own records.

A catalog is what a selector may cite and what the durable owner renders facts from. It
is built by a :class:`CatalogSource` the application implements (or one of the sources in
:mod:`foureyes.evidence.sources`), and carries the SHA-256 of its canonical JSON: two
builds of the same snapshot have the same digest, so the owner can tell whether the
records changed between selection and commit.

The JSON form is pinned::

    {"snapshot_id": str, "subject": str,
     "items": [{"ref": str, "kind": str, "value": str | object, "source": str,
                "admissible": bool, "observed_at": str}]}

``subject`` names whom the records are about. It is part of the evidence, not of a
request: the durable owner files every observation under the catalog's subject and refuses
a commit for anyone else (and a catalog that names nobody). A catalog written before
subjects were kept may leave it out; its digest is then what it always was.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    ValidationError,
    field_validator,
)

from foureyes.config import validation_problems
from foureyes.core.digest import canonical_json, sha256_hex
from foureyes.core.errors import FoureyesError
from foureyes.core.strict_json import loads_strict

__all__ = [
    "Catalog",
    "CatalogError",
    "CatalogSource",
    "EvidenceItem",
    "SOURCE_KIND_PATTERN",
    "catalog_from_json",
    "catalog_from_mapping",
]

SOURCE_KIND_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$"
"""What a record's source kind looks like: dotted lowercase names (``lifestyle.exercise``)."""

_Ref = Annotated[str, StringConstraints(min_length=1, max_length=256)]
_SourceKind = Annotated[str, StringConstraints(max_length=128, pattern=SOURCE_KIND_PATTERN)]
_MAX_PROBLEMS = 10


class CatalogError(FoureyesError):
    """Raised when a catalog cannot be built.

    Causes: malformed records, an unknown snapshot, or a source that failed to read.

    Attributes:
        problems: one line per problem, each naming the record or field at fault.
    """

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        super().__init__("invalid evidence catalog: " + "; ".join(self.problems))


class EvidenceItem(BaseModel):
    """One authoritative record of the application, as a selector may cite it."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    ref: _Ref
    """The record's id within its snapshot; what a selection names as ``evidence_ref``."""
    kind: _SourceKind
    """Source kind of the record (``lifestyle.exercise``, ``report.indicator``, ...)."""
    value: str | dict[str, JsonValue]
    """The structured value: a string, or an object whose fields templates can name."""
    source: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    """Where the record came from (a device, a form, a lab report)."""
    admissible: bool
    """Whether the record may be cited at all (consent, verification, retention)."""
    observed_at: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    """When it was observed, ISO 8601, kept exactly as given."""

    @field_validator("value")
    @classmethod
    def _finite(cls, value: str | dict[str, JsonValue]) -> str | dict[str, JsonValue]:
        # NaN and infinities have no canonical JSON, so the digest could not name them.
        try:
            json.dumps(value, allow_nan=False)
        except ValueError:
            raise ValueError("value holds a number that is not finite") from None
        return value

    @field_validator("observed_at")
    @classmethod
    def _iso(cls, value: str) -> str:
        try:
            dt.datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"observed_at {value[:64]!r} is not an ISO 8601 time") from None
        return value

    @property
    def sha256(self) -> str:
        """SHA-256 of the record's canonical JSON; persisted observations name it."""
        return sha256_hex(canonical_json(self.model_dump(mode="json")))


@dataclass(frozen=True)
class Catalog:
    """A frozen snapshot of records, ordered by ``ref``, with the digest of its content.

    Build one from records directly, or with :func:`catalog_from_json` /
    :func:`catalog_from_mapping`; the digest does not depend on the order records were
    given in.

    Raises:
        CatalogError: the snapshot id is empty or too long, or two records share a ref.
    """

    snapshot_id: str
    """Names the version of the records; a commit names it to have the catalog rebuilt."""
    items: tuple[EvidenceItem, ...]
    """The records, sorted by ``ref``."""
    subject: str | None = None
    """Whom every record is about (1 to 256 characters); ``None``: the catalog names
    nobody, and the durable owner commits nothing from it."""
    sha256: str = field(init=False)
    """SHA-256 of the canonical JSON of the snapshot id, the subject (when named) and the
    sorted records."""
    _by_ref: Mapping[str, EvidenceItem] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problems = []
        if not 1 <= len(self.snapshot_id) <= 256:
            problems.append("snapshot_id must have 1 to 256 characters")
        if self.subject is not None and not 1 <= len(self.subject) <= 256:
            problems.append("subject must have 1 to 256 characters")
        by_ref: dict[str, EvidenceItem] = {}
        for item in self.items:
            if item.ref in by_ref:
                problems.append(f"ref {item.ref!r} appears more than once")
            by_ref[item.ref] = item
        if problems:
            raise CatalogError(problems[:_MAX_PROBLEMS])
        items = tuple(sorted(self.items, key=lambda item: item.ref))
        object.__setattr__(self, "items", items)
        document = self.to_json()
        object.__setattr__(self, "sha256", sha256_hex(canonical_json(document)))
        object.__setattr__(self, "_by_ref", by_ref)

    def get(self, ref: str) -> EvidenceItem | None:
        """The record with ``ref``, or ``None`` when the snapshot has none."""
        return self._by_ref.get(ref)

    @property
    def admissible(self) -> tuple[EvidenceItem, ...]:
        """The records that may be cited, in ``ref`` order."""
        return tuple(item for item in self.items if item.admissible)

    def to_json(self) -> dict[str, Any]:
        """The catalog in its pinned JSON form (``subject`` only when it names one)."""
        document: dict[str, Any] = {"snapshot_id": self.snapshot_id}
        if self.subject is not None:
            document["subject"] = self.subject
        document["items"] = [item.model_dump(mode="json") for item in self.items]
        return document


class CatalogSource(Protocol):
    """Where the durable owner rebuilds a catalog from: the application's own records.

    Implement it over the application's tables (or use
    :class:`~foureyes.evidence.sources.SqlCatalogSource`). It must be independent of
    whatever the selector saw: the owner calls it again at commit time and trusts only
    what it returns.
    """

    async def snapshot(self, snapshot_id: str) -> Catalog:
        """Build the catalog of snapshot ``snapshot_id`` from the records as they are now.

        Raises:
            CatalogError: the snapshot is unknown, a record is malformed, or the records
                could not be read.
        """
        ...


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    snapshot_id: str = Field(min_length=1, max_length=256)
    subject: str | None = Field(default=None, min_length=1, max_length=256)
    items: list[EvidenceItem]


def catalog_from_mapping(data: Any, *, where: str = "catalog") -> Catalog:
    """Build a catalog from its pinned JSON form, already decoded.

    Validation is strict: no extra keys, no type coercion (``"true"`` is not a bool).

    Args:
        data: the decoded document.
        where: names the document in error messages (a file path, ``request body``).

    Raises:
        CatalogError: naming every field at fault.
    """
    try:
        document = _Document.model_validate(data, strict=True)
    except ValidationError as exc:
        problems = validation_problems(exc, _Document, echo=False)
        raise CatalogError(f"{where}: {p}" for p in problems[:_MAX_PROBLEMS]) from None
    try:
        return Catalog(
            snapshot_id=document.snapshot_id,
            items=tuple(document.items),
            subject=document.subject,
        )
    except CatalogError as exc:
        raise CatalogError(f"{where}: {p}" for p in exc.problems) from None


def catalog_from_json(text: str | bytes, *, where: str = "catalog") -> Catalog:
    """Build a catalog from JSON text in its pinned form.

    Duplicate keys, ``NaN`` and infinities are refused: which value was meant would be a
    guess.

    Raises:
        CatalogError: the text is not JSON, or the document is not a valid catalog.
    """
    try:
        data = loads_strict(text)
    except (ValueError, RecursionError) as exc:
        raise CatalogError([f"{where} is not valid JSON: {exc}"]) from None
    return catalog_from_mapping(data, where=where)
