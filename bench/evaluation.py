"""Evaluation: W1, W2 and W3 on every engine, and our runtime's same-run ratio to each."""

from __future__ import annotations

import tempfile
from pathlib import Path

from attp_server.run.startup import open_runtime
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry
from bench.engines import (
    OPTIONAL,
    Engine,
    EvaluatorEngine,
    ExecEngine,
    NewProgramEngine,
    PipeEngine,
    RuntimeEngine,
    checked,
    close,
    installed,
    optional_engines,
)
from bench.report import Report
from bench.timing import interleaved, median_ms, ratio
from bench.workloads import WORKLOADS, async_toolpack, toolpack

SECTION = "Evaluation (median ms per run; ratios are runtime / other, same run)"

REPEATS = {"w1": 300, "w2": 10, "w3": 60}
QUICK_REPEATS = {"w1": 5, "w2": 1, "w3": 2}

TARGETS = {
    ("w1", "exec"): "<= 3.0",
    ("w2", "exec"): "<= 50",
    ("w1", "smolagents"): "< 1.0",
    ("w1", "monty"): "< 1.0",
}


async def evaluation(report: Report, quick: bool) -> None:
    repeats = QUICK_REPEATS if quick else REPEATS
    with tempfile.TemporaryDirectory() as workspace:
        settings = Settings(workspace=Path(workspace), toolpacks=[], workers=2, timeout_s=60)
        registry = ToolRegistry([toolpack], Path(workspace), {})
        async with open_runtime(settings, registry=registry) as runtime:
            optional, missing = optional_engines()
            engines: list[Engine] = [RuntimeEngine(runtime), ExecEngine(), PipeEngine(), EvaluatorEngine(), *optional]
            if missing:
                report.notes.append(f"not installed, so not compared: {', '.join(missing)} (pip install -e '.[bench]')")
            try:
                for workload in WORKLOADS:
                    work = workload.small() if quick else workload
                    calls = {engine.name: await checked(engine, work) for engine in engines}
                    samples = await interleaved(calls, repeats[work.name], warmup=0 if quick else 3)
                    for name, times in samples.items():
                        report.add(SECTION, f"{work.name}.{name}_ms", median_ms(times), "ms")
                    ours = samples.pop("runtime")
                    for name, times in samples.items():
                        key, target = f"{work.name}.runtime_vs_{name}", TARGETS.get((work.name, name))
                        report.add(SECTION, key, ratio(ours, times), "x", target)
            finally:
                close(engines)
        await _async_tools(report, quick, Path(workspace))
        await _new_programs(report, quick, Path(workspace))


async def _async_tools(report: Report, quick: bool, workspace: Path) -> None:
    """W1 again, its tools coroutines: what the server's hop to a thread per sync tool call costs."""
    settings = Settings(workspace=workspace, toolpacks=[], workers=2, timeout_s=60)
    registry = ToolRegistry([async_toolpack], workspace, {})
    async with open_runtime(settings, registry=registry) as runtime:
        w1 = WORKLOADS[0]
        calls = {
            name: await checked(engine, w1)
            for name, engine in (("async", RuntimeEngine(runtime)), ("exec", ExecEngine()))
        }
        samples = await interleaved(calls, QUICK_REPEATS["w1"] if quick else REPEATS["w1"], warmup=0 if quick else 3)
    report.add(SECTION, "w1.runtime_async_tools_ms", median_ms(samples["async"]), "ms")
    report.add(SECTION, "w1.runtime_async_tools_vs_exec", ratio(samples["async"], samples["exec"]), "x")


async def _new_programs(report: Report, quick: bool, workspace: Path) -> None:
    """W1 again, its text new to the worker in every run: what the parse, the check and the scope analysis
    cost, which a program sent again skips (`attp_server.sandbox.process.checked`); beside Monty when installed."""
    settings = Settings(workspace=workspace, toolpacks=[], workers=2, timeout_s=60)
    registry = ToolRegistry([toolpack], workspace, {})
    async with open_runtime(settings, registry=registry) as runtime:
        w1 = WORKLOADS[0]
        module, monty = OPTIONAL["monty"]
        others = [monty()] if installed(module) else []
        engines: list[Engine] = [NewProgramEngine(runtime), RuntimeEngine(runtime), ExecEngine(), *others]
        try:
            calls = {engine.name: await checked(engine, w1) for engine in engines}
            samples = await interleaved(
                calls, QUICK_REPEATS["w1"] if quick else REPEATS["w1"], warmup=0 if quick else 3
            )
        finally:
            close(engines)
    new = samples.pop("runtime_new_program")
    report.add(SECTION, "w1.runtime_new_program_ms", median_ms(new), "ms")
    for name, times in samples.items():
        report.add(SECTION, f"w1.runtime_new_program_vs_{name}", ratio(new, times), "x")
