"""What a worker sends is not trusted: a real `attp serve` whose workers have fallen (the test hook
``TESTS_ONLY_ATTP_FALLEN_WORKERS``: each program runs as plain CPython after the worker's whole lockdown, with the
protocol pipe in reach), so that nothing but the server's own checks stands in the way.

- The server decides whether a worker serves again, never the worker: a worker that asks to be kept never serves
  another principal (``isolation = "tenant"``, two tokens, both protocol eras), nor another session under
  ``isolation = "session"`` (stdio, the anonymous principal).
- Every message is bounded before it is decoded: a 30 MB ``done`` is refused and other callers answer meanwhile
  (SECURITY.md promise 6: within 1.5 s), a ``parallel`` of 3,000,000 items is refused without the server
  allocating GBs, a ``parallel`` over the run's call budget runs none of its calls, and forged, misshapen or
  over-nested messages stop the run.
- Nothing a worker says forges a line in the text log: an error code with a newline, its own stderr.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from harness import SERVE_FLAGS, Served, serving_http, stdio_client
from harness import execute as run

from attp_server.sandbox.process import fallen

pytestmark = [pytest.mark.anyio, pytest.mark.process]

FALLEN = {fallen.ENVIRONMENT: fallen.CONSENT, "ATTP_MAX_WORKERS": "4"}
TOKENS = {"alice": "token-of-alice-5e1f0c9a", "bob": "token-of-bob-c04d2b71", "mallory": "token-of-mallory-9a2e7d03"}
"""Mallory plants a spy in the workers she is served by (last in this file); the other tests are alice's and bob's."""
FLAGS = [*SERVE_FLAGS, "--timeout-s", "10", "--workers", "1", "--log-level", "DEBUG"]
SEATBELT_BYTES = 3 * 1024**3
"""The served process's address space, set by the test: should a check fail, the machine is not what breaks."""
FORGED = "2099-01-01 00:00:00,000 WARNING attp_server.forged: "

PLANT = """
import os
import attp_server.sandbox.process.fallen as hook

def spy(channel, message, evaluate):  # the next runs this worker gets: their programs, their kept state
    channel.send({"op": "done", "status": "ok", "retire": False,
                  "result": {"stolen": message.get("code"), "state": message.get("state")}})

hook.fallen_run = spy
__result__ = os.getpid()
"""
VICTIM = "import os\n__result__ = {'pid': os.getpid(), 'mine': 'victim-secret-4411'}"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    """A fallen `attp serve` over HTTP, two tokens, a folder each; its log in a file."""
    root = tmp_path_factory.mktemp("fallen")
    log = root / "server.log"
    env = {**FALLEN, "ATTP_AUTH_TOKENS": json.dumps(TOKENS)}
    with serving_http(root / "ws", *FLAGS, "--isolation", "tenant", env=env, stderr=log) as served:
        assert served.process is not None
        resource.prlimit(served.process.pid, resource.RLIMIT_AS, (SEATBELT_BYTES, SEATBELT_BYTES))
        health = httpx.get(f"{served.url}/healthz", headers=bearer("alice"), timeout=10).json()
        assert health["sandbox"]["containment"]["fallen_workers"] is True
        yield served, log


def peak_rss(served: Served) -> int:
    """The served process's peak resident memory so far, in bytes."""
    assert served.process is not None
    for line in Path(f"/proc/{served.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def assert_not_served_by(planted: dict[str, Any], victim: dict[str, Any]) -> None:
    assert victim["status"] == "ok", victim
    assert "stolen" not in json.dumps(victim["result"]), f"a worker kept by another principal served: {victim}"
    assert victim["result"]["mine"] == "victim-secret-4411"
    assert victim["result"]["pid"] != planted["result"], "the same worker served both"


# ---------------------------------------------------------------- item 4: sizes and counts, before any work


HUGE_DONE = """
channel.send_bytes(b'{"op":"done","status":"ok","retire":false,"result":"')
for _ in range(30):  # 30 MB, written a megabyte at a time (a worker's memory_mb bounds what it holds, not this)
    channel.send_bytes(b"x" * 1_000_000)
channel.send_bytes(b'"}\\n')
"""


async def test_a_30_mb_done_is_refused_and_other_callers_answer_meanwhile(tenants: tuple[Served, Path]) -> None:
    served, _ = tenants
    latencies: list[float] = []
    huge: dict[str, Any] = {}
    async with (
        served.client(headers=bearer("alice")) as alice,
        served.client(headers=bearer("bob")) as bob,
    ):
        assert (await run(bob, "__result__ = 1"))["result"] == 1  # connected and warm

        async def hostile() -> None:
            huge.update(await run(alice, HUGE_DONE))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(hostile)
            while not huge:
                began = time.monotonic()
                assert (await run(bob, "__result__ = 1"))["result"] == 1
                latencies.append(time.monotonic() - began)
    assert huge["status"] == "error" and huge["error"]["code"] == "INTERNAL_ERROR", str(huge)[:500]
    assert "larger than" in huge["error"]["message"], huge["error"]
    assert max(latencies) < 1.5, latencies


PARALLEL_3M = """
channel.send_bytes(b'{"op":"call","tool":"parallel","args":["add",[')
for _ in range(30):
    channel.send_bytes(b"{}," * 100_000)
channel.send_bytes(b'{}]],"kwargs":{}}\\n')  # 3,000,001 items
__result__ = channel.receive()
"""


async def test_a_parallel_of_3_million_items_is_refused_without_gigabytes(tenants: tuple[Served, Path]) -> None:
    served, _ = tenants
    before = peak_rss(served)
    async with served.client(headers=bearer("alice")) as alice:
        with anyio.fail_after(30):
            data = await run(alice, PARALLEL_3M)
        assert (await run(alice, "__result__ = 2"))["result"] == 2  # the server is still itself
    assert data["status"] == "error" and "sandbox process sent" in data["error"]["message"], str(data)[:500]
    grown = peak_rss(served) - before
    assert grown < 300 * 1024**2, f"the server's peak memory grew by {grown / 1024**2:.0f} MB"


OVER_BUDGET = """
__result__ = parallel("add", [{"a": i, "b": 1} for i in range(50)], return_errors=True)
"""


async def test_a_parallel_over_the_call_budget_runs_none_of_its_calls(tenants: tuple[Served, Path]) -> None:
    """``max_tool_calls = 20``: a worker that does not count (this one sends the program's own message through the
    real evaluator's stub, told nothing of the budget) gets TOOL_CALL_LIMIT for the whole batch, not 20 runs."""
    served, _ = tenants
    program = (
        "job['limits']['max_tool_calls'] = 10_000  # the worker does not count: the server must\n"
        f"job['code'] = {OVER_BUDGET!r}\n"
        "done = evaluate(job)\n"
        "channel.send(done)\n"
    )
    async with served.client(headers=bearer("alice")) as alice:
        data = await run(alice, program)
    assert data["status"] == "error" and data["error"]["code"] == "TOOL_CALL_LIMIT", data
    assert [call for call in data["calls"] if call["ok"]] == [], data["calls"]


FORGERIES = {
    "op-not-first": 'channel.send_bytes(b\'{"status":"ok","op":"done","result":1}\\n\')',
    "two-ops": 'channel.send_bytes(b\'{"op":"call","tool":"add","args":[1,2],"kwargs":{},"op":"done"}\\n\')',
    "unknown-op": 'channel.send({"op": "ready", "pid": 1, "lockdown": {}})',
    "done-fields": 'channel.send({"op": "done", "status": 5, "retire": "no", "stdout": [1], "error": "x"})',
    "call-fields": 'channel.send({"op": "call", "tool": ["add"], "args": {}, "kwargs": []})',
    "nested": 'channel.send_bytes(b\'{"op":"call","tool":"add","args":[\' + b\'[\' * 100_000 + b\']\' * 100_000 '
    "+ b'],\"kwargs\":{}}\\n')",
    "oversized-call": 'channel.send_bytes(b\'{"op":"call","tool":"add","args":["\')\n'
    "for _ in range(40):\n    channel.send_bytes(b'x' * 1_000_000)\n"
    'channel.send_bytes(b\'"],"kwargs":{}}\\n\')',
    "not-json": 'channel.send_bytes(b\'{"op":"done",\\xff}\\n\')',
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
async def test_a_forged_or_misshapen_message_stops_the_run(tenants: tuple[Served, Path], forgery: str) -> None:
    served, _ = tenants
    program = FORGERIES[forgery] + "\n__result__ = channel.receive()\n"
    async with served.client(headers=bearer("alice")) as alice:
        with anyio.fail_after(30):
            data = await run(alice, program)
        assert (await run(alice, "__result__ = 3"))["result"] == 3
    assert data["status"] == "error" and data["error"]["code"] == "INTERNAL_ERROR", str(data)[:500]
    assert "sandbox process sent" in data["error"]["message"], data["error"]


# ---------------------------------------------------------------- item 7: the text log


FORGE_LOG = f"""
import os
os.write(2, b"x\\n{FORGED}from the worker's stderr\\n")
channel.send({{"op": "done", "status": "error", "retire": False,
              "error": {{"code": "BAD\\n{FORGED}from an error code\\r\\x1b[2J", "message": "m\\n{FORGED}message"}}}})
"""


async def test_nothing_a_worker_sends_forges_a_log_line(tenants: tuple[Served, Path]) -> None:
    served, log = tenants
    async with served.client(headers=bearer("alice")) as alice:
        data = await run(alice, FORGE_LOG)
        await run(alice, "__result__ = 4")  # the log has been written past the forged call
    assert data["status"] == "error", data
    assert "\n" not in data["error"]["code"], data["error"]
    await anyio.sleep(0.2)  # the worker's stderr is read as it comes
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    forged = [line for line in lines if line.startswith(FORGED)]
    assert forged == [], forged
    assert not any("\x1b" in line for line in lines)


def test_the_hook_is_refused_unless_asked_exactly(tmp_path: Path) -> None:
    """A wrong value, ``containment = "best-effort"`` and a non-loopback address each stop the server at start."""
    import subprocess

    from harness import server_env

    cases = {
        "wrong value": ({fallen.ENVIRONMENT: "1"}, []),
        "best-effort": ({**FALLEN, "ATTP_CONTAINMENT": "best-effort"}, []),
        "not loopback": (FALLEN, ["--transport", "http", "--host", "0.0.0.0", "--insecure-no-auth"]),
    }
    for name, (env, flags) in cases.items():
        done = subprocess.run(
            [sys.executable, "-m", "attp_server", "serve", "--workspace", str(tmp_path / "ws"), *flags],
            env={**server_env(), **env}, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        assert done.returncode != 0, name
        assert fallen.ENVIRONMENT in done.stderr, (name, done.stderr[-2000:])


async def test_the_hook_is_off_without_the_variable(tmp_path: Path) -> None:
    async with stdio_client(tmp_path / "ws", *SERVE_FLAGS) as client:
        data = await run(client, "import os\n__result__ = os.getpid()")
    assert data["status"] == "error" and data["error"]["code"] in ("IMPORT_FORBIDDEN", "FORBIDDEN"), data


# ---------------------------------------------------------------- item 2: the server decides reuse


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_worker_that_asks_to_be_kept_never_serves_another_principal(
    tenants: tuple[Served, Path], mode: str
) -> None:
    served, _ = tenants
    async with served.client(headers=bearer("mallory"), mode=mode) as mallory:
        planted = await run(mallory, PLANT)
    assert planted["status"] == "ok", planted
    async with served.client(headers=bearer("bob"), mode=mode) as bob:
        for _ in range(3):
            assert_not_served_by(planted, await run(bob, VICTIM))


async def test_a_worker_that_asks_to_be_kept_never_serves_another_session(tmp_path: Path) -> None:
    """stdio, protocol 2026-07-28, ``isolation = "session"``: each call without a handle is a session of its own,
    all of the one anonymous principal."""
    flags = [*FLAGS, "--isolation", "session"]
    async with stdio_client(tmp_path / "ws", *flags, env=FALLEN) as client:
        planted = await run(client, PLANT)
        assert planted["status"] == "ok" and planted["session"], planted
        for _ in range(3):
            victim = await run(client, VICTIM)
            assert victim["session"] != planted["session"]
            assert_not_served_by(planted, victim)
