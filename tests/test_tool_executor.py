"""ToolExecutor: sync tool calls on bounded threads, a per-session share, abandoned calls counted until they end."""

from __future__ import annotations

import threading
import time
from functools import partial

import anyio
import pytest

from attp_server.run.tool_executor import NoThread, ToolExecutor
from attp_server.toolpack import ToolCall, current_call, reset_current_call, set_current_call

pytestmark = pytest.mark.anyio

LATER = 3600.0


def where() -> str:
    return threading.current_thread().name


def nap(seconds: float) -> None:
    time.sleep(seconds)


def fail() -> None:
    raise ValueError("the tool broke")


async def test_calls_run_on_tool_threads_and_answer_as_direct_calls_would() -> None:
    executor = ToolExecutor(threads=2, per_session=2)
    try:
        deadline = time.monotonic() + LATER
        assert (await executor.call(where, {}, session="a", deadline=deadline)).startswith("attp-tool-")
        with pytest.raises(ValueError, match="the tool broke"):
            await executor.call(fail, {}, session="a", deadline=deadline)
        token = set_current_call(ToolCall(deadline=deadline))
        try:  # the run's deadline reaches the thread
            remaining = await executor.call(lambda: current_call().remaining(), {}, session="a", deadline=deadline)
        finally:
            reset_current_call(token)
        assert remaining is not None and 0 < remaining <= LATER
        assert executor.stats()["started"] == 1  # the thread is reused
    finally:
        executor.close()


async def test_a_session_past_its_share_waits_then_gets_no_thread_while_others_do() -> None:
    executor = ToolExecutor(threads=4, per_session=1)
    release = threading.Event()
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(
                partial(executor.call, release.wait, {}, session="greedy", deadline=time.monotonic() + LATER)
            )
            await anyio.sleep(0.05)
            with pytest.raises(NoThread):
                await executor.call(where, {}, session="greedy", deadline=time.monotonic() + 0.1)
            assert (await executor.call(where, {}, session="other", deadline=time.monotonic() + LATER)).startswith(
                "attp-tool-"
            )
            release.set()
        assert executor.stats()["refused"] == 1
    finally:
        executor.close()


async def test_a_call_whose_run_ends_is_counted_abandoned_until_it_returns() -> None:
    executor = ToolExecutor(threads=2, per_session=2)
    release = threading.Event()
    try:
        with anyio.move_on_after(0.05):
            await executor.call(release.wait, {}, session="a", deadline=time.monotonic() + LATER)
        assert executor.stats()["abandoned"] == 1 and executor.stats()["busy"] == 1
        release.set()
        with anyio.fail_after(10):
            while executor.stats()["abandoned"]:
                await anyio.sleep(0.01)
        assert executor.stats()["busy"] == 0
    finally:
        executor.close()


async def test_threads_never_exceed_the_setting() -> None:
    executor = ToolExecutor(threads=3, per_session=3)
    try:
        async with anyio.create_task_group() as tasks:
            for i in range(15):  # 3 running and 12 waiting: the line holds 4 per thread
                call = partial(
                    executor.call, nap, {"seconds": 0.01}, session=f"s{i % 3}", deadline=time.monotonic() + 60
                )
                tasks.start_soon(call)
        assert executor.stats()["started"] <= 3 and executor.stats()["calls"] == 15
    finally:
        executor.close()
