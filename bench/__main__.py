"""``python -m bench``: medians and same-run ratios for the runtime; prints a table, writes bench/results.json.

Rows:
- W1 "typical" (5 cheap tool calls, a comprehension, a dict) through the runtime (worker included),
  against plain CPython ``exec`` of the same program with the same functions: the floor.
- Containment: from a runaway program's deadline to its TIMEOUT result, for a Python-level loop and
  for a C-level regex hang (the latter needs a kill).
- A concurrent call's latency while another run is stuck in a runaway, against its idle latency.

``--quick`` uses tiny sizes (the test suite runs it that way as a smoke test).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from server import Toolpack
from server.runtime import ExecuteRequest, Runtime, open_runtime
from server.settings import Settings
from server.toolpacks import ToolRegistry

RESULTS = Path(__file__).parent / "results.json"


def lookup(key: str) -> dict[str, Any]:
    """Return a small record for `key`."""
    return {"key": key, "value": len(key) * 7, "tags": ["a", "b"]}


def score(value: int) -> float:
    """Return a score for `value`."""
    return value / 3.0


W1 = """
records = [lookup(k) for k in ["alpha", "beta", "gamma"]]
scores = [score(r["value"]) for r in records[:2]]
best = max(records, key=lambda r: r["value"])
tags = sorted({t for r in records for t in r["tags"]})
__result__ = {"best": best["key"], "scores": scores, "n": len(records), "tags": tags}
"""

BENCH_PACK = Toolpack(name="bench", description="Cheap tools for benchmarks.", tools=[lookup, score], read_only=True)


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


async def timed(runtime: Runtime, code: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    result = await runtime.execute(ExecuteRequest(code=code))
    return time.perf_counter() - started, result.model_dump(mode="json")


def exec_floor(repeats: int) -> list[float]:
    compiled = compile(W1, "<w1>", "exec")
    samples = []
    for _ in range(repeats):
        namespace: dict[str, Any] = {"lookup": lookup, "score": score}
        started = time.perf_counter()
        exec(compiled, namespace)
        samples.append(time.perf_counter() - started)
    return samples


async def measure(quick: bool) -> dict[str, Any]:
    repeats, runaways = (20, 2) if quick else (300, 7)
    timeout_s = 0.5 if quick else 1.0
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as workspace:
        settings = Settings(workspace=Path(workspace), toolpacks=[], workers=2, timeout_s=timeout_s)
        registry = ToolRegistry([BENCH_PACK], Path(workspace), {})
        async with open_runtime(settings, registry=registry) as runtime:
            for _ in range(5):
                await timed(runtime, W1)  # warm up
            runs = [(await timed(runtime, W1))[0] for _ in range(repeats)]
            floor = exec_floor(repeats)
            rows["w1_runtime_ms"] = median_ms(runs)
            rows["w1_exec_ms"] = median_ms(floor)
            rows["w1_ratio"] = round(statistics.median(runs) / statistics.median(floor), 1)

            runaway_programs = {"python_loop": "while True:\n    pass", "c_regex": "re.match('(a+)+$', 'a' * 40 + 'b')"}
            for name, code in runaway_programs.items():
                overshoot = []
                for _ in range(runaways):
                    elapsed, data = await timed(runtime, code)
                    assert data["error"]["code"] == "TIMEOUT", data
                    overshoot.append(elapsed - timeout_s)
                rows[f"timeout_{name}_overshoot_ms"] = median_ms(overshoot)

            idle = [(await timed(runtime, "__result__ = 1"))[0] for _ in range(repeats)]
            busy: list[float] = []

            async def runaway() -> None:
                await timed(runtime, "while True:\n    pass")

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(runaway)
                await anyio.sleep(0.05)
                deadline = time.perf_counter() + timeout_s * 0.8
                while time.perf_counter() < deadline:
                    busy.append((await timed(runtime, "__result__ = 1"))[0])
            rows["concurrent_idle_ms"] = median_ms(idle)
            rows["concurrent_during_runaway_ms"] = median_ms(busy)
            rows["concurrent_ratio"] = round(statistics.median(busy) / statistics.median(idle), 2)
    return rows


TARGETS = {
    "w1_ratio": "<= 3.0",
    "timeout_python_loop_overshoot_ms": "<= 50",
    "timeout_c_regex_overshoot_ms": "<= 300",
    "concurrent_ratio": "<= 2.0",
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = anyio.run(measure, args.quick)
    width = max(len(k) for k in rows)
    print(f"{'figure':<{width}}  {'median':>10}  target")
    for key, value in rows.items():
        print(f"{key:<{width}}  {value:>10}  {TARGETS.get(key, '')}")
    args.output.write_text(json.dumps({"quick": args.quick, "rows": rows, "targets": TARGETS}, indent=2) + "\n")


if __name__ == "__main__":
    main()
