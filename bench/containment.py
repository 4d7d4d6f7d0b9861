"""Containment: how late a runaway's TIMEOUT comes, and what a runaway costs a concurrent session."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import anyio

from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry
from bench.report import Report
from bench.timing import median_ms, ratio
from bench.workloads import W1, toolpack

SECTION = "Containment (deadline -> TIMEOUT result; a concurrent session's W1 meanwhile)"

RUNAWAYS = {
    "python_loop": "while True:\n    pass",
    "c_regex": "re.match('(a+)+$', 'a' * 40 + 'b')",  # one C call that never returns: only a kill ends it
}
TARGETS = {"python_loop": "<= 50", "c_regex": "<= 300"}


async def _timed(runtime: Runtime, code: str) -> tuple[float, str | None]:
    started = time.perf_counter()
    result = await runtime.execute(ExecuteRequest(code=code))
    return time.perf_counter() - started, result.error.code if result.error else None


async def _settled(runtime: Runtime) -> None:
    """Wait (by polling) until killed workers have been replaced, so refills do not skew what follows."""
    deadline = time.monotonic() + 30
    while runtime.pool.stats()["starting"] and time.monotonic() < deadline:
        await anyio.sleep(0.01)


async def containment(report: Report, quick: bool) -> None:
    timeout_s = 0.3 if quick else 1.0
    runaways, idle_calls = (1, 10) if quick else (7, 200)
    with tempfile.TemporaryDirectory() as workspace:
        settings = Settings(workspace=Path(workspace), toolpacks=[], workers=2, timeout_s=timeout_s)
        registry = ToolRegistry([toolpack], Path(workspace), {})
        async with open_runtime(settings, registry=registry) as runtime:
            for name, code in RUNAWAYS.items():
                late: list[float] = []
                for _ in range(runaways):
                    await _settled(runtime)
                    elapsed, error = await _timed(runtime, code)
                    if error != "TIMEOUT":
                        raise RuntimeError(f"runaway {name} ended with {error}, not TIMEOUT")
                    late.append(elapsed - timeout_s)
                report.add(SECTION, f"timeout_{name}_overshoot_ms", median_ms(late), "ms", TARGETS[name])

            for name, code in RUNAWAYS.items():
                await _settled(runtime)
                for _ in range(5):
                    await _timed(runtime, W1)  # warm
                idle = [(await _timed(runtime, W1))[0] for _ in range(idle_calls)]
                busy: list[float] = []

                async def runaway(code: str = code) -> None:
                    await _timed(runtime, code)

                for _ in range(1 if quick else 3):
                    await _settled(runtime)
                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(runaway)
                        await anyio.sleep(0.05)  # the runaway has its worker and is spinning
                        stop = time.perf_counter() + timeout_s * 0.8
                        while time.perf_counter() < stop:
                            busy.append((await _timed(runtime, W1))[0])
                report.add(SECTION, f"concurrent_{name}_idle_ms", median_ms(idle), "ms")
                report.add(SECTION, f"concurrent_{name}_during_ms", median_ms(busy), "ms")
                report.add(SECTION, f"concurrent_{name}_ratio", ratio(busy, idle), "x", "<= 2.0")
