"""``python -m bench.breakdown``: where ``attp_execute(W1)``'s time goes, over stdio and in the server, in medians.

Over stdio, two servers of the same SDK, sampled round-robin: the no-op tool (the ratio's
denominator) and ``attp_shape``, a tool with ``attp_execute``'s parameters and output schema that
answers W1's canned result (what the SDK costs for the shape of our tool: argument and output
validation on both sides, a larger reply), both on ``bench.noop_server --shape``; and ``attp serve``
running W1. In process: the runtime's
whole ``execute`` of W1 with the bench pack's tools inline and with them on tool threads, a trivial
program (one worker round trip), and the server's CPU per W1 run. ``python -m bench`` has the
evaluator's share and the pipe floor (``w1.evaluator_ms``, ``w1.pipe_ms``).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import anyio

from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry
from bench.timing import interleaved, median_ms, ratio
from bench.transport import attp_args, attp_call, clients, noop_call, stdio
from bench.workloads import W1, threaded_toolpack, toolpack

ROUNDS = 300


async def _shape_call(client: object) -> None:
    result = await client.call_tool("attp_shape", {"code": W1})  # type: ignore[attr-defined]
    if result.is_error:
        raise RuntimeError("attp_shape failed")


async def _cpu_per_run(runtime: Runtime, rounds: int) -> float:
    """The server process's CPU time per W1 run (the worker's is its own): less noisy than wall time."""
    started = time.process_time()
    for _ in range(rounds):
        await runtime.execute(ExecuteRequest(code=W1))
    return (time.process_time() - started) / rounds


async def in_process(rounds: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as workspace:
        settings = Settings(workspace=Path(workspace), toolpacks=[], workers=2)
        inline = ToolRegistry([toolpack], Path(workspace), {})
        threaded = ToolRegistry([threaded_toolpack], Path(workspace), {})
        async with open_runtime(settings, registry=inline) as fast, open_runtime(settings, registry=threaded) as slow:
            samples = await interleaved(
                {
                    "w1_runtime_execute_ms": lambda: fast.execute(ExecuteRequest(code=W1)),
                    "w1_runtime_execute_threaded_ms": lambda: slow.execute(ExecuteRequest(code=W1)),
                    "trivial_runtime_execute_ms": lambda: fast.execute(ExecuteRequest(code="__result__ = 1")),
                },
                rounds,
            )
            cpu = await _cpu_per_run(fast, rounds)
    figures = {name: median_ms(values) for name, values in samples.items()}
    figures["w1_server_cpu_per_run_ms"] = round(cpu * 1000, 3)
    return figures


async def over_stdio(rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as directory:
        scratch = Path(directory)
        workspace = scratch / "workspace"
        workspace.mkdir()
        servers = [stdio(attp_args(workspace), scratch), stdio(["-m", "bench.noop_server", "--shape"], scratch)]
        async with clients(servers) as (attp, baseline):  # one process serves both no-op and shape: one start less
            samples = await interleaved(
                {
                    "attp": lambda: attp_call(attp),
                    "noop": lambda: noop_call(baseline),
                    "shape": lambda: _shape_call(baseline),
                },
                rounds,
            )
    return {
        "stdio_noop_ms": median_ms(samples["noop"]),
        "stdio_shape_ms": median_ms(samples["shape"]),
        "stdio_attp_w1_ms": median_ms(samples["attp"]),
        "stdio_shape_vs_noop": ratio(samples["shape"], samples["noop"]),
        "stdio_attp_vs_noop": ratio(samples["attp"], samples["noop"]),
    }


async def breakdown(rounds: int = ROUNDS) -> dict[str, float]:
    return {**await over_stdio(rounds), **await in_process(rounds)}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else ROUNDS
    for key, value in anyio.run(breakdown, rounds).items():
        unit = "x" if key.endswith("_vs_noop") else "ms"
        print(f"{key:<32} {value:>8.3f} {unit}")


if __name__ == "__main__":
    main()
