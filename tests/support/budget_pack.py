"""Tools that misbehave on purpose for the budget tests: a sync call that ignores cancellation, and an
async one that records whether it was cancelled."""

from __future__ import annotations

import time
from pathlib import Path

import anyio

from attp_server import Toolpack


def nap(seconds: float) -> float:
    """Sleep `seconds` on the calling thread (nothing can interrupt it) and return them.

    Args:
        seconds: How long to sleep.

    Returns:
        The seconds slept.
    """
    time.sleep(seconds)
    return seconds


async def wait_and_mark(seconds: float, marker: str) -> str:
    """Wait `seconds`, writing `marker` + ".cancelled" if the wait is cancelled first.

    Args:
        seconds: How long to wait.
        marker: A file path (absolute) that records the cancellation.

    Returns:
        "done" when the wait ran to its end.
    """
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        Path(marker + ".cancelled").write_text("cancelled")
        raise
    return "done"


toolpack = Toolpack(
    name="budget",
    description="Test tools that take long on purpose.",
    tools=[nap, wait_and_mark],
    read_only=True,
)
