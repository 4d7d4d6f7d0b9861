"""Fault handling through the real pool: dead workers, bursts of runaways, no leftovers."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import anyio
import pytest
from harness import descendants, run_code, running

from attp_server.run.runtime import Runtime

pytestmark = pytest.mark.anyio


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def wait_for_idle(runtime: Runtime, count: int) -> None:
    with anyio.fail_after(30):
        while len(runtime.pool.worker_pids()) < count or runtime.pool.stats()["starting"]:
            await anyio.sleep(0.05)


async def test_burst_of_runaways_leaves_pool_healthy(workspace: Path) -> None:
    # Children this test did not start (a session-wide PostgreSQL server of the same test process) are not its own.
    others = set(descendants(os.getpid()))
    async with running(workspace, timeout_s=0.25, workers=2) as runtime:
        await wait_for_idle(runtime, 2)
        fds_before = open_fds()
        programs = ["while True:\n    pass", "re.match('(a+)+$', 'a' * 40 + 'b')", "x = 'a' * 10**10"]
        codes = []
        for i in range(30):
            codes.append((await run_code(runtime, programs[i % 3]))["error"]["code"])
        assert set(codes) == {"TIMEOUT", "MEMORY_LIMIT"}
        await wait_for_idle(runtime, 2)
        assert (await run_code(runtime, "__result__ = 'healthy'"))["result"] == "healthy"
        await wait_for_idle(runtime, 2)
        stats = runtime.pool.stats()
        assert (stats["idle"], stats["busy"]) == (3, 0)  # two fresh, and the one kept for the healthy run's owner
        children = {pid: state for pid, state in descendants(os.getpid()).items() if pid not in others}
        assert set(children) == {*runtime.pool.worker_pids(), runtime.pool.fork_server_pid}, children
        assert "Z" not in children.values()
        assert open_fds() <= fds_before + 2 + 3  # and the kept worker's three pipes


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGSEGV, signal.SIGTERM], ids=lambda s: s.name)
async def test_worker_killed_mid_run_fails_that_call_only(workspace: Path, signum: signal.Signals) -> None:
    async with running(workspace, timeout_s=5.0, workers=1) as runtime:
        results: list[dict[str, object]] = []

        async def victim() -> None:
            results.append(await run_code(runtime, "while True:\n    pass"))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(victim)
            with anyio.fail_after(10):
                while not runtime.pool.running_pids():
                    await anyio.sleep(0.01)
            os.kill(runtime.pool.running_pids()[0], signum)
        error = results[0]["error"]
        assert isinstance(error, dict)
        assert error["code"] in {"MEMORY_LIMIT", "RUNTIME_ERROR", "INTERNAL_ERROR"}
        assert signum.name in error["message"]
        assert (await run_code(runtime, "__result__ = 'next'"))["result"] == "next"


async def test_no_worker_outlives_the_pool(workspace: Path) -> None:
    others = set(descendants(os.getpid()))  # started by other tests of this process (a session-wide PostgreSQL)
    async with running(workspace, workers=3) as runtime:
        await wait_for_idle(runtime, 3)
        pids = runtime.pool.worker_pids()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not set(descendants(os.getpid())) - others


async def test_a_worker_retiring_after_its_last_run_says_so(workspace: Path) -> None:
    """Past MAX_RUNS_PER_WORKER the worker exits; it must say so, or the next program would die with it."""
    from attp_server.sandbox.process.worker import MAX_RUNS_PER_WORKER

    async with running(workspace, workers=1, max_workers=1) as runtime:
        statuses = set()
        for _ in range(MAX_RUNS_PER_WORKER + 5):
            statuses.add((await run_code(runtime, "__result__ = 1"))["status"])
        assert statuses == {"ok"}
        assert runtime.pool.stats()["runs"] == MAX_RUNS_PER_WORKER + 5


async def test_a_killed_fork_server_kills_its_workers_and_the_pool_starts_new_interpreters(workspace: Path) -> None:
    async with running(workspace, workers=2) as runtime:
        await wait_for_idle(runtime, 2)
        forks = runtime.pool.fork_server_pid
        assert forks is not None
        forked = runtime.pool.worker_pids()
        assert set(forked) <= set(descendants(forks))  # the workers are the fork server's children
        os.kill(forks, signal.SIGKILL)
        with anyio.fail_after(10):
            while runtime.pool.fork_server_pid is not None:
                await anyio.sleep(0.01)
        assert (await run_code(runtime, "__result__ = sum(range(10))"))["result"] == 45
        await wait_for_idle(runtime, 2)
        for pid in forked:  # killed: gone, or a zombie until whoever inherited it (init) reaps it
            with contextlib.suppress(FileNotFoundError):
                assert Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        mine = {pid for pid, _ in descendants(os.getpid()).items()}
        assert set(runtime.pool.worker_pids()) <= mine and not set(forked) & mine


async def test_each_forked_worker_has_a_stderr_of_its_own(workspace: Path) -> None:
    """No descriptor is shared between workers, or with the fork server: not even stderr."""
    async with running(workspace, workers=2) as runtime:
        await wait_for_idle(runtime, 2)
        forks = runtime.pool.fork_server_pid
        assert forks is not None
        pipes = {os.readlink(f"/proc/{pid}/fd/2") for pid in runtime.pool.worker_pids()}
        assert len(pipes) == 2
        assert os.readlink(f"/proc/{forks}/fd/2") not in pipes
