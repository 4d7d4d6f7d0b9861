"""Text in, result out: the request -> the program -> a worker (tool calls answered here) -> the result.

The MCP face and the CLI are thin layers over `Runtime.execute`; this module knows nothing of
either. Tools run here, in the server process: the worker only asks for them by name. Each step has its
own module: `intake` (the request to a program), `dispatch` (the program's tool calls), `outcome` (the
worker's report to a result), `state` (what one run's steps share); this one admits the call, opens its
session and runs the steps in order, and wires the registry and the worker pool together.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from opentelemetry import context as otel_context
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace

from attp_server.errors import ErrorCode, ErrorInfo
from attp_server.model.catalog import Catalog
from attp_server.model.docstrings import docstring_warnings
from attp_server.model.results import ExecutionResult
from attp_server.run.admission import Admission
from attp_server.run.audit import AuditLog, handle_digest
from attp_server.run.dispatch import Dispatcher
from attp_server.run.intake import Prepared, prepare
from attp_server.run.live import ConfigWatch, LivePacks, config_stamp
from attp_server.run.metrics import Gauges, Metrics, bounded_code
from attp_server.run.outcome import NO_SESSION_HINT, add_solution, error_result, from_worker, joined, point_to_renamed
from attp_server.run.rate_limits import RateLimits, known_principals, principal_of
from attp_server.run.request import CallContext, Engine, ExecuteRequest, Progress
from attp_server.run.state import RunState, record_all
from attp_server.run.tool_executor import ToolExecutor
from attp_server.run.tracing import Tracing, annotate, end, failed, now_ns
from attp_server.sandbox.process.pool import Job, WorkerPool
from attp_server.sandbox.static_check import KnownNames, known_names, module_members
from attp_server.sandbox.stdlib.namespaces import MODULE_NAMES
from attp_server.sessions import kept_state
from attp_server.sessions.approvals import Approvals
from attp_server.sessions.isolation import NoSession, Scopes
from attp_server.sessions.registry import Caller, Session, SessionRefused, Sessions
from attp_server.settings import Settings
from attp_server.store import Store, StoreError, open_store
from attp_server.toolpack import Toolpack, ToolpackLoadError, ToolRegistry, load_factory, load_toolpack

__all__ = [
    "CallContext",
    "Engine",
    "ExecuteRequest",
    "Progress",
    "RunState",
    "Runtime",
    "build_registry",
    "live_tools",
    "open_registry",
    "open_runtime",
]

logger = logging.getLogger(__name__)

STORE_UNAVAILABLE = ErrorInfo(
    code=ErrorCode.SERVER_BUSY,
    message="the server cannot reach its session store right now, so this call did not run (nothing was done)",
    solution="Send the same call again in a few seconds; if it keeps failing, tell the user the server's database "
    "is unavailable.",
)


class Runtime:
    """Runs programs. One per server; shared by all sessions (each run gets its own worker)."""

    def __init__(
        self,
        settings: Settings,
        registry: ToolRegistry,
        pool: WorkerPool,
        store: Store | None = None,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: otel_metrics.MeterProvider | None = None,
    ) -> None:
        """`store`: where sessions live (None: every call stands alone). `tracer_provider` and `meter_provider`:
        the OpenTelemetry globals unless given (the bench gives them)."""
        self.settings = settings
        self.registry = registry
        self.pool = pool
        self.known = self.known_names(registry, settings.modules)
        self.listeners: list[Callable[[], Awaitable[None]]] = []
        """Told after `refresh` (the MCP face tells its clients that the tool list changed)."""
        self.store = store
        self.sessions = Sessions(settings, store) if store is not None else None
        """Sessions and their state, in the store (None without a store: every call stands alone)."""
        self.scopes = Scopes(settings, registry)
        if self.sessions is not None:
            self.sessions.removed_listeners.append(self.scopes.end_sessions)
        self.approvals = Approvals(settings)
        self.tasks: anyio.abc.TaskGroup | None = None
        """Work that outlives the call that started it (a run waiting for an approval across calls)."""
        self.admission = Admission(settings)
        self.tools = ToolExecutor(settings.tool_threads, settings.max_runs_per_session)
        self.tracing = Tracing(tracer_provider)
        self.metrics = Metrics(known_principals(settings), self.gauges, meter_provider)
        self.audit = AuditLog(settings)
        self.limits = RateLimits(settings)
        for name in self.limits.unknown_names():
            logger.warning("rate_limit_per_minute names %r, which no token in auth_tokens has", name)
        self.dispatch = Dispatcher(
            settings,
            registry,
            Catalog(registry, settings),
            self.approvals,
            self.tools,
            tracing=self.tracing,
            metrics=self.metrics,
            audit=self.audit,
            limits=self.limits,
        )
        self.live: LivePacks | None = None
        """The live packs' tasks (upstream MCP servers); set by `open_runtime`."""
        self.watching = False
        """Whether edits of the configuration are applied while serving (`ConfigWatch`)."""
        self._generation = 0
        self._running: Counter[int] = Counter()
        """Runs in flight by the configuration generation they started under (for `reload`)."""
        self._reloading = anyio.Lock()
        self._after_reply: list[Callable[[], None]] = []
        self._after_reply_timer: asyncio.TimerHandle | None = None

    def gauges(self) -> Gauges:
        """What the server is doing right now (read at each scrape of the metrics)."""
        return Gauges(
            runs_waiting=self.admission.stats()["waiting"],
            workers_busy=len(self.pool.running_pids()),
            sessions_active=self.sessions.active if self.sessions is not None else 0,
            upstream_up={
                name: pack.live.health().get("status") == "ok"
                for name, pack in list(self.registry.packs.items())
                if pack.live is not None
            },
        )

    @property
    def catalog(self) -> Catalog:
        """What the model reads about the tools (the description, ``help()``, ``tools()``)."""
        return self.dispatch.catalog

    @property
    def slow_inline(self) -> set[str]:
        """Tools declared inline that proved slow: they run on tool threads now."""
        return self.dispatch.slow_inline

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
        self.dispatch.catalog = Catalog(self.registry, self.settings)
        self.known = self.known_names(self.registry, self.settings.modules)
        if (self.catalog.description, self.catalog.attp_text()) == before:
            return
        for listener in list(self.listeners):
            try:
                await listener()
            except Exception:
                logger.exception("a tool-list listener failed")

    async def reload(self, settings: Settings) -> None:
        """Serve the upstream servers `settings` configures: start the added and changed ones, then put them in
        the tool list (clients are told), then stop the removed and replaced ones once the runs that started
        before have ended: a running program finishes on the tools it started with."""
        if self.live is None:
            return
        async with self._reloading:
            current = [pack for pack in self.registry.packs.values() if pack.live is not None]
            fixed = frozenset(name for name, pack in self.registry.packs.items() if pack.live is None)
            factory = load_factory("mcp")
            if factory.update is None:
                return
            try:
                wanted = list(factory.update(settings, current, fixed))
            except Exception as exc:
                logger.warning("configuration edit not applied: %s", exc)
                return
            added = [pack for pack in wanted if not any(pack is old for old in current)]
            removed = [pack for pack in current if not any(pack is new for new in wanted)]
            ignored = _other_changes(self.settings, settings)
            if ignored:
                logger.warning("configuration edited: %s changed; only the upstream servers apply while serving, the "
                               "rest at the next start", ", ".join(ignored))  # fmt: skip
            if not added and not removed:
                logger.info("configuration read again: the upstream servers are as they were")
                return
            for pack in added:
                logger.info("configuration edited: starting the mcp server of toolpack %r", pack.name)
            await self.live.start(added)
            self.registry.set_live(wanted)
            self.scopes.set_live(wanted)
            self._generation += 1
            await self.refresh()
            if removed:
                names = ", ".join(repr(pack.name) for pack in removed)
                logger.info("configuration edited: stopping the mcp servers %s once the runs using them end", names)
                if self.tasks is not None:
                    self.tasks.start_soon(self._retire, removed, self._generation)
                else:
                    self.live.stop(removed)

    async def _retire(self, packs: list[Toolpack], generation: int) -> None:
        """Stop `packs` when no run that started before `generation` is still running (bounded by the longest a
        run may take, paused approvals included)."""
        longest = self.settings.timeout_s + self.settings.approval_timeout_s + 5
        with anyio.move_on_after(longest):
            while any(count for started, count in self._running.items() if started < generation):
                await anyio.sleep(0.2)
        assert self.live is not None
        self.live.stop(packs)

    async def execute(self, request: ExecuteRequest, context: CallContext | None = None) -> ExecutionResult:
        context = context if context is not None else CallContext()
        started = time.perf_counter()
        session: Session | None = None
        try:
            session = await self.open_session(context.caller, request.session)
        except SessionRefused as refused:
            result = error_result(request.target, refused.info)
        except StoreError as exc:
            logger.warning("the session store failed: %s", exc)
            result = error_result(request.target, STORE_UNAVAILABLE)
        else:
            try:
                result = await self._admitted(request, context, session)
            finally:
                if self.sessions is not None:
                    await self.sessions.finish(session)
        result.elapsed_ms = round((time.perf_counter() - started) * 1000, 2)
        if session is not None:
            result.session = session.returned
            if session.notice is not None and not request.reset:
                result.hint = joined(session.notice, result.hint)
            fresh = request.session is None and session.handle is not None
            if fresh and result.error is not None and result.error.code == ErrorCode.NAME_NOT_FOUND:
                # The name may be one an earlier call kept, in the session whose handle was not passed back.
                result.hint = joined(result.hint, NO_SESSION_HINT)
        self.after_reply(
            self.metrics.run_done(result.status, result.error.code if result.error else None, result.elapsed_ms / 1000)
        )
        outcome: dict[str, Any] = {"attp.status": result.status, "attp.tool_calls": len(result.calls)}
        if result.error is not None:
            outcome["attp.error_code"] = bounded_code(result.error.code)
        # The MCP SDK's `tools/call attp_execute` span, when there is one.
        annotate(trace.get_current_span(), {**outcome, "attp.elapsed_ms": result.elapsed_ms})
        add_solution(result, starlark=(request.engine or self.settings.engine) == "starlark")
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

    async def open_session(self, caller: Caller | None, handle: str | None) -> Session | None:
        """The call's session, taken for it (None: the CLI, or no store). Raises `SessionRefused`."""
        if self.sessions is None or (caller is None and handle is None):
            return None
        return await self.sessions.open(caller if caller is not None else Caller(), handle)

    async def _admitted(
        self, request: ExecuteRequest, context: CallContext, session: Session | None
    ) -> ExecutionResult:
        if session is not None and request.reset and session.kept is not None:
            session.keep(None)
        spans: list[Callable[[], None]] = []  # the run's spans, made after its reply (`RunState.spans`)
        waited = now_ns()
        ticket = await self.admission.enter(context.session)
        spans.append(self.tracing.later("attp.admission", waited, now_ns()))
        try:
            if isinstance(ticket, ErrorInfo):
                return error_result(request.target, ticket)
            try:
                tools = (await self.tools_for(context.caller, session)).snapshot()
            except NoSession as refused:
                return error_result(request.target, refused.info)
            caller = context.caller
            run = RunState(
                progress=context.progress,
                session=session,
                owner=context.session,
                tools=tools,
                ask=context.ask,
                principal=principal_of(caller.tenant if caller is not None else None),
                handle=handle_digest(session.handle if session is not None else None),
                later=[],
                spans=spans,
            )
            sessions = self.sessions
            if sessions is None:
                return await self._execute(request, run)
            async with sessions.held(session):
                return await self._execute(request, run)
        except Exception:
            # A bug of ours must still come back as a result, never a traceback; details go to the log only.
            logger.exception("attp_execute failed inside the server")
            return error_result(request.target, ErrorInfo(code=ErrorCode.INTERNAL_ERROR, message="the server failed"))
        finally:
            if not isinstance(ticket, ErrorInfo):
                self.admission.leave(ticket)
            self.after_reply(functools.partial(record_all, spans))

    async def _execute(self, request: ExecuteRequest, run: RunState) -> ExecutionResult:
        prepared = await prepare(request, self.settings, self.registry)
        if isinstance(prepared, ExecutionResult):
            return prepared
        result = await self._run(prepared, run)
        if prepared.tam is None:
            return result
        if result.error is not None:
            result.error = prepared.tam.relocate(result.error)
        elif (failure := prepared.tam.failure(result.result)) is not None:
            # The steps already done stay in `result`: the model must know what happened before the failure.
            result.status, result.error = "error", failure
        return result

    async def _run(self, prepared: Prepared, run: RunState) -> ExecutionResult:
        """Run the program on a worker; with `keep`, the session state goes in and what the program leaves comes
        back."""
        run.deadline = time.monotonic() + self.settings.timeout_s
        session = run.session
        keeping = prepared.keep and prepared.engine == "python" and self.settings.session_state and session is not None
        state = session.kept if keeping and session is not None else None
        registry = run.tools or self.registry
        job = Job(
            code=prepared.code,
            tools=registry.callable_names(),
            namespaces=registry.namespaces(),
            timeout_s=self.settings.timeout_s,
            max_output_bytes=self.settings.max_output_bytes,
            max_result_bytes=self.settings.max_result_bytes,
            max_tool_calls=self.settings.max_tool_calls,
            capture_print=self.settings.capture_print,
            engine=prepared.engine,
            allow_imports=self.settings.allow_imports,
            state=state.message() if state is not None else None,
            keep=keeping,
            max_state_bytes=self.settings.max_state_bytes,
            unavailable=registry.unavailable(),
            modules=self.settings.modules,
        )
        # The phases' spans are made from their times after the reply (`RunState.spans`): the admission's (queued
        # in `_admitted`), the wait for a worker's, then the evaluation's, parent of the tool calls'.
        waiting, began = now_ns(), 0
        parent = otel_context.get_current()

        def evaluating(start_ns: int) -> None:
            self.tracing.timed("attp.acquire_worker", waiting, start_ns, parent)
            run.span = self.tracing.start("attp.evaluate", start_ns, parent)

        def started() -> None:  # a worker has the job: the wait is over, the worker's run begins
            nonlocal began
            began = now_ns()
            run.trace(functools.partial(evaluating, began))

        done: Mapping[str, Any] = {}
        generation = self._generation
        self._running[generation] += 1
        try:
            done = await self.pool.run(
                job, functools.partial(self.dispatch.traced_call, run), started, meanwhile=run.record_later
            )
        finally:
            self._running[generation] -= 1
            if not self._running[generation]:
                del self._running[generation]
            run.record_later()  # the metrics: before the reply
            ended = now_ns()

            def finish() -> None:
                if run.span is None:  # no worker ever had the job
                    self.tracing.timed("attp.acquire_worker", waiting, ended, parent)
                    return
                under = trace.set_span_in_context(run.span)
                check_s = done.get("check_s")  # the worker's word: bounded by what this side saw
                if isinstance(check_s, float) and 0 <= check_s <= (ended - began) / 1e9:
                    self.tracing.timed("attp.static_check", began, began + int(check_s * 1e9), under)
                error = done.get("error")
                if isinstance(error, dict) and error.get("code"):
                    failed(run.span, bounded_code(str(error["code"])))
                end(run.span, ended)

            run.trace(finish)
        result = from_worker(done, run, prepared.target, self.settings.max_output_bytes)
        point_to_renamed(result.error, registry.renamed(), job.namespaces)
        if result.error is not None and result.error.code == ErrorCode.NAME_NOT_FOUND and result.error.received:
            await self.dispatch.refused_by_filter(run, str(result.error.received))  # the check refused it unrun
        if result.error is not None and result.error.code == ErrorCode.UPSTREAM_UNAVAILABLE:
            # Refused before it ran (the check knows the server is down), so no call asked for the server: ask now.
            pack = registry.packs.get((result.error.tool_name or "").partition(".")[0])
            if pack is not None and pack.live is not None:
                pack.live.wake()
        if keeping and session is not None:
            kept, hint = await kept_state.after_run(session.kept, done, self.settings.max_state_bytes)
            if kept is not session.kept:  # unchanged state is not written again
                session.keep(kept)
            result.hint = joined(result.hint, hint)
        return result

    def implicit_session(self, caller: Caller) -> Session | None:
        """The implicit session of a handshake-era transport's session, to find its scope (not taken: nothing of it
        is read or written)."""
        key = self.sessions.implicit_key(caller) if self.sessions is not None else None
        return Session(key, caller.principal, "implicit") if key is not None else None

    async def tools_for(self, caller: Caller | None, session: Session | None) -> ToolRegistry:
        """The tools working on the caller's folder and memory (`isolation`). Raises `NoSession`."""
        return await self.scopes.tools(self.scopes.scope_for(caller, session))

    async def end_idle_sessions(self) -> None:
        """End the sessions idle past `session_idle_s` or older than `session_max_age_s` (theirs and every other
        replica's: whoever notices first): their kept state goes, and their folders if their own."""
        if self.sessions is not None:
            await self.sessions.sweep()
        if self.store is not None:  # rounds whose relaying replica never came back for the outcome
            await self.store.rounds.expire(before=time.time() - 2 * self.settings.approval_timeout_s - 120)

    def after_reply(self, record: Callable[[], None]) -> None:
        """Record `record` (a run's spans) once the run's reply is on its way, so that a client waits for no span (the
        SDK's spans cost tens of microseconds each, and a run makes several): `AFTER_SENT_S` after the HTTP
        transport has sent a response (`reply_sent`), else `AFTER_REPLY_S` from now."""
        self._after_reply.append(record)
        if self._after_reply_timer is None:
            self._record_in(AFTER_REPLY_S)

    def reply_sent(self) -> None:
        """A response has gone out: the spans waiting for replies are made in `AFTER_SENT_S` (or sooner, if due
        sooner: a stream of responses never puts them off)."""
        if self._after_reply:
            self._record_in(AFTER_SENT_S)

    def _record_in(self, delay: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.record_after_reply()
            return
        timer = self._after_reply_timer
        if timer is not None:
            if timer.when() <= loop.time() + delay:
                return
            timer.cancel()
        self._after_reply_timer = loop.call_later(delay, self.record_after_reply)

    def record_after_reply(self) -> None:
        """Make the spans waiting for their runs' replies now (the timer's job; the bench's, to count their cost)."""
        if self._after_reply_timer is not None:
            self._after_reply_timer.cancel()
            self._after_reply_timer = None
        record_all(self._after_reply)

    async def close(self) -> None:
        """This process is stopping: its connections' sessions end with it (and the last runs' spans are made)."""
        self.record_after_reply()
        if self.sessions is not None:
            await self.sessions.close()
        self.audit.close()


def postgres_url(settings: Settings) -> str | None:
    """`database_url` when it names a PostgreSQL server (packs such as memory keep their state there), else None."""
    url = settings.database_url.get_secret_value() if settings.database_url is not None else None
    return url if url is not None and url.startswith(("postgresql://", "postgres://")) else None


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
        database_url=postgres_url(settings),
    )
    for tool in registry.tools.values():
        for warning in docstring_warnings(tool):
            logger.warning("%s", warning)
    return registry


@asynccontextmanager
async def live_tools(registry: ToolRegistry, changed: Callable[[], Awaitable[None]]) -> AsyncIterator[LivePacks]:
    """Start the packs whose tools are live (upstream MCP servers), all at once; stop them on exit.

    Each reports back within its own startup timeout, connected or not (a server that fails is
    reported and its pack stays unavailable: it never stops the server). On exit their tasks are
    cancelled, which closes every connection and ends every child process they started. The `LivePacks`
    yielded starts and stops more of them while serving (`Runtime.reload`).
    """
    async with anyio.create_task_group() as running:
        live = LivePacks(running, changed)
        await live.start([pack for pack in registry.packs.values() if pack.live is not None])
        registry.refresh()
        try:
            yield live
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
async def open_runtime(
    settings: Settings,
    *,
    registry: ToolRegistry | None = None,
    reload: Callable[[], Settings] | None = None,
    config_file: Path | None = None,
) -> AsyncIterator[Runtime]:
    """Start the live packs and the worker pool and yield a ready `Runtime`; stop them all on exit.

    With `reload` (reads the configuration again) and `config_poll_s` > 0, edits of `config_file` and the
    ``mcp_config`` files are applied while serving (`ConfigWatch`, `Runtime.reload`)."""
    # Stamped before anything starts: an edit made while the upstream servers start is applied at the first look.
    stamp = config_stamp(config_file, settings) if reload is not None else None
    registry = registry if registry is not None else build_registry(settings)
    runtime: Runtime | None = None

    async def changed() -> None:
        if runtime is not None:
            await runtime.refresh()
        else:
            registry.refresh()

    async with (
        open_store(settings) as store,
        live_tools(registry, changed) as live,
        WorkerPool(
            size=settings.workers,
            max_workers=settings.max_workers,
            memory_mb=settings.memory_mb,
            containment=settings.containment,
        ) as pool,
        anyio.create_task_group() as tasks,
    ):
        runtime = Runtime(settings, registry, pool, store)
        runtime.tasks = tasks
        runtime.live = live
        await runtime.scopes.sweep_stale(store.handles.present)
        tasks.start_soon(_end_idle_sessions, runtime)
        watch = ConfigWatch(reload, config_file, settings, runtime.reload, stamp) if reload is not None else None
        if watch is not None and settings.config_poll_s > 0 and watch.files:  # nothing to watch: nothing can change
            runtime.watching = True
            tasks.start_soon(watch.run)
        try:
            yield runtime
        finally:
            tasks.cancel_scope.cancel()
            await runtime.close()
            runtime.tools.close()


AFTER_REPLY_S = 0.02
"""How long after a run its spans are made (`Runtime.after_reply`) at the latest: time for its reply to be written
out (a timer that fires first makes the reply wait for them)."""
AFTER_SENT_S = 0.002
"""How long after the HTTP transport has sent a response the spans waiting are made (`Runtime.reply_sent`): time
for the client to take its reply (woken by it, it often runs on the server's own core)."""


SWEEP_PERIOD_S = 10.0
"""How often a server process sweeps the store (expiry, the total state bound, its stdio session's liveness)."""


LIVE_SETTINGS = frozenset({"mcp_servers", "mcp_config"})
"""What an edit of the configuration changes while serving (`Runtime.reload`)."""


def _other_changes(before: Settings, after: Settings) -> list[str]:
    """The settings an edit changed besides the upstream servers (names only, never values)."""
    return [
        name
        for name in Settings.model_fields
        if name not in LIVE_SETTINGS and getattr(before, name) != getattr(after, name)
    ]


async def _end_idle_sessions(runtime: Runtime) -> None:
    """Sessions end on time even when no call comes to notice it; leftover folders go too."""
    period = min(SWEEP_PERIOD_S, runtime.settings.session_idle_s / 2)
    sweeps = 0
    while True:
        await anyio.sleep(period)
        sweeps += 1
        try:
            await runtime.end_idle_sessions()
            if runtime.store is not None and sweeps % 30 == 0:
                await runtime.scopes.sweep_stale(runtime.store.handles.present)
        except Exception as exc:  # the store is down for a while: say so, and try again next time
            logger.warning("could not sweep the sessions in the store: %s", exc)
