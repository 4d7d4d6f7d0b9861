"""Stopping cleanly on a signal: serving ends, then the runtime's exit kills the workers and removes
their directories. Left to their default action, SIGTERM and SIGHUP would end the process on the
spot and leave both behind."""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable

import anyio

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


async def on_stop_signal(stop: Callable[[signal.Signals], None]) -> None:
    """Call `stop` with each SIGTERM, SIGHUP or SIGINT the process receives, until cancelled."""
    with anyio.open_signal_receiver(*STOP_SIGNALS) as received:
        async for signum in received:
            name = signal.Signals(signum)
            logger.info("%s: shutting down", name.name)
            stop(name)
