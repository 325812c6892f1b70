"""OpenTelemetry: the one place foureyes uses the tracing API.

foureyes depends on ``opentelemetry-api`` only. Until the application sets a tracer
provider, no span is started at all (the API's deferred provider would hand out no-op
spans, at about 30 us of CPU per reply: benchmarks/README.md, "Spans when nothing
traces"); once one is set, from then on, the application's exporter receives:

- one ``CLIENT`` span per model call (:func:`model_call_span`, used by
  :class:`~foureyes.llm.calls.ModelCaller`), named ``chat {model}``, with the GenAI
  semantic-convention attributes ``gen_ai.operation.name``, ``gen_ai.provider.name`` (and
  the older ``gen_ai.system``), ``gen_ai.request.model``, ``gen_ai.request.max_tokens``,
  ``gen_ai.request.temperature``, ``gen_ai.response.model``,
  ``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens``, ``error.type`` on failure, and ``foureyes.role``,
  ``foureyes.route``, ``foureyes.stage``;
- one ``gen_ai.evaluation.result`` event per verdict (:func:`record_verdict`), on the
  span current when the verdict was judged (the support pipeline's
  :func:`operation_span`);
- one ``INTERNAL`` span per support message (:func:`operation_span`).

Content (prompts and replies) is not captured unless the standard variable
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``true``; then the
``gen_ai.input.messages`` and ``gen_ai.output.messages`` attributes carry them as JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from foureyes import __version__
from foureyes.config import RouteConfig
from foureyes.core.roles import Role
from foureyes.llm.provider import ChatRequest, ChatResult

__all__ = [
    "CONTENT_CAPTURE_ENV",
    "CallSpan",
    "EVALUATION_EVENT",
    "OperationSpan",
    "SUPERVISOR_EVALUATION",
    "capture_content",
    "model_call_span",
    "operation_span",
    "record_evaluation",
    "record_verdict",
]

CONTENT_CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""Set to ``true`` to put prompts and replies on model-call spans (off by default)."""
EVALUATION_EVENT = "gen_ai.evaluation.result"
"""The name of the event each verdict becomes."""
SUPERVISOR_EVALUATION = "foureyes.supervisor"
"""``gen_ai.evaluation.name`` of a Supervisor verdict."""

_tracer = trace.get_tracer("foureyes", __version__)


def _tracing() -> bool:
    """Whether the application has set a tracer provider; asked at every span.

    Without one, the global provider is the API's deferred proxy, whose spans are no-ops.
    Asked each time rather than once, so a provider set after foureyes was imported is
    used from then on.
    """
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def capture_content() -> bool:
    """Whether spans may carry message content (read from the environment on each call)."""
    return os.environ.get(CONTENT_CAPTURE_ENV, "").strip().lower() == "true"


def _provider_name(route: RouteConfig) -> str:
    # Any OpenAI-compatible endpoint speaks the openai protocol; other kinds are ours.
    return "openai" if route.kind == "openai" else f"foureyes.{route.kind}"


class CallSpan:
    """The span of one model call, told how the call ended."""

    def __init__(self, span: Span) -> None:
        self._span = span

    def succeeded(self, result: ChatResult) -> None:
        """Record the response's model, finish reason and token usage."""
        span = self._span
        if not span.is_recording():
            return
        span.set_attribute("gen_ai.response.model", result.model)
        span.set_attribute("gen_ai.response.finish_reasons", [result.finish_reason or "unknown"])
        span.set_attribute("gen_ai.usage.input_tokens", result.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", result.usage.completion_tokens)
        span.set_attribute("foureyes.offline", result.offline)
        if capture_content():
            output = [{"role": "assistant", "parts": [{"type": "text", "content": result.text}]}]
            span.set_attribute("gen_ai.output.messages", json.dumps(output, ensure_ascii=False))

    def failed(self, outcome: str) -> None:
        """Mark the call failed with ``outcome`` (the error's class name, or ``cancelled``)."""
        self._span.set_attribute("error.type", outcome)
        self._span.set_status(Status(StatusCode.ERROR, outcome))


@contextlib.contextmanager
def model_call_span(
    *, role: Role, route_name: str, route: RouteConfig, stage: str, request: ChatRequest
) -> Iterator[CallSpan]:
    """A ``CLIENT`` span around one model call (see the module docstring)."""
    if not _tracing():
        yield CallSpan(trace.INVALID_SPAN)
        return
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": _provider_name(route),
        "gen_ai.system": _provider_name(route),
        "gen_ai.request.model": route.model,
        "gen_ai.request.max_tokens": request.max_tokens or route.max_tokens,
        "gen_ai.request.temperature": (
            route.temperature if request.temperature is None else request.temperature
        ),
        "foureyes.role": role.value,
        "foureyes.route": route_name,
        "foureyes.stage": stage,
    }
    if capture_content():
        messages = [
            {"role": m.role, "parts": [{"type": "text", "content": m.text}]}
            for m in request.messages
        ]
        attributes["gen_ai.input.messages"] = json.dumps(messages, ensure_ascii=False)
    with _tracer.start_as_current_span(
        f"chat {route.model}",
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield CallSpan(span)


class OperationSpan:
    """The span of one operation, to which its outcome is added."""

    def __init__(self, span: Span) -> None:
        self._span = span

    def annotate(self, **attributes: str | bool | int | float) -> None:
        """Add ``foureyes.<name>`` attributes (identifiers and codes, never text)."""
        if self._span.is_recording():
            self._span.set_attributes({f"foureyes.{k}": v for k, v in attributes.items()})


@contextlib.contextmanager
def operation_span(name: str, **attributes: str | bool | int | float) -> Iterator[OperationSpan]:
    """An ``INTERNAL`` span around one operation (a support message), made current.

    Exceptions are recorded by type only: their messages may quote user text.
    """
    if not _tracing():
        yield OperationSpan(trace.INVALID_SPAN)
        return
    with _tracer.start_as_current_span(
        name,
        kind=SpanKind.INTERNAL,
        attributes={f"foureyes.{k}": v for k, v in attributes.items()},
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield OperationSpan(span)
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise


def record_evaluation(name: str, label: str | None, **attributes: str | bool | int | float) -> None:
    """Add one ``gen_ai.evaluation.result`` event to the current span.

    Args:
        name: ``gen_ai.evaluation.name`` (what judged).
        label: ``gen_ai.evaluation.score.label`` (its decision); ``None`` when it failed.
        **attributes: further attributes, named in full (``error.type``, ``foureyes.*``).
    """
    span = trace.get_current_span()
    if span.is_recording():
        _add_evaluation(span, name, label, attributes)


def _add_evaluation(
    span: Span, name: str, label: str | None, attributes: dict[str, str | bool | int | float]
) -> None:
    event: dict[str, str | bool | int | float] = {"gen_ai.evaluation.name": name}
    if label is not None:
        event["gen_ai.evaluation.score.label"] = label
    event.update(attributes)
    span.add_event(EVALUATION_EVENT, event)


def record_verdict(
    *,
    candidate_sha256: str,
    label: str | None,
    failure: str | None,
    verdict_sha256: str | None = None,
    route: str | None = None,
) -> None:
    """Record a Supervisor verdict (or its failure) as a ``gen_ai.evaluation.result`` event.

    Args:
        candidate_sha256: the digest of the candidate judged.
        label: the verdict's decision (``approve``, ``reject``, ``insufficient``).
        failure: the reason code when the review failed or the verdict is unusable.
        verdict_sha256: the verdict's digest.
        route: the route that served it.
    """
    span = trace.get_current_span()
    if not span.is_recording():  # nothing traces: the attributes are not even built
        return
    attributes: dict[str, str | bool | int | float] = {
        "foureyes.candidate_sha256": candidate_sha256
    }
    if failure is not None:
        attributes["error.type"] = failure
    if verdict_sha256 is not None:
        attributes["foureyes.verdict_sha256"] = verdict_sha256
    if route is not None:
        attributes["foureyes.route"] = route
    _add_evaluation(span, SUPERVISOR_EVALUATION, label, attributes)
