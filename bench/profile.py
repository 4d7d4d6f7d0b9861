"""``python -m bench.profile c2``: where a call-heavy workload's time goes in the python engine (cProfile).

Runs one of `bench.callheavy`'s programs through the in-process evaluator (what the worker does, minus the
process): once to warm the imports and the compiled-program cache, then once under cProfile, and prints the
functions that take the most time of their own: the program's own (``<program>``) and the guards it calls.
C1 runs at a fifth of its size per loop (``range(20)``), so that profiling it takes seconds.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import pstats

import anyio

from bench.callheavy import WORKLOADS
from bench.engines import EvaluatorEngine


def profile(name: str, rows: int = 10) -> str:
    workload = {w.name: w for w in WORKLOADS}[name]
    if name == "c1":
        workload = dataclasses.replace(workload, code=workload.code.replace("range(100)", "range(20)"))
    engine = EvaluatorEngine()
    anyio.run(engine.run, workload)
    profiler = cProfile.Profile()
    profiler.enable()
    anyio.run(engine.run, workload)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(rows)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.profile", description=__doc__.splitlines()[0] if __doc__ else ""
    )
    parser.add_argument("workload", choices=[w.name for w in WORKLOADS])
    parser.add_argument("--rows", type=int, default=10, help="functions to list (default: %(default)s)")
    args = parser.parse_args()
    print(profile(args.workload, args.rows))


if __name__ == "__main__":
    main()
