"""Round trip and scale, against real server processes: ``attp serve`` and the no-op baseline server.

Servers run from a scratch directory (no stray ``attp.toml`` is read), with no ``ATTP_*`` variable of
this shell, the bench toolpack, and ``--log-level WARNING`` (the INFO line per call is the only
difference from the defaults). HTTP servers bind loopback ports only. The HTTP round trip and the scale
figures are measured on one ``attp serve --transport http`` (the scale figures after the round trip's
calls, as after their own warm-up calls).
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from bench.report import Report
from bench.timing import interleaved, median_ms, ratio
from bench.workloads import W1

ROOT = Path(__file__).resolve().parents[1]
ROUND_TRIP = "Round trip (MCP client -> server -> result; median ms per call)"
SCALE = "Scale (Streamable HTTP; W1 per call)"


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTP_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def attp_args(workspace: Path, *extra: str) -> list[str]:
    return [
        "-m", "attp_server", "serve", "--workspace", str(workspace), "--toolpack", "bench.workloads:toolpack",
        "--timeout-s", "10", "--log-level", "WARNING", *extra,
    ]  # fmt: skip


def stdio(args: list[str], cwd: Path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=args, env=_environment(), cwd=str(cwd))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_server(args: list[str], cwd: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """Start a server process (its log in `cwd`) and wait, polling, until it answers HTTP; stop it afterwards."""
    with (cwd / f"server-{port}.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, *args], cwd=cwd, env=_environment(), stdout=subprocess.DEVNULL, stderr=log
        )
    try:
        # One client for every poll: `httpx.get` builds a client, and loads the CA bundle, each time (about 25 ms
        # of CPU a poll, a third of a core while a server starts).
        with httpx.Client(timeout=1.0) as http:
            deadline = time.monotonic() + 60
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"server {args} exited with {process.returncode}")
                try:
                    http.get(f"http://127.0.0.1:{port}/healthz")
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"server {args} did not answer on port {port}") from None
                    time.sleep(0.05)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmRSS for {pid}")


async def attp_call(client: Client) -> None:
    result = await client.call_tool("attp_execute", {"code": W1})
    if result.is_error or (result.structured_content or {}).get("status") != "ok":
        raise RuntimeError(f"attp_execute(W1) failed: {result.structured_content}")


async def noop_call(client: Client) -> None:
    result = await client.call_tool("noop", {})
    if result.is_error:
        raise RuntimeError("noop failed")


_TLS: ssl.SSLContext | None = None


@asynccontextmanager
async def _streams(url: str) -> AsyncIterator[Any]:
    """What ``Client(url)`` connects through (the SDK's own timeouts), with one TLS context for every client: the
    SDK's default builds one, and loads the CA bundle, per client (about 25 ms of CPU each, for a plain-HTTP URL)."""
    global _TLS
    if _TLS is None:
        _TLS = ssl.create_default_context()
    timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    async with (
        httpx2.AsyncClient(timeout=timeout, verify=_TLS) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def mcp_client(target: Any) -> Client:
    """An MCP client of `target`: stdio parameters, or the URL of a Streamable HTTP endpoint."""
    return Client(_streams(target)) if isinstance(target, str) else Client(target)


@asynccontextmanager
async def clients(targets: list[Any], count: int = 1) -> AsyncIterator[list[Client]]:
    """`count` connected clients per target (stdio parameters or an HTTP URL)."""
    async with AsyncExitStack() as stack:
        opened = [await stack.enter_async_context(mcp_client(t)) for t in targets for _ in range(count)]
        yield opened


async def round_trip_stdio(report: Report, quick: bool, scratch: Path) -> float:
    """The round trip over stdio; returns how long the ``attp serve`` it spawned took to a completed ``initialize``."""
    repeats = 4 if quick else 200
    workspace = scratch / "rt-workspace"
    workspace.mkdir()
    async with AsyncExitStack() as stack:
        started = time.perf_counter()
        attp = await stack.enter_async_context(Client(stdio(attp_args(workspace), scratch)))
        cold = time.perf_counter() - started
        noop = await stack.enter_async_context(Client(stdio(["-m", "bench.noop_server"], scratch)))
        samples = await interleaved({"attp": lambda: attp_call(attp), "noop": lambda: noop_call(noop)}, repeats)
    report.add(ROUND_TRIP, "stdio.attp_execute_w1_ms", median_ms(samples["attp"]), "ms")
    report.add(ROUND_TRIP, "stdio.noop_ms", median_ms(samples["noop"]), "ms")
    report.add(ROUND_TRIP, "stdio.ratio", ratio(samples["attp"], samples["noop"]), "x", "<= 1.5")
    return cold


async def round_trip_http(report: Report, quick: bool, scratch: Path, attp_url: str) -> None:
    """The round trip over Streamable HTTP, to the ``attp serve`` at `attp_url` and a no-op server started here."""
    repeats = 4 if quick else 200
    noop_port = free_port()
    with http_server(["-m", "bench.noop_server", "--port", str(noop_port)], scratch, noop_port):
        async with clients([attp_url, f"http://127.0.0.1:{noop_port}/mcp"]) as (attp, noop):
            samples = await interleaved({"attp": lambda: attp_call(attp), "noop": lambda: noop_call(noop)}, repeats)
    report.add(ROUND_TRIP, "http.attp_execute_w1_ms", median_ms(samples["attp"]), "ms")
    report.add(ROUND_TRIP, "http.noop_ms", median_ms(samples["noop"]), "ms")
    report.add(ROUND_TRIP, "http.ratio", ratio(samples["attp"], samples["noop"]), "x")


async def _hammer(client: Client, stop: float, latencies: list[float], failures: list[str]) -> None:
    while time.perf_counter() < stop:
        started = time.perf_counter()
        try:
            await attp_call(client)
        except RuntimeError as exc:  # counted and reported, not fatal: a failure under load is a finding
            failures.append(str(exc))
            continue
        latencies.append(time.perf_counter() - started)


async def _calls(client: Client, count: int, failures: list[str] | None = None) -> None:
    for _ in range(count):
        try:
            await attp_call(client)
        except RuntimeError as exc:
            if failures is None:
                raise
            failures.append(str(exc))


async def hammer(opened: list[Client], duration: float, warm_calls: int = 1) -> tuple[list[float], list[str], float]:
    """Each client of `opened` calls W1 `warm_calls` times (its session, and the pool grown to their number), then
    all call it back to back for `duration` seconds: (latencies, the failed calls' errors, seconds elapsed)."""
    async with anyio.create_task_group() as warm:
        for client in opened:
            warm.start_soon(_calls, client, warm_calls)
    latencies: list[float] = []
    failures: list[str] = []
    started = time.perf_counter()
    async with anyio.create_task_group() as tasks:
        for client in opened:
            tasks.start_soon(_hammer, client, started + duration, latencies, failures)
    return latencies, failures, time.perf_counter() - started


async def scale(report: Report, quick: bool, process: subprocess.Popen[bytes], url: str) -> None:
    """Throughput with 1, 4 and 16 clients, then RSS over `total_calls` calls, of the ``attp serve`` `process`."""
    duration, total_calls, warm_calls = (0.3, 20, 1) if quick else (5.0, 10_000, 2)
    for concurrency in (1, 4, 16):
        async with clients([url], concurrency) as opened:
            latencies, failures, elapsed = await hammer(opened, duration, warm_calls)
        if failures:
            report.notes.append(f"{len(failures)} W1 calls failed with {concurrency} clients: {failures[0][:300]}")
        top = concurrency == 16
        throughput = round(len(latencies) / elapsed, 1)
        report.add(SCALE, f"throughput_{concurrency}_clients", throughput, "calls/s", ">= 150" if top else None)
        report.add(SCALE, f"errors_{concurrency}_clients", len(failures), "calls", "<= 0" if top else None)
        report.add(SCALE, f"latency_{concurrency}_clients_ms", median_ms(latencies), "ms")

    before = rss_mb(process.pid)
    failures = []
    async with clients([url], 4) as opened, anyio.create_task_group() as tasks:
        for client in opened:
            tasks.start_soon(_calls, client, total_calls // 4, failures)
    after = rss_mb(process.pid)
    if failures:
        report.notes.append(f"{len(failures)} of {total_calls} W1 calls failed: {failures[0][:300]}")
    report.add(SCALE, "server_rss_before_mb", before, "MB")
    report.add(SCALE, f"server_rss_after_{total_calls}_calls_mb", after, "MB")
    report.add(SCALE, "server_rss_growth_mb", round(after - before, 1), "MB")
    report.add(SCALE, "server_rss_growth_pct", round(100 * (after - before) / before, 1), "%", "<= 10")


async def cold_start(report: Report, quick: bool, scratch: Path, round_trip_start: float) -> None:
    """From spawning ``attp serve`` (stdio) to a completed ``initialize``: imports, workers ready, handshake.

    `--quick` takes its one sample from the stdio round trip's server (`round_trip_start`), started the same way."""
    workspace = scratch / "cold-workspace"
    workspace.mkdir()
    samples: list[float] = [round_trip_start] if quick else []
    for _ in range(0 if quick else 5):
        started = time.perf_counter()
        async with Client(stdio(attp_args(workspace), scratch)):
            samples.append(time.perf_counter() - started)
    report.add(SCALE, "cold_start_to_initialize_ms", median_ms(samples), "ms", "<= 1200")


async def transport(report: Report, quick: bool) -> None:
    with tempfile.TemporaryDirectory() as directory:
        scratch = Path(directory)
        cold = await round_trip_stdio(report, quick, scratch)
        workspace = scratch / "http-workspace"
        workspace.mkdir()
        port = free_port()
        with http_server(attp_args(workspace, "--transport", "http", "--port", str(port)), scratch, port) as process:
            url = f"http://127.0.0.1:{port}/mcp"
            await round_trip_http(report, quick, scratch, url)
            await scale(report, quick, process, url)
        await cold_start(report, quick, scratch, cold)
