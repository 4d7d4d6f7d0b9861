"""The server's metrics: Prometheus (``GET /metrics`` on the HTTP transport) and OpenTelemetry metrics.

Counted as runs and tool calls end: ``attp_runs_total{status,error_code}``, ``attp_run_duration_seconds``,
``attp_tool_calls_total{pack,tool,outcome}``, ``attp_tool_call_duration_seconds{pack}``,
``attp_rate_limited_total{principal}``; read at each scrape: ``attp_upstream_up{server}``,
``attp_runs_waiting``, ``attp_workers_busy``, ``attp_sessions_active``. The same figures go to the
OpenTelemetry metrics API (``attp.runs``, ``attp.run.duration``, ...): a no-op until an SDK is
configured (``opentelemetry-instrument``), then exported as that SDK says. Its counters are observed when
the SDK collects (the counts kept here), and its two histograms are recorded after the run's reply, so a
client waits for none of it.

Every label value comes from a closed set, so no program can grow the number of series: error codes
and outcomes are `ErrorCode` values or the built-in tools' codes (`TOOL_CODES`: ``FILE_NOT_FOUND``, ...;
anything else counts as ``OTHER``), tools are the enabled packs'
tools (a name no pack has counts as ``(unknown)``), principals are the configured token names (else
``other``), servers the configured upstream servers. Recording never raises: a failure to count is
logged and the run goes on.
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import metrics as otel_metrics
from opentelemetry.context import Context, get_current
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from attp_server import __version__
from attp_server.errors import TOOL_CODES, ErrorCode

logger = logging.getLogger(__name__)

CODES = frozenset(ErrorCode) | TOOL_CODES
OTHER = "OTHER"
UNKNOWN_TOOL = "(unknown)"
OTHER_PRINCIPAL = "other"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Gauges:
    """What the server is doing right now, read at each scrape."""

    runs_waiting: int = 0
    workers_busy: int = 0
    sessions_active: int = 0
    upstream_up: Mapping[str, bool] = field(default_factory=dict)


def bounded_code(code: str | None) -> str:
    """An error code as a label value: one of `ErrorCode` or the built-in tools' `TOOL_CODES`, else `OTHER` (a
    third-party pack, a program or a worker may send any text)."""
    if code is None:
        return ""
    return code if code in CODES else OTHER


class _Snapshot(Collector):
    """The gauges, from the server's state at scrape time."""

    def __init__(self, read: Callable[[], Gauges]) -> None:
        self.read = read

    def collect(self) -> Iterator[Metric]:
        try:
            now = self.read()
        except Exception:
            logger.exception("could not read the server's state for /metrics")
            return
        yield GaugeMetricFamily("attp_runs_waiting", "Runs waiting for admission.", value=now.runs_waiting)
        yield GaugeMetricFamily("attp_workers_busy", "Sandbox workers running a program.", value=now.workers_busy)
        yield GaugeMetricFamily("attp_sessions_active", "Sessions the server keeps.", value=now.sessions_active)
        up = GaugeMetricFamily("attp_upstream_up", "1 when the upstream MCP server is connected.", labels=["server"])
        for server, ok in sorted(now.upstream_up.items()):
            up.add_metric([server], 1.0 if ok else 0.0)
        yield up


@dataclass
class _Series:
    """One label set's Prometheus children and OpenTelemetry attributes, looked up once, and its count (which
    the OpenTelemetry counters observe when the SDK collects, instead of being told at every call)."""

    count: Any
    seconds: Any
    attributes: dict[str, str]
    duration_attributes: dict[str, str]
    n: int = 0


class Metrics:
    """One server's counters and histograms (its own Prometheus registry), and their OpenTelemetry twins."""

    def __init__(
        self,
        principals: frozenset[str],
        read: Callable[[], Gauges],
        meter_provider: otel_metrics.MeterProvider | None = None,
    ) -> None:
        self.principals = principals
        self.registry = CollectorRegistry()
        self.runs = Counter(
            "attp_runs",
            "Runs of attp_execute by status and error code.",
            ["status", "error_code"],
            registry=self.registry,
        )
        self.run_seconds = Histogram("attp_run_duration_seconds", "Duration of a run.", registry=self.registry)
        self.tool_calls = Counter(
            "attp_tool_calls",
            "Tool calls of programs, by pack, tool and outcome (ok or the error code).",
            ["pack", "tool", "outcome"],
            registry=self.registry,
        )
        self.tool_seconds = Histogram(
            "attp_tool_call_duration_seconds", "Duration of a tool call.", ["pack"], registry=self.registry
        )
        self.rate_limited_calls = Counter(
            "attp_rate_limited", "Tool calls refused by rate_limit_per_minute.", ["principal"], registry=self.registry
        )
        self.registry.register(_Snapshot(read))
        self._tool_series: dict[tuple[str, str, str], _Series] = {}
        self._run_series: dict[tuple[str, str], _Series] = {}
        meter = (meter_provider or otel_metrics.get_meter_provider()).get_meter("attp-server", __version__)
        self.otel_run_seconds = meter.create_histogram("attp.run.duration", unit="s", description="Duration of a run.")
        self.otel_tool_seconds = meter.create_histogram(
            "attp.tool_call.duration", unit="s", description="Duration of a tool call."
        )
        self._rate_limited: dict[str, int] = {}

        def counted(series: Callable[[], list[tuple[int, dict[str, str]]]]) -> Callable[[Any], list[Any]]:
            def callback(_options: Any) -> list[otel_metrics.Observation]:
                return [otel_metrics.Observation(n, attributes) for n, attributes in series()]

            return callback

        meter.create_observable_counter(
            "attp.runs",
            [counted(lambda: [(s.n, s.attributes) for s in list(self._run_series.values())])],
            unit="{run}",
            description="Runs of attp_execute.",
        )
        meter.create_observable_counter(
            "attp.tool_calls",
            [counted(lambda: [(s.n, s.attributes) for s in list(self._tool_series.values())])],
            unit="{call}",
            description="Tool calls.",
        )
        meter.create_observable_counter(
            "attp.rate_limited",
            [counted(lambda: [(n, {"principal": name}) for name, n in list(self._rate_limited.items())])],
            unit="{call}",
            description="Tool calls refused by rate_limit_per_minute.",
        )

        def observe(pick: Callable[[Gauges], int]) -> Callable[[Any], list[otel_metrics.Observation]]:
            def callback(_options: Any) -> list[otel_metrics.Observation]:
                return [otel_metrics.Observation(pick(read()))]

            return callback

        meter.create_observable_gauge("attp.runs.waiting", [observe(lambda g: g.runs_waiting)], unit="{run}")
        meter.create_observable_gauge("attp.workers.busy", [observe(lambda g: g.workers_busy)], unit="{worker}")
        meter.create_observable_gauge("attp.sessions.active", [observe(lambda g: g.sessions_active)], unit="{session}")

    def run_done(self, status: str, error_code: str | None, seconds: float) -> Callable[[], None]:
        """Count a run at once (a scrape after its reply sees it); returns its OpenTelemetry record, to make after
        the reply (`AfterReply`: an SDK's histogram costs tens of microseconds a record)."""
        code = bounded_code(error_code)
        return self._counted(
            self._run_series, (status, code), seconds, self.otel_run_seconds, what="a run",
            make=lambda: _Series(
                self.runs.labels(status, code), self.run_seconds, {"status": status, "error_code": code},
                {"status": status},
            ),
        )  # fmt: skip

    def tool_call_done(self, pack: str, tool: str, error_code: str | None, seconds: float) -> Callable[[], None]:
        """Count a tool call (see `run_done`). `pack` and `tool` must name a tool of an enabled pack (or be ``""``
        and `UNKNOWN_TOOL`)."""
        outcome = "ok" if error_code is None else bounded_code(error_code)
        return self._counted(
            self._tool_series, (pack, tool, outcome), seconds, self.otel_tool_seconds, what="a tool call",
            make=lambda: _Series(
                self.tool_calls.labels(pack, tool, outcome), self.tool_seconds.labels(pack),
                {"pack": pack, "tool": tool, "outcome": outcome}, {"pack": pack},
            ),
        )  # fmt: skip

    def _counted(
        self,
        known: dict[Any, _Series],
        key: tuple[str, ...],
        seconds: float,
        histogram: Any,
        *,
        what: str,
        make: Callable[[], _Series],
    ) -> Callable[[], None]:
        """Count one in the series of `key` (made once per label set, a closed set: later counts skip the labels'
        lookups); its OpenTelemetry record, to make after the reply. Never raises: a failure is logged."""
        try:
            series = known.get(key)
            if series is None:
                series = known[key] = make()
            series.count.inc()
            series.n += 1
            series.seconds.observe(seconds)
        except Exception:
            logger.exception("could not count %s", what)
            return _nothing
        return functools.partial(_record, histogram, seconds, series.duration_attributes, get_current())

    def rate_limited(self, principal: str) -> None:
        try:
            name = principal if principal in self.principals else OTHER_PRINCIPAL
            self.rate_limited_calls.labels(name).inc()
            self._rate_limited[name] = self._rate_limited.get(name, 0) + 1
        except Exception:
            logger.exception("could not count a rate-limited call")

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric (what ``GET /metrics`` answers)."""
        return generate_latest(self.registry)


def _record(histogram: otel_metrics.Histogram, seconds: float, attributes: dict[str, str], context: Context) -> None:
    """Record a duration later, in the context it was measured in (an SDK's exemplars link it to that trace)."""
    try:
        histogram.record(seconds, attributes, context)
    except Exception:
        logger.exception("could not record a duration in OpenTelemetry")


def _nothing() -> None:
    return None


def weakly(gauges: Callable[[], Gauges]) -> Callable[[], Gauges]:
    """`gauges` (a bound method) without keeping its object alive: the meter provider is the process's, and would
    hold every runtime ever made (with its registry's open databases) through its callbacks."""
    method = weakref.WeakMethod(gauges)

    def read() -> Gauges:
        found = method()
        return found() if found is not None else Gauges()

    return read
