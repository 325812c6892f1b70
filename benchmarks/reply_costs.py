"""What do the small things every reply does cost, measured alone?

Four parts of a reply that are neither its work nor its model calls, each repeated
``--replies`` times in this process and reported as CPU per reply (medians of
``--rounds``):

- ``spans``: a support message's OpenTelemetry spans (the operation's, two model calls',
  the verdict's event and the outcome's attributes), with no tracer provider set;
- ``metrics``: the gateway's five metric updates of a reply (the request, the decision,
  the triage, two model calls);
- ``log_line``: the gateway's ``http_request`` log line, formatted as JSON and written to
  ``/dev/null``;
- ``unknowns_read``: the open-unknowns read before each review, on an SQLite store.

Only public entry points are called, so the same script measures an older checkout put
first on ``PYTHONPATH`` (before/after pairs).

    python benchmarks/reply_costs.py [--replies 20000] [--rounds 5]

Numbers mean something only on an idle machine; results: benchmarks/LOG.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from foureyes.config import PrivacyConfig, RouteConfig, StoreConfig
from foureyes.core.reasons import ReasonCode
from foureyes.core.roles import Role
from foureyes.llm import telemetry
from foureyes.llm.provider import ChatMessage, ChatRequest, ChatResult
from foureyes.risk.levels import RiskLevel
from foureyes.server._logging import JsonFormatter, log_event
from foureyes.server.metrics import Metrics
from foureyes.store import Store

_ROUTE = RouteConfig(kind="openai", model="m", base_url="http://127.0.0.1:9")
_REQUEST = ChatRequest(messages=(ChatMessage.user("hello"),))
_RESULT = ChatResult(text="ok", model="m", latency_s=0.001, route="r")


def _spans() -> None:
    with telemetry.operation_span("foureyes.support_message", trace_id="t") as operation:
        for stage, role in (("draft", Role.COUNSELOR), ("review", Role.SUPERVISOR)):
            with telemetry.model_call_span(
                role=role, route_name="r", route=_ROUTE, stage=stage, request=_REQUEST
            ) as call:
                call.succeeded(_RESULT)
        telemetry.record_verdict(candidate_sha256="c", label="approve", failure=None)
        operation.annotate(decision="release", reason="approved", policy="normal")


def _metrics(metrics: Metrics) -> Callable[[], None]:
    def update() -> None:
        metrics.observe_request("/v1/chat/completions", "POST", 200, 0.003)
        metrics.record_decision(ReasonCode.APPROVED)
        metrics.record_risk("L0", RiskLevel.LOW)
        metrics.observe_model_call(Role.COUNSELOR, "counselor", 0.001, "ok")
        metrics.observe_model_call(Role.SUPERVISOR, "supervisor", 0.001, "ok")

    return update


def _log_line(logger: logging.Logger) -> Callable[[], None]:
    def line() -> None:
        log_event(
            logger,
            "http_request",
            trace_id="0" * 32,
            request_id="1" * 32,
            method="POST",
            route="/v1/chat/completions",
            status=200,
            duration_ms=3.1,
            key=None,
        )

    return line


def _cpu_us(work: Callable[[], object], replies: int) -> float:
    started = time.process_time()
    for _ in range(replies):
        work()
    return (time.process_time() - started) / replies * 1e6


async def _unknowns_read_us(folder: Path, replies: int) -> float:
    url = f"sqlite+aiosqlite:///{folder / 'store.db'}"
    store = await Store.open(StoreConfig(url=url), PrivacyConfig(), {})
    try:
        for n in range(200):  # warm: the connection is open, the statement compiled
            await store.unknowns.open(f"tenant:c{n}", limit=8)
        started = time.process_time()
        for n in range(replies):
            await store.unknowns.open(f"tenant:c{n}", limit=8)
        return (time.process_time() - started) / replies * 1e6
    finally:
        await store.close()


def main(args: argparse.Namespace) -> dict[str, float]:
    rounds: dict[str, list[float]] = {
        name: [] for name in ("spans", "metrics", "log_line", "unknowns_read")
    }
    with open(os.devnull, "w", encoding="utf-8") as sink, tempfile.TemporaryDirectory() as folder:
        logger = logging.getLogger("foureyes.benchmark.reply_costs")
        handler = logging.StreamHandler(sink)
        handler.setFormatter(JsonFormatter())
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        parts: dict[str, Callable[[], object]] = {
            "spans": _spans,
            "metrics": _metrics(Metrics()),
            "log_line": _log_line(logger),
        }
        for _ in range(args.rounds):
            for name, work in parts.items():
                rounds[name].append(_cpu_us(work, args.replies))
            reads = max(1, args.replies // 5)
            rounds["unknowns_read"].append(asyncio.run(_unknowns_read_us(Path(folder), reads)))
    return {name: round(statistics.median(values), 1) for name, values in rounds.items()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()
    report = main(arguments)
    if arguments.json:
        print(json.dumps(report))
    else:
        for name, us in report.items():
            print(f"{name:14} {us:>7} us of CPU per reply (median of {arguments.rounds} rounds)")
