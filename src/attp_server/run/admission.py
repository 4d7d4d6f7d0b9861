"""Admission control: how many runs may be in flight, and what a run that cannot start is told.

At most `max_workers` runs are in flight in the server, and at most `max_runs_per_session` of one
session. A run beyond either waits its turn (fairly: see `attp_server.run.slots`) for up to
`queue_timeout_s`; past that, or when the waiting line is full, it is answered ``SERVER_BUSY`` with
the time to retry after: when the soonest of the runs in its way must end (each has its deadline).
Nothing queues without bound, and no session can take every slot.

A run waiting for a person (an approval question, on either protocol era) holds no slot: it gives its slot back
for the wait (`RunSlot`, through the pool's `RunClock.paused`) and takes one back after the answer, ahead of runs
not started yet. What it holds meanwhile is a place among the runs waiting for a person, a separate bound:
`PAUSED_PER_PRINCIPAL` of one principal, `PAUSED_PER_SLOT` times `max_workers` in all; a run past either is not
asked its question (the tool call fails with ``SERVER_BUSY``). So unanswered questions never keep another
principal's calls out, and the worker processes they keep alive are bounded.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass

from attp_server.errors import ErrorCode, ErrorInfo
from attp_server.run.slots import FairSlots
from attp_server.sandbox.process.pool import PauseRefused
from attp_server.settings import Settings

WAITING_PER_SLOT = 4
"""The waiting line holds at most this many runs per slot."""

PAUSED_PER_PRINCIPAL = 4
"""Runs of one principal that may wait for a person (an approval) at once; one more is refused without asking."""

PAUSED_PER_SLOT = 2
"""Runs of all principals that may wait for a person at once, per slot (`max_workers`)."""


@dataclass
class _Ticket:
    session: str
    principal: str
    started: float
    holding: bool = True
    """It holds a slot (False while it waits for a person)."""


class Admission:
    """Decides whether a run may start now, after a wait, or not at all (`SERVER_BUSY`)."""

    def __init__(self, settings: Settings) -> None:
        self.max_runs = settings.max_workers
        self.per_session = min(settings.max_runs_per_session, settings.max_workers)
        self.wait_s = settings.queue_timeout_s
        self.run_s = settings.timeout_s
        self._slots = FairSlots(self.max_runs, self.per_session, max_waiting=WAITING_PER_SLOT * self.max_runs)
        self._started: dict[int, _Ticket] = {}
        self._tickets = 0
        self.admitted = 0
        self.max_paused = PAUSED_PER_SLOT * self.max_runs
        self._paused: Counter[str] = Counter()
        """Runs waiting for a person, per principal."""

    def stats(self) -> dict[str, int]:
        return {
            "in_flight": self._slots.in_use,
            "waiting": self._slots.waiting,
            "max_runs": self.max_runs,
            "max_runs_per_session": self.per_session,
            "admitted": self.admitted,
            "refused": self._slots.refused,
            "sessions": len(Counter(ticket.session for ticket in self._started.values())),
            "waiting_for_person": self._paused.total(),
        }

    async def enter(self, session: str, principal: str = "") -> int | ErrorInfo:
        """A ticket for `leave` once the run is over (and for `slot`), or the SERVER_BUSY error to answer with."""
        if not await self._slots.acquire(session, time.monotonic() + self.wait_s):
            return self._busy(session)
        self._tickets += 1
        self._started[self._tickets] = _Ticket(session, principal, time.monotonic())
        self.admitted += 1
        return self._tickets

    def leave(self, ticket: int) -> None:
        found = self._started.pop(ticket)
        if found.holding:
            self._slots.release(found.session, time.monotonic() - found.started)

    def slot(self, ticket: int) -> RunSlot:
        """The run's slot, which it gives back while it waits for a person (the pool's `RunClock`)."""
        return RunSlot(self, self._started[ticket])

    def pause(self, ticket: _Ticket) -> None:
        """The run of `ticket` waits for a person: its slot goes back; `PauseRefused` if it may not wait now."""
        own = self._paused[ticket.principal]
        if own >= PAUSED_PER_PRINCIPAL or self._paused.total() >= self.max_paused:
            mine = own >= PAUSED_PER_PRINCIPAL
            raise PauseRefused(
                f"{own if mine else self._paused.total()} of {'your' if mine else 'all'} programs are already "
                f"waiting for the user's answer, the most this server lets wait at once; the user was not asked"
            )
        self._paused[ticket.principal] += 1
        ticket.holding = False
        self._slots.release(ticket.session, time.monotonic() - ticket.started)

    async def resume(self, ticket: _Ticket) -> None:
        """The person answered: a slot for the run again, ahead of runs not started (however long that takes: every
        run holding one ends by its deadline)."""
        try:
            await self._slots.acquire(ticket.session, math.inf, first=True)
            ticket.holding, ticket.started = True, time.monotonic()
        finally:
            self._paused[ticket.principal] -= 1
            if self._paused[ticket.principal] <= 0:
                del self._paused[ticket.principal]

    def _busy(self, session: str) -> ErrorInfo:
        now = time.monotonic()
        own = self._slots.held(session) >= self.per_session
        starts = [
            ticket.started
            for ticket in self._started.values()
            if ticket.holding and (ticket.session == session or not own)
        ]
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


class RunSlot:
    """One admitted run's slot, as the pool's `RunClock` gives it back and takes it again (`Slot`)."""

    def __init__(self, admission: Admission, ticket: _Ticket) -> None:
        self.admission = admission
        self.ticket = ticket

    async def give_back(self) -> None:
        """Raises `PauseRefused` when the run's principal (or the server) has as many runs waiting as it may."""
        self.admission.pause(self.ticket)

    async def take_back(self) -> None:
        await self.admission.resume(self.ticket)
