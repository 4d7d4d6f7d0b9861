"""Stopping the server: a stop signal (SIGTERM, SIGHUP, SIGINT) or the client closing stdin ends it
promptly, with its workers killed and their private directories removed; directories that a killed
server left behind are swept at the next start.

Each server runs with its own TMPDIR, so the workers' directories it creates can be counted exactly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from harness import descendants, server_env, serving_http

from attp_server.sandbox.process.pool import WorkerPool, sweep_stale_directories

pytestmark = pytest.mark.process


def worker_directories(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("attp-worker-*"))


def children(pid: int) -> set[int]:
    """The live processes a server started: its fork server and the workers forked from it."""
    return set(descendants(pid))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:  # gone between the two looks
        return False
    return state != "Z"


def wait_until(condition: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}  # fmt: skip


@contextmanager
def stdio_server(workspace: Path, tmp: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`attp serve` over stdio, answered one initialize, with stdin left open; killed after if still there."""
    with subprocess.Popen(
        [sys.executable, "-m", "attp_server", "serve", "--workspace", str(workspace)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env={**server_env(), "TMPDIR": str(tmp)}, start_new_session=True,
    ) as process:  # fmt: skip
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
            process.stdin.flush()
            assert json.loads(process.stdout.readline())["id"] == 1  # serving: its stop handling is in place
            yield process
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_http_server_stops_on_a_signal_and_leaves_nothing(tmp_path: Path, stop: signal.Signals) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with serving_http(tmp_path, env={"TMPDIR": str(tmp)}) as served:
        assert served.process is not None
        pid = served.process.pid
        assert wait_until(lambda: len(worker_directories(tmp)) >= 2)
        workers = children(pid)
        assert len(workers) >= 2
        served.process.send_signal(stop)
        assert served.process.wait(timeout=10) == 0
    assert worker_directories(tmp) == []
    assert not any(alive(worker) for worker in workers)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_stdio_server_stops_on_a_signal_while_stdin_is_open(tmp_path: Path, stop: signal.Signals) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with stdio_server(tmp_path, tmp) as process:
        workers = children(process.pid)
        process.send_signal(stop)
        assert process.wait(timeout=10) == 0
        assert process.stdout is not None and process.stdout.read() == b""  # nothing more was asked
    assert worker_directories(tmp) == []
    assert workers and not any(alive(worker) for worker in workers)


def test_stdio_server_ends_when_the_client_closes_stdin(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with stdio_server(tmp_path, tmp) as process:
        workers = children(process.pid)
        assert process.stdin is not None
        process.stdin.close()
        assert process.wait(timeout=10) == 0
    assert worker_directories(tmp) == []
    assert workers and not any(alive(worker) for worker in workers)


def test_directories_of_a_killed_server_are_swept_at_the_next_start(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with stdio_server(tmp_path, tmp) as killed:
        os.killpg(killed.pid, signal.SIGKILL)  # no chance to clean up
        killed.wait()
    left = worker_directories(tmp)
    assert len(left) >= 2
    mine = tmp / f"attp-worker-{os.getpid()}-live"  # a running server's directory: not touched
    mine.mkdir()
    stranger = tmp / "attp-worker-notapid-x"  # not a name the pool gives: not touched
    stranger.mkdir()

    with serving_http(tmp_path, env={"TMPDIR": str(tmp)}) as served:
        assert served.process is not None
        assert not any(path.exists() for path in left)
        assert mine.exists() and stranger.exists()
        current = [path for path in worker_directories(tmp) if path not in (mine, stranger)]
        assert current and all(path.name.startswith(f"attp-worker-{served.process.pid}-") for path in current)


def test_sweep_counts_what_it_removed(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f"attp-worker-{dead.pid}-a").mkdir()
    (tmp_path / f"attp-worker-{dead.pid}-b").mkdir()
    (tmp_path / f"attp-worker-{os.getpid()}-c").mkdir()
    assert sweep_stale_directories(str(tmp_path)) == 2
    assert [p.name for p in worker_directories(tmp_path)] == [f"attp-worker-{os.getpid()}-c"]


@pytest.mark.anyio
async def test_kill_now_returns_once_the_workers_are_gone() -> None:
    """SIGKILL is asynchronous: a stdio server that exits right after kill_now() must not leave a worker
    still tearing itself down (test_stdio_server_stops_on_a_signal_while_stdin_is_open failed on that, flakily)."""
    async with WorkerPool(size=2, max_workers=2, memory_mb=256) as pool:
        pids = pool.worker_pids()
        assert len(pids) == 2
        pool.kill_now()
        survivors = [pid for pid in pids if alive(pid)]
    assert survivors == []  # asserted outside the pool: its task group would wrap the failure in a group
