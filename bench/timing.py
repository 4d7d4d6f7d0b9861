"""Medians over many runs, sampled round-robin so that a noisy machine drifts every contender alike."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

Call = Callable[[], Awaitable[Any]]


async def interleaved(
    calls: dict[str, Call], repeats: int, warmup: int = 3, settle_s: float = 0.0, settle: Call | None = None
) -> dict[str, list[float]]:
    """Time each call `repeats` times, one of each in turn, each round in a new order (shuffled with a fixed seed, so
    that no call always follows the same other: a call that follows its own engine's last one finds that process's
    caches warm, and one that follows another engine's finds them cold); returns seconds per call, by name.

    `settle_s`: an untimed pause after each call, for work a server does after its reply (the telemetry's
    spans), so that it is not timed in the next call, to another server. `settle`: awaited (untimed) after each call
    too, until what that call left running has ended (a worker pool's refill)."""
    for _ in range(warmup):
        for call in calls.values():
            await call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    order = random.Random(len(names) * 1000 + repeats)
    for _ in range(repeats):
        order.shuffle(names)
        for name in names:
            call = calls[name]
            started = time.perf_counter()
            await call()
            samples[name].append(time.perf_counter() - started)
            if settle_s:
                await anyio.sleep(settle_s)
            if settle is not None:
                await settle()
    return samples


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def ratio(numerator: list[float], denominator: list[float]) -> float:
    """Median over median, both measured in the same run."""
    return round(statistics.median(numerator) / statistics.median(denominator), 2)
