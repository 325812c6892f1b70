"""Segment release through the served gateway, the official ``openai`` SDK as client.

``foureyes simulate`` is Counselor and Supervisor; the raw event-stream bytes are read too.

``[gate] release = "segments"``: the Counselor's draft streams in, each closed segment is
reviewed as the text released so far plus it, and goes on the wire only once approved and
recorded; a reject, timeout or cut-off ends the stream with the fallback continuation.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import openai

from foureyes.config import GateConfig
from foureyes.core.digest import sha256_hex
from foureyes.core.locale import Locale
from foureyes.core.reasons import ReasonCode
from foureyes.gate import fallback_text
from foureyes.gate.segments import cut_segments
from tests.helpers.answers import LOW
from tests.helpers.server import RunningServer
from tests.helpers.simulator import RunningSimulator

Start = Callable[..., RunningServer]
CALM = "I had a rough day at work and I can't sleep."
DRAFT = (
    "Thank you for telling me about today. "
    "That sounds heavy to carry alone. "
    "What feels hardest right now?"
)
SEGMENTS = cut_segments(DRAFT, max_chars=400)
APPROVE = json.dumps({"candidate_sha256": "{{candidate_sha256}}", "decision": "approve"})
REJECT = json.dumps(
    {
        "candidate_sha256": "{{candidate_sha256}}",
        "decision": "reject",
        "violations": [{"rule": "dismissive", "span": [0, 5], "note": "cold"}],
    }
)


def serve(
    simulator: RunningSimulator,
    start_server: Start,
    tmp_path: Path,
    counselor: list[dict[str, Any]],
    supervisor: list[dict[str, Any]],
    **gate: Any,
) -> RunningServer:
    # L1 reads every message (l1_policy "every") and finds the calm one low.
    models = {
        "counselor-sim": counselor,
        "supervisor-sim": supervisor,
        "l1-sim": [{"content": LOW}],
    }
    simulator.load({"models": models})
    config = simulator.config(
        f"sqlite+aiosqlite:///{tmp_path / 'g.db'}",
        supervisor_timeout_s=3,  # the approvals before a hang must not time out
        gate=GateConfig(**({"release": "segments", "verdict_retries": 0} | gate)),
    )
    return start_server(config)


def stream(server: RunningServer) -> list[Any]:
    client = openai.OpenAI(base_url=server.base_url, api_key="unused-locally", max_retries=0)
    return list(
        client.chat.completions.create(
            model="foureyes-support",
            messages=[{"role": "user", "content": CALM}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )


def content_of(chunks: list[Any]) -> list[str]:
    return [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]


def raw_stream(server: RunningServer) -> bytes:
    body = {
        "model": "foureyes-support",
        "messages": [{"role": "user", "content": CALM}],
        "stream": True,
    }
    with httpx2.stream(
        "POST", f"{server.base_url}/chat/completions", json=body, timeout=30
    ) as response:
        assert response.status_code == 200
        return b"".join(response.iter_raw())


def trace_of(server: RunningServer, trace_id: str) -> dict[str, Any]:
    response = httpx2.get(f"{server.base_url}/traces/{trace_id}", timeout=10)
    assert response.status_code == 200, response.text
    return dict(response.json())


def decision_of(trace: dict[str, Any]) -> dict[str, Any]:
    [decision] = [e["data"] for e in trace["events"] if e["kind"] == "decision"]
    return dict(decision)


def test_an_approved_reply_arrives_segment_by_segment_and_equals_the_draft(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    server = serve(simulator, start_server, tmp_path, [{"content": DRAFT}], [{"content": APPROVE}])

    chunks = stream(server)

    assert content_of(chunks) == SEGMENTS and "".join(SEGMENTS) == DRAFT
    final = chunks[-1].model_extra["foureyes"]
    assert (final["decision"], final["reason"]) == ("released", "approved")
    assert final["delivered_sha256"] == sha256_hex(DRAFT)
    trace = trace_of(server, final["trace_id"])
    released = decision_of(trace)["segments"]["released"]
    assert [s["sha256"] for s in released] == [
        sha256_hex("".join(SEGMENTS[: i + 1])) for i in range(3)
    ]
    reviews = [r for r in simulator.requests() if r["model"] == "supervisor-sim"]
    assert len(reviews) == 3  # Supervisor calls per reply: one per segment


def test_a_rejected_second_segment_never_reaches_the_wire(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    supervisor = [{"times": 1, "content": APPROVE}, {"content": REJECT}]
    server = serve(simulator, start_server, tmp_path, [{"content": DRAFT}], supervisor)

    chunks = stream(server)

    continuation = "\n\n" + fallback_text(ReasonCode.REJECTED, Locale.EN)
    text = "".join(content_of(chunks))
    assert text == SEGMENTS[0] + continuation
    final = chunks[-1].model_extra["foureyes"]
    assert (final["decision"], final["reason"]) == ("fallback", "rejected")
    assert final["delivered_sha256"] == sha256_hex(text)
    decision = decision_of(trace_of(server, final["trace_id"]))
    assert decision["segments"]["stopped"] == "rejected"
    assert [s["segment"] for s in decision["segments"]["released"]] == [0]

    # The raw bytes of a second run: not one byte of segment 2 (or 3) on the wire.
    simulator.load(
        {
            "models": {
                "counselor-sim": [{"content": DRAFT}],
                "supervisor-sim": supervisor,
                "l1-sim": [{"content": LOW}],
            }
        }
    )
    raw = raw_stream(server)
    assert SEGMENTS[0].encode() in raw
    # Words of segments 2 and 3 found nowhere else in the stream (nor in the fallback).
    for words in (b"heavy", b"carry alone", b"hardest"):
        assert words not in raw


def test_a_review_timing_out_mid_way_ends_the_stream_with_the_fallback(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    supervisor = [{"times": 2, "content": APPROVE}, {"fault": "hang"}]
    server = serve(simulator, start_server, tmp_path, [{"content": DRAFT}], supervisor)

    chunks = stream(server)

    text = "".join(content_of(chunks))
    assert text == "".join(SEGMENTS[:2]) + "\n\n" + fallback_text(
        ReasonCode.REVIEW_TIMEOUT, Locale.EN
    )
    assert chunks[-1].model_extra["foureyes"]["reason"] == "review_timeout"


def test_a_cut_off_draft_ends_with_the_fallback_and_nothing_after_the_cut(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    counselor = [{"content": DRAFT, "fault": "truncated"}]
    server = serve(simulator, start_server, tmp_path, counselor, [{"content": APPROVE}])

    chunks = stream(server)

    text = "".join(content_of(chunks))
    assert chunks[-1].model_extra["foureyes"]["reason"] == "draft_failed"
    assert text.endswith(fallback_text(ReasonCode.DRAFT_FAILED, Locale.EN))
    assert SEGMENTS[1] not in text and SEGMENTS[2] not in text


def test_whole_release_stays_the_default(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    server = serve(
        simulator,
        start_server,
        tmp_path,
        [{"content": DRAFT}],
        [{"content": APPROVE}],
        release="whole",
    )

    chunks = stream(server)

    assert "".join(content_of(chunks)) == DRAFT
    reviews = [r for r in simulator.requests() if r["model"] == "supervisor-sim"]
    assert len(reviews) == 1
    # Every chunk of a whole release carries the decision.
    assert all(c.model_extra["foureyes"].get("decision") == "released" for c in chunks)


def test_a_client_leaving_after_the_first_segment_leaves_a_finished_record(
    simulator: RunningSimulator, start_server: Start, tmp_path: Path
) -> None:
    # Later reviews are slower, so the client is gone before the run ends.
    supervisor = [
        {"times": 1, "content": APPROVE},
        {"fault": "delay", "delay_s": 0.2, "content": APPROVE},
    ]
    server = serve(simulator, start_server, tmp_path, [{"content": DRAFT}], supervisor)
    body = json.dumps(
        {
            "model": "foureyes-support",
            "messages": [{"role": "user", "content": CALM}],
            "stream": True,
        }
    ).encode()

    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        received = b""
        while SEGMENTS[0].encode() not in received:
            piece = sock.recv(4096)
            assert piece, "the stream ended before its first segment"
            received += piece
    trace_id = next(
        line.split(b":", 1)[1].strip().decode()
        for line in received.split(b"\r\n")
        if line.lower().startswith(b"x-foureyes-trace-id")
    )

    # The run goes on without the client and is recorded whole (polled, at most 100 reads).
    for _ in range(100):
        trace = trace_of(server, trace_id)
        if trace["run"]["finished_at"] is not None:
            break
        time.sleep(0.1)
    assert trace["run"]["finished_at"] is not None
    released = decision_of(trace)["segments"]["released"]
    assert released[0]["sha256"] == sha256_hex(SEGMENTS[0])
