"""``python -m bench``: medians and same-run ratios; prints a table and writes bench/results.json.

Sections (each figure a median over many runs; each ratio two medians measured in the same run):

- Evaluation: W1 "typical", W2 "loop", W3 "json" through our runtime (worker included), against
  plain ``exec`` (the floor), ``exec`` behind a pipe, our evaluator in process, smolagents, Monty
  and Starlark (the last three if installed: ``pip install -e '.[bench]'``).
- Call-heavy: C1-C5 (helper loops, recursion, sort keys, closures, string building) on every engine,
  each against CPython ``exec`` in the same run (``bench/callheavy.py``).
- Data: engine ``cpython`` (real CPython behind the walls, the data stack loaded): C1-C5 and a pandas group-by over
  1,000,000 rows against ``exec``, a run's start-up, HumanEval's 164 canonical solutions, the fork server's memory
  and a run's own (``bench/data.py``; needs the extra ``data``).
- Round trip: ``attp_execute(W1)`` over stdio and Streamable HTTP, against a no-op tool on a tiny
  MCP server of the same SDK over the same transport.
- Containment: deadline to TIMEOUT for a Python loop and for a C-level regex hang; a concurrent
  session's W1 latency meanwhile against its idle latency.
- Walls: worker start-up and W1 with Landlock + seccomp and without them, in the same run (``bench/walls.py``).
- Owners: W1 when a worker serves one owner only: on its owner's kept worker, with a new owner each run, with 32
  owners in turn; and bursts of 8 (``bench/owners.py``).
- Scale: W1 throughput with 1, 4 and 16 HTTP clients; server RSS before and after 10,000 calls;
  cold start of ``attp serve`` to a completed initialize.
- Memory: ``find_page`` over a 100,000-page tree, per kind of query (``bench/memory_search.py``,
  which also runs alone and writes its own detailed JSON).
- Gateway: characters a model reads for one task on server-filesystem, direct MCP calls against one
  attp_execute program, and parallel() against a loop of upstream calls (``bench/gateway.py``, which
  also runs alone and prints the whole comparison).
- Sessions: W1 without a session, keeping its own variables, and with about 1 MiB kept.
- Store: W1 continuing a session handle kept in SQLite and in PostgreSQL on loopback, against no state
  (``bench/store.py``).
- Replicas: W1 throughput of 16 clients through HAProxy in front of 1 and of 3 replicas sharing a
  PostgreSQL store (``bench/replicas.py``; needs Debian's postgresql and haproxy, as the tests do).
- Telemetry: W1 with no OpenTelemetry SDK, with the SDK tracing (spans dropped), and with everything on
  (tracing, SDK metrics, the audit log, rate limits) (``bench/telemetry.py``).
- Sign-in: checking an access token (an RS256 JWT, the issuer's keys cached) the first time and once seen, against
  a static token's check in the same run (``bench/signin.py``).
- Reliability: a normal client's W1 latency (p50, p99) and errors while hostile clients send issue
  12's programs and runaways; the server's threads, and how soon it is idle afterwards (``bench/load.py``).

``--quick`` runs everything at tiny sizes (the test suite's smoke test); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path

import anyio

from bench.callheavy import callheavy
from bench.containment import containment
from bench.data import data
from bench.evaluation import evaluation
from bench.gateway import gateway
from bench.load import load
from bench.memory_search import memory
from bench.owners import owners
from bench.replicas import replicas
from bench.report import Report
from bench.sessions import sessions
from bench.signin import signin
from bench.store import postgres_server, store
from bench.telemetry import telemetry
from bench.transport import transport
from bench.walls import walls

RESULTS = Path(__file__).parent / "results.json"
SECTIONS = (
    "evaluation",
    "callheavy",
    "data",
    "transport",
    "containment",
    "walls",
    "owners",
    "memory",
    "load",
    "gateway",
    "sessions",
    "telemetry",
    "store",
    "replicas",
    "signin",
)


async def measure(quick: bool, only: list[str]) -> Report:
    report = Report(quick=quick)
    if "evaluation" in only:
        await evaluation(report, quick)
    if "callheavy" in only:
        await callheavy(report, quick)
    if "data" in only:
        await data(report, quick)
    if "transport" in only:
        await transport(report, quick)
    if "containment" in only:
        await containment(report, quick)
    if "walls" in only:
        await walls(report, quick)
    if "owners" in only:
        await owners(report, quick)
    if "memory" in only:
        await anyio.to_thread.run_sync(memory, report, quick)
    if "load" in only:  # before gateway, whose upstream servers configure logging for this process
        await load(report, quick)
    if "gateway" in only:
        report.details["gateway"] = await gateway(report, quick)
    if "sessions" in only:
        await sessions(report, quick)
    with ExitStack() as shared:  # one PostgreSQL server for both sections, each in a database of its own
        postgres = shared.enter_context(postgres_server()) if {"store", "replicas"} & set(only) else None
        if "store" in only:
            await store(report, quick, postgres)
        if "replicas" in only:
            await replicas(report, quick, postgres)
    if "telemetry" in only:
        await telemetry(report, quick)
    if "signin" in only:
        report.details["signin"] = await signin(report, quick)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test, not a measurement")
    parser.add_argument("--output", type=Path, default=RESULTS, help="where to write the JSON (default: %(default)s)")
    parser.add_argument("--only", action="append", choices=SECTIONS, help="run only this section (repeatable)")
    args = parser.parse_args(argv)
    report = anyio.run(measure, args.quick, args.only or list(SECTIONS))
    print(report.table())
    report.write(args.output)
    return 0


def cli() -> None:
    sys.exit(main())


if __name__ == "__main__":
    cli()
