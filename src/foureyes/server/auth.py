"""API keys on requests: who is calling, with which scope, and whether they may go on.

Clients send ``Authorization: Bearer <key>``. The store knows a key only by its SHA-256
(:mod:`foureyes.store.api_keys`); keys come from ``server.api_keys_env`` (scope
``client``), ``server.admin_keys_env`` (scope ``admin``) and ``foureyes keys create``.
``admin`` may do everything ``client`` may, plus traces, the console, keys and metrics.

The service is in one of three :class:`AuthMode` s:

- ``keys``: some key is active; every request needs a valid one.
- ``open_loopback``: the store has never held a key and ``server.host`` is a loopback
  address (the embedded default, ``foureyes serve`` with no config). Requests from this
  machine are served without a key, with the admin scope; any key they send is ignored
  (the ``openai`` SDK always sends one). Requests from elsewhere (``--host`` overriding
  the config, a proxy forwarding a remote address) get 401 ``loopback_only``. A proxy on
  this machine that does not send ``X-Forwarded-For`` makes every caller look local:
  give such a deployment a key.
- ``closed``: no key is active, and the host is not loopback or keys existed once (all
  revoked now). Every request gets 401 ``no_api_keys``: revoking the last key never
  opens a service.

Each principal has a tenant (:attr:`Principal.tenant`): the namespace its conversation ids
live in, so two keys naming the same conversation never share its limits, trend,
unknowns or alerts.

``/healthz`` and the start-up log line say which mode is in effect. A verified key and
the mode are cached for ``server.key_cache_s`` seconds, so revocation through the CLI
reaches running instances within that time (at once on the instance that revoked a
key over ``DELETE /v1/keys/{ref}``). When an entry expires, one read of the store
refreshes it: requests that need it meanwhile wait for that read rather than each
starting its own.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from foureyes.config import ServerConfig
from foureyes.core.errors import ConfigError
from foureyes.core.tenancy import LOCAL_TENANT, key_tenant
from foureyes.server._memo import remember_short
from foureyes.server.errors import ApiError, ErrorCode, error_responses
from foureyes.server.limits import KeyLimiter
from foureyes.store import Store
from foureyes.store.api_keys import (
    ApiKeyRecord,
    EnvKey,
    EnvKeySync,
    KeyScope,
    RevokeOutcome,
    SqlApiKeys,
    api_key_digest,
)
from foureyes.wire.text import Text

__all__ = [
    "AdminKey",
    "AuthMode",
    "ClientKey",
    "KeyAuthenticator",
    "MIN_KEY_LENGTH",
    "Principal",
    "env_api_keys",
    "is_loopback",
    "keys_router",
    "require_scope",
]

MIN_KEY_LENGTH = 16
"""Shortest key accepted from the environment: the store keeps an unsalted SHA-256."""
_CHALLENGE = {"www-authenticate": "Bearer"}


class AuthMode(StrEnum):
    """Whether requests need a key (see the module docstring)."""

    KEYS = "keys"
    """Some key is active: every request needs a valid one."""
    OPEN_LOOPBACK = "open_loopback"
    """No key was ever recorded and the host is loopback: local callers need none."""
    CLOSED = "closed"
    """No active key, and open mode does not apply: every request is refused."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request is from, as authentication established it."""

    scope: KeyScope
    """What the caller may do."""
    bucket: str
    """The rate-limit bucket the caller draws from."""
    key_id: str | None = None
    """The key's id; ``None`` for a caller served without a key (``open_loopback``)."""
    prefix: str | None = None
    """The key's display prefix, for logs."""
    name: str | None = None
    """The key's name."""

    @property
    def anonymous(self) -> bool:
        """Whether the caller was served without a key."""
        return self.key_id is None

    @property
    def tenant(self) -> str:
        """The namespace of the caller's conversations (:mod:`foureyes.core.tenancy`).

        ``key:<key id>`` for a key; callers served without one (``open_loopback``, where
        every caller is on this machine) share ``local`` with the CLI.
        """
        return LOCAL_TENANT if self.key_id is None else key_tenant(self.key_id)

    @classmethod
    def of_key(cls, record: ApiKeyRecord) -> Principal:
        """The principal a valid key stands for."""
        return cls(
            scope=record.scope,
            bucket=f"key:{record.id}",
            key_id=record.id,
            prefix=record.prefix,
            name=record.name,
        )


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback interface."""
    if host is None:
        return False
    return _names_loopback(host)


# Asked on every request. 64 characters hold any client address (an IPv6 one in brackets
# with an IPv4 tail and a zone); a longer host (a forwarded header may carry one) is still
# judged, only not remembered.
@remember_short(longest=64, size=1024)
def _names_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def env_api_keys(server: ServerConfig, environ: Mapping[str, str]) -> list[EnvKey]:
    """The keys the configured variables list, as digests.

    Raises:
        ConfigError: a configured variable is unset or empty, or a key in it is shorter
            than 16 characters, has characters other than printable ASCII, or is listed
            twice. Problems name the variable and the key's position, never the key.
    """
    problems: list[str] = []
    keys: list[EnvKey] = []
    seen: set[str] = set()
    for variable, scope in (
        (server.api_keys_env, KeyScope.CLIENT),
        (server.admin_keys_env, KeyScope.ADMIN),
    ):
        if variable is None:
            continue
        value = environ.get(variable, "")
        if not value.strip():
            problems.append(f"environment variable {variable} is not set")
            continue
        items = [item.strip() for item in value.split(",")]
        for position, key in enumerate((item for item in items if item), start=1):
            where = f"environment variable {variable}: key #{position}"
            if len(key) < MIN_KEY_LENGTH:
                problems.append(f"{where} is shorter than {MIN_KEY_LENGTH} characters")
            elif not all("!" <= char <= "~" for char in key):
                problems.append(f"{where} has characters other than printable ASCII")
            elif key in seen:
                problems.append(f"{where} is listed more than once")
            else:
                seen.add(key)
                keys.append(EnvKey.of(key, scope, variable))
    if problems:
        raise ConfigError(problems)
    return keys


_T = TypeVar("_T")

_MODE = "mode"
"""What :meth:`KeyAuthenticator.mode`'s read refreshes (key digests are 64 hex digits)."""


class KeyAuthenticator:
    """Checks the key of each request against the store, with a short cache.

    Build it with :meth:`start` at start-up; requests reach it through
    :func:`require_scope`.
    """

    def __init__(
        self,
        keys: SqlApiKeys,
        *,
        loopback_host: bool,
        cache_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Verify against ``keys``; ``loopback_host`` says the service listens on loopback."""
        self.keys = keys
        self._loopback_host = loopback_host
        self._cache_s = cache_s
        self._clock = clock
        self._mode: tuple[AuthMode, float] | None = None
        self._verified: dict[str, tuple[ApiKeyRecord, float]] = {}
        # The store reads under way, by what they refresh (``_MODE`` or a key's digest).
        self._reading: dict[str, asyncio.Future[Any]] = {}
        # Counts calls of forget(): a read begun before one does not fill the cache.
        self._generation = 0

    @classmethod
    async def start(
        cls, store: Store, server: ServerConfig, env_keys: list[EnvKey]
    ) -> tuple[KeyAuthenticator, EnvKeySync]:
        """Record the env keys listed now (see :meth:`SqlApiKeys.sync_env`) and build one.

        Raises:
            StoreError: the store could not be read or written.
        """
        keys = store.api_keys
        sync = await keys.sync_env(env_keys)
        auth = cls(keys, loopback_host=is_loopback(server.host), cache_s=server.key_cache_s)
        return auth, sync

    async def mode(self) -> AuthMode:
        """The mode in effect (cached for ``cache_s``).

        Raises:
            StoreError: the store could not be read.
        """
        if self._mode is not None and self._clock() < self._mode[1]:
            return self._mode[0]
        return await self._read_once(_MODE, self._read_mode)

    async def _read_mode(self, generation: int) -> AuthMode:
        now = self._clock()
        census = await self.keys.census()
        if census.active > 0:
            mode = AuthMode.KEYS
        elif census.total == 0 and self._loopback_host:
            mode = AuthMode.OPEN_LOOPBACK
        else:
            mode = AuthMode.CLOSED
        if generation == self._generation:
            self._mode = (mode, now + self._cache_s)
        return mode

    async def authenticate(self, authorization: str | None, client_host: str | None) -> Principal:
        """The principal behind a request's ``Authorization`` header.

        Raises:
            ApiError: 401 with the reason (``missing_api_key``, ``invalid_api_key``,
                ``no_api_keys``, ``loopback_only``).
            StoreError: the store could not be read: the key cannot be checked, so the
                request is not served (503), never let through.
        """
        mode = await self.mode()
        if mode is AuthMode.OPEN_LOOPBACK:
            if is_loopback(client_host):
                return Principal(scope=KeyScope.ADMIN, bucket=f"loopback:{client_host}")
            raise ApiError(ErrorCode.LOOPBACK_ONLY, headers=_CHALLENGE)
        if mode is AuthMode.CLOSED:
            raise ApiError(ErrorCode.NO_API_KEYS, headers=_CHALLENGE)
        if not authorization:
            raise ApiError(ErrorCode.MISSING_API_KEY, headers=_CHALLENGE)
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(ErrorCode.INVALID_API_KEY, headers=_CHALLENGE)
        record = await self._lookup(api_key_digest(token.strip()))
        if record is None or not record.active:
            raise ApiError(ErrorCode.INVALID_API_KEY, headers=_CHALLENGE)
        return Principal.of_key(record)

    def forget(self) -> None:
        """Drop the cache, so a change to the keys takes effect on the next request."""
        self._mode = None
        self._verified.clear()
        # Reads under way may have read the keys as they were: they fill no cache, and
        # the next request reads anew.
        self._generation += 1
        self._reading.clear()

    async def _lookup(self, digest: str) -> ApiKeyRecord | None:
        cached = self._verified.get(digest)
        if cached is not None and self._clock() < cached[1]:
            return cached[0]
        return await self._read_once(digest, lambda generation: self._read_key(digest, generation))

    async def _read_key(self, digest: str, generation: int) -> ApiKeyRecord | None:
        now = self._clock()
        record = await self.keys.find(digest)
        if generation != self._generation:
            return record
        # Only known keys are cached: their number is bounded by the store, while a
        # caller could send endless unknown ones.
        if record is None:
            self._verified.pop(digest, None)
        elif self._cache_s > 0:
            self._verified[digest] = (record, now + self._cache_s)
        return record

    async def _read_once(self, what: str, read: Callable[[int], Coroutine[Any, Any, _T]]) -> _T:
        """``read``'s result, one read at a time for ``what``.

        A caller that comes while the read runs waits for it (for its error too) instead
        of reading again; one cancelled while it waits leaves the read to the others.
        """
        reading = self._reading.get(what)
        if reading is None:
            reading = asyncio.ensure_future(read(self._generation))
            self._reading[what] = reading
            reading.add_done_callback(lambda done: self._read_done(what, done))
        value: _T = await asyncio.shield(reading)
        return value

    def _read_done(self, what: str, done: asyncio.Future[Any]) -> None:
        if self._reading.get(what) is done:
            del self._reading[what]
        if not done.cancelled():
            done.exception()  # retrieved here: every caller may have been cancelled


def require_scope(
    scope: KeyScope | str,
) -> Callable[[Request], Coroutine[Any, Any, Principal]]:
    """A FastAPI dependency: authenticate, rate-limit, then check ``scope``.

    The principal is returned and kept in ``request.state.principal`` (the request log
    names its key). Every authenticated request draws from its key's bucket, those then
    refused for their scope included.

    Raises (from the dependency):
        ApiError: 401 (no, bad or unusable key), 429 (rate limit, with
            ``Retry-After``) or 403 ``insufficient_scope``.
        StoreError: the store could not be read (answered 503).
    """
    required = KeyScope(scope)

    async def dependency(request: Request) -> Principal:
        service = request.app.state.service
        auth: KeyAuthenticator = service.auth
        limiter: KeyLimiter = service.limiter
        client = request.client.host if request.client else None
        principal = await auth.authenticate(request.headers.get("authorization"), client)
        request.state.principal = principal
        # A limit that cannot be checked refuses the request (StoreError: 503).
        decision = await limiter.admit(principal.bucket)
        if not decision.allowed:
            raise ApiError(
                ErrorCode.RATE_LIMITED,
                headers={"retry-after": decision.retry_after_header},
                retry_after=decision.retry_after_header,
            )
        if not principal.scope.allows(required):
            raise ApiError(ErrorCode.INSUFFICIENT_SCOPE, required=required.value)
        return principal

    return dependency


ClientKey = Annotated[Principal, Depends(require_scope(KeyScope.CLIENT))]
"""A handler parameter that requires the ``client`` scope (``admin`` keys pass too)."""
AdminKey = Annotated[Principal, Depends(require_scope(KeyScope.ADMIN))]
"""A handler parameter that requires the ``admin`` scope."""


class _KeyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    scope: KeyScope = KeyScope.CLIENT
    """What the key may do."""
    name: Text | None = Field(default=None, min_length=1, max_length=128)
    """A label for people; surrounding whitespace is dropped, and a blank one is no name."""

    @field_validator("name")
    @classmethod
    def _label(cls, name: str | None) -> str | None:
        # The store keeps the name stripped and takes no blank one: a blank label is none.
        if name is None:
            return None
        return name.strip() or None


keys_router = APIRouter(prefix="/v1/keys", tags=["keys"])
"""Admin endpoints for keys: list, create (the key is in that response only), revoke."""


@keys_router.get("", name="list_keys", responses=error_responses(401, 403, 413, 429, 503))
async def _list_keys(request: Request, _: AdminKey) -> dict[str, Any]:
    """Every key, revoked ones included; never a key itself."""
    auth: KeyAuthenticator = request.app.state.service.auth
    return {"object": "list", "data": [r.as_json() for r in await auth.keys.list()]}


@keys_router.post(
    "",
    name="create_key",
    status_code=201,
    responses=error_responses(400, 401, 403, 408, 413, 422, 429, 503),
)
async def _create_key(request: Request, body: _KeyRequest, _: AdminKey) -> dict[str, Any]:
    """Create a key; the response is the only place the key ever appears."""
    auth: KeyAuthenticator = request.app.state.service.auth
    new = await auth.keys.create(scope=body.scope, name=body.name)
    auth.forget()
    return {"key": new.key, **new.record.as_json()}


@keys_router.delete(
    "/{ref}", name="revoke_key", responses=error_responses(400, 401, 403, 404, 413, 422, 429, 503)
)
async def _revoke_key(request: Request, ref: Annotated[Text, Path()], _: AdminKey) -> JSONResponse:
    """Revoke the key with this prefix or id; it stops working at once on this instance."""
    auth: KeyAuthenticator = request.app.state.service.auth
    revocation = await auth.keys.revoke(ref)
    auth.forget()
    if revocation.outcome is RevokeOutcome.UNKNOWN:
        raise ApiError(ErrorCode.NOT_FOUND)
    if revocation.outcome is RevokeOutcome.AMBIGUOUS:
        raise ApiError(
            ErrorCode.BAD_REQUEST, param="ref", detail="several keys have this prefix; use the id"
        )
    (record,) = revocation.keys
    return JSONResponse({"outcome": revocation.outcome.value, **record.as_json()})
