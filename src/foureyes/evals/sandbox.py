"""The sandbox of an agent task's commands: bubblewrap, or (opted out) none.

An agent suite's Primary runs shell commands (the workspace's ``run`` tool) and its code
is then imported by the task's verifier and weak check: all of that is untrusted. Each of
those processes runs in a :class:`Bubblewrap` sandbox (``bwrap``, from the package
``bubblewrap``), a fresh set of Linux namespaces (user, mount, pid, network, ipc, uts,
cgroup) in which

- the workspace is the only writable folder of the host, bound at :data:`WORKSPACE_PATH` (the
  command's working folder and ``HOME``); ``/tmp`` is an empty tmpfs of its own, at most
  the memory limit in size;
- read-only, it sees the host's ``/usr`` (with ``/bin``, ``/sbin`` and ``/lib*``),
  ``/etc/alternatives`` and the dynamic linker's cache, and the base interpreter's prefix
  (``sys.base_prefix``: the standard library, never a virtual environment), with every
  ``site-packages`` or ``dist-packages`` folder in them covered by an empty read-only
  tmpfs, so neither an installed foureyes (with the suites' verifiers inside it) nor any
  other installed package is visible; ``/proc`` of its own pid namespace and a minimal
  read-only ``/dev``. Nothing else is mounted: not the project checkout, ``/home``,
  ``/root``, the rest of ``/etc``, nor the other tasks' workspaces;
- a verifier also sees its own script read-only under :data:`VERIFIER_PATH`, outside the
  workspace, and the workspace read-only; the Primary's own commands never see it;
- the network namespace holds only a loopback device of its own: no connection leaves it;
- no capability is kept, no further user namespace may be created, the command runs in a
  new session (it cannot push input into a terminal), nothing it starts outlives it (its
  pid namespace ends with it), and it dies with foureyes;
- ``prlimit`` (util-linux) sets the limits of :class:`~foureyes.evals.ToolLimits`: an
  address-space limit (``RLIMIT_AS``) per process, a process-count limit
  (``RLIMIT_NPROC``; the kernel exempts root, so it holds only when foureyes runs as
  another user) and no core dumps. The time limit is the caller's (the workspace kills the
  sandbox's process group, which takes its whole pid namespace with it).

:class:`NoSandbox` runs the same commands as before this sandbox existed: directly, with
the minimal environment only. It is an explicit opt-out (``foureyes eval run ...
--sandbox none``), recorded in the run's facts; a sandbox that cannot be set up is never
silently replaced by it (:class:`SandboxUnavailable`).

Which sandbox the workspaces and verifiers use unless told otherwise is
:func:`active_sandbox`: a shared :class:`Bubblewrap`, or the one :func:`use_sandbox` set
for the code (and the asyncio tasks it starts) inside its ``with`` block.
"""

from __future__ import annotations

import asyncio
import contextvars
import glob
import os
import shutil
import site
import sys
import sysconfig
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import ClassVar

from foureyes.core.errors import FoureyesError, UsageError

__all__ = [
    "Bubblewrap",
    "NoSandbox",
    "Sandbox",
    "SandboxName",
    "SandboxUnavailable",
    "VERIFIER_PATH",
    "WORKSPACE_PATH",
    "active_sandbox",
    "minimal_env",
    "sandbox_named",
    "use_sandbox",
]

WORKSPACE_PATH = "/workspace"
"""Where the workspace is inside a :class:`Bubblewrap` sandbox."""
VERIFIER_PATH = "/verifier"
"""Where a verifier's own files are inside a :class:`Bubblewrap` sandbox (``{task}``)."""
_BIN = "/run/foureyes/bin"
"""The sandbox's folder of ``python`` and ``python3`` (links to the base interpreter)."""
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d")
_PROBE_TIMEOUT_S = 30.0


class SandboxName(StrEnum):
    """The sandboxes there are (``foureyes eval run --sandbox``)."""

    BUBBLEWRAP = "bubblewrap"
    """:class:`Bubblewrap` (the default)."""
    NONE = "none"
    """:class:`NoSandbox`: the explicit opt-out."""


def minimal_env(home: Path) -> dict[str, str]:
    """The environment of an unsandboxed command: this interpreter's folder first on ``PATH``."""
    path = os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])
    return {
        "PATH": path,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
    }


class SandboxUnavailable(FoureyesError):
    """Raised when a sandbox cannot be set up on this machine.

    Attributes:
        sandbox: the sandbox's name (``bubblewrap``).
        reason: what is missing or failed.
    """

    def __init__(self, sandbox: str, reason: str) -> None:
        self.sandbox = sandbox
        self.reason = reason
        super().__init__(
            f"the {sandbox} sandbox of agent tasks is unavailable: {reason}. Install "
            "bubblewrap (Debian and Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
            "bubblewrap) on a kernel that allows user namespaces, or pass --sandbox none to "
            "run the Primary's commands and the verifiers unisolated (recorded with the run)"
        )


class Sandbox(ABC):
    """How a workspace command or a verifier is started (the argv around it, its env)."""

    name: ClassVar[str]
    """The sandbox's name, recorded in a run's facts (``bubblewrap``, ``none``)."""

    @property
    @abstractmethod
    def python(self) -> str:
        """The interpreter a verifier's ``{python}`` names, as seen inside."""

    @abstractmethod
    def workspace_path(self, root: Path) -> str:
        """Where the workspace ``root`` is, as seen inside."""

    @abstractmethod
    def task_path(self, folder: Path) -> str:
        """What a verifier's ``{task}`` names, as seen inside, for the task ``folder``."""

    @abstractmethod
    def env(self, root: Path) -> dict[str, str]:
        """The whole environment of a command in the workspace ``root``."""

    @abstractmethod
    async def check(self) -> None:
        """Make sure commands can run in this sandbox (once; later calls are cheap).

        Raises:
            SandboxUnavailable: they cannot.
        """

    @abstractmethod
    def command(
        self,
        argv: Sequence[str],
        *,
        root: Path,
        memory_bytes: int,
        max_processes: int,
        readonly: Mapping[str, Path] | None = None,
        writable: bool = True,
    ) -> list[str]:
        """The argv that runs ``argv`` in the workspace ``root`` under the limits.

        ``readonly`` maps a path inside to a host file or folder shown read-only there
        (a verifier's own script); ``writable=False`` shows the workspace read-only too (a
        verifier's run). Call :meth:`check` first.
        """


class NoSandbox(Sandbox):
    """No isolation: the command runs directly, in the workspace, with the minimal env."""

    name = SandboxName.NONE.value

    @property
    def python(self) -> str:
        """This interpreter."""
        return sys.executable

    def workspace_path(self, root: Path) -> str:
        """``root`` itself."""
        return str(root)

    def task_path(self, folder: Path) -> str:
        """``folder`` itself."""
        return str(folder)

    def env(self, root: Path) -> dict[str, str]:
        """:func:`minimal_env` of ``root``."""
        return minimal_env(root)

    async def check(self) -> None:
        """Always possible."""

    def command(
        self,
        argv: Sequence[str],
        *,
        root: Path,
        memory_bytes: int,
        max_processes: int,
        readonly: Mapping[str, Path] | None = None,
        writable: bool = True,
    ) -> list[str]:
        """``argv`` as it is (no limit but the caller's time limit)."""
        return list(argv)


@dataclass(frozen=True, slots=True)
class _Ready:
    bwrap: str
    prlimit: str
    options: frozenset[str]
    python: str
    """The base interpreter, resolved."""
    mounts: tuple[str, ...]
    """The read-only system part of the sandbox (the same for every command)."""


class Bubblewrap(Sandbox):
    """The ``bwrap`` sandbox described in this module's documentation."""

    name = SandboxName.BUBBLEWRAP.value

    def __init__(self, binary: str = "bwrap") -> None:
        """Use ``binary`` (a name looked up on ``PATH``, or a path) as ``bwrap``."""
        self.binary = binary
        """The bubblewrap program."""
        self._ready: _Ready | None = None

    @property
    def python(self) -> str:
        """``python`` of the sandbox's own folder: the base interpreter."""
        return f"{_BIN}/python"

    def workspace_path(self, root: Path) -> str:
        """:data:`WORKSPACE_PATH`."""
        return WORKSPACE_PATH

    def task_path(self, folder: Path) -> str:
        """:data:`VERIFIER_PATH`."""
        return VERIFIER_PATH

    def env(self, root: Path) -> dict[str, str]:
        """The sandbox's interpreter folder first on ``PATH``, the workspace as ``HOME``."""
        return {
            "PATH": f"{_BIN}:/usr/local/bin:/usr/bin:/bin",
            "HOME": WORKSPACE_PATH,
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONIOENCODING": "utf-8",
        }

    async def check(self) -> None:
        """Find ``bwrap`` and ``prlimit`` and run a command in the sandbox, once.

        Raises:
            SandboxUnavailable: one is missing, or the self-test failed (for instance on
                a kernel that does not let this user create namespaces).
        """
        if self._ready is None:
            self._ready = await self._probe()

    async def _probe(self) -> _Ready:
        bwrap = shutil.which(self.binary)
        if bwrap is None:
            raise SandboxUnavailable(self.name, f"{self.binary!r} was not found")
        prlimit = shutil.which("prlimit", path="/usr/bin:/bin")
        if prlimit is None:
            raise SandboxUnavailable(self.name, "prlimit (util-linux) was not found in /usr/bin")
        code, text = await _output([bwrap, "--help"])
        if code != 0:
            raise SandboxUnavailable(self.name, f"{bwrap} --help failed: {_last_line(text)}")
        options = frozenset(o for o in ("--disable-userns", "--size") if o in text)
        python = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
        ready = _Ready(bwrap, os.path.realpath(prlimit), options, python, _system(python))
        with tempfile.TemporaryDirectory(prefix="foureyes-sandbox-") as tmp:
            root = Path(tmp)
            argv = self._argv(
                ready,
                ["/bin/sh", "-c", "echo ok > probe && exec python -c pass"],
                root=root,
                memory_bytes=1 << 30,
                max_processes=64,
                readonly={},
            )
            code, text = await _output(argv, cwd=root, env=self.env(root))
            probe = root / "probe"
            wrote = probe.is_file() and probe.read_text(encoding="utf-8") == "ok\n"
        if code != 0 or not wrote:
            raise SandboxUnavailable(
                self.name,
                f"its self-test failed (exit status {code}: {_last_line(text) or 'no output'}; "
                "are user namespaces enabled?)",
            )
        return ready

    def command(
        self,
        argv: Sequence[str],
        *,
        root: Path,
        memory_bytes: int,
        max_processes: int,
        readonly: Mapping[str, Path] | None = None,
        writable: bool = True,
    ) -> list[str]:
        """``bwrap`` around ``prlimit`` around ``argv``.

        Raises:
            UsageError: :meth:`check` has not succeeded yet.
        """
        if self._ready is None:
            raise UsageError("check() the bubblewrap sandbox before building a command in it")
        return self._argv(
            self._ready,
            argv,
            root=root,
            memory_bytes=memory_bytes,
            max_processes=max_processes,
            readonly=readonly or {},
            writable=writable,
        )

    def _argv(
        self,
        ready: _Ready,
        argv: Sequence[str],
        *,
        root: Path,
        memory_bytes: int,
        max_processes: int,
        readonly: Mapping[str, Path],
        writable: bool = True,
    ) -> list[str]:
        args = [
            ready.bwrap,
            "--unshare-all",
            "--unshare-user",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
        ]
        if "--disable-userns" in ready.options:
            args.append("--disable-userns")
        args += ready.mounts
        args += ["--proc", "/proc", "--dev", "/dev"]
        if "--size" in ready.options:
            args += ["--size", str(memory_bytes)]
        args += ["--tmpfs", "/tmp"]
        bind = "--bind" if writable else "--ro-bind"
        args += [bind, str(root), WORKSPACE_PATH, "--chdir", WORKSPACE_PATH]
        for inside, host in sorted(readonly.items()):
            args += ["--ro-bind", str(host), inside]
        for name in ("python", "python3"):
            args += ["--symlink", ready.python, f"{_BIN}/{name}"]
        args += ["--ro-bind", ready.prlimit, "/run/foureyes/prlimit"]
        args += ["--remount-ro", "/dev", "--remount-ro", "/"]
        limits = [f"--as={memory_bytes}", f"--nproc={max_processes}", "--core=0"]
        return [*args, "--", "/run/foureyes/prlimit", *limits, "--", *argv]


def _system(python: str) -> tuple[str, ...]:
    """The read-only mounts: system folders, the base interpreter, its packages hidden."""
    args: list[str] = []
    bound: list[str] = []
    for path in _SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
            bound.append(path)
    for path in _ETC:
        args += ["--ro-bind-try", path, path]
    for prefix in (sys.base_prefix, sys.base_exec_prefix, os.path.dirname(python)):
        real = os.path.realpath(prefix)
        if os.path.isdir(real) and not _under(real, bound):
            args += ["--ro-bind", real, real]
            bound.append(real)
    for packages in _site_folders():
        if _under(packages, bound):
            args += ["--tmpfs", packages, "--remount-ro", packages]
    return tuple(args)


def _under(path: str, folders: Sequence[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _site_folders() -> list[str]:
    """Every existing folder of installed packages this or the base interpreter may use."""
    roots = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}
    roots |= {"/usr", "/usr/local"}
    found: set[str] = set()
    for top in roots:
        for pattern in ("lib*/python3*/site-packages", "lib*/python3*/dist-packages"):
            found.update(glob.glob(os.path.join(top, pattern)))
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    found.update(sysconfig.get_paths(vars=base)[key] for key in ("purelib", "platlib"))
    found.update(site.getsitepackages())
    found.add(site.getusersitepackages())
    real = {os.path.realpath(p) for p in found}
    return sorted(p for p in real if os.path.isdir(p) and not os.path.islink(p))


async def _output(
    argv: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[int, str]:
    """Exit status and output (stdout and stderr together) of ``argv``; -1 if it failed."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return -1, str(exc)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), _PROBE_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return -1, f"no answer within {_PROBE_TIMEOUT_S:g} s"
    return proc.returncode if proc.returncode is not None else -1, out.decode(errors="replace")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def sandbox_named(name: str) -> Sandbox:
    """A fresh sandbox of one of the :class:`SandboxName` values.

    Raises:
        UsageError: no sandbox has that name.
    """
    if name == SandboxName.BUBBLEWRAP:
        return Bubblewrap()
    if name == SandboxName.NONE:
        return NoSandbox()
    names = ", ".join(SandboxName)
    raise UsageError(f"no sandbox {name!r} (sandboxes: {names})")


_SHARED = Bubblewrap()
_ACTIVE: contextvars.ContextVar[Sandbox] = contextvars.ContextVar("foureyes_sandbox")


def active_sandbox() -> Sandbox:
    """The sandbox set by the innermost :func:`use_sandbox`, else a shared :class:`Bubblewrap`."""
    return _ACTIVE.get(_SHARED)


@contextmanager
def use_sandbox(sandbox: Sandbox) -> Iterator[Sandbox]:
    """Make ``sandbox`` the :func:`active_sandbox` inside the block (and its asyncio tasks)."""
    token = _ACTIVE.set(sandbox)
    try:
        yield sandbox
    finally:
        _ACTIVE.reset(token)
