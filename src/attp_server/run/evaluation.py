"""A prepared program on a worker: the job, the spans of its phases, the worker's report to a result, the kept
state written back.

`Evaluation.run` builds the `Job` (the program, the tools of the call's scope, the limits, the session's kept
state), hands it to the worker pool with `dispatch` answering its tool calls, and turns the worker's report into
the `ExecutionResult` (`outcome`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from attp_server.errors import ErrorCode
from attp_server.model.results import ExecutionResult
from attp_server.ops.metrics import bounded_code
from attp_server.ops.tracing import Tracing, end, failed, now_ns
from attp_server.run.dispatch import Dispatcher
from attp_server.run.intake import Prepared
from attp_server.run.outcome import from_worker, hidden_by_filter, joined, point_to_renamed
from attp_server.run.reload import Reconfiguration
from attp_server.run.state import RunState
from attp_server.sandbox.engines import ENGINES
from attp_server.sandbox.process.pool import Job, WorkerPool
from attp_server.sessions import kept_state
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry


class Evaluation:
    """Runs prepared programs on the pool's workers."""

    def __init__(
        self,
        settings: Settings,
        pool: WorkerPool,
        dispatch: Dispatcher,
        tracing: Tracing,
        reconfiguration: Reconfiguration,
        *,
        data_pool: WorkerPool | None = None,
        seal_key: bytes | None = None,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.data_pool = data_pool
        """The ``cpython`` engine's workers, when it is offered beside a default engine that runs on `pool`."""
        self.dispatch = dispatch
        self.tracing = tracing
        self.reconfiguration = reconfiguration
        self.seal_key = seal_key
        """The server's key for sealing a ``cpython`` session's pickle to its handle (None: no store, no sessions)."""

    @property
    def pools(self) -> list[WorkerPool]:
        """Every worker pool of the server (the default engine's, and the ``cpython`` engine's if apart)."""
        return [self.pool, *([self.data_pool] if self.data_pool is not None else [])]

    def pool_for(self, engine: str) -> WorkerPool:
        return self.data_pool if engine == "cpython" and self.data_pool is not None else self.pool

    def job(self, prepared: Prepared, run: RunState, registry: ToolRegistry, keeping: bool) -> Job:
        settings = self.settings
        pickles = ENGINES[prepared.engine].keeps == "pickles"
        return Job(
            code=prepared.code,
            tools=registry.callable_names(),
            namespaces=registry.namespaces(),
            timeout_s=settings.timeout_s,
            max_output_bytes=settings.max_output_bytes,
            max_result_bytes=settings.max_result_bytes,
            max_tool_calls=settings.max_tool_calls,
            capture_print=settings.capture_print,
            engine=prepared.engine,
            allow_imports=settings.allow_imports,
            state=self._state(run, pickles) if keeping else None,
            keep=keeping,
            max_state_bytes=settings.cpython_max_state_bytes if pickles else settings.max_state_bytes,
            unavailable=registry.unavailable(),
            modules=settings.modules,
        )

    def _state(self, run: RunState, pickles: bool) -> dict[str, Any] | None:
        """The session's kept state for the worker: an engine gets only its own kind, and a pickle only with the seal
        this server put on it for this very handle (a row changed, or moved from another handle, is dropped)."""
        kept = run.session.kept if run.session is not None else None
        if kept is None or bool(kept.pickle) != pickles:
            return None
        if pickles and (
            run.session is None or self.seal_key is None or not kept_state.sealed(kept, self.seal_key, run.session.key)
        ):
            run.notices["kept-state"] = kept_state.UNSEALED
            return None
        return kept.message()

    def owner(self, run: RunState) -> str:
        """Whose worker runs it: a worker serves one owner only (`WorkerPool.run`), which is the principal (the
        token's name, or the one anonymous principal), and under ``isolation = "session"`` the principal's session.
        Callers without a token are one principal: nothing tells them apart but a session."""
        if (run.isolation or self.settings.isolation) == "session":
            return f"{run.principal}/{run.session.key if run.session is not None else ''}"
        return run.principal

    async def run(self, prepared: Prepared, run: RunState, registry: ToolRegistry) -> ExecutionResult:
        """Run the program on a worker; with `keep`, the session state goes in and what the program leaves comes
        back."""
        run.deadline = time.monotonic() + self.settings.timeout_s
        session = run.session
        keeps = ENGINES[prepared.engine].keeps
        keeping = prepared.keep and keeps != "nothing" and self.settings.session_state and session is not None
        job = self.job(prepared, run, registry, keeping)
        done = await self._on_worker(job, run)
        result = from_worker(done, run, prepared.target, self.settings.max_output_bytes, self.settings.max_result_bytes)
        point_to_renamed(result.error, registry.renamed(), job.namespaces)
        hidden_by_filter(result.error, registry)
        if result.error is not None and result.error.code == ErrorCode.NAME_NOT_FOUND and result.error.received:
            await self.dispatch.refused_by_filter(run, str(result.error.received))  # the check refused it unrun
        if result.error is not None and result.error.code == ErrorCode.UPSTREAM_UNAVAILABLE:
            # Refused before it ran (the check knows the server is down), so no call asked for the server: ask now.
            pack = registry.packs.get((result.error.tool_name or "").partition(".")[0])
            if pack is not None and pack.live is not None:
                pack.live.wake()
        if keeping and session is not None:
            sealing = None
            max_bytes = self.settings.max_state_bytes
            if keeps == "pickles" and self.seal_key is not None:
                sealing, max_bytes = (
                    kept_state.Sealing(self.seal_key, session.key),
                    self.settings.cpython_max_state_bytes,
                )
            kept, hint = await kept_state.after_run(session.kept, done, max_bytes, sealing)
            if kept is not session.kept:  # unchanged state is not written again
                session.keep(kept)
            result.hint = joined(result.hint, hint)
        return result

    async def _on_worker(self, job: Job, run: RunState) -> Mapping[str, Any]:
        """The worker's report of `job`, with the spans of its phases made after the reply (`RunState.spans`): the
        wait for a worker, then the evaluation, parent of the static check's and the tool calls'."""
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
        try:
            with self.reconfiguration.run():
                done = await self.pool_for(job.engine).run(
                    job,
                    functools.partial(self.dispatch.traced_call, run),
                    started,
                    meanwhile=run.record_later,
                    owner=self.owner(run),
                    slot=run.slot,
                )
        finally:
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
        return done
