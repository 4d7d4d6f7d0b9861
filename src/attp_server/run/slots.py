"""A bounded number of slots shared fairly between sessions: runs in flight, tool threads.

`FairSlots` hands out at most `capacity` slots, at most `per_owner` to any one owner (a session).
When none is free, a request waits, until its deadline at the latest; the waiting line is bounded
too. A freed slot goes first to a waiter that asks `first` (a run taking back the slot it gave up while it
waited for a person: it had started, so it goes ahead of runs that have not, whatever its owner holds), then to
the waiter whose owner holds the fewest slots, then to the one whose owner
has used the least slot time lately (a decaying sum, so a session that keeps the server busy yields
to one that does not), then to the earliest. A full line turns away its worst-placed request.

Everything here runs on the event loop; nothing blocks.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import anyio

HALF_LIFE_S = 30.0
"""How fast a session's recent use of slots is forgotten: half of it every 30 seconds."""

_FORGET_BELOW = 0.01
"""Use (slot-seconds) under which an owner holding nothing is forgotten."""


@dataclass
class _Owner:
    held: int = 0
    waiting: int = 0
    used: float = 0.0
    """Slot-seconds, decayed to `as_of`."""
    as_of: float = 0.0

    def recent_use(self, now: float) -> float:
        return float(self.used * 0.5 ** ((now - self.as_of) / HALF_LIFE_S))


@dataclass(eq=False)
class _Waiter:
    owner: str
    order: int
    first: bool = False
    granted: anyio.Event = field(default_factory=anyio.Event)
    refused: bool = False


class FairSlots:
    """At most `capacity` slots in use, at most `per_owner` per owner; waiters served fairly, within their deadline."""

    def __init__(self, capacity: int, per_owner: int, max_waiting: int) -> None:
        if capacity < 1 or per_owner < 1 or max_waiting < 0:
            raise ValueError("capacity and per_owner must be >= 1, max_waiting >= 0")
        self.capacity = capacity
        self.per_owner = per_owner
        self.max_waiting = max_waiting
        self.in_use = 0
        self.refused = 0
        """Requests turned away (line full, or deadline passed while waiting)."""
        self._owners: dict[str, _Owner] = {}
        self._waiters: list[_Waiter] = []
        self._order = itertools.count()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def held(self, owner: str) -> int:
        found = self._owners.get(owner)
        return found.held if found is not None else 0

    def try_acquire(self, owner: str, *, first: bool = False) -> bool:
        """Take a slot at once if one is free for `owner`; else False.

        Waiters never block this: while a slot is free, every waiter's owner is at its `per_owner` cap
        (a freed slot goes to an eligible waiter at once).
        """
        state = self._owners.get(owner)
        if state is None:
            state = self._owners[owner] = _Owner()
        if self.in_use < self.capacity and (first or state.held < self.per_owner):
            self.in_use += 1
            state.held += 1
            return True
        return False

    async def acquire(self, owner: str, deadline: float, *, first: bool = False) -> bool:
        """Take a slot, waiting until `deadline` (``time.monotonic()``) at the latest; False if none came. `first`:
        ahead of every other waiter, past the owner's cap and never turned away by a full line (the caller bounds
        how many such waiters there are)."""
        if self.try_acquire(owner, first=first):
            return True
        waiter = _Waiter(owner, next(self._order), first)
        if not first and len(self._waiters) >= self.max_waiting:
            worst = max((w for w in self._waiters if not w.first), key=self._rank, default=None)
            if worst is None or self._rank(worst) <= self._rank(waiter):
                self.refused += 1
                self._forget_if_idle(owner)
                return False
            self._drop(worst, refused=True)
        self._waiters.append(waiter)
        self._owners[owner].waiting += 1
        try:
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                await waiter.granted.wait()
        except BaseException:  # cancelled: leave the line, or give back a slot granted at the last moment
            if waiter in self._waiters:
                self._drop(waiter, refused=False)
                self._forget_if_idle(owner)
            elif not waiter.refused:
                self.release(owner)
            raise
        if not waiter.granted.is_set():
            self._drop(waiter, refused=True)  # the deadline came first
        if waiter.refused:
            self._forget_if_idle(owner)
            return False
        return True

    def release(self, owner: str, held_for: float = 0.0) -> None:
        """Give a slot back (`held_for`: seconds it was held, counted as the owner's use) and wake the next waiter."""
        state = self._owners[owner]
        state.held -= 1
        self.in_use -= 1
        now = time.monotonic()
        state.used = state.recent_use(now) + held_for
        state.as_of = now
        self._grant()
        self._forget_if_idle(owner)

    def _forget_if_idle(self, owner: str) -> None:
        state = self._owners.get(owner)
        if state is not None and not state.held and not state.waiting and state.used < _FORGET_BELOW:
            del self._owners[owner]

    def _rank(self, waiter: _Waiter) -> tuple[bool, int, float, int]:
        state = self._owners[waiter.owner]
        return (not waiter.first, state.held, state.recent_use(time.monotonic()), waiter.order)

    def _drop(self, waiter: _Waiter, *, refused: bool) -> None:
        self._waiters.remove(waiter)
        self._owners[waiter.owner].waiting -= 1
        if refused:
            waiter.refused = True
            self.refused += 1
            waiter.granted.set()  # wakes it, if it still waits; it sees `refused`

    def _grant(self) -> None:
        while self.in_use < self.capacity:
            eligible = [w for w in self._waiters if w.first or self._owners[w.owner].held < self.per_owner]
            if not eligible:
                return
            chosen = min(eligible, key=self._rank)
            self._drop(chosen, refused=False)
            self.in_use += 1
            self._owners[chosen.owner].held += 1
            chosen.granted.set()
