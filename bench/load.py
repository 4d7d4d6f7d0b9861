"""Reliability under hostile load (issue 12): a normal session's calls while hostile sessions hammer the server.

A real ``attp serve --transport http`` (the bench and memory toolpacks, ``timeout_s`` 3). `hostile`
clients, each an MCP session of its own, send the programs of `HOSTILE` round-robin, back to back, for
`duration` seconds, from a separate process (so that their own client-side work does not slow the
normal client's measurement; with ``--quick``, a smoke run, from the bench's own). Meanwhile one normal
client calls W1 (five tool calls) every `PAUSE_S` and ``/healthz`` is read. Reported: the normal call's
p50 and p99 latency and its errors, ``/healthz``'s worst latency, the server's thread count (most
during the load, and after), the hostile outcomes, and, once the hostile clients stop, how long the
server (its process and its workers) takes to go idle (under 10 % of one CPU) and its CPU use 2 to 3
seconds after.

``python -m bench --only load`` (long form); `tests/test_budgets.py` runs the short form and asserts
what must hold whatever the machine: every normal call answers ok, threads stay bounded, the CPU
settles. ``python -m bench.load --hostile URL --clients N --duration S`` is the hostile side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
from mcp import Client

from bench.report import Report
from bench.transport import ROOT, _environment, attp_args, free_port, http_server, mcp_client
from bench.workloads import W1

SECTION = "Reliability (hostile clients + one normal client over Streamable HTTP; issue 12)"

_BOMB_STEM = "x" * 145
HOSTILE: dict[str, str] = {
    "static_check_bomb": "\n".join(
        [f"b{_BOMB_STEM}{i:04d}=0" for i in range(65)] + [f"u{_BOMB_STEM}{i:04d}()" for i in range(65)]
    ),
    "find_page_60000_terms": 'q = " ".join(["t%06d" % i for i in range(60000)])\n__result__ = len(find_page(q))',
    "bytearray_width": '__result__ = len(bytearray(b"%9999999d") % 1)',
    "bytearray_join": '__result__ = len(b"".join([bytearray(5000000)] * 3))',
    "runaway_loop": "while True:\n    pass",
    "runaway_regex": "re.match('(a+)+$', 'a' * 40 + 'b')",
}
"""The three findings of issue 12, and runaways that hold a worker until their deadline."""

REDOS: dict[str, str] = {"redos": "__result__ = hostile.redos(s='a' * 40 + '!')"}
"""Issue 22: an upstream's ``inputSchema`` pattern ``^(a+)+$`` against a string that makes `re` backtrack for
minutes (it held the whole server before schema regexes were matched by RE2, off the event loop)."""
HOSTILE_UPSTREAM = ROOT / "tests" / "support" / "hostile_upstream.py"
PROGRAMS = {"hostile": HOSTILE, "redos": REDOS}

TIMEOUT_S = 3.0
PAUSE_S = 0.05
"""Between two calls of the normal client."""
NORMAL_PATIENCE_S = 60.0
"""A normal call not answered within this counts as an error (and the load test goes on)."""
IDLE_CPU = 0.10
"""Idle: under 10 % of one CPU (the server process and its workers)."""


@dataclass
class LoadResult:
    latencies: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)
    """The normal calls' own ``elapsed_ms`` (inside the server's runtime)."""
    errors: list[str] = field(default_factory=list)
    health_latencies: list[float] = field(default_factory=list)
    max_threads: int = 0
    threads_after: int = 0
    hostile: dict[str, int] = field(default_factory=dict)
    settle_s: float | None = None
    """Seconds from the end of the hostile load to the first quiet 0.25 s window; None if never within 10 s."""
    cpu_after: float = 0.0
    """CPU-s per second, 2 to 3 seconds after the hostile load ended."""
    abandoned_after: int = 0
    server_cpu: float = 0.0
    """CPU-s per second of the server process itself (its workers not included) while the normal client ran."""
    attacker_stderr: str = ""
    """The last lines the hostile side wrote to stderr (why it made no call, when it made none)."""

    def p(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process, its reaped children, and its live children (the workers)."""
    total = _stat_cpu(pid, with_children=True)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = _stat_fields(int(entry))
            except OSError:
                continue
            if int(fields[1]) == pid:
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _stat_fields(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _stat_cpu(pid: int, *, with_children: bool) -> float:
    fields = _stat_fields(pid)
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if with_children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def thread_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


async def _until(moment: float) -> None:
    await anyio.sleep(max(0.0, moment - time.monotonic()))


async def _normal(url: str, start: float, stop: float, result: LoadResult) -> None:
    """Calls from `start` to `stop` (at least one), on a session connected before `start`."""
    async with mcp_client(url + "/mcp") as client:
        await _until(start)
        while True:
            started = time.monotonic()
            try:
                with anyio.fail_after(NORMAL_PATIENCE_S):
                    reply = await client.call_tool("attp_execute", {"code": W1})
                data = reply.structured_content or {}
                result.server_ms.append(float(data.get("elapsed_ms", 0.0)))
                if data.get("status") != "ok":
                    result.errors.append(str((data.get("error") or {}).get("code", data)))
            except Exception as exc:  # a failure under load is a finding, counted and reported
                result.errors.append(f"{type(exc).__name__}: {exc}")
            result.latencies.append(time.monotonic() - started)
            if time.monotonic() >= stop:
                return
            await anyio.sleep(PAUSE_S)


async def _watch(url: str, pid: int, start: float, stop: float, result: LoadResult) -> None:
    """``/healthz`` and the server's threads from `start` to `stop` (at least once)."""
    async with httpx.AsyncClient(timeout=30) as http:
        await _until(start)
        while True:
            started = time.monotonic()
            await http.get(url + "/healthz")
            result.health_latencies.append(time.monotonic() - started)
            result.max_threads = max(result.max_threads, thread_count(pid))
            if time.monotonic() >= stop:
                return
            await anyio.sleep(0.25)


async def _settle(pid: int, result: LoadResult, *, cpu_after: bool) -> None:
    ended = time.monotonic()
    while time.monotonic() - ended < 10:
        before, started = tree_cpu(pid), time.monotonic()
        await anyio.sleep(0.25)
        if (tree_cpu(pid) - before) / (time.monotonic() - started) < IDLE_CPU:
            result.settle_s = round(started - ended, 2)
            break
    if not cpu_after:
        return
    await anyio.sleep(max(0.0, ended + 2 - time.monotonic()))
    before, started = tree_cpu(pid), time.monotonic()
    await anyio.sleep(1.0)
    result.cpu_after = (tree_cpu(pid) - before) / (time.monotonic() - started)


async def run_load(
    scratch: Path,
    *,
    hostile: int,
    duration: float,
    programs: str = "hostile",
    cpu_after: bool = True,
    attacker_process: bool = True,
) -> LoadResult:
    """Start a server, run the hostile and the normal clients for `duration` seconds, and watch it settle.

    `programs` names what the hostile clients send (`PROGRAMS`); with ``"redos"`` the server has the hostile
    upstream of tests/support/hostile_upstream.py behind it as ``hostile``. Without `cpu_after` (the tests,
    which assert that the server settles, never its figures) the 2-to-3-seconds-after CPU is not measured.
    Without `attacker_process` (``python -m bench --quick``, whose figures mean nothing) the hostile clients are
    tasks of this process, beside the normal client, instead of ``python -m bench.load --hostile``: no interpreter
    to start for them.
    """
    workspace = scratch / "load-workspace"
    workspace.mkdir()
    port = free_port()
    flags = ["--transport", "http", "--port", str(port), "--toolpack", "memory", "--db-path", str(scratch / "m.db")]
    if programs == "redos":
        servers = {"hostile": {"command": sys.executable, "args": [str(HOSTILE_UPSTREAM)]}}
        (scratch / "upstreams.json").write_text(json.dumps({"mcpServers": servers}))
        flags += ["--mcp-config", str(scratch / "upstreams.json")]
    result = LoadResult()
    attacker_log = scratch / "attacker.stderr"
    with http_server([*attp_args(workspace, *flags), "--timeout-s", str(TIMEOUT_S)], scratch, port) as server:
        url = f"http://127.0.0.1:{port}"
        attacker: subprocess.Popen[bytes] | None = None
        outcomes: Counter[str] = Counter()  # the hostile clients', when they run in this process
        if attacker_process:
            hostile_side = ["-m", "bench.load", "--hostile", url, "--clients", str(hostile)]
            hostile_side += ["--duration", str(duration), "--programs", programs]
            with attacker_log.open("wb") as attacker_err:  # the child has its own copy of the descriptor
                attacker = subprocess.Popen(
                    [sys.executable, *hostile_side],
                    cwd=ROOT,
                    env=_environment(),
                    stdout=subprocess.PIPE,
                    stderr=attacker_err,
                )
        try:
            # The normal session connects now, while the hostile ones do: on a loaded machine connecting takes a
            # while, and the window of its calls under the hostile load must not be spent on it.
            start = time.monotonic() + 1.0  # by then the hostile sessions are connected and busy
            stop = start + max(0.5, duration - 1.5)
            async with anyio.create_task_group() as attack:
                if attacker is None:
                    attack.start_soon(_attack, url, hostile, duration, programs, outcomes)
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(_normal, url, start, stop, result)
                    tasks.start_soon(_watch, url, server.pid, start, stop, result)
                    await _until(start)
                    cpu, started = _stat_cpu(server.pid, with_children=False), time.monotonic()
                elapsed = time.monotonic() - started
                result.server_cpu = (_stat_cpu(server.pid, with_children=False) - cpu) / elapsed
            out = b""
            if attacker is not None:
                out, _ = await anyio.to_thread.run_sync(attacker.communicate)
        finally:
            if attacker is not None and attacker.poll() is None:
                attacker.kill()
                attacker.wait()
        if attacker is not None:
            result.hostile = dict(json.loads(out or b"{}"))
            result.attacker_stderr = attacker_log.read_text(errors="replace")[-2000:]
        else:
            result.hostile = dict(sorted(outcomes.items()))
        await _settle(server.pid, result, cpu_after=cpu_after)
        result.threads_after = thread_count(server.pid)
        health = httpx.get(url + "/healthz", timeout=30).json()
        result.abandoned_after = int(health.get("tools", {}).get("abandoned", -1))  # -1: a server without the count
    return result


async def load(report: Report, quick: bool) -> None:
    hostile, duration = (2, 1.5) if quick else (12, 30.0)  # 1.5 s: time for a hostile call to end on a busy machine
    with tempfile.TemporaryDirectory() as directory:
        result = await run_load(Path(directory), hostile=hostile, duration=duration, attacker_process=not quick)
    report.add(SECTION, "load.hostile_clients", hostile, "clients")
    report.add(SECTION, "load.hostile_calls", sum(result.hostile.values()), "calls")
    report.add(SECTION, "load.normal_calls", len(result.latencies), "calls")
    report.add(SECTION, "load.normal_p50_ms", round(statistics.median(result.latencies) * 1000, 1), "ms")
    report.add(SECTION, "load.normal_p99_ms", round(result.p(0.99) * 1000, 1), "ms", "<= 1500")
    report.add(SECTION, "load.normal_errors", len(result.errors), "calls", "<= 0")
    server = sorted(result.server_ms) or [0.0]
    report.add(SECTION, "load.normal_runtime_p99_ms", server[min(len(server) - 1, int(0.99 * len(server)))], "ms")
    report.add(SECTION, "load.healthz_max_ms", round(max(result.health_latencies) * 1000, 1), "ms")
    report.add(SECTION, "load.server_cpu_pct", round(result.server_cpu * 100, 1), "%")
    report.add(SECTION, "load.server_threads_max", result.max_threads, "threads")
    report.add(SECTION, "load.server_threads_after", result.threads_after, "threads")
    settle = result.settle_s if result.settle_s is not None else 10.0
    report.add(SECTION, "load.idle_after_s", settle, "s", "<= 2")
    report.add(SECTION, "load.cpu_2s_after_pct", round(result.cpu_after * 100, 1), "%", "< 10")
    if result.errors:
        report.notes.append(f"normal calls failed under load: {Counter(result.errors).most_common(3)}")
    report.notes.append(f"hostile outcomes: {result.hostile}")
    clients, duration = (1, 1.5) if quick else (10, 20.0)  # 1.5 s, as above: a call that has not ended is not counted
    with tempfile.TemporaryDirectory() as directory:
        redos = await run_load(
            Path(directory), hostile=clients, duration=duration, programs="redos", cpu_after=False,
            attacker_process=not quick,
        )  # fmt: skip
    report.add(SECTION, "load.redos_clients", clients, "clients")
    report.add(SECTION, "load.redos_calls", sum(redos.hostile.values()), "calls")
    report.add(SECTION, "load.redos_normal_p50_ms", round(statistics.median(redos.latencies) * 1000, 1), "ms")
    report.add(SECTION, "load.redos_normal_max_ms", round(max(redos.latencies) * 1000, 1), "ms", "<= 1500")
    report.add(SECTION, "load.redos_normal_errors", len(redos.errors), "calls", "<= 0")
    idle = redos.settle_s if redos.settle_s is not None else 10.0
    report.add(SECTION, "load.redos_idle_after_s", idle, "s", "<= 2")
    report.notes.append(f"ReDoS outcomes (issue 22): {redos.hostile}")


# ---------------------------------------------------------------- the hostile side, in its own process


async def _hostile_client(
    client: Client, programs: dict[str, str], first: int, stop: float, outcomes: Counter[str]
) -> None:
    names = list(programs)
    turn = first
    while time.monotonic() < stop:
        name = names[turn % len(names)]
        turn += 1
        try:
            with anyio.fail_after(max(0.1, stop - time.monotonic())):
                reply = await client.call_tool("attp_execute", {"code": programs[name]})
            code = ((reply.structured_content or {}).get("error") or {}).get("code", "ok")
        except TimeoutError:
            break  # the load is over: the call is cancelled, and its worker with it
        except Exception as exc:
            code = type(exc).__name__
        outcomes[f"{name}:{code}"] += 1


async def _attack(url: str, clients: int, duration: float, programs: str, outcomes: Counter[str]) -> None:
    """`clients` hostile sessions sending `PROGRAMS[programs]` for `duration` s once all are connected."""
    async with AsyncExitStack() as stack:
        opened = [await stack.enter_async_context(mcp_client(url + "/mcp")) for _ in range(clients)]
        stop = time.monotonic() + duration  # from when every client is connected: a slow start shortens no load
        async with anyio.create_task_group() as tasks:
            for i, client in enumerate(opened):
                tasks.start_soon(_hostile_client, client, PROGRAMS[programs], i, stop, outcomes)


async def _hostile(url: str, clients: int, duration: float, programs: str) -> None:
    outcomes: Counter[str] = Counter()
    await _attack(url, clients, duration, programs, outcomes)
    print(json.dumps(dict(sorted(outcomes.items()))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description="the hostile side of the load test")
    parser.add_argument("--hostile", required=True, metavar="URL", help="the server, e.g. http://127.0.0.1:8765")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--programs", choices=sorted(PROGRAMS), default="hostile", help="what the clients send")
    args = parser.parse_args(argv)
    anyio.run(_hostile, args.hostile, args.clients, args.duration, args.programs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
