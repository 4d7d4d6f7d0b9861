"""``python -m bench.gaps [calls]``: what a gap between two calls costs the next one, on this machine.

The same call, ``__result__ = 1`` through the runtime on the worker kept for its owner (no fork, no start-up), timed
back to back, after a pause (the process sleeps) and after other work in the server's process (as the bench's other
engines run between ours), and a bare pipe round trip between two processes after the same pause (the wake-up
alone). On a shared virtual machine a call after any gap finds both processes' caches cold: this is why the
call-heavy section's empty round trip reads more in its rounds than back to back, and why a model's calls, seconds
apart, each pay the cold round trip (docs/performance.md).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import anyio

from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry
from bench.timing import median_ms
from bench.workloads import toolpack

CALLS = 60

GAPS: dict[str, tuple[float, float]] = {
    "back_to_back": (0.0, 0.0),
    "after_5ms_sleep": (0.005, 0.0),
    "after_50ms_sleep": (0.05, 0.0),
    "after_5ms_of_work": (0.0, 0.005),
    "after_20ms_of_work": (0.0, 0.02),
}
"""Name -> (seconds asleep, seconds of other Python work in this process) before each call."""


def _work(seconds: float) -> None:
    """Other Python work in this process, for `seconds` (what another engine's run does between ours)."""
    end, count = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        count += 1


async def _calls(runtime: Runtime, calls: int, asleep: float, working: float) -> float:
    samples = []
    for _ in range(calls):
        if asleep:
            await anyio.sleep(asleep)
        _work(working)
        started = time.perf_counter()
        result = await runtime.execute(ExecuteRequest(code="__result__ = 1"))
        samples.append(time.perf_counter() - started)
        if result.status != "ok":
            raise RuntimeError(f"the run failed: {result.error}")
    return median_ms(samples)


def _pipe_round_trips(calls: int, asleep: float) -> float:
    """A byte to a child process and its answer back, after `asleep` seconds: two wake-ups and nothing else."""
    child_reads, to_child = os.pipe()
    from_child, child_writes = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer each byte until the pipe closes
        os.close(to_child)
        os.close(from_child)
        while os.read(child_reads, 1):
            os.write(child_writes, b"!")
        os._exit(0)
    os.close(child_reads)
    os.close(child_writes)
    samples = []
    try:
        for _ in range(calls):
            time.sleep(asleep)
            started = time.perf_counter()
            os.write(to_child, b"?")
            os.read(from_child, 1)
            samples.append(time.perf_counter() - started)
    finally:
        os.close(to_child)
        os.close(from_child)
        os.waitpid(pid, 0)
    return median_ms(samples)


async def gaps(calls: int = CALLS) -> dict[str, float]:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as directory:
        settings = Settings(workspace=Path(directory), toolpacks=[], workers=2, timeout_s=30)
        async with open_runtime(settings, registry=ToolRegistry([toolpack], Path(directory), {})) as runtime:
            await _calls(runtime, 20, 0.0, 0.0)  # the owner's worker is kept, and warm
            for name, (asleep, working) in GAPS.items():
                figures[f"kept_worker_{name}_ms"] = await _calls(runtime, calls, asleep, working)
    figures["pipe_round_trip_back_to_back_ms"] = _pipe_round_trips(calls, 0.0)
    figures["pipe_round_trip_after_50ms_sleep_ms"] = _pipe_round_trips(calls, 0.05)
    return figures


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else CALLS
    for key, value in anyio.run(gaps, calls).items():
        print(f"{key:<40} {value:>8.3f} ms")


if __name__ == "__main__":
    main()
