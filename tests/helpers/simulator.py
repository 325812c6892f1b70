"""The real ``foureyes simulate`` CLI for the test session, and recorded traffic to script it.

Register with ``pytest_plugins = ["tests.helpers.simulator"]`` (or import the fixtures).

- ``simulator_process`` (session): starts ``foureyes simulate --port 0 --json`` once, as a
  subprocess on a free loopback port, and stops it at the end of the session.
- ``simulator`` (function): the same process with the default scenario loaded (which
  also resets rule uses and the request log), so every test starts clean. Tests call
  ``simulator.load({...})`` with their own scenario, drive ``simulator.base_url`` and read
  ``simulator.requests()``.

``read_cassette`` reads the VCR cassettes of the third-party data (tests/helpers/data.py;
PyYAML is not a dependency) so scenarios can reuse the shape of real DeepSeek replies.
"""

from __future__ import annotations

import json
import re
import selectors
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from foureyes.config import RouteConfig
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
# VCR cassettes are YAML as PyYAML's dumper writes it. This reads exactly that subset:
# block mappings and sequences (including sequences indented like their parent key),
# plain, single- and double-quoted scalars spread over several lines, literal and folded
# block scalars, and the empty flow collections {} and [].

_KEY = re.compile(r"""^('(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|[^\s'"#{}\[\]-][^:]*?):(?: |$)""")
_SINGLE_END = re.compile(r"((?:[^']|'')*)'(?!')", re.DOTALL)
_DOUBLE_END = re.compile(r'((?:[^"\\]|\\.)*)"', re.DOTALL)
_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
    "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
    "_": "\xa0", "L": "\u2028", "P": "\u2029",
}  # fmt: skip


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_item(line: str, indent: int) -> bool:
    return _indent(line) == indent and (line[indent:].startswith("- ") or line[indent:] == "-")


def _plain(text: str) -> Any:
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE", "false", "False", "FALSE"):
        return text.lower() == "true"
    if text in ("{}", "[]"):
        return {} if text == "{}" else []
    if re.fullmatch(r"[-+]?[0-9]+", text):
        return int(text)
    if re.fullmatch(r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?", text):
        return float(text)
    return text


def _fold(lines: list[str], glued: Collection[int] = ()) -> str:
    """Join flow-scalar lines: a break is a space, blank lines are breaks, glued lines touch."""
    out, breaks = lines[0], 0
    for n, line in enumerate(lines[1:], start=1):
        if not line and n < len(lines) - 1:
            breaks += 1
            continue
        out += ("" if n - 1 - breaks in glued else "\n" * breaks or " ") + line
        breaks = 0
    return out


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] != "\\":
            out.append(text[i])
            i += 1
            continue
        code = text[i + 1]
        width = {"x": 2, "u": 4, "U": 8}.get(code, 0)
        out.append(chr(int(text[i + 2 : i + 2 + width], 16)) if width else _ESCAPES[code])
        i += 2 + width
    return "".join(out)


def _double_quoted(body: str) -> str:
    lines, glued = body.split("\n"), set()
    cooked = []
    for n, line in enumerate(lines):
        line = line.lstrip(" \t") if n else line
        if n < len(lines) - 1:
            kept = line.rstrip(" \t")
            escaped = (len(kept) - len(kept.rstrip("\\"))) % 2 == 1
            if escaped and kept == line:  # "\" at the end: the break itself is escaped
                line = kept[:-1]
                glued.add(n)
            else:  # trailing blanks go, unless the first of them is escaped
                line = kept + line[len(kept)] if escaped else kept
        cooked.append(line)
    return _unescape(_fold(cooked, glued))


def _single_quoted(body: str) -> str:
    lines = body.split("\n")
    stripped = [line if n == 0 else line.lstrip(" ") for n, line in enumerate(lines)]
    stripped = [line.rstrip(" ") if n < len(lines) - 1 else line for n, line in enumerate(stripped)]
    return _fold(stripped).replace("''", "'")


class _Reader:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.i = 0

    def _next_content(self) -> str:
        while self.i < len(self.lines) and not self.lines[self.i].strip():
            self.i += 1
        return self.lines[self.i] if self.i < len(self.lines) else ""

    def block(self, indent: int) -> Any:
        line = self._next_content()
        return self.sequence(indent) if _is_item(line, indent) else self.mapping(indent)

    def sequence(self, indent: int) -> list[Any]:
        items: list[Any] = []
        while _is_item(line := self._next_content(), indent):
            rest = line[indent + 1 :].lstrip(" ")
            if not rest:
                self.i += 1
                items.append(self.block(_indent(self._next_content())))
            elif _KEY.match(rest):
                # "- key: value" opens a mapping whose keys line up with "key".
                column = len(line) - len(rest)
                self.lines[self.i] = " " * column + rest
                items.append(self.mapping(column))
            else:
                self.i += 1
                items.append(self.scalar(rest, indent))
        return items

    def mapping(self, indent: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        while _indent(line := self._next_content()) == indent and line.strip():
            found = _KEY.match(line[indent:])
            if found is None:
                break
            raw_key = found.group(1)
            key = _plain(raw_key) if raw_key[0] not in "'\"" else self._quoted_key(raw_key)
            rest = line[indent + found.end() :].strip()
            self.i += 1
            if rest:
                result[str(key)] = self.scalar(rest, indent)
                continue
            nxt = self._next_content()
            if nxt.strip() and _indent(nxt) > indent:
                result[str(key)] = self.block(_indent(nxt))
            elif _is_item(nxt, indent):  # PyYAML puts a key's sequence at the key's column
                result[str(key)] = self.sequence(indent)
            else:
                result[str(key)] = None
        return result

    @staticmethod
    def _quoted_key(raw: str) -> str:
        return _single_quoted(raw[1:-1]) if raw[0] == "'" else _double_quoted(raw[1:-1])

    def _more_indented(self, indent: int) -> list[str]:
        lines = []
        while self.i < len(self.lines) and (
            not self.lines[self.i].strip() or _indent(self.lines[self.i]) > indent
        ):
            lines.append(self.lines[self.i])
            self.i += 1
        while lines and not lines[-1].strip():
            lines.pop()
            self.i -= 1
        return lines

    def scalar(self, text: str, indent: int) -> Any:
        """The scalar starting with ``text`` (the rest of the current line) and its continuation."""
        if text[0] in "|>":
            lines = self._more_indented(indent)
            width = min((_indent(line) for line in lines if line.strip()), default=0)
            body = [line[width:] for line in lines]
            value = _fold(body) if text[0] == ">" else "\n".join(body)
            return value if "-" in text else value + "\n"
        if text[0] in "'\"":
            end = _SINGLE_END if text[0] == "'" else _DOUBLE_END
            joined = text[1:]
            while (found := end.match(joined)) is None:
                joined += "\n" + self.lines[self.i]
                self.i += 1
            quoted = found.group(1)
            return _single_quoted(quoted) if text[0] == "'" else _double_quoted(quoted)
        lines = [text, *self._more_indented(indent)]
        return _plain(text) if len(lines) == 1 else _fold([line.strip() for line in lines])


def read_cassette(path: Path) -> list[dict[str, Any]]:
    """The interactions of a VCR cassette: each a ``{"request": ..., "response": ...}`` dict.

    The cassettes are third-party data: a missing one skips the test, or fails it in CI.
    """
    data = _Reader(require_data(path).read_text(encoding="utf-8")).block(0)
    return list(data["interactions"])
