"""Telemetry made once a run's reply is on its way, so that no client waits for a span.

An SDK's span or histogram record costs tens of microseconds, and a run makes several: its steps are timed
with two clock reads each, and the records are handed to `AfterReply`, which makes them `AFTER_SENT_S` after
the HTTP transport has sent a response (`reply_sent`), else `AFTER_REPLY_S` after they were handed over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

AFTER_REPLY_S = 0.02
"""How long after a run its spans are made at the latest: time for its reply to be written out (a timer that fires
first makes the reply wait for them)."""
AFTER_SENT_S = 0.002
"""How long after the HTTP transport has sent a response the records waiting are made: time for the client to take
its reply (woken by it, it often runs on the server's own core)."""


def record_all(later: list[Callable[[], None]]) -> None:
    """Record and empty `later`, in the order it came (a span before its children's). A record is the
    telemetry's own (`tracing`, `metrics`), which never raises."""
    records = later.copy()
    later.clear()
    for record in records:
        record()


class AfterReply:
    """The records waiting for their runs' replies, and the one timer that makes them."""

    def __init__(self) -> None:
        self._waiting: list[Callable[[], None]] = []
        self._timer: asyncio.TimerHandle | None = None

    def add(self, record: Callable[[], None]) -> None:
        """Make `record` once the run's reply is on its way (`AFTER_REPLY_S` from now at the latest)."""
        self._waiting.append(record)
        if self._timer is None:
            self._record_in(AFTER_REPLY_S)

    def reply_sent(self) -> None:
        """A response has gone out: the records waiting are made in `AFTER_SENT_S` (or sooner, if due sooner: a
        stream of responses never puts them off)."""
        if self._waiting:
            self._record_in(AFTER_SENT_S)

    def _record_in(self, delay: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.record_now()
            return
        timer = self._timer
        if timer is not None:
            if timer.when() <= loop.time() + delay:
                return
            timer.cancel()
        self._timer = loop.call_later(delay, self.record_now)

    def record_now(self) -> None:
        """Make the records waiting now (the timer's job; the bench's, to count their cost; the server's at exit)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        record_all(self._waiting)

    @property
    def timer(self) -> asyncio.TimerHandle | None:
        """The pending timer, if any (tests read when it fires)."""
        return self._timer
