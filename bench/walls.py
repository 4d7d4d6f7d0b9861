"""Walls: what Landlock and the seccomp filter cost a worker, its start-up and a W1 run, with and without them;
and what a worker's start-up costs forked from the pool's fork server, against a new interpreter.

Two pools side by side in one run, one whose workers apply every layer (as they serve) and one whose
workers leave Landlock and seccomp out (``WorkerPool(without=...)``, a pool built in code only); starts
and runs alternate between them, each going first every other turn, so both see the same machine.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import TypeVar

from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.sandbox.process.pool import WorkerPool
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry
from bench.report import Report
from bench.timing import median_ms, ratio
from bench.workloads import W1, toolpack

T = TypeVar("T")

SECTION = "Walls (Landlock + seccomp in the worker: start-up and W1, with and without)"
VARIANTS = {"walls": (), "no_walls": ("landlock", "seccomp")}


async def walls(report: Report, quick: bool) -> None:
    starts, runs = (1, 3) if quick else (30, 1000)
    with tempfile.TemporaryDirectory() as workspace:
        settings = Settings(workspace=Path(workspace), toolpacks=[], workers=1, timeout_s=60)
        registry = ToolRegistry([toolpack], Path(workspace), {})
        pools = {
            name: WorkerPool(size=1, max_workers=1, memory_mb=settings.memory_mb, containment="best-effort",
                             without=without)
            for name, without in VARIANTS.items()
        }  # fmt: skip
        # Workers forked from the pool's fork server (as they serve), against each started as a new interpreter.
        unforked = WorkerPool(size=0, max_workers=1, memory_mb=settings.memory_mb, fork_server=False)
        start: dict[str, list[float]] = {name: [] for name in [*pools, "new_interpreter"]}
        w1: dict[str, list[float]] = {name: [] for name in pools}
        async with pools["walls"], pools["no_walls"], unforked:
            if pools["walls"].lockdown.get("missing") or not pools["walls"].lockdown.get("seccomp"):
                report.notes.append(f"walls: a layer is missing on this machine: {pools['walls'].lockdown}")
            for turn in range(starts):
                for name, pool in _alternating({**pools, "new_interpreter": unforked}, turn):
                    began = time.perf_counter()
                    worker = await pool._spawn()
                    start[name].append(time.perf_counter() - began)
                    await worker.kill()
            runtimes = {name: Runtime(settings, registry, pool) for name, pool in pools.items()}
            for runtime in runtimes.values():
                for _ in range(3):
                    await runtime.execute(ExecuteRequest(code=W1))  # warm
            for turn in range(runs):
                for name, runtime in _alternating(runtimes, turn):
                    began = time.perf_counter()
                    result = await runtime.execute(ExecuteRequest(code=W1))
                    w1[name].append(time.perf_counter() - began)
                    if result.error is not None:
                        raise RuntimeError(f"W1 failed with {name}: {result.error}")
    syscall = await _syscall_ns(settings.memory_mb, 1 if quick else 15)
    for name in pools:
        report.add(SECTION, f"getpid_{name}_ns", round(statistics.median(syscall[name]), 1), "ns")
    report.add(SECTION, "getpid_walls_vs_none", ratio(syscall["walls"], syscall["no_walls"]), "x")
    for name in pools:
        report.add(SECTION, f"worker_start_{name}_ms", median_ms(start[name]), "ms")
        report.add(SECTION, f"w1_{name}_ms", median_ms(w1[name]), "ms")
    report.add(SECTION, "worker_start_walls_vs_none", ratio(start["walls"], start["no_walls"]), "x")
    report.add(SECTION, "worker_start_new_interpreter_ms", median_ms(start["new_interpreter"]), "ms")
    report.add(SECTION, "worker_start_forked_vs_new_interpreter", ratio(start["walls"], start["new_interpreter"]), "x")
    report.add(SECTION, "w1_walls_vs_none", ratio(w1["walls"], w1["no_walls"]), "x", "<= 1.05")


def _alternating(items: dict[str, T], turn: int) -> list[tuple[str, T]]:
    """Both variants, the first one first on even turns and last on odd ones (neither always follows the other)."""
    pairs = list(items.items())
    return pairs if turn % 2 == 0 else pairs[::-1]


SYSCALL_LOOP = """import os, time
started = time.perf_counter_ns()
for _ in range(100_000):
    os.getpid()
print((time.perf_counter_ns() - started) / 100_000)
"""
"""One system call near the end of the allow list (about 30 comparisons in), 100,000 times, in a worker."""


async def _syscall_ns(memory_mb: int, rounds: int) -> dict[str, list[float]]:
    """Nanoseconds per ``getpid()`` inside a locked-down worker, with and without the walls (``attp doctor``'s
    probe workers: plain CPython after the same lockdown)."""
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    pools = {
        name: WorkerPool(size=0, max_workers=1, memory_mb=memory_mb, containment="best-effort", probe=True,
                         without=without)
        for name, without in VARIANTS.items()
    }  # fmt: skip
    async with pools["walls"], pools["no_walls"]:
        for turn in range(rounds):
            for name, pool in _alternating(pools, turn):
                printed: list[str] = []
                outcome = await pool.probe(SYSCALL_LOOP, timeout_s=60, cpu_s=30, on_output=printed.append)
                if outcome["ended"] != "finished":
                    raise RuntimeError(f"the system call loop failed with {name}: {outcome}")
                samples[name].append(float("".join(printed)))
    return samples
