"""Isolation through a real server: sessions (``isolation = "session"``) and token holders (``"tenant"``)
writing the same path and the same memory page name without seeing each other's.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from harness import Served, running, serving_http
from harness import execute as run
from mcp import Client

from attp_server.errors import AttpError, ConfigError
from attp_server.faces.http import check_exposure
from attp_server.run.runtime import CallContext, ExecuteRequest
from attp_server.sessions.isolation import SESSIONS_DIR
from attp_server.sessions.registry import Caller
from attp_server.settings import Settings, load_settings

pytestmark = pytest.mark.anyio

PACKS = ["--toolpack", "files", "--toolpack", "memory", "--timeout-s", "5"]
TOKENS = {"alice": "token-of-alice-3b9f1c2e", "bob": "token-of-bob-77c0aa41"}

WRITE_BOTH = """
write_file("same.txt", {who!r})
page = create_detail_page("same page", "whose?", {who!r}, "usr-0")
__result__ = page
"""
READ_BOTH = """
found = [p["index"] for p in find_page("same page")]
__result__ = {"file": read_file("same.txt"), "files": list_files(".", recursive=True),
              "pages": [get_page(i)["detail"] for i in found]}
"""


def db_flags(root: Path) -> list[str]:
    return ["--db-path", str(root / "db" / "memory.sqlite3")]


@pytest.fixture(scope="module")
def per_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("per-session")
    with serving_http(root / "ws", *PACKS, *db_flags(root), "--isolation", "session") as served:
        yield served


@pytest.fixture(scope="module")
def per_tenant(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("per-tenant")
    env = {"ATTP_AUTH_TOKENS": json.dumps(TOKENS)}
    with serving_http(root / "ws", *PACKS, *db_flags(root), "--isolation", "tenant", env=env) as served:
        yield served


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


def session(served: Served, transport: str, headers: dict[str, str] | None = None) -> Client:
    if transport == "sse":
        return served.over_sse().client(headers=headers, mode="legacy")
    return served.client(headers=headers, mode="legacy")


async def write_then_read(client: Client, who: str, barrier: anyio.Event, written: list[str]) -> dict[str, Any]:
    wrote = await run(client, WRITE_BOTH.format(who=who))
    assert wrote["status"] == "ok", wrote
    written.append(who)
    if len(written) == 2:
        barrier.set()
    await barrier.wait()  # both have written before either reads
    read = await run(client, READ_BOTH)
    assert read["status"] == "ok", read
    view = (await client.read_resource("memory://view")).contents[0]
    return {**read["result"], "view": getattr(view, "text", "")}


async def both(first: Client, second: Client) -> tuple[dict[str, Any], dict[str, Any]]:
    barrier, written, seen = anyio.Event(), [], {}

    async def one(client: Client, who: str) -> None:
        seen[who] = await write_then_read(client, who, barrier, written)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(one, first, "from first")
        tasks.start_soon(one, second, "from second")
    return seen["from first"], seen["from second"]


def assert_apart(seen: dict[str, Any], who: str, other: str) -> None:
    assert seen["file"] == who
    assert seen["files"] == ["same.txt"]
    assert seen["pages"] == [who]
    assert who in seen["view"] and other not in seen["view"]


@pytest.mark.parametrize(
    "transports", [pytest.param(("http", "http"), id="http+http"), pytest.param(("http", "sse"), id="http+sse")]
)
async def test_two_sessions_write_the_same_path_and_page_apart(
    per_session: Served, transports: tuple[str, str]
) -> None:
    async with session(per_session, transports[0]) as first, session(per_session, transports[1]) as second:
        seen_first, seen_second = await both(first, second)
    assert_apart(seen_first, "from first", "from second")
    assert_apart(seen_second, "from second", "from first")
    assert not (per_session.workspace / "same.txt").exists()  # nobody wrote the shared folder
    folders = list((per_session.workspace / SESSIONS_DIR).iterdir())
    assert folders and all(re.fullmatch(r"[0-9a-f]{32}", p.name) for p in folders)


async def test_a_2026_request_gets_a_session_of_its_own_under_session_isolation(per_session: Served) -> None:
    async with per_session.client() as client:  # protocol 2026-07-28: no protocol session, a handle instead
        data = await run(client, "write_file('x.txt', 'y')\n__result__ = list_files('.')")
        assert data["status"] == "ok" and data["result"] == ["x.txt"] and data["session"] is not None, data
        again = await run(client, "__result__ = read_file('x.txt')", session=data["session"])
        assert again["result"] == "y"
        assert (await run(client, "__result__ = list_files('.')"))["result"] == []  # a new handle: a new folder
        with pytest.raises(Exception, match="names no session"):
            await client.read_resource("memory://view")


async def test_two_tokens_write_the_same_path_and_page_apart(per_tenant: Served) -> None:
    async with (
        session(per_tenant, "http", bearer("alice")) as alice,
        session(per_tenant, "sse", {"X-API-Key": TOKENS["bob"]}) as bob,
    ):
        seen_alice, seen_bob = await both(alice, bob)
    assert_apart(seen_alice, "from first", "from second")
    assert_apart(seen_bob, "from second", "from first")
    tenants = per_tenant.workspace / "tenants"
    assert sorted(p.name for p in tenants.iterdir()) == ["alice", "bob"]
    async with session(per_tenant, "http", bearer("alice")) as again:  # a new session of the same holder
        assert (await run(again, "__result__ = read_file('same.txt')"))["result"] == "from first"


def initialize(url: str, headers: dict[str, str]) -> str:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}  # fmt: skip
    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    with httpx.stream("POST", f"{url}/mcp", json=body, headers={**accept, **headers}) as response:
        assert response.status_code == 200
        return response.headers["mcp-session-id"]


def test_another_tokens_holder_cannot_use_a_session_id(per_tenant: Served) -> None:
    session_id = initialize(per_tenant.url or "", bearer("alice"))
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "attp_execute", "arguments": {"code": "__result__ = read_file('same.txt')"}}}  # fmt: skip
    headers = {"accept": "application/json, text/event-stream", "mcp-session-id": session_id,
               "mcp-protocol-version": "2025-11-25"}  # fmt: skip
    stolen = httpx.post(f"{per_tenant.url}/mcp", json=call, headers={**headers, **bearer("bob")})
    assert stolen.status_code == 404
    nobody = httpx.post(f"{per_tenant.url}/mcp", json=call, headers=headers)
    assert nobody.status_code == 401


# ---------------------------------------------------------------- in process: folders, expiry, settings


async def test_a_sessions_folder_and_memory_go_when_it_ends(tmp_path: Path) -> None:
    overrides = {"toolpacks": ["files", "memory"], "db_path": tmp_path / "db" / "m.sqlite3", "isolation": "session"}
    async with running(tmp_path / "ws", **overrides) as runtime:
        context = CallContext(caller=Caller(session="A"))
        request = ExecuteRequest(code="write_file('a.txt', 'x')\ncreate_detail_page('p', 'd', 't', 'usr-0')")
        assert (await runtime.execute(request, context)).status == "ok"
        folders = [tmp_path / "ws" / SESSIONS_DIR, tmp_path / "db" / SESSIONS_DIR]
        assert all(len(list(f.iterdir())) == 1 for f in folders)
        now = runtime.sessions.clock() + runtime.settings.session_idle_s + 1
        runtime.sessions.clock = lambda: now
        await runtime.end_idle_sessions()
        assert all(list(f.iterdir()) == [] for f in folders)


async def test_folders_of_a_server_that_is_gone_are_swept_at_start(tmp_path: Path) -> None:
    dead = tmp_path / "ws" / SESSIONS_DIR / f"{2**22 + 12345}-{'a' * 16}"
    alive = tmp_path / "ws" / SESSIONS_DIR / f"{os.getpid()}-{'b' * 16}"
    other = tmp_path / "ws" / SESSIONS_DIR / "not-ours"
    for folder in (dead, alive, other):
        folder.mkdir(parents=True)
    async with running(tmp_path / "ws", isolation="session"):
        assert not dead.exists() and alive.exists() and other.exists()


BAD_TOKENS = [
    pytest.param({"Alice": "t1"}, None, "lower-case", id="upper-case-name"),
    pytest.param({"../x": "t1"}, None, "lower-case", id="path-in-name"),
    pytest.param({"a": "same", "b": "same"}, None, "same value", id="shared-value"),
    pytest.param({"a": "t1"}, "t1", "same value", id="same-as-auth-token"),
    pytest.param({"default": "t1"}, "t2", "auth_token's holder", id="default-taken"),
    pytest.param({"a": ""}, None, "empty", id="empty-token"),
]


@pytest.mark.parametrize(("tokens", "unnamed", "message"), BAD_TOKENS)
def test_bad_named_tokens_are_a_startup_error(tokens: dict[str, str], unnamed: str | None, message: str) -> None:
    cli: dict[str, Any] = {"auth_tokens": tokens, "auth_token": unnamed}
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(cli, environ={})


def test_tenant_isolation_needs_named_tokens() -> None:
    with pytest.raises(AttpError, match="auth_tokens names none"):
        check_exposure(Settings(isolation="tenant", transport="http"))


async def test_the_number_of_built_scopes_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each scope's tools hold open files (a memory database): past MAX_BUILT the oldest are let go, then rebuilt."""
    monkeypatch.setattr("attp_server.sessions.isolation.MAX_BUILT", 2)
    overrides = {"toolpacks": ["files", "memory"], "db_path": tmp_path / "db" / "m.sqlite3", "isolation": "tenant"}
    async with running(tmp_path / "ws", **overrides) as runtime:
        for tenant in ("a", "b", "c", "a"):
            context = CallContext(caller=Caller(session=tenant, tenant=tenant))
            request = ExecuteRequest(code=f"write_file('t.txt', {tenant!r})\n__result__ = read_file('t.txt')")
            assert (await runtime.execute(request, context)).result == tenant
        assert len(runtime.scopes) == 2
