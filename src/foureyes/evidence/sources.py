"""Catalog sources foureyes ships: a JSON file, and a table of the application's database.

Both build a fresh :class:`~foureyes.evidence.catalog.Catalog` on every call, from the
records as they are at that moment; the durable owner relies on that to notice records
that changed between selection and commit. :class:`ConfiguredEvidence` builds one of them
and the kinds from the ``[evidence]`` config: the server's only authority for facts.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import JSON, Text, column, select, table
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from foureyes.config import ColumnMap, EvidenceConfig, validation_problems
from foureyes.core.errors import ConfigError
from foureyes.evidence.catalog import (
    Catalog,
    CatalogError,
    EvidenceItem,
    catalog_from_json,
)
from foureyes.evidence.durable import DurableOwner, Owner
from foureyes.evidence.kinds import KindRegistry
from foureyes.evidence.remote import RemoteOwner
from foureyes.store._database import Database
from foureyes.store.observations import SqlObservationLog

__all__ = [
    "ColumnMap",
    "ConfiguredEvidence",
    "JsonFileCatalogSource",
    "SqlCatalogSource",
    "owner_token",
]

_MAX_PROBLEMS = 10


class JsonFileCatalogSource:
    """A catalog kept as one JSON file in the pinned form; the file holds one snapshot."""

    def __init__(self, path: str | Path) -> None:
        """Read catalogs from ``path``."""
        self.path = Path(path)

    async def read(self) -> Catalog:
        """The catalog the file holds now, whatever its snapshot id.

        Raises:
            CatalogError: the file is missing, unreadable, not JSON, or not a catalog.
        """
        try:
            text = await asyncio.to_thread(self.path.read_text, encoding="utf-8")
        except FileNotFoundError:
            raise CatalogError([f"catalog file {str(self.path)!r} does not exist"]) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CatalogError([f"catalog file {str(self.path)!r} cannot be read: {exc}"]) from None
        return catalog_from_json(text, where=str(self.path))

    async def snapshot(self, snapshot_id: str) -> Catalog:
        """The file's catalog, provided it still holds snapshot ``snapshot_id``.

        Raises:
            CatalogError: the file cannot be read as a catalog, or holds another snapshot.
        """
        catalog = await self.read()
        if catalog.snapshot_id != snapshot_id:
            raise CatalogError(
                [
                    f"catalog file {str(self.path)!r} holds snapshot "
                    f"{catalog.snapshot_id!r}, not {snapshot_id!r}"
                ]
            )
        return catalog

    async def aclose(self) -> None:
        """Nothing to release: the file is read afresh on every call."""

    def __repr__(self) -> str:
        return f"JsonFileCatalogSource({str(self.path)!r})"


class SqlCatalogSource:
    """Reads a catalog from a table of the application's own database (SQLAlchemy async).

    The rows whose ``columns.snapshot_id`` equals the requested snapshot are the catalog.
    An engine passed in belongs to the application, which opens and disposes of it; one
    built by :meth:`from_url` belongs to the source and :meth:`aclose` disposes of it.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        table_name: str,
        *,
        columns: ColumnMap | None = None,
        schema: str | None = None,
    ) -> None:
        """Read ``schema.table_name`` through ``engine`` with the column mapping ``columns``."""
        self.engine = engine
        self._owns_engine = False
        self.columns = columns or ColumnMap()
        cols = self.columns
        names: tuple[str, ...] = (
            cols.ref,
            cols.kind,
            cols.value,
            cols.source,
            cols.admissible,
            cols.observed_at,
        )
        if cols.subject is not None:
            names = (*names, cols.subject)
        # Typed JSON, the dialect decodes the value its own way: SQLite's JSON text is
        # parsed, while asyncpg hands json/jsonb columns over already decoded.
        typed = {cols.value: JSON() if cols.json_value else Text()}
        self._table = table(
            table_name,
            *(column(n, typed.get(n)) for n in dict.fromkeys((*names, cols.snapshot_id))),
            schema=schema,
        )
        self._query = select(*(self._table.c[n] for n in names))
        self._where = self._table.c[cols.snapshot_id]

    @classmethod
    def from_url(
        cls,
        url: str,
        table_name: str,
        *,
        columns: ColumnMap | None = None,
        schema: str | None = None,
    ) -> SqlCatalogSource:
        """A source over its own engine for ``url`` (it connects at the first read).

        Raises:
            ConfigError: the URL cannot be made into an engine.
        """
        try:
            engine = create_async_engine(url, pool_pre_ping=True)
        except (ArgumentError, ImportError, ValueError) as exc:
            raise ConfigError([f"evidence.catalog_url cannot be used: {exc}"[:300]]) from None
        source = cls(engine, table_name, columns=columns, schema=schema)
        source._owns_engine = True
        return source

    async def aclose(self) -> None:
        """Dispose of the engine when the source built it; the application's is left alone."""
        if self._owns_engine:
            await self.engine.dispose()

    async def snapshot(self, snapshot_id: str) -> Catalog:
        """The catalog of the rows of ``snapshot_id``, read in one query.

        Raises:
            CatalogError: the query failed, no row belongs to the snapshot, or a row is
                not a valid record (each problem names the row's ref).
        """
        try:
            async with self.engine.connect() as conn:
                rows = (await conn.execute(self._query.where(self._where == snapshot_id))).all()
        except (SQLAlchemyError, OSError, ValueError) as exc:
            detail = type(exc).__name__ if not str(exc) else f"{type(exc).__name__}: {exc}"
            raise CatalogError([f"catalog table {self._table.name!r}: {detail[:300]}"]) from exc
        if not rows:
            raise CatalogError(
                [f"catalog table {self._table.name!r} has no records of snapshot {snapshot_id!r}"]
            )
        items, problems, subjects = [], [], set()
        for row in rows:
            values = tuple(row)
            if self.columns.subject is not None:
                subjects.add(values[-1])
                values = values[:-1]
            try:
                items.append(_item(values))
            except ValidationError as exc:
                problems.append(
                    f"record {str(row[0])[:80]!r}: "
                    + "; ".join(validation_problems(exc, echo=False))
                )
        subject = None
        if self.columns.subject is not None:
            subject = _one_subject(subjects, snapshot_id, problems)
        if problems:
            raise CatalogError(problems[:_MAX_PROBLEMS])
        try:
            return Catalog(snapshot_id=snapshot_id, items=tuple(items), subject=subject)
        except CatalogError as exc:
            name = self._table.name
            raise CatalogError([f"catalog table {name!r}: {p}" for p in exc.problems]) from None

    def __repr__(self) -> str:
        return f"SqlCatalogSource(table={self._table.name!r})"


def _item(row: tuple[Any, ...]) -> EvidenceItem:
    ref, kind, value, source, admissible, observed_at = row
    return EvidenceItem.model_validate(
        {
            "ref": ref,
            "kind": kind,
            "value": value,
            "source": source,
            "admissible": _flag(admissible),
            "observed_at": _time_text(observed_at),
        },
        strict=True,
    )


def _one_subject(subjects: set[Any], snapshot_id: str, problems: list[str]) -> str | None:
    """The one subject every row of a snapshot names, or a problem saying why not."""
    if len(subjects) != 1:
        problems.append(
            f"snapshot {snapshot_id!r}: its rows name {len(subjects)} subjects, not one"
        )
        return None
    [subject] = subjects
    if not isinstance(subject, str) or not 1 <= len(subject) <= 256:
        problems.append(f"snapshot {snapshot_id!r}: its subject is not a string of 1 to 256")
        return None
    return subject


def _flag(raw: Any) -> Any:
    # SQLite keeps booleans as 0/1; anything else is left for strict validation to refuse.
    if isinstance(raw, int) and not isinstance(raw, bool) and raw in (0, 1):
        return bool(raw)
    return raw


def _time_text(raw: Any) -> Any:
    if isinstance(raw, dt.date):  # datetime is a date too
        return raw.isoformat()
    return raw


@dataclass(frozen=True, slots=True)
class ConfiguredEvidence:
    """The ``[evidence]`` config, built: the catalog source and kinds the server trusts.

    Build it with :meth:`from_config` at start-up and close it at shutdown.
    """

    source: JsonFileCatalogSource | SqlCatalogSource
    """Where the durable owner rebuilds every snapshot from."""
    kinds: KindRegistry
    """The observation kinds selections are judged and rendered with."""
    owner_db: Database | None = None
    """The owner's own connection to the store (``owner_url``), when configured."""
    owner_service: RemoteOwner | None = None
    """The owner service this process commits through (``owner_service_url``)."""

    @classmethod
    def from_config(
        cls,
        evidence: EvidenceConfig,
        *,
        timeout_s: float = 10.0,
        environ: Mapping[str, str] | None = None,
    ) -> ConfiguredEvidence | None:
        """The configured source and kinds; ``None`` when ``[evidence]`` names none.

        The kinds file is read now; the catalog on every commit. ``timeout_s`` bounds
        the owner's connection (``owner_url``) as ``store.timeout_s`` bounds the store's,
        and a commit through the owner service (``owner_service_url``, its token read
        from ``environ``, the process's environment by default).

        Raises:
            ConfigError: the kinds file is missing, unreadable or malformed (a template
                without a slot included, naming the kind), the catalog URL is unusable,
                or the owner service's token variable is unset.
        """
        if evidence.kinds_file is None:
            return None
        owner_service = None
        if evidence.owner_service_url is not None:
            token = owner_token(evidence, os.environ if environ is None else environ)
            owner_service = RemoteOwner(evidence.owner_service_url, token, timeout_s=timeout_s)
        kinds = KindRegistry.from_file(evidence.kinds_file)
        source: JsonFileCatalogSource | SqlCatalogSource
        if evidence.catalog_file is not None:
            source = JsonFileCatalogSource(evidence.catalog_file)
        else:
            # The config's validator pairs kinds_file with exactly one catalog source.
            assert evidence.catalog_url is not None and evidence.catalog_table is not None
            source = SqlCatalogSource.from_url(
                evidence.catalog_url,
                evidence.catalog_table,
                columns=evidence.columns,
                schema=evidence.catalog_schema,
            )
        owner_db = None
        if evidence.owner_url is not None:
            owner_db = Database.create(evidence.owner_url, timeout_s=timeout_s)
        return cls(source=source, kinds=kinds, owner_db=owner_db, owner_service=owner_service)

    def observation_log(self, store_log: SqlObservationLog) -> SqlObservationLog:
        """Where the owner writes: its own connection when configured, else ``store_log``."""
        if self.owner_db is None:
            return store_log
        return SqlObservationLog(self.owner_db)

    def owner(self, store_log: SqlObservationLog) -> Owner:
        """Who commits: the owner service when configured, else an owner in this process."""
        if self.owner_service is not None:
            return self.owner_service
        return DurableOwner(self.source, self.kinds, self.observation_log(store_log))

    async def aclose(self) -> None:
        """Release the source's engine, the owner's connection and the service's client."""
        await self.source.aclose()
        if self.owner_db is not None:
            await self.owner_db.dispose()
        if self.owner_service is not None:
            await self.owner_service.aclose()


def owner_token(evidence: EvidenceConfig, environ: Mapping[str, str]) -> str:
    """The owner service's token, from the variable ``owner_token_env`` names.

    Raises:
        ConfigError: no variable is named, or it is unset or shorter than 16 characters.
    """
    name = evidence.owner_token_env
    if name is None:
        raise ConfigError(["evidence.owner_token_env: the owner service needs a token"])
    token = environ.get(name, "")
    if len(token) < 16:
        raise ConfigError(
            [
                f"environment variable {name} (evidence.owner_token_env) must hold a token "
                "of at least 16 characters"
            ]
        )
    return token
