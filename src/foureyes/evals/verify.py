"""Verifier commands: the arm's output on stdin, exit status 0 passes, under a deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path

__all__ = ["VerifierResult", "run_verifier"]


class VerifierResult(StrEnum):
    """What a verifier said."""

    PASSED = "passed"
    """It exited with status 0."""
    REJECTED = "rejected"
    """It exited with another status: the case fails."""
    TIMEOUT = "verifier_timeout"
    """It ran past its deadline and was killed: no verdict."""
    UNAVAILABLE = "verifier_unavailable"
    """It could not be started: no verdict."""


async def run_verifier(
    argv: Sequence[str],
    output: str,
    *,
    timeout_s: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> VerifierResult:
    """Run ``argv`` with ``output`` on stdin; kill it at ``timeout_s``.

    ``cwd`` and ``env`` are the command's folder and whole environment (by default this
    process's); an agent task's verifier runs in the task's workspace.
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            cwd=cwd,
            env=None if env is None else dict(env),
        )
    except OSError:
        return VerifierResult.UNAVAILABLE
    try:
        await asyncio.wait_for(proc.communicate(output.encode("utf-8")), timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return VerifierResult.TIMEOUT
    except asyncio.CancelledError:
        # A cancelled run must not leave the verifier running behind it.
        proc.kill()
        await proc.wait()
        raise
    return VerifierResult.PASSED if proc.returncode == 0 else VerifierResult.REJECTED
