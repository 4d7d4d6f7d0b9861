"""Store: what keeping a session in the store costs W1, in medians from one run.

W1 through the runtime, round-robin, three ways: with no state at all (no session: the floor); continuing
one session handle whose state is the embedded SQLite store (its lease taken and its state read, W1's
variables restored in the worker and collected again, the lease given back, every call; W1 leaves the
same values every time, so the worker says so and nothing is re-checked or written); and the same on
PostgreSQL over loopback (a server started for the bench from Debian's binaries, as the tests do, and shared
with the replicas section, each in a database of its own; skipped when they are not installed). The deltas are
each median minus the floor's: they hold the store's work and the keeping of W1's variables. The store's part
alone is the ``*_ops_ms`` rows: one call's store operations (take the session, read its state, write W1's
state back, changed or not, and give it up), timed on their own in the same run.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path
from typing import Any

from attp_server.run.runtime import CallContext, ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime
from attp_server.sessions.registry import Caller
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry
from bench.report import Report
from bench.timing import Call, interleaved, median_ms
from bench.workloads import W1, toolpack

SECTION = "Store (median ms per W1 call continuing one session handle; delta to no state, same run)"
REPEATS, QUICK_REPEATS = 300, 3
SUPPORT = Path(__file__).resolve().parents[1] / "tests" / "support"


def _support() -> Any:
    """tests/support/postgres.py, the tests' own PostgreSQL fixture."""
    if str(SUPPORT) not in sys.path:
        sys.path.insert(0, str(SUPPORT))
    import postgres

    return postgres


@contextmanager
def postgres_server() -> Iterator[Any | None]:
    """A PostgreSQL server on loopback for the bench (a `postgres.Postgres`), or None when its binaries are not
    installed. ``python -m bench`` starts one for the store and the replicas sections."""
    try:
        postgres = _support()
        postgres.bin_dir()
    except (ImportError, RuntimeError):
        yield None
        return
    with postgres.running_postgres() as server:
        yield server


def _ops(runtime: Runtime, handle: str) -> Call:
    """What the store does for one call on `handle`, without the run between."""
    sessions = runtime.sessions
    assert sessions is not None

    async def call() -> None:
        session = await sessions.open(Caller(), handle)
        session.keep(session.kept)
        await sessions.finish(session)

    return call


def _call(runtime: Runtime, handle: str | None) -> Call:
    context = CallContext(caller=Caller() if handle is not None else None)
    request = ExecuteRequest(code=W1, session=handle)

    async def call() -> None:
        result = await runtime.execute(request, context)
        if result.status != "ok":
            raise RuntimeError(f"W1 failed in the store bench: {result.error}")

    return call


async def _handle(runtime: Runtime) -> str:
    first = await runtime.execute(ExecuteRequest(code=W1), CallContext(caller=Caller()))
    if first.session is None:
        raise RuntimeError("W1 left nothing to keep: the store bench has no handle to continue")
    return first.session


async def store(report: Report, quick: bool, server: Any | None) -> None:
    """The section, with PostgreSQL on `server` (from `postgres_server`) unless it is None."""
    with tempfile.TemporaryDirectory() as folder, ExitStack() as databases:
        root = Path(folder)
        url = databases.enter_context(_support().fresh_database(server)) if server is not None else None
        registry = ToolRegistry([toolpack], root / "ws", {})
        kinds = {"sqlite": None, "postgresql": url} if url is not None else {"sqlite": None}
        calls: dict[str, Call] = {}
        async with AsyncExitStack() as runtimes:
            for kind, database_url in kinds.items():
                settings = Settings(
                    workspace=root / "ws", toolpacks=[], workers=2, timeout_s=60,
                    db_path=root / kind / "memory.sqlite3", database_url=database_url,
                )  # fmt: skip
                runtime = await runtimes.enter_async_context(open_runtime(settings, registry=registry))
                if not calls:
                    calls["none"] = _call(runtime, None)
                handle = await _handle(runtime)
                calls[kind] = _call(runtime, handle)
                calls[f"{kind}_ops"] = _ops(runtime, handle)
            samples = await interleaved(calls, QUICK_REPEATS if quick else REPEATS, warmup=0 if quick else 5)
    floor = median_ms(samples["none"])
    report.add(SECTION, "store.w1_no_state_ms", floor, "ms")
    for kind in kinds:
        report.add(SECTION, f"store.w1_{kind}_ms", median_ms(samples[kind]), "ms")
        if not quick:  # three samples of each may come out in any order
            report.add(SECTION, f"store.{kind}_delta_ms", round(median_ms(samples[kind]) - floor, 3), "ms")
        report.add(SECTION, f"store.{kind}_ops_ms", median_ms(samples[f"{kind}_ops"]), "ms")
