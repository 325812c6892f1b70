"""Random identifiers, drawn from the operating system's generator a block at a time.

A reply takes a few random ids: its run's, its risk assessment's, the HTTP request's.
``secrets.token_hex`` reads each from ``os.urandom``, a system call around which CPython
releases the interpreter's lock; in a serving process the SQLite writer thread is
usually waiting for that lock, takes it at each release, and the event loop's thread then
waits for it back (benchmarks/README.md, "Random ids from a pool"). :func:`random_hex`
reads 4096 bytes at a time instead and hands each byte out once, so most ids cost no
system call and no switch between threads.

The bytes are the operating system's cryptographic randomness as ``secrets`` would have
read them, only read earlier: ids stay unguessable and, with their 64 or more random
bits, unique. A child process forked from this one starts with an empty pool, so parent
and child never hand out the same bytes. Key material (API keys, the store's HMAC key,
lease tokens) does not come from here but from :mod:`secrets` directly, so that no
secret's bytes sit in a buffer beside anything else.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from foureyes.core.errors import UsageError

__all__ = ["random_hex"]

_BLOCK = 4096


class _Pool:
    """Random bytes read ahead from ``read`` (``os.urandom``); each byte is handed out once."""

    def __init__(self, read: Callable[[int], bytes] = os.urandom) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._bytes = b""
        self._at = 0

    def take(self, count: int) -> bytes:
        with self._lock:
            end = self._at + count
            if end > len(self._bytes):
                self._bytes = self._read(max(_BLOCK, count))
                self._at, end = 0, count
            taken = self._bytes[self._at : end]
            self._at = end
        return taken

    def forget(self) -> None:
        """Drop what was read ahead (in a forked child: the parent hands it out)."""
        # A fork may happen while another thread holds the lock; the child's copy of it
        # would then stay locked for ever, so the child gets a new one.
        self._lock = threading.Lock()
        self._bytes = b""
        self._at = 0


_POOL = _Pool()
if hasattr(os, "register_at_fork"):  # not on Windows, which cannot fork
    os.register_at_fork(after_in_child=_POOL.forget)


def random_hex(nbytes: int) -> str:
    """``nbytes`` random bytes as ``2 * nbytes`` lowercase hex digits, as ``secrets.token_hex``.

    For identifiers, not for key material (see the module's note).

    Raises:
        UsageError: ``nbytes`` is not a positive integer.
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
        raise UsageError(f"random_hex takes a positive number of bytes, not {nbytes!r}")
    return _POOL.take(nbytes).hex()
