"""How fast is a projection, and how much of a review request can a prefix cache reuse?

1. Time per event of :func:`foureyes.review.projection.project` on synthetic agent sessions
   of about 1k, 10k and 100k events (``recent:5``, ``reasoning-only``), cold (a fresh
   session object, so nothing is memoised; with and without the cyclic GC) and warm (the
   same session again, as a second view of the same checkpoint would be). Times are CPU
   time of this process, which a shared machine disturbs less than wall time.
2. The ``cache-aligned`` prefix share of every real session in trajectories/ of the data
   directory (docs/data.md) and the chat cassettes, against its theoretical maximum: the
   bytes before the first masked event (system messages, tools and native prefix).

    python benchmarks/projection.py [--repeats 7] [--json]

Results: benchmarks/README.md (current, and how to read them), benchmarks/LOG.md (history).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from foureyes.llm.provider import ChatMessage
from foureyes.review.projection import Mask, Projection, Window, project
from foureyes.review.request import RequestMode, build_review_request, request_units
from foureyes.review.session import (
    AssistantMessage,
    EndReason,
    Event,
    ReasoningBlock,
    Session,
    StepEnd,
    StepStart,
    TextBlock,
    ToolCallBlock,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)

REPO = Path(__file__).resolve().parents[1]
SIZES = (1_000, 10_000, 100_000)
LIMITS = {"max_snapshot_chars": 65_536, "max_images": 20}
WINDOWS = ("recent:1", "recent:3", "current-turn")


def synthetic(events_wanted: int) -> tuple[Event, ...]:
    """Turns of 6 tool steps: a user message, reasoning, text, a call and its result each."""
    events: list[Event] = []
    turn = step = 0
    while len(events) < events_wanted:
        turn += 1
        turn_id = f"t{turn}"
        events += [TurnStart(turn_id=turn_id), UserMessage(content=f"Task {turn}: fix bug #{turn}")]
        for _ in range(6):
            step += 1
            call = f"call_{step:06d}"
            events += [
                StepStart(step_id=f"s{step}", turn_id=turn_id),
                AssistantMessage(
                    blocks=(
                        ReasoningBlock(
                            text=f"Step {step}: the failing test points at parse(). " * 6
                        ),
                        TextBlock(text=f"Running the tests for step {step}."),
                        ToolCallBlock(call_id=call, name="bash", arguments='{"cmd": "pytest -x"}'),
                    )
                ),
                ToolResult(call_id=call, content=f"==== {step} passed, 1 failed ====\n" * 8),
                StepEnd(step_id=f"s{step}"),
            ]
        events.append(TurnEnd(turn_id=turn_id, reason=EndReason.COMPLETED))
    return tuple(events)


def _cold(events: tuple[Event, ...], *, collect: bool) -> float:
    session = Session(events=events)  # a new session object: nothing memoised yet
    gc.collect()
    if not collect:
        gc.disable()
    try:
        started = time.process_time()
        result = project(session, Window.recent(5), Mask.REASONING_ONLY, **LIMITS)
        elapsed = time.process_time() - started
    finally:
        gc.enable()
    assert isinstance(result, Projection)
    return elapsed


def time_projection(events: tuple[Event, ...], repeats: int) -> dict[str, float]:
    """Median cold time (with and without the cyclic GC) and warm time of one projection."""
    _cold(events, collect=True)  # warm-up: imports, validator caches
    cold = [_cold(events, collect=True) for _ in range(repeats)]
    no_gc = [_cold(events, collect=False) for _ in range(repeats)]
    session = Session(events=events)
    project(session, Window.recent(5), Mask.REASONING_ONLY, **LIMITS)
    warm = []
    for _ in range(repeats):
        started = time.process_time()
        project(session, Window.recent(5), Mask.REASONING_ONLY, **LIMITS)
        warm.append(time.process_time() - started)
    n = len(events)
    return {
        "events": n,
        "cold_ms": statistics.median(cold) * 1e3,
        "cold_us_per_event": statistics.median(cold) * 1e6 / n,
        "no_gc_us_per_event": statistics.median(no_gc) * 1e6 / n,
        "warm_ms": statistics.median(warm) * 1e3,
    }


def real_sessions() -> list[tuple[str, Session]]:
    """The trajectory files and the chat cassettes, read as the review tests read them."""
    sys.path.insert(0, str(REPO))
    from tests.review._session_support import real_sessions as sessions

    return list(sessions())


def prefix_shares() -> list[dict[str, Any]]:
    rows = []
    for name, session in real_sessions():
        system = tuple(ChatMessage.system(s) for s in session.system)
        for spec in WINDOWS:
            for mask in (Mask.REASONING_ONLY, Mask.ACTION_ONLY):
                projection = project(session, Window.parse(spec), mask, **LIMITS)
                if not isinstance(projection, Projection):
                    rows.append(
                        {
                            "session": name,
                            "window": spec,
                            "mask": mask.value,
                            "skipped": projection.reason.value,
                        }
                    )
                    continue
                maximum = sum(
                    len(u) for u in request_units((*system, *projection.prefix), session.tools)
                )
                aligned = build_review_request(
                    session, projection, RequestMode.CACHE_ALIGNED, instruction="Review."
                )
                persona = build_review_request(
                    session, projection, RequestMode.REVIEWER_PERSONA, instruction="Review."
                )
                rows.append(
                    {
                        "session": name,
                        "window": spec,
                        "mask": mask.value,
                        "prefix_bytes": aligned.prefix_bytes,
                        "theoretical_max": maximum,
                        "total_bytes": aligned.total_bytes,
                        "share": aligned.prefix_share,
                        "persona_share": persona.prefix_share,
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    timings = [time_projection(synthetic(n), args.repeats) for n in SIZES]
    shares = prefix_shares()
    if args.json:
        print(
            json.dumps(
                {"python": platform.python_version(), "timings": timings, "shares": shares},
                indent=2,
            )
        )
        return
    print(f"Python {platform.python_version()}, median of {args.repeats}")
    print(f"{'events':>8} {'cold ms':>9} {'us/event':>9} {'no-GC us/event':>15} {'warm ms':>9}")
    for t in timings:
        cold, per_event, warm = t["cold_ms"], t["cold_us_per_event"], t["warm_ms"]
        no_gc = t["no_gc_us_per_event"]
        print(f"{t['events']:>8} {cold:>9.2f} {per_event:>9.2f} {no_gc:>15.2f} {warm:>9.3f}")
    print()
    print(f"{'session':<58} {'window':<13} {'mask':<15} {'share':>7} {'= max':>6} {'persona':>8}")
    for r in shares:
        if "skipped" in r:
            print(f"{r['session']:<58} {r['window']:<13} {r['mask']:<15} skipped: {r['skipped']}")
            continue
        equal = "yes" if r["prefix_bytes"] == r["theoretical_max"] else "NO"
        head = f"{r['session']:<58} {r['window']:<13} {r['mask']:<15}"
        print(f"{head} {r['share']:>7.3f} {equal:>6} {r['persona_share']:>8.3f}")


if __name__ == "__main__":
    main()
