"""Tenants: whose conversation a conversation id names.

A client chooses its conversation ids, so an id alone names nothing another client
could not name too. Every conversation is therefore kept under a *tenant*, the namespace
of whoever is calling: ``key:<key id>`` for a caller with an API key, :data:`LOCAL_TENANT`
for callers served without one (the server in open-loopback mode, the CLI, a library
embedding). :func:`scoped_conversation` combines the two into the conversation key that
the store keys everything by (triage records, flight leases, daily limits, trends, open
unknowns, alert consent and contacts), so two tenants using the same id never share or
touch each other's state, and no unscoped id reaches the store.
"""

from __future__ import annotations

from foureyes.core.digest import sha256_hex
from foureyes.core.errors import UsageError
from foureyes.core.ids import random_hex

__all__ = [
    "CONVERSATION_KEY_MAX",
    "LOCAL_TENANT",
    "key_tenant",
    "new_conversation_id",
    "scoped_conversation",
]

LOCAL_TENANT = "local"
"""The tenant of callers served without a key: open loopback, the CLI, the library."""
CONVERSATION_KEY_MAX = 256
"""The longest conversation key (the store's ``conversation_id`` columns)."""
_TENANT_MAX = 64
# Neither may appear in a tenant: the character after the tenant tells the two forms of
# a key apart, so the key of one (tenant, id) pair is never the key of another.
_PLAIN, _DIGEST = "/", "#"


def key_tenant(key_id: str) -> str:
    """The tenant of the API key with id ``key_id``."""
    return f"key:{key_id}"


def scoped_conversation(tenant: str, conversation_id: str) -> str:
    """The store's key of ``tenant``'s conversation ``conversation_id``.

    ``<tenant>/<id>`` when that fits in :data:`CONVERSATION_KEY_MAX` characters, else
    ``<tenant>#<sha256 of id>``; distinct (tenant, id) pairs never share a key.

    Raises:
        UsageError: ``tenant`` is empty, longer than 64 characters or contains ``/``
            or ``#``; or ``conversation_id`` is empty.
    """
    if not tenant or len(tenant) > _TENANT_MAX or _PLAIN in tenant or _DIGEST in tenant:
        raise UsageError(f"not a tenant: {tenant[:80]!r}")
    if not conversation_id:
        raise UsageError("a conversation id is not empty")
    plain = f"{tenant}{_PLAIN}{conversation_id}"
    if len(plain) <= CONVERSATION_KEY_MAX:
        return plain
    return f"{tenant}{_DIGEST}{sha256_hex(conversation_id)}"


def new_conversation_id() -> str:
    """A fresh conversation id, for a message that names none."""
    return f"anon:{random_hex(12)}"
