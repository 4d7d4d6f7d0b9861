"""Session state through the real transports on the handshake protocols: a real `attp serve` and the SDK's client.

On the handshake protocols (the Python client's ``mode="legacy"``; Claude Desktop over stdio, the
TypeScript SDK 1.x that n8n uses) stdio is one session per connection, SSE one per ``/sse`` stream,
Streamable HTTP one per ``Mcp-Session-Id``: each stands for a handle, so nothing needs passing. On
2026-07-28 there are no protocol sessions: state comes back as a handle (tests/test_handles.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from harness import SERVE_FLAGS, Served, serving_http, stdio_client
from harness import execute as run
from mcp import Client

pytestmark = [pytest.mark.anyio, pytest.mark.process]

STATE_ENV = {"ATTP_MAX_STATE_BYTES": "4000"}


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving_http(tmp_path_factory.mktemp("state-ws"), *SERVE_FLAGS, env=STATE_ENV) as served:
        yield served


def connect(transport: str, http: Served, workspace: Path) -> Client:
    """A client with a session of its own on `transport`."""
    if transport == "stdio":
        return stdio_client(workspace, *SERVE_FLAGS, env=STATE_ENV, mode="legacy")
    if transport == "sse":
        return http.over_sse().client(mode="legacy")
    return http.client(mode="legacy")  # the handshake: an Mcp-Session-Id


TRANSPORTS = [pytest.param("stdio", id="stdio"), pytest.param("sse", id="sse"), pytest.param("http", id="http")]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_state_is_kept_across_calls_reset_and_capped(transport: str, http: Served, tmp_path: Path) -> None:
    async with connect(transport, http, tmp_path) as client:
        first = await run(client, "x = 41\ndef answer():\n    return x + 1\n__result__ = 'set'")
        assert first["status"] == "ok" and first["hint"] is None, first
        assert (await run(client, "__result__ = answer()"))["result"] == 42
        capped = await run(client, "big = 'b' * 10000\nsmall = 'fits'\n__result__ = len(big)")
        assert capped["result"] == 10000
        assert "big (too big" in capped["hint"] and "4,000" in capped["hint"], capped["hint"]
        assert (await run(client, "__result__ = [small, answer()]"))["result"] == ["fits", 42]
        after_reset = await run(client, "__result__ = x", reset=True)
        assert after_reset["error"]["code"] == "NAME_NOT_FOUND"


@pytest.mark.parametrize("transport", [pytest.param("sse", id="sse"), pytest.param("http", id="http")])
async def test_a_second_client_cannot_read_the_first_clients_state(transport: str, http: Served) -> None:
    async with (
        connect(transport, http, http.workspace) as first,
        connect(transport, http, http.workspace) as second,
    ):
        await run(first, f"secret = {uuid.uuid4().hex!r}\ndef reveal():\n    return secret")
        for code in ("__result__ = secret", "__result__ = reveal()"):
            assert (await run(second, code))["error"]["code"] == "NAME_NOT_FOUND"
        assert (await run(first, "__result__ = len(reveal())"))["result"] == 32


def test_a_guessed_session_id_is_refused(http: Served) -> None:
    """Session ids are the SDK's random UUIDs; one nobody was given answers 404 on both HTTP transports."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "attp_execute",
            "arguments": {"code": "__result__ = secret"}}}  # fmt: skip
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    guessed = httpx.post(f"{http.url}/mcp", json=call, headers={**headers, "mcp-session-id": uuid.uuid4().hex})
    assert guessed.status_code == 404
    posted = httpx.post(f"{http.url}/messages/?session_id={uuid.uuid4().hex}", json=call)
    assert posted.status_code == 404


async def test_a_2026_request_keeps_state_only_through_its_handle(http: Served) -> None:
    """Protocol 2026-07-28 has no session (each request stands alone): state travels as the session handle."""
    async with http.client() as client:
        handle = (await run(client, "x = 1"))["session"]
        result = await run(client, "__result__ = x")
        assert result["error"]["code"] == "NAME_NOT_FOUND"
        # The description says variables stay in a session; this call is told how to continue one.
        assert "send this program again with session set to" in result["hint"]
        assert (await run(client, "__result__ = x", session=handle))["result"] == 1


async def test_one_principals_sessions_do_not_evict_another_principals_kept_state(tmp_path: Path) -> None:
    """Issue 33, item 7: `max_total_state_bytes` was one pool, so one token holder opening sessions made every
    other holder's kept state go, oldest first. Each principal now has a share and its own go first."""
    import sqlite3

    import anyio

    tokens = {"alice": "tok-alice-0123456789", "mallory": "tok-mallory-0123456789"}
    env = {"ATTP_AUTH_TOKENS": json.dumps(tokens), "ATTP_MAX_STATE_BYTES": "2000", "ATTP_MAX_TOTAL_STATE_BYTES": "6000"}
    data = tmp_path / "data"
    flags = [*SERVE_FLAGS, "--db-path", str(data / "memory.sqlite3")]
    with serving_http(tmp_path / "ws", *flags, env=env) as served:
        async with served.client(headers={"Authorization": f"Bearer {tokens['alice']}"}) as alice:
            mine = await run(alice, "blob = 'a' * 1000")
            assert mine["status"] == "ok", mine
            handles = []
            async with served.client(headers={"Authorization": f"Bearer {tokens['mallory']}"}) as mallory:
                for _ in range(8):
                    theirs = await run(mallory, "blob = 'm' * 1000")
                    handles.append(theirs["session"])

            def kept() -> int:  # what any replica's sweep (every 10 s) keeps the store within
                with sqlite3.connect(f"file:{data / 'state.sqlite3'}?mode=ro", uri=True) as db:
                    return int(db.execute("SELECT SUM(state_bytes) FROM attp_handles").fetchone()[0])

            with anyio.fail_after(30):
                while kept() > 6000:
                    await anyio.sleep(0.25)
            still = await run(alice, "__result__ = len(blob)", session=mine["session"])
            assert still["status"] == "ok" and still["result"] == 1000, still
            async with served.client(headers={"Authorization": f"Bearer {tokens['mallory']}"}) as mallory:
                oldest = await run(mallory, "__result__ = len(blob)", session=handles[0])
    assert oldest["error"]["code"] == "NAME_NOT_FOUND", oldest
    assert oldest["hint"].startswith("The variables kept from this session's earlier calls were dropped")
