"""Opening and closing the store: engine, schema upgrade, keys, writer and ledger."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING

from sqlalchemy import select, text

from foureyes.config import PrivacyConfig, StoreConfig
from foureyes.core.errors import ConfigError
from foureyes.store._clock import WallClock, require_utc, utc_now
from foureyes.store._database import Database, GroupCommits
from foureyes.store._migrate import upgrade_to_head
from foureyes.store._sealing import KEY_BYTES, UnknownSeal
from foureyes.store.tables import HMAC_KEY_NAME, UNKNOWNS_KEY_NAME, store_secrets
from foureyes.store.traces import SqlTraceWriter
from foureyes.store.unknowns import SqlOpenUnknowns

if TYPE_CHECKING:
    from foureyes.store.alerts import SqlAlertRecords
    from foureyes.store.api_keys import SqlApiKeys
    from foureyes.store.assessments import SqlAssessmentLog
    from foureyes.store.evals import SqlEvalStore
    from foureyes.store.ledger import SqlSpendLedger
    from foureyes.store.observations import SqlObservationLog
    from foureyes.store.rate_limits import SqlRateBuckets

__all__ = ["Store"]

# What bounds the connections this role may open on this database (PostgreSQL); a
# setting the server does not have (reserved_connections before 16) reads as 0.
_CONNECTION_LIMITS = text(
    "SELECT current_setting('max_connections')::int AS max_connections,"
    " current_setting('superuser_reserved_connections')::int AS superuser_reserved,"
    " coalesce(current_setting('reserved_connections', true), '0')::int AS reserved,"
    " r.rolsuper AS superuser, r.rolconnlimit AS role_limit, d.datconnlimit AS database_limit"
    " FROM pg_roles r, pg_database d"
    " WHERE r.rolname = current_user AND d.datname = current_database()"
)


class Store:
    """The durable store: the trace writer and the spend ledger over one database.

    Open it with :meth:`open`, which brings the schema to the newest revision, and close
    it with :meth:`close` (or use it as an async context manager). Every failure of the
    database surfaces as :class:`~foureyes.core.errors.StoreError`.
    """

    def __init__(
        self, db: Database, *, traces: SqlTraceWriter, unknowns_key: bytes, clock: WallClock
    ) -> None:
        self._db = db
        self._traces = traces
        self._clock = clock
        # The other record keepers are built (and their modules imported) on first use:
        # a command that only lists runs loads none of them.
        self._ledger: SqlSpendLedger | None = None
        self._assessments: SqlAssessmentLog | None = None
        self._alerts: SqlAlertRecords | None = None
        self._observations: SqlObservationLog | None = None
        self._api_keys: SqlApiKeys | None = None
        self._evals: SqlEvalStore | None = None
        self._rate_buckets: SqlRateBuckets | None = None
        self._unknowns = SqlOpenUnknowns(
            db,
            privacy=traces.privacy,
            fingerprint=traces.fingerprint,
            seal=UnknownSeal(unknowns_key),
            clock=clock,
            pending=traces.pending,
        )

    @classmethod
    async def open(
        cls,
        store: StoreConfig,
        privacy: PrivacyConfig,
        environ: Mapping[str, str],
        *,
        timeout_s: float | None = None,
        clock: WallClock = utc_now,
    ) -> Store:
        """Connect to ``store.url``, upgrade its schema to head, and return the open store.

        Args:
            store: where the database is (SQLite file by default, PostgreSQL by URL).
            privacy: whether raw input is kept, for how long, and where the keys are.
            environ: the environment holding the variables ``privacy.hmac_key_env`` and
                ``privacy.unknowns_key_env`` name. For each with no variable configured, a
                random key generated once and kept in the database is used, so
                fingerprints stay stable and sealed unknowns open across restarts.
            timeout_s: how long an operation waits for a locked or unreachable database
                (SQLite busy timeout; PostgreSQL connect and lock timeouts); ``None``
                takes ``store.timeout_s``.
            clock: the wall clock for timestamps, daily limits and expiry.

        Raises:
            ConfigError: the URL is unusable, a key variable is configured but not set, or
                the unknowns key is not 32 bytes (hex or URL-safe base64).
            StoreError: the database cannot be reached, created or migrated.
        """
        env_key = _hmac_key_from_env(privacy, environ)
        env_unknowns_key = privacy.unknowns_key(environ)
        db = Database.create(
            store.url,
            timeout_s=store.timeout_s if timeout_s is None else timeout_s,
            group_commit=store.group_commit,
            pool_size=store.pool_size,
        )
        try:
            await db.probe("open")
            await upgrade_to_head(db)
            stored = await _stored_keys(
                db,
                clock,
                hmac=env_key is None,
                unknowns=env_unknowns_key is None,
            )
        except BaseException:
            await db.dispose()
            raise
        key = env_key if env_key is not None else stored[HMAC_KEY_NAME]
        unknowns_key = env_unknowns_key or stored[UNKNOWNS_KEY_NAME]
        return cls(
            db,
            traces=SqlTraceWriter(db, privacy=privacy, hmac_key=key, clock=clock),
            unknowns_key=unknowns_key,
            clock=clock,
        )

    @property
    def traces(self) -> SqlTraceWriter:
        """The trace writer (a :class:`~foureyes.core.trace.TraceWriter`)."""
        return self._traces

    @property
    def ledger(self) -> SqlSpendLedger:
        """The spend ledger (a :class:`~foureyes.core.budget.SpendLedger`)."""
        if self._ledger is None:
            from foureyes.store.ledger import SqlSpendLedger

            self._ledger = SqlSpendLedger(self._db, clock=self._clock)
        return self._ledger

    @property
    def unknowns(self) -> SqlOpenUnknowns:
        """Open unknowns kept per conversation (the gate's "cannot judge" items)."""
        return self._unknowns

    @property
    def assessments(self) -> SqlAssessmentLog:
        """Triage assessments (fingerprints, never text) and the single-flight leases."""
        if self._assessments is None:
            from foureyes.store.assessments import SqlAssessmentLog

            self._assessments = SqlAssessmentLog(
                self._db, fingerprint=self._traces.fingerprint, pending=self._traces.pending
            )
        return self._assessments

    @property
    def alerts(self) -> SqlAlertRecords:
        """Guardian-alert opt-ins, contacts, decisions and send attempts."""
        if self._alerts is None:
            from foureyes.store.alerts import SqlAlertRecords

            self._alerts = SqlAlertRecords(self._db)
        return self._alerts

    @property
    def observations(self) -> SqlObservationLog:
        """Durable evidence-bound observations."""
        if self._observations is None:
            from foureyes.store.observations import SqlObservationLog

            self._observations = SqlObservationLog(self._db, clock=self._clock)
        return self._observations

    @property
    def api_keys(self) -> SqlApiKeys:
        """Client and admin API keys (digests only)."""
        if self._api_keys is None:
            from foureyes.store.api_keys import SqlApiKeys

            self._api_keys = SqlApiKeys(self._db, clock=self._clock)
        return self._api_keys

    @property
    def evals(self) -> SqlEvalStore:
        """Evaluation runs and their results."""
        if self._evals is None:
            from foureyes.store.evals import SqlEvalStore

            self._evals = SqlEvalStore(self._db, clock=self._clock)
        return self._evals

    @property
    def rate_buckets(self) -> SqlRateBuckets:
        """Per-key request rate limits (token buckets shared by every process)."""
        if self._rate_buckets is None:
            from foureyes.store.rate_limits import SqlRateBuckets

            self._rate_buckets = SqlRateBuckets(self._db, clock=self._clock)
        return self._rate_buckets

    @property
    def dialect(self) -> str:
        """The database backend: ``sqlite`` or ``postgresql``."""
        return self._db.dialect

    @property
    def group_commits(self) -> GroupCommits:
        """Group commit so far: transactions run and the run writes they held together."""
        return self._db.group_commits

    async def ping(self) -> None:
        """Check that the database answers a read.

        Raises:
            StoreError: the database cannot be reached.
        """
        async with self._db.read("ping") as conn:
            await conn.execute(select(1))

    async def shared_by_processes(self, workers: int = 1) -> str | None:
        """Why ``workers`` processes cannot share this store, or ``None`` when they can.

        PostgreSQL: every process keeps up to ``store.pool_size`` connections open, so
        ``workers x pool_size`` must fit in what the server lets this role open on this
        database: ``max_connections`` less the slots it reserves for superusers (and,
        from PostgreSQL 16, ``reserved_connections``), and within the role's and the
        database's own connection limits, which do not bind a superuser. A pool that
        does not fit works while load is light and fails replies as store errors when it
        fills. Connections that other clients hold now are not counted (they come and
        go), nor are other instances of the deployment, which cannot be seen from here.

        An SQLite file can be shared while it is in WAL mode (readers and the one writer
        do not block each other, and every connection waits up to the busy timeout for
        the write lock); :meth:`open` switches it to WAL, which some file systems
        (network shares) cannot keep. One process always can.

        Raises:
            StoreError: the database cannot be reached.
        """
        if self._db.dialect != "sqlite":
            return await self._connections_problem(workers)
        if workers <= 1:
            return None
        async with self._db.read("journal_mode") as conn:
            mode = str((await conn.execute(text("PRAGMA journal_mode"))).scalar_one())
        if mode.lower() == "wal":
            return None
        return (
            f"the SQLite file is in journal mode {mode!r}, not WAL, so worker processes "
            f"would lock each other out; use one worker or PostgreSQL"
        )

    async def _connections_problem(self, workers: int) -> str | None:
        """Why ``workers`` pools do not fit in the PostgreSQL server's connection limits."""
        async with self._db.read("connection_limits") as conn:
            row = (await conn.execute(_CONNECTION_LIMITS)).one()
        pool_size = self._db.pool_size
        need = workers * pool_size
        if row.superuser:
            limits = [(row.max_connections, "max_connections")]
        else:
            reserved = row.superuser_reserved + row.reserved
            own = (
                (row.role_limit, "the connection limit of this role"),
                (row.database_limit, "the connection limit of this database"),
            )
            limits = [
                (row.max_connections - reserved, f"max_connections less {reserved} reserved"),
                *((limit, what) for limit, what in own if limit >= 0),
            ]
        limit, what = min(limits)
        if need <= limit:
            return None
        return (
            f"{workers} x store.pool_size {pool_size} = {need} connections, more than the "
            f"{limit} this PostgreSQL server allows ({what}); lower store.pool_size or "
            f"server.workers, or raise the server's limit"
        )

    async def close(self) -> None:
        """Close every connection; the store and its writer and ledger are unusable after.

        What cancelled callers were writing is first written and undone (a reservation
        released, a lease given back).
        """
        await self._db.dispose()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"Store(url={self._db.masked_url!r})"


def _hmac_key_from_env(privacy: PrivacyConfig, environ: Mapping[str, str]) -> bytes | None:
    if privacy.hmac_key_env is None:
        return None
    value = environ.get(privacy.hmac_key_env)
    if not value:
        # Falling back to the stored key would silently change every fingerprint.
        raise ConfigError([f"environment variable {privacy.hmac_key_env} is not set"])
    return value.encode("utf-8")


async def _stored_keys(
    db: Database, clock: WallClock, *, hmac: bool, unknowns: bool
) -> dict[str, bytes]:
    """The keys kept in the store that the environment does not give, made on first use."""
    names = [name for name, use in ((HMAC_KEY_NAME, hmac), (UNKNOWNS_KEY_NAME, unknowns)) if use]
    if not names:
        return {}
    async with db.write("store_keys") as conn:
        # Instances starting together each offer a key; the first insert wins for all.
        for name in names:
            await conn.execute(
                db.insert_ignoring_conflict(
                    store_secrets,
                    {
                        "name": name,
                        "value": secrets.token_bytes(KEY_BYTES),
                        "created_at": require_utc(clock(), "the store clock"),
                    },
                    ["name"],
                )
            )
        rows = (
            await conn.execute(
                select(store_secrets.c.name, store_secrets.c.value).where(
                    store_secrets.c.name.in_(names)
                )
            )
        ).all()
    return {row.name: bytes(row.value) for row in rows}
