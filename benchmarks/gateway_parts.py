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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
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


def sdk_client(base_url: str) -> openai.AsyncOpenAI:
    """The load generator's client for every HTTP system (aiohttp, no retries)."""
    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key="unused",
        max_retries=0,
        timeout=120,
        http_client=openai.DefaultAioHttpClient(),
    )


class BareSdk:
    """The floor: a draft call, then one check call that sees the draft's digest."""

    def __init__(self, sim_url: str) -> None:
        self.client = sdk_client(sim_url)

    async def reply(self, n: int) -> Outcome:
        draft = await self.client.chat.completions.create(
            model="counselor-sim",
            messages=[
                {"role": "system", "content": "You are a supportive listener."},
                {"role": "user", "content": MESSAGE},
            ],
        )
        text = draft.choices[0].message.content or ""
        digest = hashlib.sha256(text.encode()).hexdigest()
        verdict = await self.client.chat.completions.create(
            model="supervisor-sim",
            messages=[{"role": "user", "content": f"Review this reply (sha256 {digest}):\n{text}"}],
        )
        return Outcome(digest in (verdict.choices[0].message.content or ""))

    async def aclose(self) -> None:
        await self.client.close()


class NemoServer:
    """NeMo over HTTP through the SDK, its config chosen per request.

    ``nemoguardrails server``, or IORails behind benchmarks/nemo/iorails_asgi.py (which
    serves its one config and ignores the choice).
    """

    def __init__(self, url: str, pid: int) -> None:
        self.client = sdk_client(url + "/v1")
        self.pid = pid

    async def reply(self, n: int) -> Outcome:
        answer = await self.client.chat.completions.create(
            model="counselor-sim",
            messages=[{"role": "user", "content": MESSAGE}],
            extra_body={"guardrails": {"config_id": NEMO_CONFIG_ID}},
        )
        return Outcome(answer.choices[0].message.content == DRAFT)

    async def aclose(self) -> None:
        await self.client.close()


class FoureyesGateway:
    """``foureyes serve`` through the SDK; every reply is a new conversation."""

    def __init__(self, name: str, url: str, pid: int, message: str) -> None:
        self.name = name
        self.client = sdk_client(url + "/v1")
        self.pid = pid
        self.message = message
        self.sent = 0

    async def reply(self, n: int) -> Outcome:
        # A fresh conversation per reply keeps per-conversation limits (L1's daily cap,
        # single-flight triage) out of a throughput measurement.
        self.sent += 1
        answer = await self.client.chat.completions.create(
            model=GATEWAY_MODEL,
            messages=[{"role": "user", "content": self.message}],
            user=f"bench-{id(self):x}-{self.sent}",
        )
        meta: dict[str, Any] = getattr(answer, "foureyes", None) or {}
        # Released as drafted; an escalating message's reply also carries crisis resources.
        text = answer.choices[0].message.content or ""
        ok = meta.get("reason") == "approved" and text.startswith(DRAFT)
        return Outcome(ok, meta.get("trace_id"))

    async def aclose(self) -> None:
        await self.client.close()


def released(outcome: SupportOutcome) -> Outcome:
    """A foureyes reply as expected: approved and released as the simulator drafted it."""
    ok = outcome.reason is ReasonCode.APPROVED and outcome.text.startswith(DRAFT)
    return Outcome(ok, outcome.trace_id)


class InProcess:
    """foureyes in this process (the library API, ``Guard``) on the simulator's routes.

    ``mode`` ``reply``: :meth:`Guard.reply`, support mode (triage, draft, review, gate,
    durable record). ``mode`` ``check``: the host drafts with the ``openai`` SDK (one call
    to the Counselor's model), then :meth:`Guard.check` judges that draft (triage, review,
    gate, durable record): two upstream calls per reply either way. Every reply is a new
    conversation, as for the gateway. Its CPU is this process's (``in_process``).
    """

    in_process = True

    def __init__(self, name: str, guard: Guard, sim_url: str, mode: str) -> None:
        self.name = name
        self.guard = guard
        self.mode = mode
        self.host = sdk_client(sim_url) if mode == "check" else None
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
        draft = await self.host.chat.completions.create(model="counselor-sim", messages=messages)
        text = draft.choices[0].message.content or ""
        return released(await self.guard.check(messages, text, user=user))

    async def aclose(self) -> None:
        if self.host is not None:
            await self.host.close()
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


def run_library_bench(
    nemo_python: Path,
    config_dir: Path,
    plan: Sequence[tuple[int, int]],
    warmup: int,
    engine: str = "llmrails",
) -> dict[str, Any]:
    """benchmarks/nemo/library_bench.py with ``engine`` (``llmrails`` or ``iorails``)."""
    args = [str(nemo_python), str(HERE / "nemo" / "library_bench.py"), "--config", str(config_dir)]
    args += ["--message", MESSAGE, "--expect", DRAFT, "--warmup", str(warmup), "--engine", engine]
    args += ["--cells", ",".join(f"{c}:{r}" for c, r in plan)]
    env = dict(os.environ) | {"NEMO_GUARDRAILS_NO_USAGE_STATS": "1"}
    done = subprocess.run(
        args, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=3600
    )
    if done.returncode != 0:
        raise RuntimeError(f"NeMo {engine} benchmark failed:\n{done.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


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
