"""OpenTelemetry spans of model calls: GenAI attributes, failures, content capture off."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from foureyes.config import Config, RolesConfig, RouteConfig
from foureyes.core.budget import CallBudget
from foureyes.core.deadline import Deadline
from foureyes.core.errors import RouteHTTPError
from foureyes.core.roles import Role
from foureyes.llm import telemetry
from foureyes.llm.calls import CallScope, ModelCaller
from foureyes.llm.provider import ChatMessage, ChatRequest, Usage
from foureyes.llm.routes import Routes
from tests.helpers.otel import fresh_exporter
from tests.helpers.scripted import ScriptedProvider

SECRET = "my neighbour's name is Alice"
REQUEST = ChatRequest(messages=(ChatMessage.user(SECRET),), temperature=0.2)


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return fresh_exporter()


def caller(provider: ScriptedProvider) -> ModelCaller:
    config = Config(
        routes={"scripted": RouteConfig(kind="scripted", model="glm-4.7-flash", max_tokens=300)},
        roles=RolesConfig(counselor="scripted"),
    )
    return ModelCaller(Routes(config, {"scripted": provider}))


def scope() -> CallScope:
    return CallScope(Deadline.after(5), CallBudget(3))


async def test_a_model_call_is_one_client_span_with_genai_attributes(
    spans: InMemorySpanExporter,
) -> None:
    provider = ScriptedProvider(usage=Usage(prompt_tokens=120, completion_tokens=30))
    provider.enqueue(Role.COUNSELOR, "I hear you.")

    await caller(provider).call(Role.COUNSELOR, REQUEST, scope(), stage="draft")

    [span] = spans.get_finished_spans()
    assert span.name == "chat glm-4.7-flash" and span.kind is SpanKind.CLIENT
    attributes = dict(span.attributes or {})
    assert attributes | {"gen_ai.response.finish_reasons": None} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "foureyes.scripted",
        "gen_ai.system": "foureyes.scripted",
        "gen_ai.request.model": "glm-4.7-flash",
        "gen_ai.request.max_tokens": 300,
        "gen_ai.request.temperature": 0.2,
        "gen_ai.response.model": "scripted",
        "gen_ai.response.finish_reasons": None,
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "foureyes.role": "counselor",
        "foureyes.route": "scripted",
        "foureyes.stage": "draft",
        "foureyes.offline": False,
    }
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert SECRET not in str(span.to_json())  # content capture is off by default


async def test_a_failed_call_marks_its_span_with_the_error_type(
    spans: InMemorySpanExporter,
) -> None:
    provider = ScriptedProvider().enqueue(Role.COUNSELOR, RouteHTTPError("scripted", 502))

    with pytest.raises(RouteHTTPError):
        await caller(provider).call(Role.COUNSELOR, REQUEST, scope(), stage="draft")

    [span] = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "RouteHTTPError"
    assert span.events == ()  # the exception's message may quote input: not recorded


async def test_content_is_captured_only_when_the_standard_variable_says_so(
    spans: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(telemetry.CONTENT_CAPTURE_ENV, "true")
    provider = ScriptedProvider().enqueue(Role.COUNSELOR, "I hear you.")

    await caller(provider).call(Role.COUNSELOR, REQUEST, scope(), stage="draft")

    attributes = dict(spans.get_finished_spans()[0].attributes or {})
    sent = json.loads(str(attributes["gen_ai.input.messages"]))
    assert sent == [{"role": "user", "parts": [{"type": "text", "content": SECRET}]}]
    answered = json.loads(str(attributes["gen_ai.output.messages"]))
    assert answered[0]["parts"][0]["content"] == "I hear you."


def test_an_evaluation_outside_any_span_is_dropped_quietly() -> None:
    telemetry.record_verdict(candidate_sha256="a" * 64, label="approve", failure=None)


_UNTRACED_THEN_TRACED = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from foureyes.config import RouteConfig
from foureyes.core.roles import Role
from foureyes.llm import telemetry
from foureyes.llm.provider import ChatMessage, ChatRequest, ChatResult

class MustNotBeAsked:
    def start_as_current_span(self, *args, **kwargs):
        raise AssertionError("a span was started with no tracer provider set")

route = RouteConfig(kind="scripted", model="m")
request = ChatRequest(messages=(ChatMessage.user("hi"),))

def one_message():
    with telemetry.operation_span("foureyes.support_message", trace_id="t") as operation:
        with telemetry.model_call_span(
            role=Role.COUNSELOR, route_name="r", route=route, stage="draft", request=request
        ) as call:
            call.succeeded(ChatResult(text="ok", model="m", latency_s=0.0, route="r"))
        telemetry.record_verdict(candidate_sha256="c", label="approve", failure=None)
        operation.annotate(decision="release")

proxy, telemetry._tracer = telemetry._tracer, MustNotBeAsked()
one_message()  # nothing traces: no span is asked for
telemetry._tracer = proxy
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
one_message()  # set after import: used from now on
call, operation = exporter.get_finished_spans()
assert (call.name, operation.name) == ("chat m", "foureyes.support_message")
assert call.parent.span_id == operation.context.span_id
assert [event.name for event in operation.events] == ["gen_ai.evaluation.result"]
assert operation.attributes["foureyes.decision"] == "release"
"""


def test_no_span_is_started_until_a_tracer_provider_is_set_and_then_every_one_is() -> None:
    # The session's tests share one SDK provider (set once per process), so the time
    # before any provider is set is seen in a process of its own.
    subprocess.run([sys.executable, "-c", _UNTRACED_THEN_TRACED], check=True, timeout=60)
