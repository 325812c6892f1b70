"""The durable owner as its own service: the wire form of a commit, and its client.

``foureyes owner serve`` (:mod:`foureyes.server.owner_app`) is the only process that holds
the owner role's database credential. The gateway asks it to commit over a narrow API:
it sends an :class:`OwnerCommit` (whom, which snapshot, the selector's raw selections and
its rendering to compare) and nothing it could forge evidence with: no record, no slot
text, no template. The service rebuilds the snapshot from its own ``[evidence]`` source,
judges, renders and writes, and answers a :class:`~foureyes.evidence.durable.CommitResult`.

:class:`RemoteOwner` is that client, with the in-process
:class:`~foureyes.evidence.durable.DurableOwner`'s ``commit`` signature, so
:func:`~foureyes.evidence.facts.select_facts` takes either. Its token (``[evidence]
owner_token_env``) lets the gateway ask; it cannot write a row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from foureyes.core.errors import StoreError
from foureyes.evidence.durable import Claim, CommitResult, CommitStatus
from foureyes.evidence.render import Observation
from foureyes.evidence.selection import Rejection, RejectReason
from foureyes.store.observations import LOCAL_TENANT

if TYPE_CHECKING:
    import httpx

__all__ = ["OWNER_COMMIT_PATH", "OwnerCommit", "RemoteOwner", "commit_result_from_json"]

OWNER_COMMIT_PATH = "/v1/owner/commit"
"""Where the owner service takes a commit."""


class OwnerCommit(BaseModel):
    """The body of a commit the owner service takes: a claim, whom, and who asks.

    Strict: any other key (a record, a slot text, a template, a kind's definition) is
    refused before anything is read, so nothing a caller sends can become evidence.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    subject: str = Field(min_length=1, max_length=256)
    """Whom the caller believes the records are about; must be the catalog's own."""
    tenant: str = Field(default=LOCAL_TENANT, min_length=1, max_length=128)
    """Who commits (the gateway's API-key tenant)."""
    trace_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{32}$")
    """The gateway's traced run, stored with each row."""
    claim: Claim
    """The selections, the snapshot and digest they were judged against, the rendering."""


def commit_result_from_json(body: Any) -> CommitResult:
    """A :class:`CommitResult` back from :meth:`CommitResult.to_json`.

    Raises:
        ValueError: the body is not a commit result.
    """
    if not isinstance(body, dict):
        raise ValueError("a commit result is a JSON object")
    try:
        return CommitResult(
            status=CommitStatus(body["status"]),
            subject=str(body["subject"]),
            snapshot_id=str(body["snapshot_id"]),
            catalog_sha256=body["catalog_sha256"],
            accepted=tuple(Observation.model_validate(o) for o in body["accepted"]),
            rejected=tuple(
                Rejection(int(r["index"]), r["selection"], RejectReason(r["reason"]))
                for r in body["rejected"]
            ),
            commit_id=body["commit_id"],
            detail=str(body["detail"]),
        )
    except (KeyError, TypeError, ValueError, ValidationError) as exc:
        raise ValueError(f"not a commit result: {type(exc).__name__}") from None


class RemoteOwner:
    """Commits through the owner service at ``url`` (``[evidence] owner_service_url``).

    Args:
        url: the service's base URL (``http://127.0.0.1:8711``).
        token: the bearer token the service checks (never an owner database credential).
        timeout_s: bound on one commit, connection included.
        transport: an httpx transport (tests may pass an in-process ASGI transport).
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout_s: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        # Imported here: `import foureyes.evidence` needs no HTTP client (the slim install).
        import httpx

        self.url = url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.url,
            headers={"authorization": f"Bearer {token}"},
            timeout=timeout_s,
            transport=transport,
            trust_env=False,  # a proxy from the environment must not see the token
        )

    async def commit(
        self,
        subject: str,
        claim: Claim,
        *,
        tenant: str = LOCAL_TENANT,
        trace_id: str | None = None,
    ) -> CommitResult:
        """Ask the service to commit; see :meth:`DurableOwner.commit`.

        Raises:
            StoreError: the service could not be reached, refused the token, failed, or
                answered something that is not a commit result. Whether it persisted is
                then unknown, and a retry writes nothing twice.
        """
        import httpx  # loaded by __init__ already

        body = OwnerCommit(subject=subject, tenant=tenant, trace_id=trace_id, claim=claim)
        try:
            response = await self._client.post(
                OWNER_COMMIT_PATH, content=body.model_dump_json(), headers=_JSON
            )
        except httpx.HTTPError as exc:
            raise StoreError("owner_commit", type(exc).__name__) from exc
        if response.status_code not in (200, 409):
            raise StoreError("owner_commit", f"the owner service answered {response.status_code}")
        try:
            return commit_result_from_json(response.json())
        except ValueError as exc:
            raise StoreError("owner_commit", str(exc)) from exc

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._client.aclose()

    def __repr__(self) -> str:
        return f"RemoteOwner({self.url!r})"


_JSON = {"content-type": "application/json"}
