"""Medians over many runs, sampled round-robin so that a noisy machine drifts every contender alike."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

Call = Callable[[], Awaitable[Any]]


async def interleaved(calls: dict[str, Call], repeats: int, warmup: int = 3) -> dict[str, list[float]]:
    """Time each call `repeats` times, one of each in turn; returns seconds per call, by name."""
    for _ in range(warmup):
        for call in calls.values():
            await call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            started = time.perf_counter()
            await call()
            samples[name].append(time.perf_counter() - started)
    return samples


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def ratio(numerator: list[float], denominator: list[float]) -> float:
    """Median over median, both measured in the same run."""
    return round(statistics.median(numerator) / statistics.median(denominator), 2)
