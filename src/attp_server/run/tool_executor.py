"""Synchronous tool calls on threads of their own: a bounded number, shared fairly, counted when abandoned.

A tool runs in the server process. A synchronous one runs on one of `threads` threads, so that it
never stalls the event loop. A thread cannot be stopped from outside: when the run that made a call
ends first (its deadline, a cancellation), the call is *abandoned*. It keeps its thread until the
function returns, and is counted meanwhile (``/healthz`` -> ``tools.abandoned``). The threads are
bounded, so what abandoned calls can hold is bounded; one session holds at most `per_session` of
them, so its abandoned calls cannot take the threads other sessions need: its own later calls wait,
until their run's deadline at the latest, and then fail with ``SERVER_BUSY``.

Tools that can stop early read their run's deadline (``current_call().remaining()``, set by the
runtime and copied into the thread): the shell pack caps a command's timeout with it, the memory pack
aborts a query past it.

The server runs on asyncio (anyio's asyncio backend); a finished call is handed back to the loop with
``call_soon_threadsafe``, the cheapest way across (a hop costs about 30 µs).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attp_server.run.slots import FairSlots

logger = logging.getLogger(__name__)


class NoThread(Exception):
    """No tool thread came free for this session before its run's deadline."""

    def __init__(self, held: int, abandoned: int) -> None:
        super().__init__(f"{held} threads held by this session, {abandoned} abandoned")
        self.held = held
        self.abandoned = abandoned


@dataclass(eq=False)
class _Call:
    function: Callable[[], Any]
    context: contextvars.Context
    loop: asyncio.AbstractEventLoop
    answer: asyncio.Future[Any]
    session: str
    started: float
    finished: bool = False
    abandoned: bool = False


class ToolExecutor:
    """Runs synchronous tool functions on at most `threads` threads, at most `per_session` per session."""

    def __init__(self, threads: int, per_session: int) -> None:
        self.threads = threads
        self._slots = FairSlots(threads, min(per_session, threads), max_waiting=4 * threads)
        self._queue: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._started: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()
        self.abandoned = 0
        """Calls whose run has ended while they still run."""
        self.calls = 0
        self.busy_refusals = 0

    def stats(self) -> dict[str, int]:
        return {
            "threads": self.threads,
            "started": len(self._started),
            "busy": self._slots.in_use,
            "waiting": self._slots.waiting,
            "abandoned": self.abandoned,
            "calls": self.calls,
            "refused": self.busy_refusals,
        }

    async def call(self, function: Callable[..., Any], kwargs: dict[str, Any], *, session: str, deadline: float) -> Any:
        """``function(**kwargs)`` on a tool thread; raises what it raises, or `NoThread`."""
        if not await self._slots.acquire(session, deadline):
            self.busy_refusals += 1
            raise NoThread(self._slots.held(session), self.abandoned)
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()  # the tool reads its run's deadline there (`current_call()`)
        bound = functools.partial(function, **kwargs)
        call = _Call(bound, context, loop, loop.create_future(), session, time.monotonic())
        self.calls += 1
        self._submit(call)
        try:
            return await call.answer
        except asyncio.CancelledError:
            if not call.finished:
                call.abandoned = True
                self.abandoned += 1
                logger.warning("a tool call outlived its run; its thread is counted as abandoned until it returns")
            raise

    def close(self) -> None:
        """Stop the idle threads (busy ones are daemons and end with the process)."""
        for _ in self._started:
            self._queue.put(None)

    def _submit(self, call: _Call) -> None:
        self._queue.put(call)
        with self._lock:
            if self._idle:
                self._idle -= 1
                return
            thread = threading.Thread(target=self._work, name=f"attp-tool-{len(self._started) + 1}", daemon=True)
            self._started.append(thread)
        thread.start()

    def _work(self) -> None:
        while (call := self._queue.get()) is not None:
            try:
                outcome: tuple[bool, Any] = (True, call.context.run(call.function))
            except BaseException as exc:  # handed to the caller, as a direct call would raise it
                outcome = (False, exc)
            with self._lock:  # idle before the slot is given back: the next call must not start another thread
                self._idle += 1
            try:
                call.loop.call_soon_threadsafe(self._finished, call, outcome)
            except RuntimeError:  # the loop is closed: the server is stopping
                return

    def _finished(self, call: _Call, outcome: tuple[bool, Any]) -> None:
        call.finished = True
        self._slots.release(call.session, time.monotonic() - call.started)
        if call.abandoned:
            self.abandoned -= 1
            return
        if call.answer.done():  # cancelled: the caller is gone, and is about to find out
            return
        ok, value = outcome
        if ok:
            call.answer.set_result(value)
        else:
            call.answer.set_exception(value)
