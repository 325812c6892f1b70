"""A real PostgreSQL server for the test session: initdb and pg_ctl on a loopback port.

Register with ``pytest_plugins = ["tests.helpers.postgres"]``. ``postgres_server`` starts
one server per session; ``postgres_url`` gives each test a fresh database on it. Without
PostgreSQL binaries the tests that need them are skipped, except under ``CI=true``, where
they fail so CI cannot pass without running them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = [
    "PostgresServer",
    "PostgresUnavailable",
    "free_port",
    "postgres_server",
    "postgres_url",
    "running_postgres",
]

_SUPERUSER = "foureyes"
_SYSTEM_USER = "postgres"


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class PostgresServer:
    """A running server: where its binaries are and where it listens."""

    bin_dir: Path
    port: int

    def url(self, database: str) -> str:
        """The SQLAlchemy async URL of ``database`` on this server."""
        return f"postgresql+asyncpg://{_SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """Create an empty database and return its name."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        self._client("createdb", name)
        return name

    def drop_database(self, name: str) -> None:
        """Drop ``name``, closing any connection left open on it."""
        self._client("dropdb", "--force", name)

    def _client(self, tool: str, *args: str) -> None:
        command = [str(self.bin_dir / tool), "-h", "127.0.0.1", "-p", str(self.port)]
        subprocess.run(
            [*command, "-U", _SUPERUSER, *args], check=True, capture_output=True, timeout=60
        )


class PostgresUnavailable(RuntimeError):
    """This machine cannot run a PostgreSQL server (no binaries, or no user to run it as)."""


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"PostgreSQL tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL not available: {reason}")


def _find_bin_dir() -> Path | None:
    candidates = []
    found = shutil.which("initdb")
    if found:
        # Debian puts wrappers or symlinks on PATH; the real tools sit side by side.
        candidates.append(Path(found).resolve().parent)
    versions = Path("/usr/lib/postgresql").glob("*/bin")
    candidates += sorted(
        versions, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0, reverse=True
    )
    for directory in candidates:
        if all((directory / tool).is_file() for tool in ("initdb", "pg_ctl", "createdb")):
            return directory
    return None


def _as_system_user(command: list[str]) -> list[str]:
    # initdb refuses to run as root; the cluster then belongs to the postgres user.
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", _SYSTEM_USER, "--", *command]


def _run(command: list[str]) -> None:
    result = subprocess.run(_as_system_user(command), capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )


@contextlib.contextmanager
def running_postgres(*, durable: bool = False) -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL cluster on a loopback port, stopped and removed at the end.

    Tests run it with ``fsync`` and synchronous commit off (durability is not what they
    measure); ``durable`` keeps the server's defaults, as a deployment has them (the
    benchmarks' choice).

    Raises:
        PostgresUnavailable: no PostgreSQL binaries, or (as root) no ``runuser`` or
            ``postgres`` user to run the server as.
        RuntimeError: ``initdb`` or ``pg_ctl`` failed.
    """
    bin_dir = _find_bin_dir()
    if bin_dir is None:
        raise PostgresUnavailable(
            "initdb/pg_ctl not found on PATH or under /usr/lib/postgresql/*/bin"
        )
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            raise PostgresUnavailable("running as root needs runuser to start it as another user")
        try:
            ids = subprocess.run(["id", "-u", _SYSTEM_USER], capture_output=True, check=True)
        except subprocess.CalledProcessError:
            raise PostgresUnavailable(f"running as root needs the {_SYSTEM_USER!r} user") from None
        owner = int(ids.stdout)
    else:
        owner = os.geteuid()
    # Not pytest's tmp dir: its parents are private to root, and the server must reach it.
    base = Path(tempfile.mkdtemp(prefix="foureyes-pg-"))
    os.chown(base, owner, -1)
    data, log = base / "data", base / "server.log"
    port = free_port()
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {base} -c max_connections=200"
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    try:
        _run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                _SUPERUSER,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ]
        )
        _run(
            [
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(log),
                "-o",
                options,
                "-w",
                "-t",
                "60",
                "start",
            ]
        )
        try:
            yield PostgresServer(bin_dir=bin_dir, port=port)
        finally:
            _run([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"])
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """Start a throwaway PostgreSQL cluster for the session and stop it at the end."""
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(running_postgres())
        except PostgresUnavailable as exc:
            _unavailable(str(exc))
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """The URL of a fresh, empty database, dropped after the test."""
    name = postgres_server.create_database()
    yield postgres_server.url(name)
    postgres_server.drop_database(name)
