"""The slim install, checked end to end: wheel, fresh venv, `foureyes serve`, one reply.

Run with any Python 3.11+ (standard library only), from the repository root::

    python3 scripts/slim_check.py            # builds into a temporary directory
    python3 scripts/slim_check.py --keep     # and keeps it (venv, wheel, server log)

Steps, each timed: build the wheel (`pip wheel . --no-deps`), create a fresh venv, install
the wheel with `--no-cache-dir` (every dependency from the registry, nothing from pip's
cache), start `foureyes serve` on a free port in an empty directory (offline routes, a new
SQLite store), poll `/healthz` until it answers, send one chat completion, stop the server.
It fails (exit 1) when the venv holds a dev tool, when the server does not become ready or
when the reply lacks the `foureyes` decision. The README's install-to-first-reply time is
the `install` + `first reply` total this prints.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# Tools of the `test`, `dev` and `eval` extras: none may come with `pip install .`.
DEV_TOOLS = ("pytest", "pytest-asyncio", "hypothesis", "mypy", "ruff", "playwright", "matplotlib")
READY_POLLS = 600  # 0.1 s apart
REQUEST = {
    "model": "foureyes-support",
    "messages": [{"role": "user", "content": "hello, I had a long day"}],
}


def main() -> int:
    """Run the check in a temporary directory; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="foureyes-slim-"))
    try:
        return check(work)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def check(work: Path) -> int:
    """Build, install, serve and ask once inside ``work``; 0 when every step held."""
    times: dict[str, float] = {}
    wheels = work / "dist"
    with timed(times, "build wheel"):
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
        subprocess.run([*pip, "wheel", str(REPO), "--no-deps", "-w", str(wheels)], check=True)
    (wheel,) = wheels.glob("foureyes-*.whl")
    venv = work / "venv"
    with timed(times, "install"):
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        bin_dir = venv / "bin"
        install = [str(bin_dir / "pip"), "install", "--disable-pip-version-check", "--quiet"]
        subprocess.run([*install, "--no-cache-dir", str(wheel)], check=True)
    listed = subprocess.run(
        [str(bin_dir / "pip"), "list", "--format", "json", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    installed = {entry["name"].lower() for entry in json.loads(listed)}
    extra = sorted(installed & set(DEV_TOOLS))
    print(f"installed {len(installed)} distributions; dev tools among them: {extra or 'none'}")
    if extra:
        return 1
    port = free_port()
    home = work / "home"
    home.mkdir()
    log = (work / "serve.log").open("wb")
    with timed(times, "first reply"):
        server = subprocess.Popen(
            [str(bin_dir / "foureyes"), "serve", "--port", str(port)],
            cwd=home,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            health = wait_ready(port, server)
            reply = post(f"http://127.0.0.1:{port}/v1/chat/completions", REQUEST)
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)
            log.close()
    print(f"healthz: {json.dumps(health)}")
    decision = reply.get("foureyes", {})
    text = reply["choices"][0]["message"]["content"]
    print(f"reply: {text!r}")
    print(f"decision: {decision.get('decision')} ({decision.get('reason')})")
    for step, seconds in times.items():
        print(f"{step:>12}: {seconds:6.1f} s")
    print(f"install to first reply: {times['install'] + times['first reply']:.1f} s")
    return 0 if decision.get("decision") and decision.get("reason") else 1


class timed:
    """Adds the wall time of its block to ``times[name]``."""

    def __init__(self, times: dict[str, float], name: str) -> None:
        self.times, self.name = times, name

    def __enter__(self) -> None:
        self.start = time.monotonic()

    def __exit__(self, *_: object) -> None:
        self.times[self.name] = time.monotonic() - self.start


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(port: int, server: subprocess.Popen[bytes]) -> dict[str, object]:
    """Poll ``/healthz`` until it says ``ok``; its body."""
    for _ in range(READY_POLLS):
        if server.poll() is not None:
            raise SystemExit(f"foureyes serve exited with {server.returncode} before it was ready")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
                body: dict[str, object] = json.load(answer)
                if body.get("status") == "ok":
                    return body
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.1)
    raise SystemExit(f"foureyes serve not ready after {READY_POLLS} polls")


def post(url: str, body: dict[str, object]) -> dict[str, Any]:
    """POST ``body`` as JSON; the JSON answer."""
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        result: dict[str, Any] = json.load(answer)
        return result


if __name__ == "__main__":
    sys.exit(main())
