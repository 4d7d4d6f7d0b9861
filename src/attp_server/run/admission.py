"""Admission control: how many runs may be in flight, and what a run that cannot start is told.

At most `max_workers` runs are in flight in the server, and at most `max_runs_per_session` of one
session. A run beyond either waits its turn (fairly: see `attp_server.run.slots`) for up to
`queue_timeout_s`; past that, or when the waiting line is full, it is answered ``SERVER_BUSY`` with
the time to retry after: when the soonest of the runs in its way must end (each has its deadline).
Nothing queues without bound, and no session can take every slot.
"""

from __future__ import annotations

import math
import time
from collections import Counter

from attp_server.errors import ErrorCode, ErrorInfo
from attp_server.run.slots import FairSlots
from attp_server.settings import Settings

WAITING_PER_SLOT = 4
"""The waiting line holds at most this many runs per slot."""


class Admission:
    """Decides whether a run may start now, after a wait, or not at all (`SERVER_BUSY`)."""

    def __init__(self, settings: Settings) -> None:
        self.max_runs = settings.max_workers
        self.per_session = min(settings.max_runs_per_session, settings.max_workers)
        self.wait_s = settings.queue_timeout_s
        self.run_s = settings.timeout_s
        self._slots = FairSlots(self.max_runs, self.per_session, max_waiting=WAITING_PER_SLOT * self.max_runs)
        self._started: dict[int, tuple[str, float]] = {}
        self._tickets = 0
        self.admitted = 0

    def stats(self) -> dict[str, int]:
        return {
            "in_flight": self._slots.in_use,
            "waiting": self._slots.waiting,
            "max_runs": self.max_runs,
            "max_runs_per_session": self.per_session,
            "admitted": self.admitted,
            "refused": self._slots.refused,
            "sessions": len(Counter(session for session, _ in self._started.values())),
        }

    async def enter(self, session: str) -> int | ErrorInfo:
        """A ticket for `leave` once the run is over, or the SERVER_BUSY error to answer with."""
        if not await self._slots.acquire(session, time.monotonic() + self.wait_s):
            return self._busy(session)
        self._tickets += 1
        self._started[self._tickets] = (session, time.monotonic())
        self.admitted += 1
        return self._tickets

    def leave(self, ticket: int) -> None:
        session, started = self._started.pop(ticket)
        self._slots.release(session, time.monotonic() - started)

    def _busy(self, session: str) -> ErrorInfo:
        now = time.monotonic()
        own = self._slots.held(session) >= self.per_session
        starts = [started for owner, started in self._started.values() if owner == session or not own]
        # Every run in the way ends by its deadline (the worker is killed there): the soonest one frees a slot.
        soonest = min(starts, default=now) + self.run_s - now
        retry = max(1, math.ceil(soonest))
        if own:
            message = (
                f"this session already has {self.per_session} programs running (max_runs_per_session), and none "
                f"finished within {self.wait_s:g} s"
            )
            solution = f"Wait for your running programs' results before sending more; retry in {retry} s."
        else:
            message = (
                f"the server is already running {self.max_runs} programs (max_workers) and none finished within "
                f"{self.wait_s:g} s, so this one was not run"
            )
            solution = f"Retry the same call in {retry} s."
        return ErrorInfo(code=ErrorCode.SERVER_BUSY, message=message, solution=solution)
