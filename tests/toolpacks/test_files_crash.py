"""A write interrupted by killing the server (SIGKILL, mid-run) leaves the old or the new content, never a mix."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import anyio
import pytest
from harness import serving_http

pytestmark = [pytest.mark.anyio, pytest.mark.process]

SIZE = 400_000
OLD = b"old content\n" * 1000
PROGRAM = f"""
for i in range(200):
    write_file("doc.txt", ("A" if i % 2 == 0 else "B") * {SIZE})
"""


@pytest.mark.parametrize("delay_ms", [0, 3, 7, 13, 29])
async def test_killed_server_leaves_old_or_new_content(tmp_path: Path, delay_ms: int) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    doc = workspace / "doc.txt"
    doc.write_bytes(OLD)
    flags = ("--toolpack", "files", "--timeout-s", "60", "--max-tool-calls", "1000")
    with serving_http(workspace, *flags) as served:
        assert served.process is not None
        process = served.process

        async def run() -> None:
            async with served.client() as client:
                await client.call_tool("attp_execute", {"code": PROGRAM})

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            deadline = time.monotonic() + 30
            while doc.read_bytes() == OLD:  # wait until the writes are under way
                assert time.monotonic() < deadline, "the program never wrote"
                await anyio.sleep(0.001)
            await anyio.sleep(delay_ms / 1000)
            os.killpg(process.pid, signal.SIGKILL)  # the server and everything it started
            process.wait(timeout=10)
            group.cancel_scope.cancel()

    content = doc.read_bytes()
    assert content in {b"A" * SIZE, b"B" * SIZE}, f"torn write: {len(content)} bytes, starts {content[:20]!r}"
    leftovers = [p.name for p in workspace.iterdir() if p.name != "doc.txt"]
    assert all(name.startswith(".doc.txt.") and name.endswith(".tmp") for name in leftovers), leftovers
