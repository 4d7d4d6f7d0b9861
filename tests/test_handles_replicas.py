"""Two `attp serve` processes sharing one store (an SQLite file, or a real PostgreSQL server), one secret and one
workspace: replicas. A 2026-07-28 client whose requests alternate between them, as behind a round-robin proxy,
keeps its state through its handle, and answers on one replica an approval the other asked for. (HAProxy in front
of three replicas: tests/test_replicas.py.)
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from harness import SERVE_FLAGS, Served, mcp_http_client, running, serving_http
from harness import execute as run
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitRequestParams, ElicitResult
from postgres import fresh_database, running_postgres

from attp_server.run.runtime import CallContext, ExecuteRequest
from attp_server.sessions.registry import Caller
from attp_server.store import STATE_FILE_NAME

pytestmark = pytest.mark.anyio
LEASE_S = 4
"""`session_lease_s` of the replicas in the killed-run test: how long the killed replica holds the handle."""


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def replicas(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Served]]:
    root = tmp_path_factory.mktemp("replicas")
    flags = [*SERVE_FLAGS, "--db-path", str(root / "data" / "memory.sqlite3"), "--approval", "destructive"]
    with ExitStack() as stack:
        if request.param == "postgresql":  # a database of its own on the session's server
            flags += ["--database-url", stack.enter_context(fresh_database(request.getfixturevalue("postgres")))]
        yield [stack.enter_context(serving_http(root / "ws", *flags)) for _ in range(2)]


@asynccontextmanager
async def round_robin(replicas: list[Served], seen: list[tuple[int, bytes]]) -> AsyncIterator[Any]:
    """Streamable HTTP whose every request goes to the next replica in turn; `seen` gets (port, body) of each."""
    ports = itertools.cycle([httpx2.URL(r.url).port for r in replicas])

    async def next_replica(request: httpx2.Request) -> None:
        port = next(ports)
        assert port is not None
        seen.append((port, request.content))
        request.url = request.url.copy_with(port=port)

    http = mcp_http_client(event_hooks={"request": [next_replica]})
    async with http, streamable_http_client(replicas[0].url + "/mcp", http_client=http) as streams:
        yield streams


async def test_state_follows_the_handle_from_replica_to_replica(replicas: list[Served]) -> None:
    seen: list[tuple[int, bytes]] = []
    async with Client(round_robin(replicas, seen)) as client:
        handle = (await run(client, "count = 1"))["session"]
        for expected in range(2, 6):
            data = await run(client, "count += 1\n__result__ = count", session=handle)
            assert data["result"] == expected, data
    calls = {port for port, body in seen if b'"tools/call"' in body}
    assert len(calls) == 2


async def test_an_approval_asked_by_one_replica_is_answered_on_the_other(replicas: list[Served]) -> None:
    asked: list[str] = []

    async def user(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"allow_for_session": False})

    seen: list[tuple[int, bytes]] = []
    async with Client(round_robin(replicas, seen), elicitation_callback=user) as client:
        code = 'write_file("relayed.txt", "yes")\n__result__ = read_file("relayed.txt")'
        data = await run(client, code)
    assert data["status"] == "ok" and data["result"] == "yes", data
    assert len(asked) == 1 and "relayed.txt" in asked[0]
    assert (replicas[0].workspace / "relayed.txt").read_text() == "yes"
    calls = [(port, b"requestState" in body) for port, body in seen if b'"tools/call"' in body]
    assert len(calls) == 2 and calls[0][1] is False and calls[1][1] is True, calls
    assert calls[0][0] != calls[1][0]  # asked by one replica, answered on the other


async def test_a_store_that_goes_away_is_a_clear_refusal_not_a_traceback(tmp_path: Path) -> None:
    with running_postgres() as server:  # a server of its own: this test stops it
        workspace = tmp_path / "ws"
        workspace.mkdir()
        async with running(workspace, database_url=server.url(), database_timeout_s=1) as runtime:
            context = CallContext(caller=Caller())
            handle = (await runtime.execute(ExecuteRequest(code="kept = 1"), context)).session
            server.process.send_signal(signal.SIGINT)  # fast shutdown: its clients are cut off
            server.process.wait(timeout=60)
            refused = await runtime.execute(ExecuteRequest(code="__result__ = kept", session=handle), context)
            assert refused.error is not None and refused.error.code == "SERVER_BUSY", refused
            assert "session store" in refused.error.message


def held_leases(store: Path) -> int:
    """How many handles a running call holds in the SQLite store at `store` (read beside the servers)."""
    if not store.exists():
        return 0
    with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)) as db:
        try:
            return int(db.execute("SELECT count(*) FROM attp_handles WHERE lease IS NOT NULL").fetchone()[0])
        except sqlite3.OperationalError:  # the table is not there yet
            return 0


async def test_a_replica_killed_mid_run_loses_that_run_only(tmp_path: Path) -> None:
    """The killed run's changes are not written; its lease runs out and the other replica serves the handle."""
    flags = [*SERVE_FLAGS, "--timeout-s", "30", "--db-path", str(tmp_path / "data" / "memory.sqlite3")]
    env = {"ATTP_SESSION_LEASE_S": str(LEASE_S)}
    with (
        serving_http(tmp_path / "ws", *flags, env=env) as doomed,
        serving_http(tmp_path / "ws", *flags, env=env) as survivor,
    ):
        async with doomed.client() as client:
            handle = (await run(client, "kept = ['before']"))["session"]
        outcome: list[str] = []

        async def killed_run() -> None:
            try:
                with anyio.move_on_after(30):
                    async with doomed.client() as client:
                        await run(client, "kept = kept + ['lost']\nslow_echo('x', delay=20)", session=handle)
                    outcome.append("answered")
            except Exception:  # the connection broke, however the client words it
                outcome.append("failed")

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(killed_run)
            with anyio.fail_after(20):
                while not held_leases(tmp_path / "data" / STATE_FILE_NAME):
                    await anyio.sleep(0.05)  # until the run holds the handle
            assert doomed.process is not None
            os.killpg(doomed.process.pid, signal.SIGKILL)
        assert outcome == ["failed"]  # the call in flight on the killed replica fails
        started = time.monotonic()
        async with survivor.client() as client:
            after = await run(client, "kept = kept + ['after']\n__result__ = kept", session=handle)
        assert after["result"] == ["before", "after"], after
        assert time.monotonic() - started < 25  # within the lease's life (LEASE_S), not the killed run's timeout
