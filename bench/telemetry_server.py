"""``python -m bench.telemetry_server {traces|everything} serve ...``: `attp` with the OpenTelemetry SDK set up
first, as `opentelemetry-instrument` would, but exporting nowhere (the telemetry bench's servers).

``traces``: an SDK tracer provider whose batch processor hands every span to an exporter that drops it.
``everything``: that, an SDK meter provider read every second by an exporter that drops the figures, an
audit log in the working directory and a rate limit no call reaches.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from attp_server.faces.cli import main as attp


class DropSpans(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class DropMetrics(MetricExporter):
    def __init__(self) -> None:
        super().__init__(preferred_temporality={}, preferred_aggregation={})

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


def tracer_provider() -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DropSpans()))
    return provider


def meter_provider() -> MeterProvider:
    return MeterProvider(metric_readers=[PeriodicExportingMetricReader(DropMetrics(), export_interval_millis=1000)])


def main(argv: list[str]) -> int:
    mode, *args = argv
    trace.set_tracer_provider(tracer_provider())
    if mode == "everything":
        metrics.set_meter_provider(meter_provider())
        os.environ["ATTP_AUDIT_LOG"] = os.path.abspath("telemetry-audit.jsonl")
        os.environ["ATTP_RATE_LIMIT_PER_MINUTE"] = "1000000000"
    elif mode != "traces":
        raise SystemExit(f"unknown mode {mode!r}: traces or everything")
    gc.freeze()  # as `attp` itself does before it runs a command (`faces.cli.cli`): the same start as the "off" server
    return attp(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
