"""A program's tool calls, answered in the server: the worker asks for a tool by name, this runs it.

Every call is checked again here (the worker is sandboxed, not trusted): the run's call budget, the name
against the call's scope, the arguments against the tool's signature, the operator's approvals. A tool
runs where its pack says it may: async ones on the event loop, cheap ones inline (until they prove not
cheap), the rest on the fair-shared tool threads, always within the run's deadline. Each call goes into
the run's trace and its progress to the client. Operations see each call too: a span (`tracing`), the
metrics, the rate limit of the caller's principal, and the audit log for calls that change things.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pydantic_core

from attp_server.errors import ErrorCode, ErrorInfo, short_repr
from attp_server.model.catalog import Catalog
from attp_server.model.results import CallRecord
from attp_server.ops.audit import AuditLog
from attp_server.ops.metrics import UNKNOWN_TOOL, Gauges, Metrics, bounded_code
from attp_server.ops.rate_limits import RateLimits, known_principals
from attp_server.ops.tracing import Tracing, failed, now_ns
from attp_server.run.state import RunState
from attp_server.run.tool_executor import NoThread, ToolExecutor
from attp_server.sandbox.process.protocol import ErrorReport, ToolReply, capped
from attp_server.sandbox.process.tools import META_TOOLS
from attp_server.sandbox.static_check import PARALLEL
from attp_server.sessions.approvals import Approvals
from attp_server.settings import Settings
from attp_server.toolpack import Tool, ToolCall, ToolError, ToolRegistry, reset_current_call, set_current_call

logger = logging.getLogger(__name__)

MAX_PARALLEL = 16
"""Calls of one ``parallel()`` in flight at once; the rest wait their turn (every one still counts)."""

INLINE_BUDGET_S = 0.002
INLINE_STRIKES = 3
"""A tool declared inline (`Toolpack.inline`) that holds the event loop longer than INLINE_BUDGET_S (CPU time, so
that a garbage collection or a preemption is not held against it) INLINE_STRIKES times runs on tool threads after."""


class Dispatcher:
    """Answers the tool calls of every run. One per server, shared by all sessions."""

    def __init__(
        self,
        settings: Settings,
        registry: ToolRegistry,
        catalog: Catalog,
        approvals: Approvals,
        executor: ToolExecutor,
        *,
        tracing: Tracing | None = None,
        metrics: Metrics | None = None,
        audit: AuditLog | None = None,
        limits: RateLimits | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.catalog = catalog
        """Answers ``help()`` and ``tools()``; replaced when the registry's tools change."""
        self.approvals = approvals
        self.executor = executor
        self.tracing = tracing if tracing is not None else Tracing()
        self.metrics = metrics if metrics is not None else Metrics(known_principals(settings), Gauges)
        self.audit = audit if audit is not None else AuditLog(settings)
        self.limits = limits if limits is not None else RateLimits(settings)
        self.slow_inline: set[str] = set()
        """Tools declared inline that took longer than INLINE_BUDGET_S INLINE_STRIKES times: they run on threads."""
        self._inline_strikes: Counter[str] = Counter()

    async def traced_call(self, run: RunState, name: str, args: list[Any], kwargs: dict[str, Any]) -> ToolReply:
        """The reply to the worker's call of `name`, recorded in the run's trace and reported as progress."""
        if name == PARALLEL:
            return await self._parallel(run, args, kwargs)
        registry = run.tools or self.registry  # the tools this run started with
        tool = registry.resolve(name)
        # Label values from a closed set: an enabled pack's tool, help/tools, or UNKNOWN_TOOL (the name is the
        # program's own text).
        pack, label = (tool.pack, tool.name) if tool is not None else ("", name if name in META_TOOLS else UNKNOWN_TOOL)
        ref = f"{pack}.{label}" if pack else label
        started, began = time.perf_counter(), now_ns()
        if tool is not None and registry.packs[tool.pack].live is not None:
            run.make_spans()  # the run's evaluation span, this one's parent, is made first
            with self.tracing.tool_call(ref, run.span) as span:  # current: the upstream call is traced under it
                reply = await self._call(run, name, args, kwargs)
                code = reply_code(reply)
                if code is not None:
                    failed(span, bounded_code(code))
            seconds = time.perf_counter() - started
        else:  # its span is made once it is over, after the run's reply (`RunState.spans`)
            code = None
            try:
                reply = await self._call(run, name, args, kwargs)
                code = reply_code(reply)
            finally:  # a call cancelled with its run has its span too
                ended, outcome = now_ns(), bounded_code(code) if code is not None else None
                run.trace(lambda: self.tracing.tool_call_timed(ref, run.span, began, ended, outcome))
            seconds = time.perf_counter() - started
        run.defer(functools.partial(self._count, run, pack, label, code, seconds))
        error = reply.get("error")
        run.calls.append(
            CallRecord(
                tool=tool.ref if tool is not None else name[:100],
                ok=bool(reply.get("ok")),
                ms=round(seconds * 1000, 3),
                error_code=error.get("code") if error else None,
            )
        )
        done = len(run.calls)
        await tell(run, done, f"{done} tool call{'s' if done > 1 else ''} done (last: {run.calls[-1].tool})")
        return reply

    async def _parallel(self, run: RunState, args: list[Any], kwargs: dict[str, Any]) -> ToolReply:
        """``parallel(tool, items)``: one traced call per item, at most `MAX_PARALLEL` at once, replies in order.

        The worker checked the shapes; they are checked again here, since a worker is not trusted.
        """
        name, items = [*args, None, None][:2] if not kwargs else (None, None)
        if not isinstance(name, str) or not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            return reply_error(
                ErrorInfo(
                    code=ErrorCode.INVALID_ARGUMENT,
                    message="call it as parallel(tool, items) with items a list of keyword-argument dicts",
                    tool_name=PARALLEL,
                )
            )
        if name in META_TOOLS or (run.tools or self.registry).resolve(name) is None:
            # Refused once, not once per item: the name is the program's own text, of any length.
            await self.refused_by_filter(run, name)
            return reply_error(
                ErrorInfo(
                    code=ErrorCode.NAME_NOT_FOUND,
                    message=f"parallel(): no tool named {short_repr(name, 100)}",
                    tool_name=PARALLEL,
                    parameter_name="tool",
                    solution="Pass a tool of the description, e.g. parallel(read_file, [...]) or "
                    "parallel('pack.tool', [...]); tools('word') searches them.",
                )
            )
        budget = self.settings.max_tool_calls - run.count
        if len(items) > budget:  # counted here, before anything runs or is allocated: the worker's count is its word
            return reply_error(
                ErrorInfo(
                    code=ErrorCode.TOOL_CALL_LIMIT,
                    message=f"parallel() of {len(items):,} items: the program has {max(budget, 0)} of its "
                    f"{self.settings.max_tool_calls} tool calls left (max_tool_calls), so none of them was run",
                    tool_name=PARALLEL,
                )
            )
        replies: list[ToolReply] = [{"ok": False} for _ in items]
        slots = anyio.Semaphore(MAX_PARALLEL)

        async def one(index: int, item: dict[str, Any]) -> None:
            async with slots:
                replies[index] = await self.traced_call(run, name, [], item)

        async with anyio.create_task_group() as tasks:
            for index, item in enumerate(items):
                tasks.start_soon(one, index, item)
        return {"ok": True, "value": replies}

    def _count(self, run: RunState, pack: str, tool: str, code: str | None, seconds: float) -> None:
        """Count a tool call in the metrics; its OpenTelemetry record comes with the run's spans, after the reply."""
        run.trace(self.metrics.tool_call_done(pack, tool, code, seconds))

    async def _call(self, run: RunState, name: str, args: list[Any], kwargs: dict[str, Any]) -> ToolReply:
        run.count += 1
        if run.count > self.settings.max_tool_calls:
            return reply_error(
                ErrorInfo(
                    code=ErrorCode.TOOL_CALL_LIMIT,
                    message=f"the program made more than {self.settings.max_tool_calls} tool calls",
                    tool_name=name,
                )
            )
        if name in META_TOOLS:
            return self._meta(run, name, args, kwargs)
        tool = (run.tools or self.registry).resolve(name)
        if tool is None:
            await self.refused_by_filter(run, name)
            return reply_error(
                ErrorInfo(code=ErrorCode.NAME_NOT_FOUND, message=f"no tool named {name!r}", tool_name=name)
            )
        bound = await self._bind(run, tool, args, kwargs)
        if isinstance(bound, ErrorInfo):
            return reply_error(bound)
        limited = self.limits.take(run.principal, tool.ref, run.grant.rate_limit_per_minute if run.grant else None)
        if limited is not None:
            self.metrics.rate_limited(run.principal)
            await self._audit(run, "rate_limited", tool, bound, limited.code)
            return reply_error(limited)

        async def decided(outcome: str) -> None:
            await self._audit(run, "approval", tool, bound, outcome)

        mode = run.grant.approval if run.grant is not None else None
        refused = await self.approvals.check(tool, bound, run.session, run.ask, decided=decided, mode=mode)
        if refused is not None:
            return reply_error(refused)
        if tool.marks.read_only or not self.audit.enabled:
            return await self._run_tool(run, tool, bound)
        started = time.perf_counter()
        reply = await self._run_tool(run, tool, bound)
        outcome = reply_code(reply) or "ok"
        await self._audit(run, "tool_call", tool, bound, outcome, duration_ms=(time.perf_counter() - started) * 1000)
        return reply

    async def refused_by_filter(self, run: RunState, name: str) -> None:
        """An audit line when `name` is refused because a server's filters hide it, or the caller's access rules
        withhold it (not merely unknown)."""
        if self.audit.enabled and isinstance(name, str) and len(name) <= 200:
            registry = run.tools or self.registry
            withheld = registry.withheld(name)
            hidden = registry.filtered(name) if withheld is None else withheld
            if hidden is not None:
                event = "filter_refused" if withheld is None else "access_refused"
                await self.audit.record(
                    event, principal=run.principal, handle=run.handle, tool=hidden, outcome="NAME_NOT_FOUND"
                )

    async def _audit(
        self,
        run: RunState,
        event: str,
        tool: Tool,
        arguments: dict[str, Any],
        outcome: str,
        *,
        duration_ms: float | None = None,
    ) -> None:
        """One line of the audit log (if it is on), written before the program hears the outcome."""
        if self.audit.enabled:
            await self.audit.record(
                event,
                principal=run.principal,
                handle=run.handle,
                tool=f"{tool.pack}.{tool.name}",
                outcome=outcome,
                arguments=arguments,
                duration_ms=duration_ms,
            )

    async def _run_tool(self, run: RunState, tool: Tool, bound: dict[str, Any]) -> ToolReply:
        """Call the tool where its pack says it may run, within the run's deadline: its reply to the worker."""
        # The tool may read the run's deadline and report progress through `current_call()`.
        token = set_current_call(
            ToolCall(
                deadline=run.current_deadline(),
                progress=forward_progress(run, tool),
                notices=run.notices,
                workspace=(run.tools or self.registry).workspace,
                principal=run.person,
                credential=run.credential,
                open_url=run.open_url,
            )
        )
        try:
            if tool.is_async:  # cancelled with the run: the pool's deadline cancels this task
                value = await tool.function(**bound)
            elif tool.inline and tool.name not in self.slow_inline:
                value = self._inline(tool, bound)
            else:
                deadline = run.current_deadline()
                limit = deadline if deadline is not None else math.inf
                value = await self.executor.call(tool.function, bound, session=run.owner, deadline=limit)
        except NoThread as exc:
            return reply_error(_no_thread(tool.name, exc, self.settings.tool_threads))
        except ToolError as exc:
            return reply_error(exc.info(tool.name))
        except Exception as exc:
            logger.exception("tool %s raised", tool.name)
            return reply_error(
                ErrorInfo(
                    code=ErrorCode.TOOL_ERROR,
                    message=f"{tool.name}() failed: {type(exc).__name__}: {exc}",
                    tool_name=tool.name,
                )
            )
        finally:
            reset_current_call(token)
        try:
            return {"ok": True, "value": pydantic_core.to_jsonable_python(value)}
        except pydantic_core.PydanticSerializationError:
            logger.error("tool %s returned a non-JSON %s", tool.name, type(value).__name__)
            return reply_error(
                ErrorInfo(
                    code=ErrorCode.TOOL_ERROR,
                    message=f"{tool.name}() returned a {type(value).__name__}, which is not JSON data",
                    tool_name=tool.name,
                )
            )

    async def _bind(
        self, run: RunState, tool: Tool, args: list[Any], kwargs: dict[str, Any]
    ) -> dict[str, Any] | ErrorInfo:
        """The call's arguments checked against the tool's signature, or the error that refuses them.

        A tool described by a JSON Schema (an upstream's ``inputSchema``) is checked on a tool thread within
        the run's deadline: the schema is the upstream's and the arguments the program's, so the work is
        neither's to put on the event loop every session shares (its regexes run in linear time, too).
        """
        if tool.check is None:
            return tool.bind(args, kwargs)
        deadline = run.current_deadline()
        check = functools.partial(tool.bind, args, kwargs)
        try:
            checked: dict[str, Any] | ErrorInfo = await self.executor.call(
                check, {}, session=run.owner, deadline=deadline if deadline is not None else math.inf
            )
        except NoThread as exc:
            return _no_thread(tool.ref, exc, self.settings.tool_threads)
        return checked

    def _meta(self, run: RunState, name: str, args: list[Any], kwargs: dict[str, Any]) -> ToolReply:
        """``help(name=None)`` and ``tools(query=None)``, answered by the catalog (a search that finds
        nothing says so in the result's hint, with the closest names)."""
        catalog = run.catalog or self.catalog  # the caller's own under access rules
        meta = catalog.help if name == "help" else catalog.search
        too_long = any(isinstance(a, str) and len(a) > 200 for a in [*args, *kwargs.values()])
        if len(args) + len(kwargs) > 1 or set(kwargs) - {"name", "query"} or too_long:
            usage = "help(name=None)" if name == "help" else "tools(query=None)"
            usage += " with a name or query of at most 200 characters"
            return reply_error(
                ErrorInfo(code=ErrorCode.INVALID_ARGUMENT, message=f"call it as {usage}", tool_name=name)
            )
        value = meta(*args, *kwargs.values())
        if name == "tools" and value == []:
            query = next(iter([*args, *kwargs.values()]), "")
            lead = (
                f"tools({short_repr(query, 60)}) found no tool (it needs every word in a tool's name or description)."
            )
            run.notices["tools-none"] = catalog.unknown(query, lead) if isinstance(query, str) else lead
        return {"ok": True, "value": value}

    def _inline(self, tool: Tool, bound: dict[str, Any]) -> Any:
        """Call a tool its pack declares cheap on the event loop; one that is not cheap goes to the threads."""
        started = time.thread_time()  # CPU time: a preemption of the server on a busy machine is not the tool's
        try:
            return tool.function(**bound)
        finally:
            spent = time.thread_time() - started
            if spent > INLINE_BUDGET_S:
                self._inline_strikes[tool.name] += 1
                if self._inline_strikes[tool.name] >= INLINE_STRIKES:
                    self.slow_inline.add(tool.name)
                    logger.warning(
                        "tool %s is declared inline but held the event loop %.1f ms; it runs on tool threads now",
                        tool.name,
                        spent * 1000,
                    )


def reply_code(reply: ToolReply) -> str | None:
    """None for a reply that succeeded, else its error code."""
    if reply.get("ok"):
        return None
    error = reply.get("error")
    return str(error.get("code") or ErrorCode.TOOL_ERROR) if error else ErrorCode.TOOL_ERROR


def reply_error(info: ErrorInfo) -> ToolReply:
    """A failed call's reply to the worker, its texts capped."""
    error: ErrorReport = capped(info.model_dump(exclude_none=True))
    return {"ok": False, "error": error}


def _no_thread(tool: str, exc: NoThread, threads: int) -> ErrorInfo:
    why = (
        f"{exc.abandoned} tool call(s) of runs that already ended are still running"
        if exc.abandoned
        else f"all {threads} tool threads (tool_threads) are busy"
    )
    return ErrorInfo(
        code=ErrorCode.SERVER_BUSY,
        message=f"{tool}() could not start before the run's time limit: {why}",
        tool_name=tool,
        solution="Retry in a few seconds, with smaller inputs so that each tool call ends within the run's time limit.",
    )


async def tell(run: RunState, value: float, message: str) -> None:
    """Report the run's progress, if anyone listens and `value` moves it forward."""
    if run.progress is None or value <= run.reported:
        return
    run.reported = value
    try:
        await run.progress(value, message)
    except Exception as exc:  # a client that went away must not fail the run
        logger.debug("progress notification failed: %s", exc)


def forward_progress(run: RunState, tool: Tool) -> Callable[[float | None, str], Awaitable[None]] | None:
    """Progress a tool reports from inside its call, as the run's progress: the calls done so far plus the
    fraction of this one (so the value never goes back), and the tool's own message."""
    if run.progress is None:
        return None

    async def forward(fraction: float | None, message: str) -> None:
        share = min(max(fraction, 0.0), 0.99) if fraction is not None else 0.0
        await tell(run, len(run.calls) + share, f"{tool.ref}: {message}")

    return forward
