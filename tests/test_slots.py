"""FairSlots: a bounded number of slots, a per-session cap, a bounded line served fairly, deadlines; and a run waiting
for a person, which gives its slot back (`Admission.slot`)."""

from __future__ import annotations

import functools
import time

import anyio
import pytest

from attp_server.errors import ErrorInfo
from attp_server.run.admission import PAUSED_PER_PRINCIPAL, Admission
from attp_server.run.slots import FairSlots
from attp_server.sandbox.process.pool import PauseRefused
from attp_server.settings import Settings

pytestmark = pytest.mark.anyio

LATER = 3600.0


def soon(seconds: float = LATER) -> float:
    return time.monotonic() + seconds


async def test_capacity_and_the_per_owner_cap() -> None:
    slots = FairSlots(capacity=3, per_owner=2, max_waiting=4)
    assert slots.try_acquire("a") and slots.try_acquire("a")
    assert not slots.try_acquire("a")  # its cap, though one slot is free
    assert slots.try_acquire("b")
    assert not slots.try_acquire("c")  # the server is full
    slots.release("a")
    assert slots.try_acquire("c")
    assert (slots.in_use, slots.held("a"), slots.held("b"), slots.held("c")) == (3, 1, 1, 1)


async def test_a_freed_slot_goes_to_the_owner_holding_fewest() -> None:
    slots = FairSlots(capacity=2, per_owner=2, max_waiting=4)
    assert slots.try_acquire("greedy") and slots.try_acquire("other")
    order: list[str] = []

    async def wait(owner: str) -> None:
        assert await slots.acquire(owner, soon())
        order.append(owner)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(wait, "greedy")  # first in line, but already holds a slot
        await anyio.sleep(0.01)
        tasks.start_soon(wait, "newcomer")
        await anyio.sleep(0.01)
        slots.release("other")
        await anyio.sleep(0.01)
        assert order == ["newcomer"]
        slots.release("newcomer")
    assert order == ["newcomer", "greedy"]


async def test_among_equals_the_owner_that_used_least_goes_first() -> None:
    slots = FairSlots(capacity=1, per_owner=1, max_waiting=4)
    assert slots.try_acquire("busy")
    slots.release("busy", held_for=20.0)  # it has kept the server busy lately
    assert slots.try_acquire("holder")
    order: list[str] = []

    async def wait(owner: str) -> None:
        assert await slots.acquire(owner, soon())
        order.append(owner)
        slots.release(owner)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(wait, "busy")
        await anyio.sleep(0.01)
        tasks.start_soon(wait, "quiet")
        await anyio.sleep(0.01)
        slots.release("holder")
    assert order == ["quiet", "busy"]


async def test_a_waiter_gives_up_at_its_deadline() -> None:
    slots = FairSlots(capacity=1, per_owner=1, max_waiting=4)
    assert slots.try_acquire("a")
    assert await slots.acquire("b", soon(0.05)) is False
    assert (slots.waiting, slots.refused) == (0, 1)
    slots.release("a")
    assert slots.try_acquire("b")


async def test_a_full_line_turns_away_its_worst_placed_request() -> None:
    slots = FairSlots(capacity=1, per_owner=1, max_waiting=1)
    assert slots.try_acquire("holder")
    outcomes: dict[str, bool] = {}

    async def wait(owner: str) -> None:
        outcomes[owner] = await slots.acquire(owner, soon())

    slots.release("holder", held_for=0.0)
    assert slots.try_acquire("holder")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(wait, "holder")  # holds a slot: the worst place in line
        await anyio.sleep(0.01)
        tasks.start_soon(wait, "fresh")  # better placed: takes its place
        await anyio.sleep(0.01)
        assert outcomes == {"holder": False}
        slots.release("holder")
    assert outcomes == {"holder": False, "fresh": True}
    assert slots.refused == 1


async def test_a_cancelled_waiter_leaves_the_line() -> None:
    slots = FairSlots(capacity=1, per_owner=1, max_waiting=4)
    assert slots.try_acquire("a")
    with anyio.move_on_after(0.05):
        await slots.acquire("b", soon())
    assert slots.waiting == 0
    slots.release("a")
    assert slots.in_use == 0 and slots.try_acquire("b")


async def test_a_run_taking_its_slot_back_goes_first_past_its_cap_and_a_full_line() -> None:
    slots = FairSlots(capacity=1, per_owner=1, max_waiting=1)
    assert slots.try_acquire("busy")
    order: list[str] = []

    async def wait(owner: str, *, first: bool = False) -> None:
        assert await slots.acquire(owner, soon(), first=first)
        order.append(owner)
        slots.release(owner)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(wait, "new")
        await anyio.sleep(0.01)
        tasks.start_soon(functools.partial(wait, "busy", first=True))  # the line is full, and busy holds its cap
        await anyio.sleep(0.01)
        assert slots.waiting == 2
        slots.release("busy")
    assert order == ["busy", "new"]


async def test_a_paused_run_gives_its_slot_back_and_takes_one_again() -> None:
    admission = Admission(Settings(max_workers=2, queue_timeout_s=0.2))
    paused = []
    for _ in range(PAUSED_PER_PRINCIPAL):
        ticket = await admission.enter("alice-session", "alice")
        assert isinstance(ticket, int)
        slot = admission.slot(ticket)
        await slot.give_back()  # waiting for alice: its slot is free for others
        paused.append((ticket, slot))
    running = await admission.enter("alice-session", "alice")
    assert isinstance(running, int)
    with pytest.raises(PauseRefused, match="4 of your programs are already waiting"):
        await admission.slot(running).give_back()
    bob = await admission.enter("bob-session", "bob")  # four of alice's runs wait for her: bob still runs
    assert isinstance(bob, int)
    carol = await admission.enter("carol-session", "carol")  # two run: the server is full
    assert isinstance(carol, ErrorInfo) and carol.code == "SERVER_BUSY"
    assert admission.stats()["waiting_for_person"] == PAUSED_PER_PRINCIPAL
    async with anyio.create_task_group() as tasks:
        _, slot = paused[0]
        tasks.start_soon(slot.take_back)  # alice answered: her run waits for a slot, ahead of any new run
        await anyio.sleep(0.01)
        assert admission.stats()["in_flight"] == 2
        admission.leave(bob)
    assert admission.stats() | {"in_flight": 2, "waiting_for_person": PAUSED_PER_PRINCIPAL - 1} == admission.stats()
    for ticket, _ in paused:
        admission.leave(ticket)  # three never took a slot back: leaving gives nothing back
    admission.leave(running)
    assert admission.stats()["in_flight"] == 0
