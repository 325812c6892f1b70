"""An OpenTelemetry SDK for the test session, exporting finished spans to memory.

``opentelemetry-sdk`` is a dev dependency only: foureyes itself uses the API. The global
tracer provider can be set once per process, so the first use installs it and every
later test shares it; :func:`fresh_exporter` clears the exporter for the test at hand.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["fresh_exporter"]

_exporter: InMemorySpanExporter | None = None


def _installed() -> InMemorySpanExporter:
    global _exporter
    if _exporter is None:
        _exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
        trace.set_tracer_provider(provider)
    return _exporter


def fresh_exporter() -> InMemorySpanExporter:
    """The session's in-memory exporter (installed on first use), emptied."""
    exporter = _installed()
    exporter.clear()
    return exporter
