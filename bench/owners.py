"""Owners: what it costs that a worker serves one owner only (issue 33: the server decides reuse, never the worker).

A worker is bound to the owner of its first run (a principal; under ``isolation = "session"`` a principal's
session) and serves no other. W1 through the runtime, three ways, each on a pool of its own (the default: two fresh
workers kept ready, ``max_workers`` 16), in turns:

- ``same``: one owner: every run on the worker kept for it (what every run got before, from any idle worker);
- ``new``: a new owner each run (a 2026-07-28 client that never passes its handle, under session isolation): each
  run takes a fresh worker, and the pool forks another meanwhile (about 12 ms);
- ``turns``: 32 owners in turn, past the 16 workers kept: the one used longest ago has been killed, so each run
  takes a fresh worker too, and a kept worker is killed each time.

and a burst: 8 runs at once of 8 new owners, against 8 runs at once of one owner (whose kept workers serve them).
"""

from __future__ import annotations

import itertools
import tempfile
import time
from pathlib import Path

import anyio

from attp_server.run.request import CallContext
from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.sandbox.process.pool import WorkerPool
from attp_server.sessions.registry import Caller
from attp_server.settings import Settings
from attp_server.toolpack import ToolRegistry
from bench.report import Report
from bench.timing import median_ms, ratio
from bench.workloads import W1, toolpack

SECTION = "Owners (a worker serves one owner: W1 on its owner's kept worker, and on a fresh one)"
WAYS = ("same", "new", "turns")
BURST = 8


async def owners(report: Report, quick: bool) -> None:
    repeats, bursts = (3, 1) if quick else (600, 40)
    with tempfile.TemporaryDirectory() as workspace:
        settings = Settings(workspace=Path(workspace), toolpacks=[], timeout_s=60)
        registry = ToolRegistry([toolpack], Path(workspace), {})
        pools = {way: WorkerPool(size=settings.workers, max_workers=settings.max_workers, memory_mb=settings.memory_mb)
                 for way in WAYS}  # fmt: skip
        async with pools["same"], pools["new"], pools["turns"]:
            runtimes = {way: Runtime(settings, registry, pool) for way, pool in pools.items()}
            fresh = itertools.count()
            turns = itertools.cycle(range(32))

            def owner(way: str) -> str:
                return "owner" if way == "same" else f"new-{next(fresh)}" if way == "new" else f"turn-{next(turns)}"

            async def w1(way: str, name: str) -> None:
                context = CallContext(caller=Caller(tenant=name))
                result = await runtimes[way].execute(ExecuteRequest(code=W1), context)
                if result.error is not None:
                    raise RuntimeError(f"W1 failed ({way}): {result.error}")

            for way in WAYS:  # warm, and the turns' owners all seen once
                for _ in range(3 if way != "turns" else 32):
                    await w1(way, owner(way))
            samples: dict[str, list[float]] = {way: [] for way in WAYS}
            for turn in range(repeats):
                for way in WAYS[turn % 3 :] + WAYS[: turn % 3]:
                    name = owner(way)
                    began = time.perf_counter()
                    await w1(way, name)
                    samples[way].append(time.perf_counter() - began)
            burst: dict[str, list[float]] = {"one_owner": [], "new_owners": []}
            for turn in range(bursts):
                for kind in ("one_owner", "new_owners")[turn % 2 :] + ("one_owner", "new_owners")[: turn % 2]:
                    way = "same" if kind == "one_owner" else "new"
                    names = ["owner"] * BURST if kind == "one_owner" else [owner("new") for _ in range(BURST)]
                    began = time.perf_counter()
                    async with anyio.create_task_group() as tasks:
                        for name in names:
                            tasks.start_soon(w1, way, name)
                    burst[kind].append(time.perf_counter() - began)
                    await anyio.sleep(0.1)  # the refills of the fresh workers, untimed
    for way in WAYS:
        report.add(SECTION, f"owners.w1_{way}_ms", median_ms(samples[way]), "ms")
    report.add(SECTION, "owners.new_vs_same", ratio(samples["new"], samples["same"]), "x")
    report.add(SECTION, "owners.turns_vs_same", ratio(samples["turns"], samples["same"]), "x")
    report.add(SECTION, f"owners.burst_{BURST}_one_owner_ms", median_ms(burst["one_owner"]), "ms")
    report.add(SECTION, f"owners.burst_{BURST}_new_owners_ms", median_ms(burst["new_owners"]), "ms")
    report.add(SECTION, "owners.burst_new_vs_one", ratio(burst["new_owners"], burst["one_owner"]), "x")
