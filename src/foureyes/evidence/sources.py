"""Catalog sources foureyes ships: a JSON file, and a table of the application's database.

Both build a fresh :class:`~foureyes.evidence.catalog.Catalog` on every call, from the
records as they are at that moment; the durable owner relies on that to notice records
that changed between selection and commit. :class:`ConfiguredEvidence` builds one of them
and the kinds from the ``[evidence]`` config: the server's only authority for facts.
"""

from __future__ import annotations

import asyncio
import datetime as dt
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
from foureyes.evidence.kinds import KindRegistry
from foureyes.store._database import Database
from foureyes.store.observations import SqlObservationLog

__all__ = ["ColumnMap", "ConfiguredEvidence", "JsonFileCatalogSource", "SqlCatalogSource"]

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
        names = (cols.ref, cols.kind, cols.value, cols.source, cols.admissible, cols.observed_at)
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
        items, problems = [], []
        for row in rows:
            try:
                items.append(_item(tuple(row)))
            except ValidationError as exc:
                problems.append(
                    f"record {str(row[0])[:80]!r}: " + "; ".join(validation_problems(exc))
                )
        if problems:
            raise CatalogError(problems[:_MAX_PROBLEMS])
        return Catalog(snapshot_id=snapshot_id, items=tuple(items))

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

    @classmethod
    def from_config(
        cls, evidence: EvidenceConfig, *, timeout_s: float = 10.0
    ) -> ConfiguredEvidence | None:
        """The configured source and kinds; ``None`` when ``[evidence]`` names none.

        The kinds file is read now; the catalog on every commit. ``timeout_s`` bounds
        the owner's connection (``owner_url``) as ``store.timeout_s`` bounds the store's.

        Raises:
            ConfigError: the kinds file is missing, unreadable or malformed (a template
                without a slot included, naming the kind), or the catalog URL is unusable.
        """
        if evidence.kinds_file is None:
            return None
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
        return cls(source=source, kinds=kinds, owner_db=owner_db)

    def observation_log(self, store_log: SqlObservationLog) -> SqlObservationLog:
        """Where the owner writes: its own connection when configured, else ``store_log``."""
        if self.owner_db is None:
            return store_log
        return SqlObservationLog(self.owner_db)

    async def aclose(self) -> None:
        """Release the source's engine, if it built one, and the owner's connection."""
        await self.source.aclose()
        if self.owner_db is not None:
            await self.owner_db.dispose()
