"""Sessions: what keeping a session's variables costs a call, in medians from the same run.

W1 through the runtime, round-robin: without a session (nothing kept, the floor) against a session
that keeps W1's own variables (restored, collected and re-checked every call); then a session that
keeps about `max_state_bytes` (a 1 MiB list of text sent to the worker and back every call) against
the session-less call right after it, which runs on the worker that just carried the megabyte and
pays part of its cost.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from attp_server.run.runtime import CallContext, ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime
from attp_server.sessions.registry import Caller
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry
from bench.report import Report
from bench.timing import Call, interleaved, median_ms, ratio
from bench.workloads import W1, toolpack

SECTION = "Sessions (median ms per W1 call; ratios to the same call without a session, same run)"

REPEATS, QUICK_REPEATS = 200, 3
FULL_STATE = "rows = ['row %06d ' % i + 'x' * 40 for i in range({n})]\n__result__ = len(rows)"
"""About 1 MiB of kept text at the default size; far less with --quick."""


def _call(runtime: Runtime, session: str | None) -> Call:
    context = CallContext(caller=Caller(session=session) if session is not None else None)

    async def call() -> None:
        result = await runtime.execute(ExecuteRequest(code=W1), context)
        if result.status != "ok":
            raise RuntimeError(f"W1 failed in the sessions bench: {result.error}")

    return call


async def sessions(report: Report, quick: bool) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        workspace = Path(scratch) / "ws"  # the data folder beside it: never inside the workspace
        settings = Settings(
            workspace=workspace, toolpacks=[], workers=2, timeout_s=60,
            db_path=Path(scratch) / ".attp" / "memory.sqlite3",
        )  # fmt: skip
        registry = ToolRegistry([toolpack], workspace, {})
        async with open_runtime(settings, registry=registry) as runtime:
            rows = 200 if quick else 18_000
            seeded = await runtime.execute(
                ExecuteRequest(code=FULL_STATE.format(n=rows)), CallContext(caller=Caller(session="full"))
            )
            if seeded.status != "ok" or seeded.hint:
                raise RuntimeError(f"the sessions bench could not keep its state: {seeded.error or seeded.hint}")
            repeats = QUICK_REPEATS if quick else REPEATS
            warmup = 0 if quick else 3
            light = {"none": _call(runtime, None), "small": _call(runtime, "small")}
            samples = await interleaved(light, repeats, warmup=warmup)
            heavy = {"full": _call(runtime, "full"), "after": _call(runtime, None)}
            samples |= await interleaved(heavy, repeats, warmup=warmup)
    report.add(SECTION, "sessions.w1_without_session_ms", median_ms(samples["none"]), "ms")
    report.add(SECTION, "sessions.w1_keeping_its_variables_ms", median_ms(samples["small"]), "ms")
    report.add(SECTION, "sessions.w1_with_1mib_kept_ms", median_ms(samples["full"]), "ms")
    report.add(SECTION, "sessions.w1_right_after_1mib_ms", median_ms(samples["after"]), "ms")
    report.add(SECTION, "sessions.keeping_vs_none", ratio(samples["small"], samples["none"]), "x")
    report.add(SECTION, "sessions.1mib_vs_none", ratio(samples["full"], samples["none"]), "x")
