"""Telemetry: what traces, metrics, the audit log and rate limits cost a W1 call, in medians from the same run.

W1 through the runtime (worker included), round-robin on one worker pool, three ways: no OpenTelemetry SDK
(the API's no-op; the Prometheus counters are always on), the SDK tracing every span into a batch
processor whose exporter drops them, and everything on (that tracing, the SDK's metrics read by a
periodic reader with an exporter that drops them, ``audit_log`` and ``rate_limit_per_minute``). The
MCP SDK's own ``tools/call`` span is not in these figures (no transport here); the round-trip rows
of the transport section include it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import NoOpTracerProvider

from attp_server.run.runtime import ExecuteRequest, Runtime, open_runtime
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry
from bench.report import Report
from bench.timing import Call, interleaved, median_ms, ratio
from bench.workloads import W1, toolpack

SECTION = "Telemetry (median ms per W1 call through the runtime; ratios to no SDK, same run)"

REPEATS, QUICK_REPEATS = 300, 3


class _DropSpans(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class _DropMetrics(MetricExporter):
    def __init__(self) -> None:
        super().__init__(preferred_temporality={}, preferred_aggregation={})

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


def _call(runtime: Runtime) -> Call:
    async def call() -> None:
        result = await runtime.execute(ExecuteRequest(code=W1))
        if result.status != "ok":
            raise RuntimeError(f"W1 failed in the telemetry bench: {result.error}")

    return call


async def telemetry(report: Report, quick: bool) -> None:
    with tempfile.TemporaryDirectory() as workspace:
        root = Path(workspace)
        plain = Settings(workspace=root, toolpacks=[], workers=2, timeout_s=60)
        audited = plain.model_copy(update={"audit_log": root / "audit.jsonl", "rate_limit_per_minute": 1_000_000_000})
        registry = ToolRegistry([toolpack], root, {})
        spans = TracerProvider()
        spans.add_span_processor(BatchSpanProcessor(_DropSpans()))
        reader = PeriodicExportingMetricReader(_DropMetrics(), export_interval_millis=1000)
        meters = MeterProvider(metric_readers=[reader])
        async with open_runtime(plain, registry=registry) as first:
            off = Runtime(
                plain, registry, first.pool, tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider()
            )
            traced = Runtime(plain, registry, first.pool, tracer_provider=spans, meter_provider=NoOpMeterProvider())
            everything = Runtime(audited, registry, first.pool, tracer_provider=spans, meter_provider=meters)
            calls = {"off": _call(off), "traced": _call(traced), "all": _call(everything)}
            samples = await interleaved(calls, QUICK_REPEATS if quick else REPEATS, warmup=0 if quick else 5)
        spans.shutdown()
        meters.shutdown()
    report.add(SECTION, "telemetry.w1_no_sdk_ms", median_ms(samples["off"]), "ms")
    report.add(SECTION, "telemetry.w1_tracing_ms", median_ms(samples["traced"]), "ms")
    report.add(SECTION, "telemetry.w1_everything_ms", median_ms(samples["all"]), "ms")
    report.add(SECTION, "telemetry.tracing_vs_none", ratio(samples["traced"], samples["off"]), "x")
    report.add(SECTION, "telemetry.everything_vs_none", ratio(samples["all"], samples["off"]), "x", "<= 1.05")
