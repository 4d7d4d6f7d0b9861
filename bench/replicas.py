"""Replicas: W1 throughput through HAProxy in front of 1 and of 3 ``attp serve --transport http`` replicas.

The same setup as the multi-replica acceptance test (tests/test_replicas.py), from its own fixtures in
tests/support: a real PostgreSQL server in a temporary folder, Debian's ``haproxy`` running the
repository's ``deploy/haproxy.cfg``, every replica with the same ``database_url``, ``secret_file`` and
workspace. 16 clients (the SDK's default mode, protocol 2026-07-28) call ``attp_execute(W1)`` as fast as
they can for a fixed time, first against one replica, then against three; the ratio is the second over
the first, measured in the same run (``--quick``, a smoke run, starts the three only and takes two of
them out of HAProxy's rotation for the one-replica figures). On a machine with few cores the replicas
share them, so expect no gain there: the figure says what more processes buy on this machine, not on
several.

Runs alone too: ``python -m bench.replicas`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from bench.report import Report
from bench.store import postgres_server
from bench.timing import median_ms
from bench.transport import hammer, mcp_client

ROOT = Path(__file__).resolve().parents[1]
SUPPORT = ROOT / "tests" / "support"
SECTION = "Replicas (16 clients, W1 through HAProxy; PostgreSQL store; calls/s)"
CLIENTS = 16


def _fixtures() -> object:
    """The test suite's HAProxy fixture (tests/support), so the bench measures what the test runs."""
    if str(SUPPORT) not in sys.path:
        sys.path.insert(0, str(SUPPORT))
    import replicas

    return replicas


async def _throughput(url: str, duration: float) -> tuple[float, float, int]:
    """(calls/s, median ms, failed calls) of CLIENTS clients for `duration` seconds, after a warm-up call each."""
    async with AsyncExitStack() as stack:
        opened = [await stack.enter_async_context(mcp_client(url)) for _ in range(CLIENTS)]
        latencies, failures, elapsed = await hammer(opened, duration)
    return round(len(latencies) / elapsed, 1), median_ms(latencies) if latencies else 0.0, len(failures)


def _out_of_rotation(cluster: Any, names: list[str]) -> None:
    """Put replicas in maintenance through HAProxy's stats socket (level admin): it sends them nothing more."""
    for name in names:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(cluster.stats_socket))
            sock.sendall(f"disable server attp_replicas/{name}\n".encode())
            sock.recv(4096)
    cluster.wait_status(dict.fromkeys(names, "MAINT"))


async def replicas(report: Report, quick: bool, server: Any | None) -> None:
    """The section, on the PostgreSQL `server` (from `bench.store.postgres_server`; None: not installed)."""
    if server is None:
        raise RuntimeError("the replicas bench needs PostgreSQL: install Debian's `postgresql` package")
    support = _fixtures()
    duration = 0.3 if quick else 10.0
    figures: dict[int, tuple[float, float, int]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "workspace").mkdir()
        (root / "secret.key").write_bytes(os.urandom(32))
        env = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(SUPPORT)])}

        def args(name: str) -> list[str]:
            return [
                "--workspace", str(root / "workspace"), "--toolpack", "bench.workloads:toolpack",
                "--database-url", server.create_database(f"bench_{name}"), "--secret-file", str(root / "secret.key"),
                "--db-path", str(root / f"data-{name}" / "memory.sqlite3"),
                "--timeout-s", "10", "--log-level", "WARNING",
            ]  # fmt: skip

        if quick:  # a smoke run: one cluster of three, then two of them out of HAProxy's rotation (two starts less)
            with support.running_cluster(root / "cluster", 3, args("quick"), env) as cluster:  # type: ignore[attr-defined]
                figures[3] = await _throughput(cluster.url + "/mcp", duration)
                _out_of_rotation(cluster, ["attp2", "attp3"])
                figures[1] = await _throughput(cluster.url + "/mcp", duration)
        else:
            for count in (1, 3):
                with support.running_cluster(root / f"cluster-{count}", count, args(str(count)), env) as cluster:  # type: ignore[attr-defined]
                    figures[count] = await _throughput(cluster.url + "/mcp", duration)
    for count in (1, 3):
        throughput, latency, failed = figures[count]
        name = f"replicas.{count}_replica{'s' if count > 1 else ''}"
        report.add(SECTION, f"{name}_throughput", throughput, "calls/s")
        report.add(SECTION, f"{name}_latency_ms", latency, "ms")
        report.add(SECTION, f"{name}_errors", failed, "calls")
    report.add(SECTION, "replicas.3_vs_1", round(figures[3][0] / figures[1][0], 2), "x")
    report.notes.append(
        f"replicas: {os.cpu_count()} CPU cores shared by PostgreSQL, HAProxy, the replicas and the clients"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replicas", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run, not a measurement")
    args = parser.parse_args(argv)
    report = Report(quick=args.quick)
    with postgres_server() as server:
        anyio.run(replicas, report, args.quick, server)
    print(report.table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
