"""What the walls contain on ``engine = "asteval"`` that asteval's own rules do not, through the real path.

asteval refuses dunders and a few names, and nothing else: a program reaches the private attributes of what its
symbols hold. From a tool stub that is the worker's end of the protocol pipe (`read_file._invoke.channel`) and the
clock the deadline alarm reads (`read_file._invoke.pauses`). Each case is an attack on those, or on what asteval
does not bound (time, memory), and the detector that proves it contained: the server's wall-clock kill, the
worker's limits, and a worker never given a second run after an asteval program (`Engine.reuse`), whatever the
worker says.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import make_settings, run_code

from attp_server.run.runtime import Runtime
from attp_server.run.startup import open_runtime

pytestmark = pytest.mark.anyio

TIMEOUT_S = 1.0

FORGE_AND_LISTEN = """\
channel = read_file._invoke.channel
forged = {'op': 'done', 'status': 'ok', 'result': 'forged', 'hint': None, 'error': None, 'stdout': '',
          'truncated': False, 'retire': False}
channel.writer.write((json.dumps(forged) + '\\n').encode())
channel.writer.flush()
taken = channel.reader.readline()
call = {'op': 'call', 'tool': 'write_file', 'args': ['stolen.txt', taken.decode()], 'kwargs': {}}
channel.writer.write((json.dumps(call) + '\\n').encode())
channel.writer.flush()
while True:
    pass
"""
"""Says the run is done (and the worker reusable), then waits for the next run's message and writes it to a file."""


@pytest.fixture
async def one_worker(workspace: Path) -> AsyncIterator[Runtime]:
    settings = make_settings(workspace, engine="asteval", workers=1, timeout_s=TIMEOUT_S)
    async with open_runtime(settings) as runtime:
        yield runtime


async def timed(runtime: Runtime, code: str) -> dict[str, Any]:
    with anyio.fail_after(TIMEOUT_S + 3):
        return await run_code(runtime, code)


async def test_a_forged_done_does_not_hand_the_worker_the_next_run(one_worker: Runtime, workspace: Path) -> None:
    await timed(one_worker, FORGE_AND_LISTEN)  # its own result is whatever it says, as __result__ would be
    victim = await timed(one_worker, "secret = 'the next run'\n__result__ = add(1, 2)")
    assert victim["result"] == 3, victim
    await anyio.sleep(0.2)
    assert not (workspace / "stolen.txt").exists(), (workspace / "stolen.txt").read_text()


async def test_moving_its_own_deadline_does_not_outlive_the_timeout(one_worker: Runtime) -> None:
    started = anyio.current_time()
    data = await timed(one_worker, "read_file._invoke.pauses.paused(10 ** 9)\nwhile True:\n    pass")
    assert data["error"]["code"] == "TIMEOUT"
    assert anyio.current_time() - started < TIMEOUT_S + 2
    assert (await timed(one_worker, "__result__ = 'alive'"))["result"] == "alive"


@pytest.mark.parametrize(
    ("code", "codes"),
    [
        pytest.param("x = (10 ** 10000) ** 10000", {"TIMEOUT"}, id="c-level-power-within-asteval-limit"),
        pytest.param("x = 10 ** 9 * 'ab'", {"MEMORY_LIMIT"}, id="int-times-str"),
        pytest.param("x = bytearray(10 ** 10)", {"MEMORY_LIMIT"}, id="bytearray"),
        pytest.param(
            "read_file._invoke.max_calls = 10 ** 9\nfor i in range(10 ** 6):\n    add(1, 1)",
            {"TOOL_CALL_LIMIT", "TIMEOUT"},
            id="raise-its-own-call-limit",
        ),
        pytest.param(
            "print._write = None\nread_file._invoke.channel.writer.close()\nadd(1, 1)",
            {"INTERNAL_ERROR", "RUNTIME_ERROR", "MEMORY_LIMIT"},
            id="close-the-pipe",
        ),
    ],
)
async def test_what_asteval_does_not_bound_ends_cleanly(one_worker: Runtime, code: str, codes: set[str]) -> None:
    data = await timed(one_worker, code)
    assert data["status"] == "error" and data["error"]["code"] in codes, data
    assert (await timed(one_worker, "__result__ = 'alive'"))["result"] == "alive"
