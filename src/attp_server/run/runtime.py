"""Text in, result out: the request -> the program -> a worker (tool calls answered here) -> the result.

The MCP face and the CLI are thin layers over `Runtime.execute`; this module knows nothing of
either. Tools run here, in the server process: the worker only asks for them by name. Each step has its
own module: `intake` (the request to a program), `evaluation` (the program on a worker), `dispatch` (the
program's tool calls), `outcome` (the worker's report to a result), `state` (what one run's steps share),
`reload` (configuration edits while serving); this one admits the call, opens its session and runs the steps
in order. `startup` builds it with everything that starts and stops with the server.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable

import anyio.abc
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace

from attp_server.errors import ErrorCode, ErrorInfo
from attp_server.model.catalog import Catalog
from attp_server.model.results import ExecutionResult
from attp_server.ops.after_reply import AfterReply, record_all
from attp_server.ops.audit import AuditLog, handle_digest
from attp_server.ops.call_log import report_call
from attp_server.ops.metrics import Gauges, Metrics, weakly
from attp_server.ops.rate_limits import RateLimits, known_principals
from attp_server.ops.tracing import Tracing, now_ns
from attp_server.run.admission import Admission
from attp_server.run.dispatch import Dispatcher
from attp_server.run.evaluation import Evaluation
from attp_server.run.intake import prepare
from attp_server.run.outcome import add_solution, error_result, with_session
from attp_server.run.reach import Reach, for_caller
from attp_server.run.reload import Reconfiguration
from attp_server.run.request import CallContext, Engine, ExecuteRequest, Progress
from attp_server.run.state import RunState
from attp_server.run.tool_executor import ToolExecutor
from attp_server.sandbox.process.pool import WorkerPool
from attp_server.sessions.approvals import Approvals
from attp_server.sessions.isolation import NoSession, Scopes
from attp_server.sessions.registry import Caller, Session, SessionRefused, Sessions
from attp_server.settings import Settings
from attp_server.store import Store, StoreError
from attp_server.toolpack import ToolRegistry

__all__ = ["CallContext", "Engine", "ExecuteRequest", "Progress", "RunState", "Runtime"]

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
        data_pool: WorkerPool | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: otel_metrics.MeterProvider | None = None,
    ) -> None:
        """`store`: where sessions live (None: every call stands alone). `data_pool`: the ``cpython`` engine's workers
        when that engine is offered beside a default engine whose workers are `pool`. `tracer_provider` and
        `meter_provider`: the OpenTelemetry globals unless given (the bench gives them)."""
        self.settings = settings
        self.registry = registry
        self.pool = pool
        self.known = registry.known_names(settings.modules)
        self.listeners: list[Callable[[], Awaitable[None]]] = []
        """Told after `refresh` (the MCP face tells its clients that the tool list changed)."""
        self.store = store
        self.sessions = Sessions(settings, store) if store is not None else None
        """Sessions and their state, in the store (None without a store: every call stands alone)."""
        self.reach = Reach(settings, store)  # the access rules: each call runs on its caller's view of the tools
        self.scopes = Scopes(settings, registry, separate=lambda: self.reach.separates_sessions)
        if self.sessions is not None:
            self.sessions.removed_listeners.append(self.scopes.end_sessions)
        self.approvals = Approvals(settings)
        self.tasks: anyio.abc.TaskGroup | None = None
        """Work that outlives the call that started it (a run waiting for an approval across calls)."""
        self.admission = Admission(settings)
        self.tools = ToolExecutor(settings.tool_threads, settings.max_runs_per_session)
        self.tracing = Tracing(tracer_provider)
        self.metrics = Metrics(known_principals(settings), weakly(self.gauges), meter_provider)
        self.audit = AuditLog(settings, registry.held_secrets)
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
        self.reconfiguration = Reconfiguration(settings, registry, self.scopes, self.refresh, self.reach)
        """Edits of the upstream servers' configuration while serving (its `live` is set by `open_runtime`)."""
        self.watching = False
        """Whether edits of the configuration are applied while serving (`ConfigWatch`)."""
        self.evaluation = Evaluation(
            settings,
            pool,
            self.dispatch,
            self.tracing,
            self.reconfiguration,
            data_pool=data_pool,
            seal_key=store.secret.key("cpython-state") if store is not None else None,
        )
        self.deferred = AfterReply()
        """Telemetry made once replies are on their way (a face tells it when a response has been sent)."""

    def gauges(self) -> Gauges:
        """What the server is doing right now (read at each scrape of the metrics)."""
        return Gauges(
            runs_waiting=self.admission.stats()["waiting"],
            workers_busy=sum(len(pool.running_pids()) for pool in self.evaluation.pools),
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

    async def refresh(self, *, changed: bool = False) -> None:
        """A live pack's tools or availability changed: settle the names again, rebuild what is derived from
        them (catalog and description, known names), and tell the listeners if what a client reads changed (or
        `changed`: what some callers read did, their access rules)."""
        before = (self.catalog.description, self.catalog.attp_text())
        self.registry.refresh()
        self.scopes.refresh()
        self.dispatch.catalog = Catalog(self.registry, self.settings)
        self.known = self.registry.known_names(self.settings.modules)
        if (self.catalog.description, self.catalog.attp_text()) == before and not changed:
            return
        for listener in list(self.listeners):
            try:
                await listener()
            except Exception:
                logger.exception("a tool-list listener failed")

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
            with_session(result, session, request, self.settings)
        add_solution(result, self.settings.engine)  # a run's result has its engine's already (`_execute`)
        code = result.error.code if result.error else None
        self.deferred.add(self.metrics.run_done(result.status, code, result.elapsed_ms / 1000))
        report_call(
            context.call_id,
            context.session,
            status=result.status,
            error_code=code,
            tool_calls=len(result.calls),
            elapsed_ms=result.elapsed_ms,
            principal=self.reach.label(context.caller),
        )
        return result

    async def open_session(self, caller: Caller | None, handle: str | None) -> Session | None:
        """The call's session, taken for it (None: the CLI, or no store). Raises `SessionRefused`."""
        if self.sessions is None or (caller is None and handle is None):
            return None
        own_folder = self.reach.isolation(caller) == "session"
        return await self.sessions.open(caller if caller is not None else Caller(), handle, own_folder=own_folder)

    async def _admitted(
        self, request: ExecuteRequest, context: CallContext, session: Session | None
    ) -> ExecutionResult:
        if session is not None and request.reset and session.kept is not None:
            session.keep(None)
        spans: list[Callable[[], None]] = []  # the run's spans, made after its reply (`RunState.spans`)
        waited = now_ns()
        caller = context.caller
        who = for_caller(caller)
        ticket = await self.admission.enter(context.session, who["principal"])
        spans.append(self.tracing.later("attp.admission", waited, now_ns()))
        try:
            if isinstance(ticket, ErrorInfo):
                return error_result(request.target, ticket)
            try:
                tools = (await self.tools_for(context.caller, session)).snapshot()
            except NoSession as refused:
                return error_result(request.target, refused.info)
            view = self.reach.view(caller, tools)
            run = RunState(
                progress=context.progress,
                session=session,
                owner=context.session,
                tools=view.tools,
                catalog=view.catalog,
                grant=view.grant,
                isolation=self.reach.isolation(caller),
                ask=context.ask,
                **who,
                open_url=context.open_url,
                handle=handle_digest(session.handle if session is not None else None),
                later=[],
                spans=spans,
                slot=self.admission.slot(ticket),
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
            self.deferred.add(functools.partial(record_all, spans))

    async def _execute(self, request: ExecuteRequest, run: RunState) -> ExecutionResult:
        prepared = await prepare(request, self.settings, self.registry)
        if isinstance(prepared, ExecutionResult):
            return prepared
        forbidden = self.reach.refused_engine(run.grant, prepared.engine)  # the call's, or its envelope's
        if forbidden is not None:
            return error_result(request.target, forbidden)
        result = await self.evaluation.run(prepared, run, run.tools or self.registry)
        add_solution(result, prepared.engine)
        if prepared.tam is None:
            return result
        if result.error is not None:
            result.error = prepared.tam.relocate(result.error)
        elif (failure := prepared.tam.failure(result.result)) is not None:
            # The steps already done stay in `result`: the model must know what happened before the failure.
            result.status, result.error = "error", failure
        return result

    def implicit_session(self, caller: Caller) -> Session | None:
        """The implicit session of a handshake-era transport's session, to find its scope (not taken: nothing of it
        is read or written)."""
        key = self.sessions.implicit_key(caller) if self.sessions is not None else None
        return Session(key, caller.principal, "implicit") if key is not None else None

    async def tools_for(self, caller: Caller | None, session: Session | None) -> ToolRegistry:
        """The tools working on the caller's folder and memory (`isolation`, or its access rules'). Raises
        `NoSession`."""
        return await self.scopes.tools(self.scopes.scope_for(caller, session, self.reach.isolation(caller)))

    async def end_idle_sessions(self) -> None:
        """End the sessions idle past `session_idle_s` or older than `session_max_age_s` (theirs and every other
        replica's: whoever notices first): their kept state goes, and their folders if their own."""
        if self.sessions is not None:
            await self.sessions.sweep()
        if self.store is not None:  # rounds whose relaying replica never came back for the outcome
            await self.store.rounds.expire(before=time.time() - 2 * self.settings.approval_timeout_s - 120)

    async def close(self) -> None:
        """This process is stopping: its connections' sessions end with it (and the last runs' spans are made)."""
        self.deferred.record_now()
        if self.sessions is not None:
            await self.sessions.close()
        self.audit.close()
