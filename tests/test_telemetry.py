"""Traces (issue 25, SPEC §15): a run's phases and tool calls as spans under the MCP SDK's server span, the
trace context passed on to upstream servers, and the ecosystem's way in (`opentelemetry-instrument`).

The in-process tests use the OpenTelemetry SDK's in-memory exporter (tests/support/otel.py); the last
one runs a real `attp serve --transport http` under `opentelemetry-instrument` with the console exporter.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import execute, free_port, make_settings, running, server_env, wait_for_health
from mcp import Client
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind, StatusCode
from otel import recording
from upstreams import everything_stdio, tapped

from attp_server.faces.app import create_server
from attp_server.faces.http import SpansAfterReply
from attp_server.ops.after_reply import AFTER_SENT_S
from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime
from attp_server.run.state import RunState

pytestmark = pytest.mark.anyio

THREE_CALLS = """
write_file("notes.txt", "planted-value-4d1e")
try:
    add("planted-text-9c2b", 2)
except Exception:
    pass
__result__ = read_file("notes.txt")
"""
"""Three tool calls, the second failing (INVALID_ARGUMENT); values that must never reach a span."""


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    found = [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]
    return sorted(found, key=lambda s: s.start_time or 0)


def named(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    matching = [s for s in spans if s.name == name]
    assert len(matching) == 1, [s.name for s in spans]
    return matching[0]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_run_is_a_tree_of_its_phases_and_tool_calls(workspace: Path, mode: str) -> None:
    with recording() as exporter:
        async with running(workspace) as runtime, Client(create_server(runtime), mode=mode) as client:  # type: ignore[arg-type]
            data = await execute(client, THREE_CALLS)
        spans = list(exporter.get_finished_spans())
    assert data["status"] == "ok", data
    server = named(spans, "tools/call attp_execute")
    assert server.kind == SpanKind.SERVER
    phases = children(spans, server)
    assert [s.name for s in phases] == ["attp.admission", "attp.acquire_worker", "attp.evaluate"]
    evaluate = phases[-1]
    calls = children(spans, evaluate)
    assert [s.name for s in calls] == [
        "attp.static_check",
        "execute_tool files.write_file",
        "execute_tool demo.add",
        "execute_tool files.read_file",
    ]
    for span in calls[1:]:
        assert span.attributes is not None
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["gen_ai.tool.name"] == span.name.removeprefix("execute_tool ")
    failed = calls[2]
    assert failed.attributes is not None and failed.attributes["error.type"] == "INVALID_ARGUMENT"
    assert failed.status.status_code == StatusCode.ERROR
    assert all("error.type" not in (s.attributes or {}) for s in (calls[1], calls[3]))
    # The phases follow one another inside the server span, and the run's elapsed_ms fits inside it.
    assert all(a.end_time <= b.start_time for a, b in itertools.pairwise(phases))  # type: ignore[operator]
    assert server.start_time is not None and server.end_time is not None
    assert evaluate.start_time is not None and evaluate.end_time is not None
    assert server.start_time <= phases[0].start_time  # type: ignore[operator]
    assert evaluate.end_time <= server.end_time
    assert data["elapsed_ms"] <= (server.end_time - server.start_time) / 1e6
    assert (evaluate.end_time - evaluate.start_time) / 1e6 <= data["elapsed_ms"]
    assert server.attributes is not None and server.attributes["attp.tool_calls"] == 3
    # Never an argument value, the program or the result in a span.
    text = json.dumps([dict(s.attributes or {}) for s in spans] + [s.name for s in spans], default=str)
    for planted in ("planted-value-4d1e", "planted-text-9c2b", "notes.txt", 'write_file("'):
        assert planted not in text


async def test_a_runs_spans_are_made_after_its_reply_and_none_is_lost(workspace: Path) -> None:
    """The reply does not wait for the tracing SDK: the run's own spans come a moment after it, all of them."""
    with recording() as exporter:
        async with running(workspace) as runtime:
            result = await runtime.execute(ExecuteRequest(code=THREE_CALLS))
            at_reply = [s.name for s in exporter.get_finished_spans()]
            with anyio.fail_after(10):
                while len(exporter.get_finished_spans()) < 7:
                    await anyio.sleep(0.01)
            names = sorted(s.name for s in exporter.get_finished_spans())
    assert result.status == "ok", result.error
    assert "attp.evaluate" not in at_reply and not any(n.startswith("execute_tool") for n in at_reply), at_reply
    phases = ["attp.admission", "attp.acquire_worker", "attp.evaluate", "attp.static_check"]
    calls = ["execute_tool files.write_file", "execute_tool demo.add", "execute_tool files.read_file"]
    assert names == sorted([*phases, *calls])


async def test_a_sent_http_response_brings_the_waiting_spans_forward_and_a_stream_of_them_never_puts_them_off(
    workspace: Path,
) -> None:
    """Spans wait for the replies: made a moment after an HTTP response is sent (`SpansAfterReply`), else by a
    later timer; responses that keep coming never push them further out."""
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"part", "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    made: list[str] = []
    async with running(workspace) as runtime:
        wrapped = SpansAfterReply(app, runtime)
        loop_time = anyio.current_time
        runtime.deferred.add(lambda: made.append("spans"))
        timer = runtime.deferred.timer
        assert timer is not None and timer.when() - loop_time() > AFTER_SENT_S  # the later timer alone
        await wrapped({"type": "http"}, None, send)
        forward = runtime.deferred.timer
        assert forward is not None and forward.when() - loop_time() <= AFTER_SENT_S
        await wrapped({"type": "http"}, None, send)  # another response: the time stays
        assert runtime.deferred.timer is forward and made == []
        with anyio.fail_after(5):
            while not made:
                await anyio.sleep(0.001)
    assert made == ["spans"] and len(sent) == 6


async def test_a_failed_run_marks_its_evaluation_with_the_error_code(workspace: Path) -> None:
    with recording() as exporter:
        async with running(workspace) as runtime, Client(create_server(runtime)) as client:  # type: ignore[arg-type]
            data = await execute(client, 'refuse("NOPE")')
        spans = list(exporter.get_finished_spans())
    assert data["status"] == "error"
    call = named(spans, "execute_tool demo.refuse")
    assert call.attributes is not None and call.attributes["error.type"] == "OTHER"  # a pack's own code: bounded
    evaluate = named(spans, "attp.evaluate")
    assert evaluate.status.status_code == StatusCode.ERROR
    assert named(spans, "tools/call attp_execute").attributes["attp.error_code"] == "OTHER"  # type: ignore[index]


async def test_an_unknown_tool_name_is_not_a_span_name(workspace: Path) -> None:
    """The program's text names the tool it asks for: a name no pack has is one fixed span name."""
    async with running(workspace) as runtime:
        with recording() as exporter:
            await runtime.dispatch.traced_call(RunState(), "no_such_tool_" + "x" * 80, [], {})
            names = [s.name for s in exporter.get_finished_spans()]
    assert names == ["execute_tool (unknown)"]


async def test_an_upstream_call_is_a_client_span_whose_context_reaches_the_upstream(
    workspace: Path, tmp_path: Path
) -> None:
    """server-everything (a real third-party server) behind the wire recorder: the `_meta.traceparent` of the
    ``tools/call`` it received names the gateway's CLIENT span, under the tool call's span."""
    log = tmp_path / "wire.jsonl"
    settings = make_settings(workspace, toolpacks=[], mcp_servers={"everything": everything_stdio(tap=log)})
    with recording() as exporter:
        async with open_runtime(settings) as runtime, Client(create_server(runtime)) as client:  # type: ignore[arg-type]
            data = await execute(client, '__result__ = echo(message="traced")')
        spans = list(exporter.get_finished_spans())
    assert data["status"] == "ok" and data["result"] == "Echo: traced", data
    tool_span = named(spans, "execute_tool everything.echo")
    upstream = children(spans, tool_span)
    assert [s.kind for s in upstream] == [SpanKind.CLIENT], [s.name for s in upstream]
    client_span = upstream[0]
    assert client_span.name == "MCP send tools/call echo"
    calls = [m["msg"] for m in tapped(log) if m["dir"] == "in" and m["msg"].get("method") == "tools/call"]
    assert len(calls) == 1
    traceparent = calls[0]["params"]["_meta"]["traceparent"]
    version, trace_id, span_id, flags = traceparent.split("-")
    assert client_span.context is not None
    assert version == "00" and int(flags, 16) & 1  # sampled
    assert int(trace_id, 16) == client_span.context.trace_id == named(spans, "tools/call attp_execute").context.trace_id  # type: ignore[union-attr]
    assert int(span_id, 16) == client_span.context.span_id


class _Broken(SpanProcessor):
    """A span processor that fails at every turn (a broken exporter plugin)."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("the tracing backend is down")

    def on_end(self, span: Any) -> None:
        raise RuntimeError("the tracing backend is down")


async def test_telemetry_that_fails_never_fails_a_run(workspace: Path) -> None:
    """A tracing backend, a metrics backend that raise, and an audit log that cannot be written: the run
    still answers."""
    blocked = workspace.parent / "not-a-dir"  # beside the workspace: the audit log is the server's own
    blocked.write_text("a file where the audit log's folder should be")
    spans = TracerProvider()
    spans.add_span_processor(_Broken())
    async with running(workspace, audit_log=blocked / "audit.jsonl") as first:
        runtime = Runtime(first.settings, first.registry, first.pool, tracer_provider=spans)

        def broken(*_args: Any, **_kwargs: Any) -> None:
            raise RuntimeError("the metrics backend is down")

        runtime.metrics.runs.labels = broken  # type: ignore[method-assign]
        runtime.metrics.tool_calls.labels = broken  # type: ignore[method-assign]
        result = await runtime.execute(ExecuteRequest(code='write_file("t.txt", "x")\n__result__ = add(1, 2)'))
    assert result.status == "ok", result.error
    assert result.result == 3
    assert runtime.audit.failures == 1


# ---------------------------------------------------------------- opentelemetry-instrument, for real


def console_recipe() -> dict[str, str]:
    """The variables of docs/operations.md's console recipe: the ``OTEL_...=...`` words of the command it shows."""
    page = (Path(__file__).parents[1] / "docs" / "operations.md").read_text(encoding="utf-8")
    [command] = [line for line in page.splitlines() if "OTEL_TRACES_EXPORTER=console" in line and "`" not in line]
    return dict(word.split("=", 1) for word in command.split() if word.startswith("OTEL_"))


def test_opentelemetry_instrument_around_attp_serve_prints_the_run_spans(tmp_path: Path) -> None:
    """docs/operations.md's command: `opentelemetry-instrument` with the console exporter around `attp serve`."""
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    assert instrument.exists(), "pip install -e '.[test]' installs opentelemetry-distro"
    port = free_port()
    recipe = console_recipe()
    # Each signal names its exporter: one left to the distro's default (OTLP) fails the set-up without the OTLP
    # package, which this environment may well have (so running the recipe alone would not show it).
    assert {"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER"} <= set(recipe), recipe
    env = {**server_env(), **recipe, "OTEL_BSP_SCHEDULE_DELAY": "200"}
    out = tmp_path / "stdout.txt"
    with out.open("wb") as stdout:
        process = subprocess.Popen(
            [str(instrument), sys.executable, "-m", "attp_server", "serve", "--transport", "http",
             "--port", str(port), "--workspace", str(tmp_path / "ws"), "--toolpack", "files",
             "--toolpack", "demo_pack:toolpack"],
            stdout=stdout, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for_health(url, process)

            async def call() -> dict[str, Any]:
                async with Client(url + "/mcp") as client:
                    return await execute(client, "__result__ = add(2, 3)")

            data = anyio.run(call)
            assert data["result"] == 5
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    spans = _console_spans(out.read_text())
    by_name = {s["name"]: s for s in spans}
    for name in ("tools/call attp_execute", "attp.admission", "attp.evaluate", "execute_tool demo.add"):
        assert name in by_name, sorted(by_name)
    root = by_name["tools/call attp_execute"]
    assert by_name["execute_tool demo.add"]["context"]["trace_id"] == root["context"]["trace_id"]
    assert by_name["execute_tool demo.add"]["parent_id"] == by_name["attp.evaluate"]["context"]["span_id"]
    assert by_name["execute_tool demo.add"]["attributes"]["gen_ai.tool.name"] == "demo.add"


def _console_spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed (one indented object per span)."""
    decoder = json.JSONDecoder()
    spans, index = [], 0
    while (start := text.find("{", index)) != -1:
        try:
            value, index = decoder.raw_decode(text, start)
        except ValueError:
            index = start + 1
            continue
        if isinstance(value, dict) and "context" in value and "name" in value:
            spans.append(value)
    return spans
