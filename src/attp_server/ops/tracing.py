"""Traces of a run, through the OpenTelemetry API only (the SDK and exporters are the operator's choice).

Under the MCP SDK's ``tools/call attp_execute`` server span a run adds, in order: ``attp.admission``
(waiting for a run slot), ``attp.acquire_worker`` (waiting for a sandbox worker), then ``attp.evaluate``
(the worker's run), under which ``attp.static_check`` (timed by the worker) and one
``execute_tool {pack}.{tool}`` span per tool call (``gen_ai.operation.name = execute_tool``,
``gen_ai.tool.name``, ``error.type`` = the error code on failure). A call to an upstream MCP server is
the SDK's CLIENT span under its tool's span, and the SDK passes ``traceparent``/``tracestate`` on in the
request's ``_meta``. No span holds an argument value, a program's text or a result.

Without an SDK every call here is the API's no-op. With one, a span costs tens of microseconds and a run has
several, so they stay off the paths the worker and the client wait on: a step is timed (two clock reads) and
its span made with those times after the run's reply (`RunState.spans`, `AfterReply`); only a span
something runs under that traces itself (an upstream call) is made as it starts (with the spans above it),
and made current.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

from opentelemetry import context, trace
from opentelemetry.trace import Span, Status, StatusCode

from attp_server import __version__

logger = logging.getLogger(__name__)

EXECUTE_TOOL = "execute_tool"


class Tracing:
    """The server's tracer (the global provider's unless one is given, e.g. by the bench).

    Every call into the SDK is guarded: a span processor or exporter that raises is logged (once) and the
    run goes on with a span that records nothing."""

    def __init__(self, provider: trace.TracerProvider | None = None) -> None:
        self.tracer = (provider or trace.get_tracer_provider()).get_tracer("attp-server", __version__)

    def _start(self, name: str, **options: Any) -> Span:
        try:
            return self.tracer.start_span(name, **options)
        except Exception:
            _failure("start a span")
            return trace.INVALID_SPAN

    def start(self, name: str, start_ns: int, parent: context.Context | None) -> Span:
        """A span that the caller ends (`end`), begun at `start_ns`, under `parent` (a context)."""
        return self._start(name, context=parent, start_time=start_ns)

    def timed(self, name: str, start_ns: int, end_ns: int, parent: context.Context | None) -> None:
        """A span for a step that is over (timed here, or by the worker: the static check), under `parent`."""
        end(self._start(name, context=parent, start_time=start_ns), end_ns)

    def later(self, name: str, start_ns: int, end_ns: int) -> Callable[[], None]:
        """`timed` for a step that is over, to record later (`RunState.later`) under the span current now."""
        return functools.partial(self.timed, name, start_ns, end_ns, context.get_current())

    def tool_call_timed(self, ref: str, parent: Span | None, start_ns: int, end_ns: int, code: str | None) -> None:
        """The span of one tool call that is over (see `tool_call`), ``error.type`` = `code` if it failed."""
        span = self._start(
            f"{EXECUTE_TOOL} {ref}",
            context=trace.set_span_in_context(parent) if parent is not None else None,
            attributes=_tool_attributes(ref),
            start_time=start_ns,
        )
        if code is not None:
            failed(span, code)
        end(span, end_ns)

    @contextmanager
    def tool_call(self, ref: str, parent: Span | None) -> Iterator[Span]:
        """The span of one tool call, ``execute_tool {pack}.{tool}``, under the run's evaluation span, made the
        current span while the tool runs, so that what the tool does is traced under it (an upstream server's
        tool: the MCP client's span and the ``traceparent`` it sends). Other tools' calls are `tool_call_timed`
        once over."""
        under = trace.set_span_in_context(parent) if parent is not None else None
        span = self._start(f"{EXECUTE_TOOL} {ref}", context=under, attributes=_tool_attributes(ref))
        try:
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                yield span
        finally:
            end(span)


@functools.lru_cache(maxsize=4096)
def _tool_attributes(ref: str) -> Mapping[str, str]:
    """A tool call span's attributes (built once per tool: `ref` names a tool of an enabled pack, or one fixed
    label)."""
    return MappingProxyType({"gen_ai.operation.name": EXECUTE_TOOL, "gen_ai.tool.name": ref})


def end(span: Span, end_ns: int | None = None) -> None:
    """End `span` (at `end_ns`), whatever the SDK's processors do."""
    try:
        span.end(end_time=end_ns)
    except Exception:
        _failure("end a span")


def failed(span: Span, code: str) -> None:
    """Mark `span` as failed with an error code (the code only: messages may quote arguments)."""
    try:
        span.set_attribute("error.type", code)
        span.set_status(Status(StatusCode.ERROR))
    except Exception:
        _failure("mark a span failed")


def annotate(span: Span, attributes: dict[str, Any]) -> None:
    """Add attributes to `span` if it records (the SDK's server span of the call)."""
    try:
        if span.is_recording():
            span.set_attributes(attributes)
    except Exception:
        _failure("annotate a span")


_reported: set[str] = set()


def _failure(what: str) -> None:
    if what not in _reported:  # once per kind: a broken exporter must not flood the log
        _reported.add(what)
        logger.exception("tracing failed to %s; runs go on without it", what)


def now_ns() -> int:
    return time.time_ns()
