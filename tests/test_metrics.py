"""``GET /metrics`` (issue 25, SPEC §15): Prometheus text behind the token, counters that move by what the runs
did, and label values a program cannot multiply."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from harness import SERVE_FLAGS, Served, execute, make_settings, running, serving_http
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client.parser import text_string_to_metric_families
from upstreams import everything_stdio

import attp_server
from attp_server.ops.metrics import bounded_code
from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime
from attp_server.run.state import RunState

pytestmark = pytest.mark.anyio

TOKENS = {"alice": "metrics-token-5b2c9e", "bob": "metrics-token-77e1a0"}
AUTH = {"Authorization": f"Bearer {TOKENS['alice']}"}
GAUGES = ("attp_runs_waiting", "attp_workers_busy", "attp_sessions_active")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {"ATTP_AUTH_TOKENS": json.dumps(TOKENS), "ATTP_RATE_LIMIT_PER_MINUTE": json.dumps({"default": 3})}
    with serving_http(tmp_path_factory.mktemp("metrics-ws"), *SERVE_FLAGS, env=env) as served:
        yield served


def scrape(
    served: Served, headers: dict[str, str] | None = None
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``, by name and labels."""
    assert served.url is not None
    response = httpx.get(served.url + "/metrics", headers=headers or AUTH, timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def moved(before: dict[tuple[str, tuple[tuple[str, str], ...]], float], after: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[str, float]:  # fmt: skip
    """The counters that moved, as ``name{label=value,...}``: delta (sums, buckets, timestamps and gauges aside)."""
    changed = {}
    for key, value in after.items():
        name, labels = key
        if not name.startswith("attp_") or name.endswith(("_created", "_bucket", "_sum")) or name in GAUGES:
            continue
        delta = value - before.get(key, 0.0)
        if delta:
            changed[name + "{" + ",".join(f"{k}={v}" for k, v in labels) + "}"] = round(delta, 6)
    return changed


def test_a_scrape_without_the_token_is_refused(server: Served) -> None:
    assert server.url is not None
    refused = httpx.get(server.url + "/metrics", timeout=10)
    assert refused.status_code == 401
    assert "attp_" not in refused.text
    wrong = httpx.get(server.url + "/metrics", headers={"Authorization": "Bearer nope"}, timeout=10)
    assert wrong.status_code == 401


@pytest.mark.parametrize(("mode", "principal"), [("auto", "alice"), ("legacy", "bob")])
async def test_counters_move_by_what_the_runs_did(server: Served, mode: str, principal: str) -> None:
    before = scrape(server)
    async with server.client(headers={"Authorization": f"Bearer {TOKENS[principal]}"}, mode=mode) as client:
        first = await execute(client, "__result__ = add(1, 2)")
        second = await execute(client, 'refuse("NOPE")')
        third = await execute(client, 'write_file("m.txt", "x")')
        fourth = await execute(client, "__result__ = add(2, 2)")  # the fourth tool call this minute: limited
    after = scrape(server)
    assert (first["status"], second["error"]["code"], third["status"]) == ("ok", "NOPE", "ok")
    assert fourth["error"]["code"] == "RATE_LIMITED", fourth
    assert "allowed in" in fourth["error"]["message"]
    assert moved(before, after) == {
        "attp_runs_total{error_code=,status=ok}": 2,
        "attp_runs_total{error_code=OTHER,status=error}": 1,  # a pack's own error code is not a label value
        "attp_runs_total{error_code=RATE_LIMITED,status=error}": 1,
        "attp_run_duration_seconds_count{}": 4,
        "attp_tool_calls_total{outcome=ok,pack=demo,tool=add}": 1,
        "attp_tool_calls_total{outcome=OTHER,pack=demo,tool=refuse}": 1,
        "attp_tool_calls_total{outcome=ok,pack=files,tool=write_file}": 1,
        "attp_tool_calls_total{outcome=RATE_LIMITED,pack=demo,tool=add}": 1,
        "attp_tool_call_duration_seconds_count{pack=demo}": 3,
        "attp_tool_call_duration_seconds_count{pack=files}": 1,
        f"attp_rate_limited_total{{principal={principal}}}": 1,
    }
    for gauge in GAUGES:
        assert (gauge, ()) in after
    # The next minute's calls would pass again: the limit is a rate, not a quota. (Not waited for here.)


async def test_label_values_are_a_closed_set(workspace: Path) -> None:
    """A worker asking for a hundred made-up tool names grows no series: they are all one `(unknown)`."""
    async with running(workspace) as runtime:
        for i in range(100):
            await runtime.dispatch.traced_call(RunState(), f"made_up_{i}", [], {})
        text = runtime.metrics.exposition().decode()
    tool_series = [line for line in text.splitlines() if line.startswith("attp_tool_calls_total{")]
    assert tool_series == ['attp_tool_calls_total{outcome="NAME_NOT_FOUND",pack="",tool="(unknown)"} 100.0']


async def test_the_built_in_tools_codes_are_label_values(workspace: Path) -> None:
    """FILE_NOT_FOUND, the code programs meet most, is counted as itself, in the run's and the tool call's series."""
    async with running(workspace) as runtime:
        result = await runtime.execute(ExecuteRequest(code='read_file("missing.txt")'))
        text = runtime.metrics.exposition().decode()
    assert result.error is not None and result.error.code == "FILE_NOT_FOUND"
    assert 'attp_runs_total{error_code="FILE_NOT_FOUND",status="error"} 1.0' in text
    assert 'attp_tool_calls_total{outcome="FILE_NOT_FOUND",pack="files",tool="read_file"} 1.0' in text


def raised_codes(root: Path) -> dict[str, str]:
    """Every error code the source raises, with a file that raises it: the first argument (or ``code=``) of
    ``ToolError(...)`` and ``ErrorInfo(...)``, and what is assigned to a name ``code`` (``code = {...}.get(...)``,
    a class's ``code = "SKILL_NOT_FOUND"``)."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        if "bundled_skills" in path.parts:  # examples and templates of programs and third-party packs
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            given: list[ast.expr] = []
            if isinstance(node, ast.Call):
                called = node.func
                name = called.id if isinstance(called, ast.Name) else getattr(called, "attr", "")
                if name in ("ToolError", "ErrorInfo"):
                    given += node.args[:1] + [k.value for k in node.keywords if k.arg == "code"]
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(target, ast.Name) and target.id == "code" for target in targets):
                    given.append(node.value)
            for expression in given:
                for leaf in ast.walk(expression):
                    if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str) and leaf.value.isupper():
                        found.setdefault(leaf.value, str(path.relative_to(root)))
    return found


def test_every_code_the_source_raises_is_a_label_value() -> None:
    """A built-in tool's new code must not count as OTHER: it is in `TOOL_CODES` (or `ErrorCode`)."""
    found = raised_codes(Path(attp_server.__file__).parent)
    assert {"FILE_NOT_FOUND", "MEMORY_BUSY", "SKILL_NOT_FOUND", "IO_ERROR"} <= set(found)  # the scan sees them
    missing = {code: where for code, where in found.items() if bounded_code(code) != code}
    assert not missing, f"add these to attp_server.errors.TOOL_CODES: {missing}"
    assert bounded_code("NOPE") == "OTHER"


async def test_opentelemetry_metrics_when_an_sdk_is_configured(workspace: Path) -> None:
    """The same counts through the OpenTelemetry metrics API, read by the SDK's in-memory reader."""
    reader = InMemoryMetricReader()
    async with running(workspace) as first:
        runtime = Runtime(first.settings, first.registry, first.pool, meter_provider=MeterProvider([reader]))
        await runtime.execute(ExecuteRequest(code='__result__ = add(1, 2)\nwrite_file("o.txt", "x")'))
        await runtime.execute(ExecuteRequest(code='refuse("NOPE")'))
        await runtime.close()  # the durations are recorded after the replies: by now, or as the server stops
    data = reader.get_metrics_data()
    assert data is not None
    points = {
        metric.name: {
            tuple(sorted((p.attributes or {}).items())): getattr(p, "value", None) for p in metric.data.data_points
        }
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    assert points["attp.runs"] == {
        (("error_code", ""), ("status", "ok")): 1,
        (("error_code", "OTHER"), ("status", "error")): 1,
    }
    assert points["attp.tool_calls"] == {
        (("outcome", "ok"), ("pack", "demo"), ("tool", "add")): 1,
        (("outcome", "ok"), ("pack", "files"), ("tool", "write_file")): 1,
        (("outcome", "OTHER"), ("pack", "demo"), ("tool", "refuse")): 1,
    }
    assert {"attp.run.duration", "attp.tool_call.duration", "attp.workers.busy", "attp.sessions.active"} <= set(points)


async def test_a_duration_recorded_after_the_reply_is_linked_to_its_own_runs_trace(workspace: Path) -> None:
    """The OpenTelemetry durations are recorded after the replies, together: each still carries the trace it was
    measured in (the SDK's exemplars), never another run's or none."""
    reader = InMemoryMetricReader()
    tracer = TracerProvider().get_tracer("test")
    traces: list[int] = []
    async with running(workspace) as first:
        runtime = Runtime(first.settings, first.registry, first.pool, meter_provider=MeterProvider([reader]))
        for name in ("A", "B"):
            with tracer.start_as_current_span(name) as span:
                traces.append(span.get_span_context().trace_id)
                await runtime.execute(ExecuteRequest(code="__result__ = add(1, 2)"))
        with tracer.start_as_current_span("C"):  # both runs' records at once, in a third trace's context
            runtime.deferred.record_now()
    data = reader.get_metrics_data()
    assert data is not None
    linked = {
        metric.name: sorted(exemplar.trace_id for point in metric.data.data_points for exemplar in point.exemplars)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name in ("attp.run.duration", "attp.tool_call.duration")
    }
    # A histogram keeps one exemplar per bucket (the last): each one there is A's or B's, none C's.
    assert set(linked) == {"attp.run.duration", "attp.tool_call.duration"}
    assert all(ids and set(ids) <= set(traces) for ids in linked.values()), (linked, traces)


async def test_an_upstream_server_is_up_or_down(workspace: Path) -> None:
    """`attp_upstream_up{server}`: 1 for server-everything (a real third-party server), 0 for one that cannot start."""
    servers = {"everything": everything_stdio(), "broken": {"command": "/nonexistent/mcp-server"}}
    settings = make_settings(workspace, toolpacks=[], mcp_servers=servers, mcp_startup_timeout_s=5)
    async with open_runtime(settings) as runtime:
        text = runtime.metrics.exposition().decode()
    assert 'attp_upstream_up{server="everything"} 1.0' in text
    assert 'attp_upstream_up{server="broken"} 0.0' in text
