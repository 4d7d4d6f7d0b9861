"""Text in, result out: envelope -> static check -> worker (tool calls answered here) -> result object.

The MCP face and the CLI are thin layers over `Runtime.execute`; this module knows nothing of
either. Tools run here, in the server process: the worker only asks for them by name.
"""

from __future__ import annotations

import functools
import logging
import math
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.abc
import pydantic_core
from pydantic import ValidationError

from attp_server.errors import ErrorCode, ErrorInfo, short_repr
from attp_server.model.catalog import Catalog
from attp_server.model.docstrings import docstring_warnings
from attp_server.model.results import CallRecord, ExecutionResult, Status
from attp_server.run.admission import Admission
from attp_server.run.envelope import Declined, EnvelopeError, Program, parse_envelope
from attp_server.run.tam import TamError, looks_like_tam, translate_tam
from attp_server.run.tool_executor import NoThread, ToolExecutor
from attp_server.sandbox.process.pool import Job, WorkerPool, run_clock
from attp_server.sandbox.process.protocol import text_of
from attp_server.sandbox.starlark import engine as starlark_engine
from attp_server.sandbox.static_check import META_TOOLS, PARALLEL, KnownNames, known_names, module_members
from attp_server.sandbox.stdlib.namespaces import MODULE_NAMES
from attp_server.sessions import kept_state
from attp_server.sessions.approvals import Approvals, Ask
from attp_server.sessions.isolation import NoSession, Scopes
from attp_server.sessions.registry import EVICTED, SESSIONS_AT_FULL_STATE, Caller, Session, Sessions
from attp_server.settings import Settings
from attp_server.toolpack import (
    Tool,
    ToolCall,
    ToolError,
    ToolpackLoadError,
    ToolRegistry,
    load_factory,
    load_toolpack,
    reset_current_call,
    set_current_call,
)

logger = logging.getLogger(__name__)

NO_SESSION_HINT = (
    "Nothing is kept between calls for this client: its requests carry no MCP session (Streamable HTTP on "
    "protocol 2026-07-28), so define again in this program whatever an earlier call defined."
)

MAX_PARALLEL = 16
"""Calls of one ``parallel()`` in flight at once; the rest wait their turn (every one still counts)."""

SOLUTIONS: dict[str, str] = {
    ErrorCode.TIMEOUT: "Do less per call: smaller inputs, fewer iterations, or split the work across several calls.",
    ErrorCode.MEMORY_LIMIT: "Work on smaller pieces of data; avoid building huge strings or lists.",
    ErrorCode.TOOL_CALL_LIMIT: "Make fewer tool calls per program, or split the work across several calls.",
    ErrorCode.RESULT_TOO_LARGE: "Return a summary, counts, or a slice of the data instead of all of it.",
    ErrorCode.RESULT_NOT_SERIALIZABLE: "Return plain data: dict, list, str, int, float, bool or None.",
    ErrorCode.RUNTIME_ERROR: "Fix the code at that line; wrap risky steps in try/except if a failure is expected.",
    ErrorCode.INTERNAL_ERROR: "Retry the call; if it keeps failing, simplify the program.",
}

STARLARK_SOLUTIONS: dict[str, str] = {
    ErrorCode.RUNTIME_ERROR: "Fix the code at that line; Starlark has no try/except, so check values first "
    "(e.g. `if key in d`, `if x != None`).",
    ErrorCode.SYNTAX_ERROR: "Write Starlark: no while (use for ... in range(n) with break), no try/except, class, "
    "import, or ** (use pow).",
}

Engine = Literal["python", "starlark"]

INLINE_BUDGET_S = 0.002
INLINE_STRIKES = 3
"""A tool declared inline (`Toolpack.inline`) that holds the event loop longer than INLINE_BUDGET_S (CPU time, so
that a garbage collection or a preemption is not held against it) INLINE_STRIKES times runs on tool threads after."""


@dataclass(frozen=True)
class ExecuteRequest:
    """The inputs of `attp_execute`: exactly one of `code` / `envelope`."""

    code: str | None = None
    envelope: str | None = None
    target: str | None = None
    thought: str | None = None
    engine: Engine | None = None
    """The language of the program; None means the `engine` setting. TAM blocks always run as Python."""
    reset: bool = False
    """Clear the session's kept variables and functions before the program runs."""


Progress = Callable[[float, str], Awaitable[None]]
"""Told after each tool call of a run (how many calls are done, and a message naming the tool), and while
a long call reports its own progress (calls done plus the fraction of this one)."""


@dataclass(frozen=True)
class CallContext:
    """Who asked, for the log line, and where progress goes (MCP progress notifications)."""

    call_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    session: str = "-"
    progress: Progress | None = None
    caller: Caller | None = None
    """Whose session this call belongs to (None: no session, e.g. the CLI)."""
    ask: Ask | None = None
    """How to ask the user to approve a tool call (MCP elicitation); None when nobody can be asked."""


@dataclass
class _Run:
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

    def current_deadline(self) -> float | None:
        """`deadline` moved by the time the run's clock has been paused so far."""
        clock = run_clock()
        if self.deadline is None or clock is None:
            return self.deadline
        return self.deadline + clock.paused_total


class Runtime:
    """Runs programs. One per server; shared by all sessions (each run gets its own worker)."""

    def __init__(self, settings: Settings, registry: ToolRegistry, pool: WorkerPool) -> None:
        self.settings = settings
        self.registry = registry
        self.pool = pool
        self.catalog = Catalog(registry, settings)
        self.known = self.known_names(registry, settings.modules)
        self.listeners: list[Callable[[], Awaitable[None]]] = []
        """Told after `refresh` (the MCP face tells its clients that the tool list changed)."""
        self.sessions = Sessions(settings.session_idle_s, SESSIONS_AT_FULL_STATE * settings.max_state_bytes)
        self.scopes = Scopes(settings, registry)
        self.approvals = Approvals(settings)
        self.tasks: anyio.abc.TaskGroup | None = None
        """Work that outlives the call that started it (a run waiting for an approval across calls)."""
        self.admission = Admission(settings)
        self.tools = ToolExecutor(settings.tool_threads, settings.max_runs_per_session)
        self.slow_inline: set[str] = set()
        """Tools declared inline that took longer than INLINE_BUDGET_S INLINE_STRIKES times: they run on threads."""
        self._inline_strikes: Counter[str] = Counter()

    @staticmethod
    def known_names(registry: ToolRegistry, modules: Sequence[str] = MODULE_NAMES) -> KnownNames:
        """Every name a program may use without defining it: tools, builtins, the enabled modules and pack
        namespaces."""
        packs = tuple((pack, tuple(names)) for pack, names in registry.namespaces().items())
        unavailable = tuple(registry.unavailable().items())
        return known_names(tuple(registry.callable_names()), packs, unavailable, module_members(tuple(modules)))

    async def refresh(self) -> None:
        """A live pack's tools or availability changed: settle the names again, rebuild what is derived from
        them (catalog and description, known names), and tell the listeners if what a client reads changed."""
        before = (self.catalog.description, self.catalog.attp_text())
        self.registry.refresh()
        self.scopes.refresh()
        self.catalog = Catalog(self.registry, self.settings)
        self.known = self.known_names(self.registry, self.settings.modules)
        if (self.catalog.description, self.catalog.attp_text()) == before:
            return
        for listener in list(self.listeners):
            try:
                await listener()
            except Exception:
                logger.exception("a tool-list listener failed")

    async def execute(self, request: ExecuteRequest, context: CallContext | None = None) -> ExecutionResult:
        context = context if context is not None else CallContext()
        started = time.perf_counter()
        await self.end_idle_sessions()
        session = self.sessions.open(context.caller) if context.caller is not None else None
        evicted = session is not None and session.evicted
        if session is not None and (request.reset or evicted):
            self.sessions.keep(session, None)
            session.evicted = False
        ticket = await self.admission.enter(context.session)
        try:
            if isinstance(ticket, ErrorInfo):
                result = _error(request.target, ticket)
            else:
                with self.sessions.using(session):
                    try:
                        tools = await self.tools_for(context.caller, session)
                    except NoSession as refused:
                        result = _error(request.target, refused.info)
                    else:
                        run = _Run(
                            progress=context.progress,
                            session=session,
                            owner=context.session,
                            tools=tools,
                            ask=context.ask,
                        )
                        result = await self._execute(request, run)
        except Exception:
            # A bug of ours must still come back as a result, never a traceback; details go to the log only.
            logger.exception("attp_execute failed inside the server")
            result = _error(request.target, ErrorInfo(code=ErrorCode.INTERNAL_ERROR, message="the server failed"))
        finally:
            if not isinstance(ticket, ErrorInfo):
                self.admission.leave(ticket)
        result.elapsed_ms = round((time.perf_counter() - started) * 1000, 2)
        if evicted and not request.reset:
            result.hint = _joined(EVICTED, result.hint)
        sessionless = context.caller is not None and session is None and self.settings.session_state
        if sessionless and result.error is not None and result.error.code == ErrorCode.NAME_NOT_FOUND:
            # The description promises kept variables; this client's requests cannot have them.
            result.hint = _joined(result.hint, NO_SESSION_HINT)
        if result.error is not None and result.error.solution is None:
            starlark = (request.engine or self.settings.engine) == "starlark"
            solution = STARLARK_SOLUTIONS.get(result.error.code) if starlark else None
            result.error.solution = solution or SOLUTIONS.get(result.error.code)
        # One line per call; never the code, the result or tool arguments (they may hold secrets).
        fields = {
            "call": context.call_id,
            "session": context.session,
            "status": result.status,
            "error": result.error.code if result.error else None,
            "tool_calls": len(result.calls),
            "ms": result.elapsed_ms,
        }
        logger.info("attp_execute", extra={"fields": fields})
        return result

    async def _execute(self, request: ExecuteRequest, run: _Run) -> ExecutionResult:
        target = request.target
        if (request.code is None) == (request.envelope is None):
            return _error(
                target,
                ErrorInfo(
                    code=ErrorCode.INVALID_ARGUMENT,
                    message="give exactly one of `code` (a Python program) or `envelope` (an ATTP TOML envelope)",
                    parameter_name="code",
                    received="both" if request.code is not None else "neither",
                    expected="exactly one of code / envelope",
                ),
            )
        if request.envelope is not None:
            limit = 2 * self.settings.max_code_chars + 10_000
            if len(request.envelope) > limit:
                return _error(
                    target,
                    ErrorInfo(
                        code=ErrorCode.INVALID_ENVELOPE,
                        message=f"the envelope is {len(request.envelope):,} characters; the limit is {limit:,}",
                        parameter_name="envelope",
                        received=f"{len(request.envelope):,} characters",
                        expected=f"at most {limit:,} characters",
                        solution="Send less: keep large data in files and read it with tools.",
                    ),
                )
            if looks_like_tam(request.envelope):
                return await self._execute_tam(request.envelope, target, run)
            strict = self.settings.envelope_strict
            try:
                # Off the event loop: a pathological document must not stall other sessions.
                parsed = await anyio.to_thread.run_sync(
                    functools.partial(parse_envelope, request.envelope, strict=strict)
                )
            except EnvelopeError as exc:
                return _error(target, exc.info)
            target = target or parsed.target
            if isinstance(parsed, Declined):
                return ExecutionResult(status="fail", target=target, hint=parsed.message)
            program = parsed
        else:
            program = Program(code=request.code or "", target=target, thought=request.thought)
        if len(program.code) > self.settings.max_code_chars:
            return _error(
                target,
                ErrorInfo(
                    code=ErrorCode.INVALID_ARGUMENT,
                    message=f"the program is {len(program.code):,} characters; the limit is "
                    f"{self.settings.max_code_chars:,}",
                    parameter_name="code",
                    received=f"{len(program.code):,} characters",
                    expected=f"at most {self.settings.max_code_chars:,} characters",
                    solution="Split the work into several calls, or keep large data in files and read it with tools.",
                ),
            )
        engine = request.engine or self.settings.engine
        if engine == "starlark":
            if not starlark_engine.available():
                return _error(
                    target,
                    ErrorInfo(
                        code=ErrorCode.INVALID_ARGUMENT,
                        message=starlark_engine.missing_extra_message(),
                        parameter_name="engine",
                        received="starlark",
                        expected="python, or starlark once the extra is installed",
                        suggested_value="python",
                        solution=f"Write the program in Python (engine='python'), or have the operator run "
                        f"{starlark_engine.INSTALL}.",
                    ),
                )
            # No static check: the Python one does not apply, and Starlark is parsed only inside the worker
            # (a pathological program must never reach starlark-rust in the server process).
            return await self._run(program.code, target, run, engine)
        # The static check happens in the worker, under the run's deadline (attp_server.sandbox.static_check),
        # with the names the session kept (they travel in the job's state).
        return await self._run(program.code, target, run, engine, keep=True)

    async def _execute_tam(self, text: str, target: str | None, run: _Run) -> ExecutionResult:
        """TAM blocks (seed 003), translated to a program so they share the sandbox, limits and trace."""
        try:
            tam = await anyio.to_thread.run_sync(
                functools.partial(translate_tam, text, self.registry, max_steps=self.settings.max_tool_calls)
            )
        except TamError as exc:
            return _error(target, exc.info)
        result = await self._run(tam.code, target, run)
        if result.error is not None:
            result.error = tam.relocate(result.error)
        elif (failure := tam.failure(result.result)) is not None:
            # The steps already done stay in `result`: the model must know what happened before the failure.
            result.status, result.error = "error", failure
        return result

    async def _run(
        self, code: str, target: str | None, run: _Run, engine: Engine = "python", *, keep: bool = False
    ) -> ExecutionResult:
        """Run `code` on a worker; with `keep`, the session state goes in and what the program leaves comes back."""
        run.deadline = time.monotonic() + self.settings.timeout_s
        session = run.session
        keeping = keep and engine == "python" and self.settings.session_state and session is not None
        state = session.kept if keeping and session is not None else None
        job = Job(
            code=code,
            tools=self.registry.callable_names(),
            namespaces=self.registry.namespaces(),
            timeout_s=self.settings.timeout_s,
            max_output_bytes=self.settings.max_output_bytes,
            max_result_bytes=self.settings.max_result_bytes,
            max_tool_calls=self.settings.max_tool_calls,
            capture_print=self.settings.capture_print,
            engine=engine,
            allow_imports=self.settings.allow_imports,
            state=state.message() if state is not None else None,
            keep=keeping,
            max_state_bytes=self.settings.max_state_bytes,
            unavailable=self.registry.unavailable(),
            modules=self.settings.modules,
        )
        done = await self.pool.run(job, functools.partial(self._traced_call, run))
        result = self._result(done, run, target)
        if keeping and session is not None:
            kept, hint = await kept_state.after_run(session.kept, done, self.settings.max_state_bytes)
            self.sessions.keep(session, kept)
            result.hint = _joined(result.hint, hint)
        return result

    async def tools_for(self, caller: Caller | None, session: Session | None) -> ToolRegistry:
        """The tools working on the caller's folder and memory (`isolation`). Raises `NoSession`."""
        return await self.scopes.tools(self.scopes.scope_for(caller, session))

    async def end_idle_sessions(self) -> None:
        """End the sessions idle past `session_idle_s`: their kept state goes, and their folders if their own."""
        await self.scopes.end_sessions(self.sessions.expire())

    async def close(self) -> None:
        """End every session (the server is stopping)."""
        with anyio.CancelScope(shield=True):
            await self.scopes.end_sessions(self.sessions.close_all())

    def _result(self, done: dict[str, Any], run: _Run, target: str | None) -> ExecutionResult:
        # The worker is sandboxed, not trusted: its report is validated like any other input.
        stdout = done.get("stdout")
        stdout = stdout if isinstance(stdout, str) else ""
        cut = stdout.encode("utf-8")[: self.settings.max_output_bytes].decode("utf-8", "ignore")
        try:
            error = ErrorInfo.model_validate(_capped(done["error"])) if done.get("error") is not None else None
        except ValidationError:
            logger.error("worker sent a malformed error: %s", short_repr(done.get("error"), 500))
            error = ErrorInfo(code=ErrorCode.INTERNAL_ERROR, message="the sandbox reported a malformed error")
        status: Status = "error" if error is not None or done.get("status") != "ok" else "ok"
        if status == "error" and error is None:
            error = ErrorInfo(code=ErrorCode.INTERNAL_ERROR, message="the sandbox reported an error without details")
        hint = done.get("hint") if isinstance(done.get("hint"), str) else None
        for notice in list(run.notices.values()):  # a tool thread left running may still add one
            hint = _joined(hint, notice)
        return ExecutionResult(
            status=status,
            target=target,
            result=done.get("result") if status == "ok" else None,
            stdout=cut,
            truncated=bool(done.get("truncated")) or len(cut) < len(stdout),
            hint=hint,
            calls=run.calls,
            error=error,
        )

    # ------------------------------------------------------------ tool calls from the worker

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

    async def _traced_call(self, run: _Run, name: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        if name == PARALLEL:
            return await self._parallel(run, args, kwargs)
        started = time.perf_counter()
        reply = await self._call(run, name, args, kwargs)
        tool = self.registry.resolve(name)
        error = reply.get("error") or {}
        run.calls.append(
            CallRecord(
                tool=tool.ref if tool is not None else name[:100],
                ok=bool(reply.get("ok")),
                ms=round((time.perf_counter() - started) * 1000, 3),
                error_code=error.get("code"),
            )
        )
        done = len(run.calls)
        await _tell(run, done, f"{done} tool call{'s' if done > 1 else ''} done (last: {run.calls[-1].tool})")
        return reply

    async def _parallel(self, run: _Run, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        """``parallel(tool, items)``: one traced call per item, at most `MAX_PARALLEL` at once, replies in order.

        The worker checked the shapes; they are checked again here, since a worker is not trusted.
        """
        name, items = [*args, None, None][:2] if not kwargs else (None, None)
        if not isinstance(name, str) or not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            return _reply_error(
                ErrorInfo(
                    code=ErrorCode.INVALID_ARGUMENT,
                    message="call it as parallel(tool, items) with items a list of keyword-argument dicts",
                    tool_name=PARALLEL,
                )
            )
        if name in META_TOOLS or (run.tools or self.registry).resolve(name) is None:
            # Refused once, not once per item: the name is the program's own text, of any length.
            return _reply_error(
                ErrorInfo(
                    code=ErrorCode.NAME_NOT_FOUND,
                    message=f"parallel(): no tool named {short_repr(name, 100)}",
                    tool_name=PARALLEL,
                    parameter_name="tool",
                    solution="Pass a tool of the description, e.g. parallel(read_file, [...]) or "
                    "parallel('pack.tool', [...]); tools('word') searches them.",
                )
            )
        replies: list[dict[str, Any]] = [{} for _ in items]
        slots = anyio.Semaphore(MAX_PARALLEL)

        async def one(index: int, item: dict[str, Any]) -> None:
            async with slots:
                replies[index] = await self._traced_call(run, name, [], item)

        async with anyio.create_task_group() as tasks:
            for index, item in enumerate(items):
                tasks.start_soon(one, index, item)
        return {"ok": True, "value": replies}

    async def _call(self, run: _Run, name: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        run.count += 1
        if run.count > self.settings.max_tool_calls:
            return _reply_error(
                ErrorInfo(
                    code=ErrorCode.TOOL_CALL_LIMIT,
                    message=f"the program made more than {self.settings.max_tool_calls} tool calls",
                    tool_name=name,
                )
            )
        if name in META_TOOLS:
            meta = self.catalog.help if name == "help" else self.catalog.search
            too_long = any(isinstance(a, str) and len(a) > 200 for a in [*args, *kwargs.values()])
            if len(args) + len(kwargs) > 1 or set(kwargs) - {"name", "query"} or too_long:
                usage = "help(name=None)" if name == "help" else "tools(query=None)"
                usage += " with a name or query of at most 200 characters"
                return _reply_error(
                    ErrorInfo(code=ErrorCode.INVALID_ARGUMENT, message=f"call it as {usage}", tool_name=name)
                )
            return {"ok": True, "value": meta(*args, *kwargs.values())}
        tool = (run.tools or self.registry).resolve(name)
        if tool is None:
            return _reply_error(
                ErrorInfo(code=ErrorCode.NAME_NOT_FOUND, message=f"no tool named {name!r}", tool_name=name)
            )
        bound = tool.bind(args, kwargs)
        if isinstance(bound, ErrorInfo):
            return _reply_error(bound)
        refused = await self.approvals.check(tool, bound, run.session, run.ask)
        if refused is not None:
            return _reply_error(refused)
        # The tool may read the run's deadline and report progress through `current_call()`.
        token = set_current_call(
            ToolCall(deadline=run.current_deadline(), progress=_forward_progress(run, tool), notices=run.notices)
        )
        try:
            if tool.is_async:  # cancelled with the run: the pool's deadline cancels this task
                value = await tool.function(**bound)
            elif tool.inline and tool.name not in self.slow_inline:
                value = self._inline(tool, bound)
            else:
                deadline = run.current_deadline()
                limit = deadline if deadline is not None else math.inf
                value = await self.tools.call(tool.function, bound, session=run.owner, deadline=limit)
        except NoThread as exc:
            return _reply_error(_no_thread(tool.name, exc, self.settings.tool_threads))
        except ToolError as exc:
            return _reply_error(exc.info(tool.name))
        except Exception as exc:
            logger.exception("tool %s raised", tool.name)
            return _reply_error(
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
            return _reply_error(
                ErrorInfo(
                    code=ErrorCode.TOOL_ERROR,
                    message=f"{tool.name}() returned a {type(value).__name__}, which is not JSON data",
                    tool_name=tool.name,
                )
            )


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


async def _tell(run: _Run, value: float, message: str) -> None:
    if run.progress is None or value <= run.reported:
        return
    run.reported = value
    try:
        await run.progress(value, message)
    except Exception as exc:  # a client that went away must not fail the run
        logger.debug("progress notification failed: %s", exc)


def _forward_progress(run: _Run, tool: Tool) -> Callable[[float | None, str], Awaitable[None]] | None:
    """Progress a tool reports from inside its call, as the run's progress: the calls done so far plus the
    fraction of this one (so the value never goes back), and the tool's own message."""
    if run.progress is None:
        return None

    async def forward(fraction: float | None, message: str) -> None:
        share = min(max(fraction, 0.0), 0.99) if fraction is not None else 0.0
        await _tell(run, len(run.calls) + share, f"{tool.ref}: {message}")

    return forward


def _capped(error: Any) -> Any:
    """Cut every text field of a worker's error report to `MAX_TEXT` characters."""
    if not isinstance(error, dict):
        return error
    return {k: text_of(v) if isinstance(v, str) else v for k, v in error.items()}


def _reply_error(info: ErrorInfo) -> dict[str, Any]:
    return {"ok": False, "error": _capped(info.model_dump(exclude_none=True))}


def _joined(first: str | None, second: str | None) -> str | None:
    if first and second:
        return f"{first if first.endswith(('.', '?', '!')) else first + '.'} {second}"
    return first or second


def _error(target: str | None, info: ErrorInfo) -> ExecutionResult:
    return ExecutionResult(status="error", target=target, error=info)


def build_registry(settings: Settings) -> ToolRegistry:
    """Load the enabled toolpacks and register their tools.

    A pack the user asked for by name must load (else `ToolpackLoadError` naming it); a pack that is
    only enabled by default is skipped with a warning, so one broken plugin cannot stop the server.
    """
    explicit = "toolpacks" in settings.model_fields_set
    packs = []
    for spec in settings.toolpacks:
        try:
            packs.append(load_toolpack(spec))
        except ToolpackLoadError as exc:
            if explicit:
                raise
            logger.warning("skipping default toolpack %r: %s", spec, exc)
    if settings.upstream_servers:  # the MCP gateway: one pack per configured server, made by its factory
        packs.extend(load_factory("mcp").make(settings, frozenset(p.name for p in packs)))
    registry = ToolRegistry(
        packs,
        settings.workspace.resolve(),
        settings.toolpack_options,
        settings.skills_dirs,
        db_path=settings.db_path.resolve(),
    )
    for tool in registry.tools.values():
        for warning in docstring_warnings(tool):
            logger.warning("%s", warning)
    return registry


@asynccontextmanager
async def live_tools(registry: ToolRegistry, changed: Callable[[], Awaitable[None]]) -> AsyncIterator[None]:
    """Start the packs whose tools are live (upstream MCP servers), all at once; stop them on exit.

    Each reports back within its own startup timeout, connected or not (a server that fails is
    reported and its pack stays unavailable: it never stops the server). On exit their tasks are
    cancelled, which closes every connection and ends every child process they started.
    """
    lives = [pack.live for pack in registry.packs.values() if pack.live is not None]
    if not lives:
        yield
        return
    async with anyio.create_task_group() as running:
        async with anyio.create_task_group() as starting:
            for live in lives:
                starting.start_soon(running.start, functools.partial(live.serve, changed))
        registry.refresh()
        try:
            yield
        finally:
            running.cancel_scope.cancel()


@asynccontextmanager
async def open_registry(settings: Settings) -> AsyncIterator[ToolRegistry]:
    """The registry with its live packs started (for the CLI's tools, prompt and check)."""
    registry = build_registry(settings)

    async def unchanged() -> None:
        registry.refresh()

    async with live_tools(registry, unchanged):
        yield registry


@asynccontextmanager
async def open_runtime(settings: Settings, *, registry: ToolRegistry | None = None) -> AsyncIterator[Runtime]:
    """Start the live packs and the worker pool and yield a ready `Runtime`; stop them all on exit."""
    registry = registry if registry is not None else build_registry(settings)
    runtime: Runtime | None = None

    async def changed() -> None:
        if runtime is not None:
            await runtime.refresh()
        else:
            registry.refresh()

    async with (
        live_tools(registry, changed),
        WorkerPool(size=settings.workers, max_workers=settings.max_workers, memory_mb=settings.memory_mb) as pool,
        anyio.create_task_group() as tasks,
    ):
        runtime = Runtime(settings, registry, pool)
        runtime.tasks = tasks
        if settings.isolation == "session":
            await anyio.to_thread.run_sync(runtime.scopes.sweep_stale)
        tasks.start_soon(_end_idle_sessions, runtime)
        try:
            yield runtime
        finally:
            tasks.cancel_scope.cancel()
            await runtime.close()
            runtime.tools.close()


async def _end_idle_sessions(runtime: Runtime) -> None:
    """Sessions end on time even when no call comes to notice it."""
    period = min(60.0, runtime.settings.session_idle_s / 2)
    while True:
        await anyio.sleep(period)
        await runtime.end_idle_sessions()
