"""The worker's own event loop: ``async``/``await``, ``asyncio.run`` and top-level ``await`` without any descriptor.

asyncio's default loop wakes itself through a socket pair and waits on epoll, neither of which a locked-down worker
may make (seccomp). A program has no socket or pipe to wait on anyway, only timers and tasks, so `WorkerLoop` waits
by sleeping until its next timer. `install` makes it the loop ``asyncio.run`` and ``asyncio.new_event_loop`` give.

Runs in the worker. Imports nothing above `attp_server.sandbox`.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Coroutine, Mapping
from typing import Any


class _TimersOnly(selectors.BaseSelector):
    """A selector that watches no descriptor: `select` sleeps for its timeout and reports nothing."""

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        raise OSError("the sandbox has no sockets or pipes for an event loop to watch")

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        raise KeyError(fileobj)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise RuntimeError("the event loop has nothing left to wait for: an awaited future that nothing sets")
        if timeout > 0:
            time.sleep(timeout)
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return {}

    def close(self) -> None:
        return None


class WorkerLoop(asyncio.SelectorEventLoop):
    """A selector event loop with no self-pipe (a worker has one thread: nothing wakes it from another)."""

    def __init__(self) -> None:
        super().__init__(_TimersOnly())

    def _make_self_pipe(self) -> None:
        self._ssock = self._csock = None

    def _close_self_pipe(self) -> None:
        return None

    def _write_to_self(self) -> None:
        return None


class _Policy(asyncio.DefaultEventLoopPolicy):
    _loop_factory = WorkerLoop


def install() -> None:
    """Make `WorkerLoop` the loop asyncio gives this process."""
    asyncio.set_event_loop_policy(_Policy())


def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a top-level ``await`` program to its end on a new `WorkerLoop`."""
    loop = WorkerLoop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()
