"""The systems under test, their servers and configs, for benchmarks/gateway.py."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from loadgen import http_get, start_process, stop_process

from foureyes import Guard
from foureyes.core.reasons import ReasonCode
from foureyes.pipeline import SupportOutcome
from foureyes.risk.assess import ContextFlags, Dimensions
from gate import APPROVE, DRAFT

HERE = Path(__file__).resolve().parent
MESSAGE = "I had a rough day at work and I can't sleep."
"""A message L0 does not escalate: triage makes no model call, so a reply costs two."""
ESCALATING_MESSAGE = "Sometimes I feel like I want to die."
"""A message L0 escalates: triage makes an L1 call (answered ``low``, so no L2)."""
L1_LOW = json.dumps(
    {
        "risk_level": "low",
        "confidence": 0.9,
        "dimensions": dict.fromkeys(Dimensions.model_fields, 0.1),
        "evidence": "a passing wish, no plan",
        "context_flags": dict.fromkeys(ContextFlags.model_fields, False),
    }
)
NEMO_CHECK = r"Should the message be blocked \(Yes or No\)\?"
GATEWAY_MODEL = "foureyes-support"
NEMO_CONFIG_ID = "support"


def scenario(delay_s: float) -> dict[str, Any]:
    """The simulator's models; every answer after ``delay_s`` seconds (0: at once)."""

    def rule(name: str, content: str, tokens: tuple[int, int], **match: str) -> dict[str, Any]:
        usage = {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]}
        delay = {"fault": "delay", "delay_s": delay_s} if delay_s > 0 else {}
        return {"name": name, "content": content, "usage": usage} | match | delay

    return {
        "models": {
            # NeMo's main model answers its own check too, told apart by the check prompt.
            "counselor-sim": [
                rule("nemo-check", "No", (250, 1), match=NEMO_CHECK),
                rule("draft", DRAFT, (400, 40)),
            ],
            "supervisor-sim": [rule("verdict", APPROVE, (900, 30))],
            "risk-sim": [rule("l1", L1_LOW, (600, 80))],
        }
    }


@dataclass(frozen=True)
class Outcome:
    """What one reply gave: whether it is the expected one, and its trace."""

    ok: bool
    trace_id: str | None = None


JSON_HEADERS = {"Content-Type": "application/json"}


class LeanHttp:
    """The load generator's HTTP client for every server: one aiohttp session, no SDK.

    A reply is one JSON ``POST`` and its JSON answer, nothing else (no retries, no
    response models): the thinnest client the benchmark can have, the same for every
    system, so the client's CPU is small beside the servers' and no system pays for
    another's SDK. Create it inside the running event loop.
    """

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=120),
        )

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """``POST`` ``body`` as JSON to ``path``; the status and the decoded answer."""
        data = json.dumps(body).encode()
        async with self.session.post(self.base_url + path, data=data, headers=JSON_HEADERS) as r:
            answer: dict[str, Any] = json.loads(await r.read())
            return r.status, answer

    async def chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], str]:
        """A ``POST /chat/completions``: status, answer and the first choice's text."""
        status, answer = await self.post("/chat/completions", body)
        text = ""
        if status == 200:
            text = answer["choices"][0]["message"].get("content") or ""
        return status, answer, text

    async def aclose(self) -> None:
        await self.session.close()


class BareSdk:
    """The floor: a draft call, then one check call that sees the draft's digest.

    Both calls go straight to the simulator through :class:`LeanHttp` (the key ``sdk``
    is historical: it once used the ``openai`` SDK).
    """

    def __init__(self, sim_url: str) -> None:
        self.client = LeanHttp(sim_url)

    async def reply(self, n: int) -> Outcome:
        _, _, text = await self.client.chat(
            {
                "model": "counselor-sim",
                "messages": [
                    {"role": "system", "content": "You are a supportive listener."},
                    {"role": "user", "content": MESSAGE},
                ],
            }
        )
        digest = hashlib.sha256(text.encode()).hexdigest()
        _, _, verdict = await self.client.chat(
            {
                "model": "supervisor-sim",
                "messages": [
                    {"role": "user", "content": f"Review this reply (sha256 {digest}):\n{text}"}
                ],
            }
        )
        return Outcome(digest in verdict)

    async def aclose(self) -> None:
        await self.client.aclose()


class NemoServer:
    """NeMo over HTTP through :class:`LeanHttp`, its config chosen per request.

    ``nemoguardrails server``, or IORails behind benchmarks/nemo/iorails_asgi.py (which
    serves its one config and ignores the choice).
    """

    def __init__(self, url: str, pid: int) -> None:
        self.client = LeanHttp(url + "/v1")
        self.pid = pid

    async def reply(self, n: int) -> Outcome:
        status, _, text = await self.client.chat(
            {
                "model": "counselor-sim",
                "messages": [{"role": "user", "content": MESSAGE}],
                "guardrails": {"config_id": NEMO_CONFIG_ID},
            }
        )
        return Outcome(status == 200 and text == DRAFT)

    async def aclose(self) -> None:
        await self.client.aclose()


class FoureyesGateway:
    """``foureyes serve`` through :class:`LeanHttp`; every reply is a new conversation."""

    def __init__(self, name: str, url: str, pid: int, message: str) -> None:
        self.name = name
        self.client = LeanHttp(url + "/v1")
        self.pid = pid
        self.message = message
        self.sent = 0

    async def reply(self, n: int) -> Outcome:
        # A fresh conversation per reply keeps per-conversation limits (L1's daily cap,
        # single-flight triage) out of a throughput measurement.
        self.sent += 1
        status, answer, text = await self.client.chat(
            {
                "model": GATEWAY_MODEL,
                "messages": [{"role": "user", "content": self.message}],
                "user": f"bench-{self.name}-{id(self):x}-{self.sent}",
            }
        )
        meta: dict[str, Any] = answer.get("foureyes") or {}
        # Released as drafted; an escalating message's reply also carries crisis resources.
        ok = status == 200 and meta.get("reason") == "approved" and text.startswith(DRAFT)
        return Outcome(ok, meta.get("trace_id"))

    async def aclose(self) -> None:
        await self.client.aclose()


class NemoLibrary:
    """NeMo as a library in its own interpreter (benchmarks/nemo/library_bench.py --serve).

    One process for the whole run, so its cells can alternate with foureyes' cell by
    cell: :meth:`warm`, then :meth:`run` one measured cell, its CPU read from ``/proc``
    of that process around the measured part only.
    """

    def __init__(self, nemo_python: Path, config_dir: Path, engine: str) -> None:
        args = [str(nemo_python), str(HERE / "nemo" / "library_bench.py"), "--serve"]
        args += ["--config", str(config_dir), "--message", MESSAGE, "--expect", DRAFT]
        args += ["--engine", engine]
        env = dict(os.environ) | {"NEMO_GUARDRAILS_NO_USAGE_STATS": "1"}
        self.engine = engine
        self.process = subprocess.Popen(
            args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.pid = self.process.pid
        ready = self._read()
        if ready.get("ready") is not True:
            raise RuntimeError(f"NeMo {engine} did not start: {ready}")

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"NeMo {self.engine} benchmark exited ({self.process.wait()})")
            if line.startswith("{"):  # anything else is a library printing to stdout
                answer: dict[str, Any] = json.loads(line)
                return answer

    def _ask(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self._read()

    def warm(self, concurrency: int, replies: int) -> None:
        """Unmeasured replies (the engine's caches and connection pools)."""
        self._ask(f"{concurrency} {replies}")

    def run(self, concurrency: int, replies: int) -> dict[str, Any]:
        """One measured cell; NeMo's own figures plus ``proc_cpu_s``, read from /proc."""
        before = tree_cpu_seconds(self.pid)
        result = self._ask(f"{concurrency} {replies}")
        result["proc_cpu_s"] = tree_cpu_seconds(self.pid) - before
        return result

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def released(outcome: SupportOutcome) -> Outcome:
    """A foureyes reply as expected: approved and released as the simulator drafted it."""
    ok = outcome.reason is ReasonCode.APPROVED and outcome.text.startswith(DRAFT)
    return Outcome(ok, outcome.trace_id)


class InProcess:
    """foureyes in this process (the library API, ``Guard``) on the simulator's routes.

    ``mode`` ``reply``: :meth:`Guard.reply`, support mode (triage, draft, review, gate,
    durable record). ``mode`` ``check``: the host drafts with :class:`LeanHttp` (one call
    to the Counselor's model), then :meth:`Guard.check` judges that draft (triage, review,
    gate, durable record): two upstream calls per reply either way. Every reply is a new
    conversation, as for the gateway. Its CPU is this process's (``in_process``).
    """

    in_process = True

    def __init__(self, name: str, guard: Guard, sim_url: str, mode: str) -> None:
        self.name = name
        self.guard = guard
        self.mode = mode
        self.host = LeanHttp(sim_url) if mode == "check" else None
        self.sent = 0

    @classmethod
    async def start(cls, name: str, sim_url: str, mode: str, workdir: Path) -> InProcess:
        """Open a guard with the gateway's config (its own SQLite store) and wrap it."""
        store_url = f"sqlite+aiosqlite:///{workdir / f'guard-{name}.db'}"
        config = workdir / f"guard-{name}.toml"
        config.write_text(gateway_toml(sim_url, store_url, False, True), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
        return cls(name, await Guard.start(config, environ=env), sim_url, mode)

    async def reply(self, n: int) -> Outcome:
        self.sent += 1
        messages = [{"role": "user", "content": MESSAGE}]
        user = f"bench-{self.name}-{self.sent}"
        if self.host is None:
            return released(await self.guard.reply(messages, user=user))
        _, _, text = await self.host.chat({"model": "counselor-sim", "messages": messages})
        return released(await self.guard.check(messages, text, user=user))

    async def aclose(self) -> None:
        if self.host is not None:
            await self.host.aclose()
        await self.guard.aclose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Servers:
    """The server subprocesses of one run, stopped together."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.processes: list[subprocess.Popen[bytes]] = []
        self.store_urls: dict[str, str] = {}
        self.logs: dict[str, Path] = {}

    @property
    def last_pid(self) -> int:
        """The process id of the server started last."""
        return self.processes[-1].pid

    def nemo_server(self, nemo_python: Path, configs: Path) -> str:
        port = free_port()
        env = dict(os.environ) | {"NEMO_GUARDRAILS_NO_USAGE_STATS": "1"}
        args = [str(nemo_python), str(HERE / "nemo" / "serve_loopback.py"), "server"]
        args += ["--config", str(configs), "--port", str(port), "--disable-chat-ui"]
        url = f"http://127.0.0.1:{port}"
        log = self.workdir / "nemo-server.log"
        self.processes.append(start_process(args, ready_url=url + "/healthz", log=log, env=env))
        return url

    def iorails_asgi(self, nemo_python: Path, config_dir: Path) -> str:
        """IORails behind benchmarks/nemo/iorails_asgi.py (NeMo's server runs LLMRails only)."""
        port = free_port()
        env = dict(os.environ) | {"NEMO_GUARDRAILS_NO_USAGE_STATS": "1"}
        args = [str(nemo_python), str(HERE / "nemo" / "iorails_asgi.py")]
        args += ["--config", str(config_dir), "--port", str(port)]
        url = f"http://127.0.0.1:{port}"
        log = self.workdir / "iorails-asgi.log"
        self.processes.append(start_process(args, ready_url=url + "/healthz", log=log, env=env))
        return url

    def foureyes(
        self,
        sim_url: str,
        name: str,
        *,
        risk_on_simulator: bool = False,
        speculate: bool = True,
        transport: str = "lean",
        group_commit: bool = True,
        store_url: str | None = None,
        workers: int = 1,
        shared_limits: bool = False,
        budgets: bool = False,
    ) -> str:
        """Start ``foureyes serve`` (its own SQLite store unless ``store_url``); return its URL."""
        port = free_port()
        if store_url is None:
            store_url = f"sqlite+aiosqlite:///{self.workdir / f'foureyes-{name}.db'}"
        self.store_urls[name] = store_url
        config = self.workdir / f"foureyes-{name}.toml"
        config.write_text(
            gateway_toml(
                sim_url,
                store_url,
                risk_on_simulator,
                speculate,
                transport,
                group_commit,
                shared_limits,
                budgets,
            )
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("FOUREYES_")}
        args = [sys.executable, "-m", "foureyes.cli", "serve", "--config", str(config)]
        args += ["--port", str(port), "--workers", str(workers)]
        url = f"http://127.0.0.1:{port}"
        log = self.logs[name] = self.workdir / f"foureyes-{name}.log"
        self.processes.append(start_process(args, ready_url=url + "/healthz", log=log, env=env))
        if http_get(url + "/healthz") != 200:
            raise RuntimeError(f"foureyes serve ({name}) is not healthy; see {log}")
        return url

    def close(self) -> None:
        for process in self.processes:
            stop_process(process)


_BUDGET = (
    "daily_calls = 1000000000\ndaily_budget_usd = 1000000.0\n"
    "price_in = 0.000001\nprice_out = 0.000002\n"
)
"""Daily limits no run reaches, on one route: every call still goes through the ledger."""


def gateway_toml(
    sim_url: str,
    store_url: str,
    risk_on_simulator: bool,
    speculate: bool,
    transport: str = "lean",
    group_commit: bool = True,
    shared_limits: bool = False,
    budgets: bool = False,
) -> str:
    """A ``foureyes.toml``: Counselor and Supervisor (and L1, if asked) on the simulator.

    ``transport`` is the routes' (``lean``, the shipped default; ``aiohttp``: the ``openai``
    SDK); ``group_commit`` the store's (on by default); ``shared_limits`` keeps the per-key
    rate limit in the store (as several workers need it) instead of in memory; ``budgets``
    gives every route a daily call limit and a daily spend limit (with prices), both far
    above what a run uses, so each model call reserves and settles in the ledger.
    """
    routes = {"counselor": "counselor-sim", "supervisor": "supervisor-sim", "risk": "risk-sim"}
    grouped = str(group_commit).lower()
    lines = [f'[store]\nurl = "{store_url}"\ngroup_commit = {grouped}\n']
    for name, model in routes.items():
        lines.append(
            f'[routes.{name}]\nkind = "openai"\nbase_url = "{sim_url}"\nmodel = "{model}"\n'
            f'transport = "{transport}"\n' + (_BUDGET if budgets else "")
        )
    roles = 'counselor = "counselor"\nsupervisor = "supervisor"\n'
    if risk_on_simulator:
        roles += 'risk_l1 = "risk"\n'
    lines.append(f"[roles]\n{roles}")
    lines.append(f"[gate]\nspeculative_draft = {str(speculate).lower()}\n")
    # Loopback without keys (open_loopback); the limiter must never be what is measured.
    backend = '\nrate_limit_backend = "store"' if shared_limits else ""
    lines.append(f"[server]\nrate_per_minute = 10000000\nburst = 1000000{backend}\n")
    return "\n".join(lines)


def nemo_config(template: Path, configs: Path, sim_url: str) -> Path:
    """Copy NeMo's config as ``configs/support`` with the simulator's URL; return it."""
    target = configs / NEMO_CONFIG_ID
    shutil.copytree(template, target)
    config = target / "config.yml"
    text = config.read_text(encoding="utf-8")
    text, count = re.subn(r"base_url: \S+", f"base_url: {sim_url}", text)
    if count != 1:
        raise RuntimeError(f"{config} should name exactly one base_url")
    config.write_text(text, encoding="utf-8")
    return target


def nemo_version(nemo_python: Path) -> str:
    if not nemo_python.exists():
        return "absent"
    code = "import importlib.metadata as m; print(m.version('nemoguardrails'))"
    done = subprocess.run([str(nemo_python), "-c", code], capture_output=True, text=True)
    return done.stdout.strip() or "absent"


def cpu_count() -> int:
    return len(os.sched_getaffinity(0))


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) a process has used so far."""
    return sum(cpu_times(Path(f"/proc/{pid}/stat")))


def _stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of ``pid``, every live descendant, and every descendant already reaped.

    The processes under test and nothing else: uvicorn's worker processes, or a
    PostgreSQL cluster's backends under its postmaster (a backend that exited and was
    waited for is in its parent's ``cutime``/``cstime``, so it is not lost).
    """
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(_stat_fields(int(entry))[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = _stat_fields(current)
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
        todo += children.get(current, [])
    return total


def postmaster_pid(port: int) -> int:
    """The postmaster of the PostgreSQL cluster listening on ``port`` (its ``-p`` option).

    Raises:
        RuntimeError: no ``postgres`` process was started with ``-p port``.
    """
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                args = cmdline.read().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"postgres"):
            pairs = zip(args, args[1:], strict=False)
            if any(flag == b"-p" and value == str(port).encode() for flag, value in pairs):
                return int(entry)
    raise RuntimeError(f"no PostgreSQL postmaster listens on port {port}")


def postgres_clock(port: int) -> Callable[[], float]:
    """CPU seconds so far of one PostgreSQL cluster (its postmaster and backends) only."""
    pid = postmaster_pid(port)
    return lambda: tree_cpu_seconds(pid)


def cpu_times(stat: Path) -> tuple[float, float]:
    """User and system CPU seconds from a ``/proc`` ``stat`` file (a process's or a thread's)."""
    fields = stat.read_text(encoding="ascii").rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def request_durations(log: Path) -> dict[str, float]:
    """``duration_ms`` of each traced request in a ``foureyes serve`` log, by trace id.

    The gateway's request log times a request from the app's outermost middleware to the
    end of its response: the server's side of a reply, without the client's SDK.
    """
    durations = {}
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if '"http_request"' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("trace_id"):
            durations[entry["trace_id"]] = float(entry["duration_ms"])
    return durations
