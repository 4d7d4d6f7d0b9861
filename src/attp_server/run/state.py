"""The state of one run while its program runs: what the tool-call dispatch and the result building share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry.trace import Span

from attp_server.access.policy import Grant
from attp_server.model.catalog import Catalog
from attp_server.model.results import CallRecord
from attp_server.ops.after_reply import record_all
from attp_server.run.request import OpenUrl, Progress
from attp_server.sandbox.process.pool import Slot, run_clock
from attp_server.sessions.approvals import Ask
from attp_server.sessions.registry import Session
from attp_server.toolpack import ToolRegistry


@dataclass
class RunState:
    """State of one run: its trace and call count (the server's count is authoritative), and its deadline."""

    calls: list[CallRecord] = field(default_factory=list)
    count: int = 0
    progress: Progress | None = None
    deadline: float | None = None
    """`time.monotonic()` at which the worker's wall clock runs out, not counting the time it was paused
    (`RunClock.paused_total`: waiting for a person's approval); tool calls are bounded by it."""
    reported: float = 0.0
    """The last progress value sent: MCP progress must increase, and parallel calls finish in any order."""
    notices: dict[str, str] = field(default_factory=dict)
    """What tools asked the model to know (`ToolCall.notice`), added to the result's hint."""
    session: Session | None = None
    owner: str = "-"
    """Who runs it, for the fair shares of runs in flight and tool threads: the caller's session label."""
    tools: ToolRegistry | None = None
    """The tools of the call's scope (isolation); None means the server's own registry."""
    ask: Ask | None = None
    principal: str = "anonymous"
    """Whose calls these are, for rate limits, metrics and the audit log: the signed-in principal, the token's name,
    or anonymous."""
    catalog: Catalog | None = None
    """What the caller's model reads about its tools (``help()``, ``tools()``) under access rules; None: the
    server's own."""
    grant: Grant | None = None
    """What the caller's access rules give it (its approval mode, rate limit); None: no rules apply."""
    isolation: str | None = None
    """Whose files and memory the run's tools work on (its access rules', else the server's); None: the server's."""
    person: str | None = None
    """Whom upstream servers that see the person act for (`ToolCall.principal`); None for an anonymous caller."""
    credential: str | None = field(default=None, repr=False)
    """The signed-in caller's access token (`ToolCall.credential`), for token exchange."""
    open_url: OpenUrl | None = None
    handle: str | None = None
    """A digest of the session handle, for the audit log (never the handle itself)."""
    slot: Slot | None = None
    """Its admission slot, given back while it waits for a person (None: a run not admitted, as in some tests)."""
    span: Span | None = None
    """The run's evaluation span, parent of its tool calls' spans (None before the worker has the job)."""
    later: list[Callable[[], None]] | None = None
    """The run's metrics that the worker need not wait for, recorded by `record_later` while the worker runs
    and before the reply; None: recorded at once."""
    spans: list[Callable[[], None]] | None = None
    """The spans of the run's steps that are over, made from their times after the reply is on its way (the
    runtime hands them to the event loop), or as soon as a span must exist (`make_spans`: the parent of an
    upstream call's span); with them, the tool calls' OpenTelemetry duration records. None: made at once."""

    def defer(self, record: Callable[[], None]) -> None:
        """Record `record` later (`later`), or now when nothing will."""
        if self.later is None:
            record()
        else:
            self.later.append(record)

    def record_later(self) -> None:
        """Record what `later` holds (see `record_all`)."""
        if self.later:
            record_all(self.later)

    def trace(self, make: Callable[[], None]) -> None:
        """Make a span (or an OpenTelemetry record) later (`spans`), or now when nothing will."""
        if self.spans is None:
            make()
        else:
            self.spans.append(make)

    def make_spans(self) -> None:
        """Make the spans `spans` holds now (in order: a span before its children's)."""
        if self.spans:
            record_all(self.spans)

    def current_deadline(self) -> float | None:
        """`deadline` moved by the time the run's clock has been paused so far."""
        clock = run_clock()
        if self.deadline is None or clock is None:
            return self.deadline
        return self.deadline + clock.paused_total
