"""``python -m bench.breakdown``: where W1's time goes in the server process, in medians.

Prints the runtime's whole ``execute`` for W1 (worker included) beside the pieces the server adds
around the worker: the static check of the program, and one hop to a thread and back (the check
takes one, and so does every call of a synchronous tool; W1 makes five). The evaluator's own share
and the pipe floor are in ``python -m bench`` (``w1.evaluator_ms``, ``w1.pipe_ms``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import anyio
from attp_server.checks import check_program
from attp_server.runtime import ExecuteRequest, open_runtime
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry

from bench.workloads import W1, toolpack

ROUNDS = 300


def _nothing() -> None:
    return None


async def breakdown(rounds: int = ROUNDS) -> dict[str, float]:
    checks: list[float] = []
    hops: list[float] = []
    runs: list[float] = []
    with tempfile.TemporaryDirectory() as workspace:
        settings = Settings(workspace=Path(workspace), toolpacks=[], workers=2)
        registry = ToolRegistry([toolpack], Path(workspace), {})
        async with open_runtime(settings, registry=registry) as runtime:
            for _ in range(rounds):
                started = time.perf_counter()
                check_program(W1, runtime.known)
                checks.append(time.perf_counter() - started)
                started = time.perf_counter()
                await anyio.to_thread.run_sync(_nothing)
                hops.append(time.perf_counter() - started)
                started = time.perf_counter()
                await runtime.execute(ExecuteRequest(code=W1))
                runs.append(time.perf_counter() - started)
    return {
        "w1_runtime_execute_ms": round(statistics.median(runs) * 1000, 3),
        "static_check_ms": round(statistics.median(checks) * 1000, 3),
        "thread_hop_ms": round(statistics.median(hops) * 1000, 3),
    }


def main() -> None:
    for key, value in anyio.run(breakdown).items():
        print(f"{key:<24} {value:>8.3f} ms")


if __name__ == "__main__":
    main()
