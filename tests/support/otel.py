"""The OpenTelemetry SDK for the tracing tests: one global provider for the test process (OpenTelemetry sets
it once), exporting only inside `recording()`, so the rest of the suite does not pile spans up in memory.

Once installed, the tests after it run with an SDK: spans are made and dropped, and MCP clients put a
``traceparent`` in the ``_meta`` of their requests (which every MCP server accepts; SEP-414)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import context, trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class _WhileRecording(SpanProcessor):
    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.inner = SimpleSpanProcessor(exporter)
        self.on = False

    def on_start(self, span: Span, parent_context: context.Context | None = None) -> None:
        if self.on:
            self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            self.inner.on_end(span)


_EXPORTER = InMemorySpanExporter()
_PROCESSOR = _WhileRecording(_EXPORTER)


def _install() -> None:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    if _PROCESSOR not in provider._active_span_processor._span_processors:
        provider.add_span_processor(_PROCESSOR)


@contextmanager
def recording() -> Iterator[InMemorySpanExporter]:
    """Spans ended inside the block, in `exporter.get_finished_spans()`."""
    _install()
    _EXPORTER.clear()
    _PROCESSOR.on = True
    try:
        yield _EXPORTER
    finally:
        _PROCESSOR.on = False
