"""The real ``foureyes simulate`` CLI for the test session, and recorded traffic to script it.

Register with ``pytest_plugins = ["tests.helpers.simulator"]`` (or import the fixtures).

- ``simulator_process`` (session): starts ``foureyes simulate --port 0 --json`` once, as a
  subprocess on a free loopback port, and stops it at the end of the session.
- ``simulator`` (function): the same process with the default scenario loaded (which
  also resets rule uses and the request log), so every test starts clean. Tests call
  ``simulator.load({...})`` with their own scenario, drive ``simulator.base_url`` and read
  ``simulator.requests()``.

``read_cassette`` reads the VCR cassettes of the third-party data (tests/helpers/data.py),
with the product's reader, so scenarios can reuse the shape of real DeepSeek replies.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from foureyes.config import Config, GateConfig, RolesConfig, RouteConfig, StoreConfig
from foureyes.review.importers.vcr import interactions
from tests.helpers.data import require_data

__all__ = [
    "DEFAULT_SCENARIO",
    "RunningSimulator",
    "SCENARIOS",
    "read_cassette",
    "simulate_command",
    "simulator",
    "simulator_process",
    "start_simulator",
    "stop_simulator",
]

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "tests" / "fixtures" / "scenarios"
"""Scenario files kept for tests."""
DEFAULT_SCENARIO = SCENARIOS / "default.toml"
"""What the simulator serves before a test loads its own scenario."""

# Starting the command imports all of foureyes: ~4 s of CPU, 30 s on a busy 2-core machine.
_STARTUP_S = 120.0


@dataclass
class RunningSimulator:
    """A ``foureyes simulate`` subprocess and the ways a test talks to it."""

    url: str
    """Root URL, e.g. ``http://127.0.0.1:54321`` (control endpoints live under it)."""
    base_url: str
    """The OpenAI base URL (``url + "/v1"``)."""
    port: int
    """The port it listens on."""
    log_path: Path
    """Its ``--log`` JSONL file (every request of the session, never truncated)."""
    process: subprocess.Popen[str] = field(repr=False)
    """The subprocess."""

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"content-type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode()
            exc.close()
            raise AssertionError(f"{method} {path} -> HTTP {exc.code}: {detail}") from None

    def load(self, scenario: Mapping[str, Any] | Path) -> None:
        """Replace the scenario (a mapping, or a TOML/JSON file); resets uses and the log."""
        if isinstance(scenario, Path):
            text = scenario.read_text(encoding="utf-8")
            scenario = tomllib.loads(text) if scenario.suffix == ".toml" else json.loads(text)
        self._call("PUT", "/_sim/scenario", dict(scenario))

    def reset(self) -> None:
        """Forget rule uses and the in-memory request log."""
        self._call("POST", "/_sim/reset")

    def requests(self) -> list[dict[str, Any]]:
        """The chat requests received since the last reset or load, oldest first."""
        return list(self._call("GET", "/_sim/requests")["requests"])

    def route(self, model: str, **overrides: Any) -> RouteConfig:
        """An ``openai`` route config pointing at this simulator."""
        return RouteConfig(kind="openai", base_url=self.base_url, model=model, **overrides)

    def config(
        self,
        store_url: str,
        *,
        timeout_s: float = 5,
        supervisor_timeout_s: float | None = None,
        gate: GateConfig | None = None,
    ) -> Config:
        """A config with every model role on this simulator.

        Models ``counselor-sim``, ``supervisor-sim``, ``l1-sim`` and ``l2-sim``; the store at
        ``store_url``; every other setting at its default unless ``gate`` is given.
        """
        sup = timeout_s if supervisor_timeout_s is None else supervisor_timeout_s
        return Config(
            store=StoreConfig(url=store_url),
            routes={
                "counselor_sim": self.route("counselor-sim", timeout_s=timeout_s),
                "supervisor_sim": self.route("supervisor-sim", timeout_s=sup),
                "l1_sim": self.route("l1-sim", timeout_s=timeout_s),
                "l2_sim": self.route("l2-sim", timeout_s=timeout_s),
            },
            roles=RolesConfig(
                counselor="counselor_sim",
                supervisor="supervisor_sim",
                risk_l1="l1_sim",
                risk_l2="l2_sim",
            ),
            gate=gate or GateConfig(),
        )


def simulate_command(*args: str) -> list[str]:
    """The argv that runs ``foureyes ARGS`` with this interpreter."""
    return [sys.executable, "-c", "from foureyes.cli import main; main()", *args]


def start_simulator(scenario: Path, *, log_path: Path) -> RunningSimulator:
    """Start ``foureyes simulate --port 0 --json`` and wait for its ready line."""
    process = subprocess.Popen(
        simulate_command(
            "simulate", "--scenario", str(scenario), "--port", "0", "--json", "--log", str(log_path)
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        ready = selector.select(timeout=_STARTUP_S)
    line = process.stdout.readline() if ready else ""
    if not line:
        stop_simulator(process)
        raise RuntimeError(f"foureyes simulate did not start (exit code {process.returncode})")
    info = json.loads(line)
    return RunningSimulator(
        url=info["url"],
        base_url=info["base_url"],
        port=info["port"],
        log_path=log_path,
        process=process,
    )


def stop_simulator(process: subprocess.Popen[str]) -> None:
    """Stop the subprocess (SIGTERM, then SIGKILL) and close its pipe."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()


@pytest.fixture(scope="session")
def simulator_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSimulator]:
    """One simulator subprocess for the whole session."""
    log_path = tmp_path_factory.mktemp("simulator") / "requests.jsonl"
    running = start_simulator(DEFAULT_SCENARIO, log_path=log_path)
    try:
        yield running
    finally:
        stop_simulator(running.process)


@pytest.fixture
def simulator(simulator_process: RunningSimulator) -> RunningSimulator:
    """The session's simulator, serving the default scenario with a fresh log."""
    simulator_process.load(DEFAULT_SCENARIO)
    return simulator_process


# --- recorded traffic -------------------------------------------------------------------
def read_cassette(path: Path) -> list[dict[str, Any]]:
    """The interactions of a VCR cassette: each a ``{"request": ..., "response": ...}`` dict.

    Read by the product's own cassette reader (:mod:`foureyes.review.importers.vcr`); the
    cassettes are third-party data: a missing one skips the test, or fails it in CI.
    """
    return interactions(require_data(path).read_text(encoding="utf-8"))
