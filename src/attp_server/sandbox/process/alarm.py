"""The deadline as a timer signal: a run's Python code is stopped at its deadline, whatever it is doing.

While a program runs in the main thread, ``SIGALRM`` fires at the deadline (and every 10 ms after, in
case one is lost) and its handler raises `Timeout`, the uncatchable abort: CPython runs signal handlers
between bytecodes, so a runaway loop or recursion ends on time without the evaluator checking the clock
on every call; the regex engine looks for signals too. A long C-level call that does not (a huge sum,
a sort) returns first; the server's kill covers that. A tool call holds the alarm (`hold`, `release`)
so a reply is never left half read on the protocol pipe; a deadline that passed meanwhile ends the run
at the next tick (10 ms) after the reply is in.

Where no timer is possible (another thread, another platform) `armed` reports it and the evaluator
checks the clock itself on every call as well as every loop iteration.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Protocol

from attp_server.sandbox.limits import Timeout

REPEAT_S = 0.01
"""After the first alarm, how often it fires again (a handler's exception lost in C code is retried)."""


def available() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


class Clock(Protocol):
    """What has the deadline: its ``deadline`` may move later while the run waits (an approval)."""

    deadline: float


class _State:
    """Whether a tool call is in flight (the alarm then waits for the next tick, 10 ms later)."""

    holding = False


@contextlib.contextmanager
def armed(clock: Clock) -> Iterator[bool]:
    """Raise `Timeout` in this thread once ``time.monotonic()`` passes ``clock.deadline``, while the block runs.

    Yields False, doing nothing, where a timer signal is not available.
    """
    if not available():
        yield False
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        if time.monotonic() < clock.deadline:  # too early, or the deadline moved: the next alarm looks again
            return
        if _State.holding:  # mid tool call: the reply is read first; the next tick ends the run
            return
        raise Timeout("the program ran past its time limit")

    previous = signal.signal(signal.SIGALRM, expire)
    started = time.monotonic()
    _State.holding = False
    pending, interval = signal.setitimer(signal.ITIMER_REAL, max(clock.deadline - started, 0.001), REPEAT_S)
    try:
        yield True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _State.holding = False
        if pending:  # someone else's alarm (a test runner's timeout): put it back, minus the time spent here
            signal.setitimer(signal.ITIMER_REAL, max(pending - (time.monotonic() - started), 0.001), interval)


def hold() -> None:
    """A tool call starts: the alarm must not interrupt its round trip on the protocol pipe."""
    _State.holding = True


def release() -> None:
    """The tool call's reply is in. A deadline that passed meanwhile (and was not moved by a pause) ends the
    run at the alarm's next tick, after the call's own outcome (a value, or the tool's error) is taken."""
    _State.holding = False
