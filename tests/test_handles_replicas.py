"""Two `attp serve` processes sharing one store (an SQLite file), one secret and one workspace: replicas on one
machine. A 2026-07-28 client whose requests alternate between them, as behind a round-robin proxy, keeps its
state through its handle, and answers on one replica an approval the other asked for. (PostgreSQL and HAProxy in
front of three replicas: tests/test_replicas.py.)
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from typing import Any

import httpx2
import pytest
from harness import SERVE_FLAGS, Served, serving_http
from harness import execute as run
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitRequestParams, ElicitResult

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Served]]:
    root = tmp_path_factory.mktemp("replicas")
    flags = [*SERVE_FLAGS, "--db-path", str(root / "data" / "memory.sqlite3"), "--approval", "destructive"]
    with ExitStack() as stack:
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

    http = httpx2.AsyncClient(event_hooks={"request": [next_replica]}, timeout=httpx2.Timeout(30, read=300))
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
