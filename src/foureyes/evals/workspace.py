"""A task workspace and the agent loop's four tools over it: read, search, edit, run.

Every path a tool is given is resolved inside the workspace folder: an absolute path, a
path that climbs out (``../``) or one that leads out through a symlink is refused. A
refusal, a missing file, a bad argument or a command that failed is a tool *result*
marked as an error (:class:`ToolOutcome`), never an exception: the model reads it and
carries on.

``run`` executes a command with ``/bin/sh -c`` in the workspace's sandbox
(:mod:`foureyes.evals.sandbox`; by default bubblewrap: the workspace, at ``/workspace``,
is its only writable folder, nothing of the host but the system's programs and the
standard library is visible, there is no network, and memory and processes are limited),
with a minimal environment (``PATH`` with the sandbox's ``python`` first, ``HOME`` the
workspace, a UTF-8 locale), a time limit after which its whole process group is killed,
and its output (stdout and stderr together) bounded, the workspace's own location in it
(``/workspace``, or its host path) written as ``.``. A sandbox that cannot be set up is
the one exception a tool call raises (:class:`~foureyes.evals.SandboxUnavailable`), not a
result. ``read``, ``search`` and ``edit`` run in this process: the path checks above
confine them, not the sandbox.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from foureyes.evals.sandbox import Sandbox, active_sandbox, minimal_env

__all__ = [
    "READ_ONLY_TOOLS",
    "ReadOnlyTools",
    "TOOL_SPECS",
    "ToolLimits",
    "ToolOutcome",
    "Workspace",
    "minimal_env",
]


@dataclass(frozen=True, slots=True)
class ToolLimits:
    """What bounds the tools of one workspace."""

    run_timeout_s: float = 20.0
    """Longest a ``run`` command may take before its process group is killed."""
    max_output_chars: int = 20_000
    """Most characters of a command's output (or a file, or search hits) returned."""
    max_search_hits: int = 200
    """Most matching lines one ``search`` returns."""
    memory_bytes: int = 1 << 30
    """Address space each process of a sandboxed command (or verifier) may map (1 GiB)."""
    max_processes: int = 256
    """Processes a sandboxed command may have at once (not enforced when run as root)."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What one tool call returned to the model."""

    content: str
    """The result text."""
    error: bool = False
    """Whether the call failed (refused, bad arguments, command failed or killed)."""


class _Refused(Exception):
    """A tool call that cannot be carried out; its message is the tool result."""


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _ReadArgs(_Args):
    path: str = Field(min_length=1)


class _SearchArgs(_Args):
    pattern: str = Field(min_length=1)
    regex: bool = False
    path: str = "."


class _EditArgs(_Args):
    path: str = Field(min_length=1)
    old: str | None = None
    new: str | None = None
    content: str | None = None


class _RunArgs(_Args):
    command: str = Field(min_length=1)


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> Any:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


_PATH = {"type": "string", "description": "A path relative to the workspace folder."}
TOOL_SPECS: tuple[Mapping[str, Any], ...] = (
    _function("read", "Read a UTF-8 text file of the workspace.", {"path": _PATH}, ["path"]),
    _function(
        "search",
        "Find lines containing a fixed string (or matching a Python regex with regex=true) "
        "in the files under a path; answers path:line:text.",
        {
            "pattern": {"type": "string"},
            "regex": {"type": "boolean", "description": "Treat pattern as a regex."},
            "path": _PATH,
        },
        ["pattern"],
    ),
    _function(
        "edit",
        "Replace the one occurrence of `old` with `new` in a file, or write a whole file "
        "with `content` (created with its folders if missing).",
        {
            "path": _PATH,
            "old": {"type": "string", "description": "Exact text, found exactly once."},
            "new": {"type": "string"},
            "content": {"type": "string", "description": "The whole new file."},
        },
        ["path"],
    ),
    _function(
        "run",
        "Run a shell command in the workspace folder; answers its exit status and output.",
        {"command": {"type": "string"}},
        ["command"],
    ),
)
"""The OpenAI ``tools`` entries of read, search, edit and run."""


class Workspace:
    """A folder the agent works in, and its tools, each confined to it."""

    def __init__(
        self, root: Path, limits: ToolLimits | None = None, sandbox: Sandbox | None = None
    ) -> None:
        """Serve the tools over ``root`` (an existing folder) under ``limits``.

        ``run`` commands run in ``sandbox`` (by default the :func:`active_sandbox`).
        """
        self.root = root.resolve(strict=True)
        """The workspace folder, resolved."""
        self.limits = limits or ToolLimits()
        """The tools' bounds."""
        self.sandbox = sandbox or active_sandbox()
        """Where ``run`` commands run."""

    def resolve(self, path: str) -> Path:
        """``path`` as a location inside the workspace.

        Raises:
            _Refused: the path is absolute, climbs out, or leads out through a symlink.
        """
        if os.path.isabs(path):
            raise _Refused(f"{path!r} is an absolute path: give a path relative to the workspace")
        try:
            target = (self.root / path).resolve()
        except (OSError, RuntimeError, ValueError) as exc:
            raise _Refused(f"{path!r} cannot be resolved: {exc}") from None
        if not target.is_relative_to(self.root):
            raise _Refused(f"{path!r} is outside the workspace")
        return target

    async def call(self, name: str, arguments: str) -> ToolOutcome:
        """Carry out the tool call ``name(arguments)``; every failure is an error result.

        Raises:
            SandboxUnavailable: a ``run`` call, and its sandbox cannot be set up.
        """
        try:
            raw = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            return ToolOutcome(f"arguments are not JSON: {exc}", error=True)
        if not isinstance(raw, dict):
            return ToolOutcome("arguments must be a JSON object", error=True)
        try:
            if name == "read":
                return self._read(_ReadArgs.model_validate(raw))
            if name == "search":
                return self._search(_SearchArgs.model_validate(raw))
            if name == "edit":
                return self._edit(_EditArgs.model_validate(raw))
            if name == "run":
                return await self._run(_RunArgs.model_validate(raw))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
            )
            return ToolOutcome(f"bad arguments for {name}: {problems}", error=True)
        except _Refused as exc:
            return ToolOutcome(str(exc), error=True)
        except OSError as exc:
            return ToolOutcome(f"{name} failed: {exc.strerror or exc}", error=True)
        known = ", ".join(spec["function"]["name"] for spec in TOOL_SPECS)
        return ToolOutcome(f"no tool {name!r} (tools: {known})", error=True)

    def _bounded(self, text: str) -> str:
        limit = self.limits.max_output_chars
        if len(text) <= limit:
            return text
        return f"{text[:limit]}\n[cut: {limit} of {len(text)} characters shown]"

    def _text(self, target: Path, path: str) -> str:
        if not target.is_file():
            raise _Refused(f"{path!r} is not a file")
        try:
            return target.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise _Refused(f"{path!r} is not UTF-8 text") from None

    def _read(self, args: _ReadArgs) -> ToolOutcome:
        return ToolOutcome(self._bounded(self._text(self.resolve(args.path), args.path)))

    def _search(self, args: _SearchArgs) -> ToolOutcome:
        top = self.resolve(args.path)
        try:
            pattern = re.compile(args.pattern if args.regex else re.escape(args.pattern))
        except re.error as exc:
            raise _Refused(f"bad regex: {exc}") from None
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        hits: list[str] = []
        for file in files:
            # A symlink inside may still lead out: only files that resolve inside are read.
            if not file.resolve().is_relative_to(self.root):
                continue
            try:
                lines = file.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            rel = file.relative_to(self.root).as_posix()
            hits.extend(
                f"{rel}:{n}:{line}" for n, line in enumerate(lines, 1) if pattern.search(line)
            )
        if not hits:
            return ToolOutcome("no match")
        shown = hits[: self.limits.max_search_hits]
        more = len(hits) - len(shown)
        tail = f"\n[{more} more matches not shown]" if more else ""
        return ToolOutcome(self._bounded("\n".join(shown) + tail))

    def _edit(self, args: _EditArgs) -> ToolOutcome:
        target = self.resolve(args.path)
        if args.content is not None:
            if args.old is not None or args.new is not None:
                raise _Refused("give either content, or old and new, not both")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(args.content, encoding="utf-8")
            return ToolOutcome(f"wrote {args.path} ({len(args.content)} characters)")
        if args.old is None or args.new is None:
            raise _Refused("give old and new (replace), or content (write the file)")
        if not args.old:
            raise _Refused("old is empty: give the exact text to replace")
        text = self._text(target, args.path)
        count = text.count(args.old)
        if count != 1:
            found = "not found" if count == 0 else f"found {count} times"
            raise _Refused(f"old text {found} in {args.path}: give text that occurs exactly once")
        target.write_text(text.replace(args.old, args.new, 1), encoding="utf-8")
        return ToolOutcome(f"replaced 1 occurrence in {args.path}")

    async def _run(self, args: _RunArgs) -> ToolOutcome:
        sandbox = self.sandbox
        await sandbox.check()
        argv = sandbox.command(
            ["/bin/sh", "-c", args.command],
            root=self.root,
            memory_bytes=self.limits.memory_bytes,
            max_processes=self.limits.max_processes,
        )
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=self.root,
            env=sandbox.env(self.root),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed whole
        )
        assert proc.stdout is not None
        limit = self.limits.max_output_chars
        kept = bytearray()
        total = 0

        async def drain() -> None:
            nonlocal total
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(65536):
                total += len(chunk)
                if len(kept) < limit * 4:  # bytes: up to 4 per character
                    kept.extend(chunk[: limit * 4 - len(kept)])
            await proc.wait()

        timed_out = False
        try:
            await asyncio.wait_for(drain(), self.limits.run_timeout_s)
        except TimeoutError:
            timed_out = True
        finally:
            if proc.returncode is None:
                _kill_group(proc.pid)
                await proc.wait()
        # The workspace's own (random, temporary) location reads as ".", so a recorded
        # exchange replays whatever folder the next run's copy lands in, in any sandbox.
        output = kept.decode("utf-8", errors="replace").replace(str(self.root), ".")
        inside = sandbox.workspace_path(self.root)
        if inside != str(self.root):
            output = re.sub(re.escape(inside) + r"(?![\w-])", ".", output)
        if total > len(kept):
            output += f"\n[cut: {len(kept)} of {total} bytes of output shown]"
        output = self._bounded(output)
        if timed_out:
            limit_s = self.limits.run_timeout_s
            return ToolOutcome(f"killed after {limit_s:g} s (the time limit)\n{output}", error=True)
        status = proc.returncode
        return ToolOutcome(f"exit status {status}\n{output}", error=status != 0)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


READ_ONLY_TOOLS = ("read", "search")
"""The workspace tools a reviewer may call: they read, they change nothing."""


class ReadOnlyTools:
    """A workspace's ``read`` and ``search`` for a ``reviewer-persona`` review.

    Any other name (``edit``, ``run``) is refused as a result text, never carried out, so
    a reviewer cannot change the workspace it verifies.
    """

    def __init__(self, workspace: Workspace) -> None:
        """Offer ``workspace``'s read-only tools."""
        self._workspace = workspace
        self.specs: tuple[Mapping[str, Any], ...] = tuple(
            s for s in TOOL_SPECS if s["function"]["name"] in READ_ONLY_TOOLS
        )
        """Their OpenAI specs."""

    async def call(self, name: str, arguments: str) -> str:
        """The result text of ``name(arguments)`` (a refusal for a tool that is not read-only)."""
        if name not in READ_ONLY_TOOLS:
            return f"error: no tool {name!r} (a reviewer may only {' or '.join(READ_ONLY_TOOLS)})"
        outcome = await self._workspace.call(name, arguments)
        return f"error: {outcome.content}" if outcome.error else outcome.content
