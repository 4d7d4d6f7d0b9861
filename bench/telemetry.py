"""Telemetry: what traces, metrics, the audit log and rate limits cost a W1 call, in medians from the same run.

W1 over Streamable HTTP, round-robin against three `attp serve` processes: one with no OpenTelemetry SDK
(the API's no-op; the Prometheus counters are always on), one with the SDK tracing every span (the MCP
SDK's ``tools/call`` span and the run's) into a batch processor whose exporter drops them, and one with
everything on (that tracing, SDK metrics read every second and dropped, ``audit_log`` and
``rate_limit_per_minute``); see ``bench/telemetry_server.py``. Then the same three ways in process,
through `Runtime.execute` on one worker pool (no transport, no MCP SDK span): the server's own share.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from mcp import Client
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.trace import NoOpTracerProvider

from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry
from bench.report import Report
from bench.telemetry_server import meter_provider, tracer_provider
from bench.timing import Call, interleaved, median_ms, ratio
from bench.transport import attp_args, attp_call, clients, free_port, http_server
from bench.workloads import W1, toolpack

SECTION = "Telemetry (median ms per W1 call; ratios to no OpenTelemetry SDK, same run)"

REPEATS, QUICK_REPEATS = 300, 3
MODES = ("off", "traces", "everything")
SETTLE_S = 0.005
"""An untimed pause after each HTTP call: a server makes a run's spans once its reply is sent
(`faces.http.SpansAfterReply`), and that work must not be timed in the next call, to another of the three servers
on the same cores."""


def _server_args(mode: str, workspace: Path, port: int) -> list[str]:
    args = attp_args(workspace, "--transport", "http", "--port", str(port))
    return args if mode == "off" else ["-m", "bench.telemetry_server", mode, *args[2:]]


def _call(runtime: Runtime) -> Call:
    async def call() -> None:
        result = await runtime.execute(ExecuteRequest(code=W1))
        runtime.deferred.record_now()  # the run's spans, made after the reply: counted here, in the server's share
        if result.status != "ok":
            raise RuntimeError(f"W1 failed in the telemetry bench: {result.error}")

    return call


def _bound(client: Client) -> Call:
    async def call() -> None:
        await attp_call(client)

    return call


async def _over_http(scratch: Path, repeats: int, warmup: int) -> dict[str, list[float]]:
    workspace = scratch / "ws"
    workspace.mkdir()
    ports = {mode: free_port() for mode in MODES}
    with (
        http_server(_server_args("off", workspace, ports["off"]), scratch, ports["off"]),
        http_server(_server_args("traces", workspace, ports["traces"]), scratch, ports["traces"]),
        http_server(_server_args("everything", workspace, ports["everything"]), scratch, ports["everything"]),
    ):
        urls = [f"http://127.0.0.1:{ports[mode]}/mcp" for mode in MODES]
        async with clients(urls) as opened:
            calls = {mode: _bound(client) for mode, client in zip(MODES, opened, strict=True)}
            return await interleaved(calls, repeats, warmup=warmup, settle_s=SETTLE_S)


async def _in_process(scratch: Path, repeats: int, warmup: int) -> dict[str, list[float]]:
    plain = Settings(workspace=scratch / "ws", toolpacks=[], workers=2, timeout_s=60)
    audited = plain.model_copy(update={"audit_log": scratch / "audit.jsonl", "rate_limit_per_minute": 10**9})
    registry = ToolRegistry([toolpack], scratch / "ws", {})
    spans, meters = tracer_provider(), meter_provider()
    async with open_runtime(plain, registry=registry) as first:
        none = {"tracer_provider": NoOpTracerProvider(), "meter_provider": NoOpMeterProvider()}
        calls = {
            "off": _call(Runtime(plain, registry, first.pool, **none)),  # type: ignore[arg-type]
            "traces": _call(
                Runtime(plain, registry, first.pool, tracer_provider=spans, meter_provider=NoOpMeterProvider())
            ),
            "everything": _call(Runtime(audited, registry, first.pool, tracer_provider=spans, meter_provider=meters)),
        }
        samples = await interleaved(calls, repeats, warmup=warmup)
    spans.shutdown()
    meters.shutdown()
    return samples


async def telemetry(report: Report, quick: bool) -> None:
    repeats, warmup = (QUICK_REPEATS, 0) if quick else (REPEATS, 5)
    with tempfile.TemporaryDirectory() as scratch:
        http = await _over_http(Path(scratch), repeats, warmup)
    with tempfile.TemporaryDirectory() as scratch:
        local = await _in_process(Path(scratch), repeats, warmup)
    for where, samples in (("http", http), ("runtime", local)):
        report.add(SECTION, f"telemetry.{where}_w1_no_sdk_ms", median_ms(samples["off"]), "ms")
        report.add(SECTION, f"telemetry.{where}_w1_traces_ms", median_ms(samples["traces"]), "ms")
        report.add(SECTION, f"telemetry.{where}_w1_everything_ms", median_ms(samples["everything"]), "ms")
        report.add(SECTION, f"telemetry.{where}_traces_vs_none", ratio(samples["traces"], samples["off"]), "x")
        target = "<= 1.05" if where == "http" else None
        report.add(
            SECTION, f"telemetry.{where}_everything_vs_none", ratio(samples["everything"], samples["off"]), "x", target
        )
