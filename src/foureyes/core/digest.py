"""Digests: the SHA-256 every proposal and decision is bound to, and the HMAC used for privacy."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = [
    "Proposal",
    "canonical_json",
    "is_sha256_hex",
    "sha256_hex",
    "text_fingerprint",
]

_HEX64 = re.compile(r"[0-9a-f]{64}")

T = TypeVar("T")


def sha256_hex(data: str | bytes) -> str:
    """Return the SHA-256 of ``data`` as 64 lowercase hex characters.

    Text is encoded as UTF-8 exactly as given: no normalisation, no stripping, so the
    digest names the very bytes that would be delivered.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def canonical_json(value: Any) -> bytes:
    """Serialise a JSON value canonically: sorted keys, no spaces, UTF-8, no NaN."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def is_sha256_hex(value: object) -> bool:
    """Whether ``value`` is a digest as foureyes writes them: 64 lowercase hex characters."""
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def text_fingerprint(text: str, key: bytes) -> str:
    """HMAC-SHA256 of ``text`` under ``key``, hex; what traces keep instead of raw user text.

    Unlike a bare hash, a fingerprint cannot be reversed by hashing guessed messages
    without the key.
    """
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Proposal(Generic[T]):
    """Anything a model produced, bound to the digest of its canonical bytes.

    Build one with :meth:`of_text` (for free text; the digest covers the exact text) or
    :meth:`of_json` (for structured output; the digest covers its canonical JSON).
    """

    content: T
    """The proposal itself: the text, or the parsed structured value."""
    sha256: str
    """SHA-256 of the canonical bytes of ``content``."""
    role: str
    """The role that produced it (``counselor``, ``supervisor``, ...)."""
    route: str
    """The route that served the call."""
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    """Call facts for the trace (latency, tokens, offline flag); not part of the identity."""

    @classmethod
    def of_text(cls, text: str, *, role: str, route: str, **meta: Any) -> Proposal[str]:
        """A text proposal whose digest is the SHA-256 of ``text`` as UTF-8."""
        return Proposal(content=text, sha256=sha256_hex(text), role=role, route=route, meta=meta)

    @classmethod
    def of_json(cls, value: Any, *, role: str, route: str, **meta: Any) -> Proposal[Any]:
        """A structured proposal whose digest is the SHA-256 of its canonical JSON."""
        return Proposal(
            content=value,
            sha256=sha256_hex(canonical_json(value)),
            role=role,
            route=route,
            meta=meta,
        )
