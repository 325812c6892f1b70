"""Whole release against segment release: time to first released byte, total, Supervisor calls.

Starts ``foureyes simulate`` on loopback and answers the same message through the support
pipeline (what the gateway runs per message: L0 triage, the gate, the durable record) in
both ``[gate] release`` modes, the Counselor reached over the ``openai`` route and the
trace in SQLite. Every model call takes ``--delay-ms`` (50 ms by default,
the issue's goal setting): the Supervisor answers after that long; the Counselor, asked
for a whole reply, too; asked for a stream (segment mode), it sends its first chunk after
a tenth of it and paces the rest over the remainder (the rule's ``stream_interval_s``), so
the whole stream also takes ``--delay-ms`` and the text arrives as a model writes it.

Per reply it records when the first released text was handed over (segment mode: the
first approved segment; whole mode: the outcome), the total time, and the Supervisor calls
made. It also measures, by direct calls on the same routes, the two parts of the issue's
goal: the first segment's draft time (from the request until the stream has carried the
first segment as :class:`~foureyes.gate.segments.SegmentCutter` cuts it) and one review
(a Supervisor call); the goal is first byte <= their sum.

    python benchmarks/segments.py [--replies 50] [--delay-ms 50] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from loadgen import load_scenario, start_simulator, stop_process

from foureyes.config import Config, GateConfig, RolesConfig, RouteConfig, StoreConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.roles import Role
from foureyes.gate.segments import cut_segments
from foureyes.llm.openai_compat import NO_KEY, OpenAIProvider
from foureyes.llm.provider import ChatMessage, ChatRequest
from foureyes.pipeline import Runtime, SupportMessage

DRAFT = (
    "Thank you for telling me. It sounds like today took a lot out of you. "
    "It makes sense to feel worn down. What was the hardest part of it?"
)
APPROVE = '{"candidate_sha256": "{{candidate_sha256}}", "decision": "approve"}'
MESSAGE = SupportMessage(text="I had a rough day at work and I can't sleep.")


PIECE_CHARS = 16
"""Characters per streamed delta (the simulator's ``_STREAM_PIECE_CHARS``)."""
PAYLOADS = 1 + -(-len(DRAFT) // PIECE_CHARS) + 3
"""Server-sent events of the Counselor's stream: role, content pieces, finish, usage, [DONE]."""


def scenario(delay_s: float, *, streamed: bool) -> dict[str, Any]:
    """Every call takes ``delay_s``; a streamed draft spreads it over its chunks."""
    if streamed:
        first = delay_s / 10
        pace = (delay_s - first) / (PAYLOADS - 1)
        draft = {"content": DRAFT, "fault": "delay", "delay_s": first, "stream_interval_s": pace}
    else:
        draft = {"content": DRAFT, "fault": "delay", "delay_s": delay_s}
    return {
        "models": {
            "counselor-sim": [draft],
            "supervisor-sim": [{"content": APPROVE, "fault": "delay", "delay_s": delay_s}],
        }
    }


async def parts(base_url: str, calls: int) -> dict[str, float]:
    """Median first-segment draft time and one review, by direct calls on the routes."""
    counselor = OpenAIProvider(
        "c", RouteConfig(kind="openai", base_url=base_url, model="counselor-sim"), api_key=NO_KEY
    )
    supervisor = OpenAIProvider(
        "s", RouteConfig(kind="openai", base_url=base_url, model="supervisor-sim"), api_key=NO_KEY
    )
    first_segment = cut_segments(DRAFT, max_chars=GateConfig().segment_max_chars)[0]
    drafts: list[float] = []
    review_ms: list[float] = []
    ask = ChatRequest(messages=(ChatMessage.user(MESSAGE.text),))
    # Any 64-hex digest in the request fills the Supervisor's {{candidate_sha256}}.
    judge = ChatRequest(messages=(ChatMessage.user(sha256_hex(DRAFT)),))
    try:
        for _ in range(calls):
            started = time.perf_counter()
            seen: list[str] = []
            closed: list[float] = []

            def on_text(piece: str, seen: list[str] = seen, closed: list[float] = closed) -> None:
                seen.append(piece)
                if not closed and len("".join(seen)) > len(first_segment):
                    closed.append(time.perf_counter())  # the cutter closes it on the next char

            await counselor.complete_streaming(ask, timeout_s=30, on_text=on_text)
            drafts.append(((closed[0] if closed else time.perf_counter()) - started) * 1000)
            started = time.perf_counter()
            await supervisor.complete(judge, timeout_s=30)
            review_ms.append((time.perf_counter() - started) * 1000)
    finally:
        await counselor.aclose()
        await supervisor.aclose()
    return {
        "first_segment_draft_median_ms": statistics.median(drafts),
        "review_median_ms": statistics.median(review_ms),
    }


async def measure(release: str, base_url: str, db: Path, replies: int) -> dict[str, Any]:
    """``replies`` messages through the support pipeline, as the gateway runs them.

    L0 triage (risk roles offline), the gate with the Counselor and Supervisor on the
    simulator, the run's record written before anything is handed over (segment mode:
    before each segment), SQLite with group commit.
    """
    config = Config(
        store=StoreConfig(url=f"sqlite+aiosqlite:///{db}"),
        routes={
            "c": RouteConfig(kind="openai", base_url=base_url, model="counselor-sim"),
            "s": RouteConfig(kind="openai", base_url=base_url, model="supervisor-sim"),
        },
        roles=RolesConfig(counselor="c", supervisor="s"),
        gate=GateConfig(release=release, max_calls=10),  # type: ignore[arg-type]
    )
    runtime = await Runtime.open(config, {})
    first_ms: list[float] = []
    total_ms: list[float] = []
    reviews: list[int] = []
    try:
        for _ in range(replies):
            started = time.perf_counter()
            first: list[float] = []

            async def sink(trace_id: str, segment: str, first: list[float] = first) -> None:
                if not first:
                    first.append(time.perf_counter())

            streamed = sink if release == "segments" else None
            outcome = await runtime.pipeline.handle(MESSAGE, on_segment=streamed)
            done = time.perf_counter()
            assert outcome.text == DRAFT, outcome.reason
            first_ms.append(((first[0] if first else done) - started) * 1000)
            total_ms.append((done - started) * 1000)
            reviews.append(sum(1 for call in outcome.calls if call.role == Role.SUPERVISOR.value))
    finally:
        await runtime.aclose()
    return {
        "first_byte_median_ms": statistics.median(first_ms),
        "total_median_ms": statistics.median(total_ms),
        "supervisor_calls_per_reply": statistics.mean(reviews),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=50)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    delay_s = args.delay_ms / 1000
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        process, base_url = start_simulator(scenario(delay_s, streamed=False), Path(tmp))
        try:
            for release in ("whole", "segments"):
                load_scenario(base_url, scenario(delay_s, streamed=release == "segments"))
                db = Path(tmp) / f"{release}.db"
                results[release] = await measure(release, base_url, db, args.replies)
            goal = await parts(base_url, args.replies)
        finally:
            stop_process(process)
    bound = goal["first_segment_draft_median_ms"] + goal["review_median_ms"]
    first = results["segments"]["first_byte_median_ms"]
    if args.json:
        report = {"python": platform.python_version(), "results": results, "goal": goal}
        print(json.dumps(report | {"goal_met": first <= bound}, indent=2))
        return
    print(f"{args.replies} replies per mode, {args.delay_ms:g} ms per model call")
    print("| release | first byte (median ms) | total (median ms) | Supervisor calls per reply |")
    print("|---|---|---|---|")
    for release, r in results.items():
        print(
            f"| {release} | {r['first_byte_median_ms']:.1f} | {r['total_median_ms']:.1f} "
            f"| {r['supervisor_calls_per_reply']:.1f} |"
        )
    verdict = "met" if first <= bound else "NOT met"
    print(
        f"\ngoal: first byte {first:.1f} ms <= first segment's draft "
        f"{goal['first_segment_draft_median_ms']:.1f} ms + one review "
        f"{goal['review_median_ms']:.1f} ms = {bound:.1f} ms: {verdict}"
    )


if __name__ == "__main__":
    asyncio.run(main())
