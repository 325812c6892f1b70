"""The pipeline's spans: one per message, role calls under it, verdicts as evaluation events."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from foureyes.core.errors import RouteTimeout
from foureyes.core.roles import Role
from foureyes.llm.telemetry import EVALUATION_EVENT, SUPERVISOR_EVALUATION
from foureyes.pipeline import SupportMessage
from tests.helpers.otel import fresh_exporter
from tests.helpers.scripted import ScriptedProvider, approve
from tests.pipeline.conftest import MakePipeline

DRAFT = "Thank you for telling me. What feels hardest right now?"
CALM = "I had a rough day at work and I can't sleep."


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return fresh_exporter()


async def test_role_calls_are_spans_under_the_message_and_the_verdict_an_event(
    make_pipeline: MakePipeline, scripted: ScriptedProvider, spans: InMemorySpanExporter
) -> None:
    scripted.enqueue(Role.COUNSELOR, DRAFT).enqueue(Role.SUPERVISOR, approve())

    outcome = await make_pipeline().handle(SupportMessage(text=CALM))

    finished = spans.get_finished_spans()
    [message] = [s for s in finished if s.name == "foureyes.support_message"]
    calls = [s for s in finished if s.name.startswith("chat ")]
    attributes = dict(message.attributes or {})
    assert attributes["foureyes.trace_id"] == outcome.trace_id
    assert (attributes["foureyes.decision"], attributes["foureyes.reason"]) == (
        "released",
        "approved",
    )
    assert attributes["foureyes.risk_tier"] == "L0"
    assert [dict(s.attributes or {})["foureyes.role"] for s in calls] == [
        "counselor",
        "supervisor",
    ]
    assert message.context is not None
    assert all(s.parent is not None and s.parent.span_id == message.context.span_id for s in calls)
    [evaluation] = [e for e in message.events if e.name == EVALUATION_EVENT]
    assert dict(evaluation.attributes or {}) == {
        "gen_ai.evaluation.name": SUPERVISOR_EVALUATION,
        "gen_ai.evaluation.score.label": "approve",
        "foureyes.candidate_sha256": outcome.candidate_sha256,
        "foureyes.verdict_sha256": outcome.gate.attempts[0].review.verdict_sha256
        if outcome.gate.attempts[0].review
        else None,
        "foureyes.route": "scripted",
    }


async def test_a_review_that_failed_is_an_evaluation_event_with_its_reason(
    make_pipeline: MakePipeline, scripted: ScriptedProvider, spans: InMemorySpanExporter
) -> None:
    scripted.enqueue(Role.COUNSELOR, DRAFT).enqueue(Role.SUPERVISOR, RouteTimeout("scripted", 5))

    await make_pipeline(max_revisions=0).handle(SupportMessage(text=CALM))

    [message] = [s for s in spans.get_finished_spans() if s.name == "foureyes.support_message"]
    [evaluation] = [e for e in message.events if e.name == EVALUATION_EVENT]
    attributes = dict(evaluation.attributes or {})
    assert attributes["error.type"] == "review_timeout"
    assert "gen_ai.evaluation.score.label" not in attributes
