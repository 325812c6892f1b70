"""An open unknown's words sealed at rest: AES-256-GCM, bound to the unknown's row.

A sealed text is one version byte, a random 96-bit nonce, and the ciphertext with its
tag. The associated data names the conversation and the unknown's id, so a sealed text
copied into another row (of this conversation or another) does not open there; neither
does one sealed under another key, nor one altered by a byte. Opening never raises: what
does not open reads as ``None``, and the caller decides what to say instead.
"""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING

from foureyes.core.errors import UsageError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["KEY_BYTES", "UnknownSeal"]

KEY_BYTES = 32
"""An AES-256 key."""
_VERSION = b"\x01"
_NONCE_BYTES = 12
_TAG_BYTES = 16


def _bound_to(conversation_id: str, unknown_id: str) -> bytes:
    # JSON keeps the fields apart whatever characters a conversation id holds.
    return json.dumps(["foureyes.open_unknown.v1", conversation_id, unknown_id]).encode()


class UnknownSeal:
    """Seals and opens open unknowns' words under one key."""

    __slots__ = ("_aead", "_key")

    def __init__(self, key: bytes) -> None:
        """Seal under ``key`` (:data:`KEY_BYTES` bytes).

        Raises:
            UsageError: the key is not 32 bytes.
        """
        if len(key) != KEY_BYTES:
            raise UsageError(f"an unknowns key is {KEY_BYTES} bytes, got {len(key)}")
        self._key = key
        self._aead: AESGCM | None = None

    def _cipher(self) -> AESGCM:
        # cryptography is imported when an unknown is first sealed or opened, not when the
        # store opens (a command that reads no unknown never loads it).
        if self._aead is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            self._aead = AESGCM(self._key)
        return self._aead

    def seal(self, words: str, *, conversation_id: str, unknown_id: str) -> bytes:
        """``words`` encrypted for the row ``unknown_id`` of ``conversation_id``."""
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = self._cipher().encrypt(
            nonce, words.encode("utf-8"), _bound_to(conversation_id, unknown_id)
        )
        return _VERSION + nonce + sealed

    def open(self, sealed: bytes, *, conversation_id: str, unknown_id: str) -> str | None:
        """The words ``sealed`` holds for that row; ``None`` when they do not open there.

        They do not open under another key, in another row, or altered at all.
        """
        sealed = bytes(sealed)
        if len(sealed) < 1 + _NONCE_BYTES + _TAG_BYTES or sealed[:1] != _VERSION:
            return None
        nonce, body = sealed[1 : 1 + _NONCE_BYTES], sealed[1 + _NONCE_BYTES :]
        cipher = self._cipher()
        from cryptography.exceptions import InvalidTag

        try:
            plain = cipher.decrypt(nonce, body, _bound_to(conversation_id, unknown_id))
            return plain.decode("utf-8")
        except (InvalidTag, UnicodeDecodeError):
            return None

    def __repr__(self) -> str:
        return "UnknownSeal(<key hidden>)"
