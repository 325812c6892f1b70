"""trace_view: a recorded run read back with its per-stage summary."""

from __future__ import annotations

from foureyes.core.roles import Role
from foureyes.pipeline import DELIVERY_SCHEMA, SupportMessage, trace_view
from foureyes.store import Store
from tests.helpers.scripted import ScriptedProvider, approve
from tests.pipeline._support import assessment
from tests.pipeline.conftest import MakePipeline

DRAFT = "Thank you for telling me. What feels hardest right now?"


async def test_the_view_lifts_triage_gate_and_delivery_out_of_the_events(
    make_pipeline: MakePipeline, scripted: ScriptedProvider, store: Store
) -> None:
    scripted.enqueue(Role.RISK_L1, assessment("high", 0.9))
    scripted.enqueue(Role.RISK_L2, assessment("medium", 0.9))
    scripted.enqueue(Role.COUNSELOR, DRAFT).enqueue(Role.SUPERVISOR, approve())
    outcome = await make_pipeline().handle(
        SupportMessage(text="I want to die tonight", conversation_id="c1")
    )
    record = await store.traces.get(outcome.trace_id)
    assert record is not None

    view = trace_view(record)

    assert view["run"]["trace_id"] == outcome.trace_id
    assert view["run"]["outcome"] == "released" and view["run"]["input_text"] is None
    assert len(view["events"]) == len(record.events)
    triage = view["summary"]["triage"]
    assert (triage["tier"], triage["level"], triage["confirmed"]) == ("L2", "high", False)
    assert triage["l0"]["categories"] == ["suicidal_ideation"]
    assert all("term" not in m for m in triage["l0"]["matches"])  # never the user's words
    assert triage["l1"]["level"] == "high" and "evidence" not in triage["l1"]
    gate = view["summary"]["gate"]
    assert gate["candidate_sha256"] == outcome.candidate_sha256
    assert gate["attempts"][0]["review"]["verdict"]["decision"] == "approve"
    delivery = view["summary"]["delivery"]
    assert delivery["schema"] == DELIVERY_SCHEMA
    assert [c["stage"] for c in delivery["calls"]] == ["l1", "l2", "draft", "review"]
    assert all(c["start_ms"] >= 0 and c["duration_ms"] >= 0 for c in delivery["calls"])
    assert DRAFT not in str(view)  # texts are digests in the record


async def test_a_run_without_pipeline_events_has_empty_blocks(store: Store) -> None:
    trace_id = await store.traces.start_run("review")
    record = await store.traces.get(trace_id)
    assert record is not None

    assert trace_view(record)["summary"] == {"triage": None, "gate": None, "delivery": None}
