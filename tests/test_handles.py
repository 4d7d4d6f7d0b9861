"""Sessions as handles, through a real `attp serve` and the SDK's own client, on both protocol eras.

The default client speaks 2026-07-28 (no protocol session): state comes back as a `session` handle
the model passes back. ``mode="legacy"`` speaks the handshake protocol: its transport session stands
for a handle of its own, so it keeps state without passing anything, and may pass a handle too.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from harness import SERVE_FLAGS, Served, serving_http
from harness import execute as run
from mcp import Client

pytestmark = pytest.mark.anyio

ERAS = [pytest.param({}, id="2026-07-28"), pytest.param({"mode": "legacy"}, id="legacy")]
TOKENS = {"alice": "alice-token-" + "a" * 20, "bob": "bob-token-" + "b" * 20}


def flags(data: Path, *more: str) -> list[str]:
    return [*SERVE_FLAGS, "--db-path", str(data / "memory.sqlite3"), *more]


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("handles")
    with serving_http(root / "ws", *flags(root / "data")) as served:
        yield served


async def text_of(client: Client, **arguments: Any) -> tuple[dict[str, Any], str]:
    result = await client.call_tool("attp_execute", arguments)
    assert result.structured_content is not None
    block = result.content[0]
    assert block.type == "text"
    return dict(result.structured_content), block.text


@pytest.mark.parametrize("era", ERAS)
async def test_a_handle_is_minted_passed_back_and_keeps_state(http: Served, era: dict[str, Any]) -> None:
    async with http.client(**era) as client:
        tools = await client.list_tools()
        schema = tools.tools[0].input_schema["properties"]["session"]
        assert schema["type"] == "string" and schema["x-mcp-header"] == "Session"
        first, text = await text_of(client, code="x = 41\ndef answer():\n    return x + 1")
        handle = first["session"]
        assert isinstance(handle, str) and len(handle) >= 22, first
        assert json.loads(text)["session"] == handle  # the lean text carries it too
        again = await run(client, "__result__ = answer()", session=handle)
        assert (again["result"], again["session"]) == (42, handle)
    async with http.client(**era) as other_connection:  # a handle outlives the connection that got it
        assert (await run(other_connection, "__result__ = x", session=handle))["result"] == 41


async def test_a_call_without_the_handle_starts_afresh_and_is_told_how_to_continue(http: Served) -> None:
    async with http.client() as client:
        first = await run(client, "y = 1")
        assert first["session"] is not None
        lost = await run(client, "__result__ = y + 1")
        assert lost["error"]["code"] == "NAME_NOT_FOUND"
        assert "session" in lost["hint"] and "earlier call" in lost["hint"], lost["hint"]
        plain = await run(client, "__result__ = 2 + 2")  # nothing to keep: no handle, nothing stored
        assert (plain["result"], plain["session"]) == (4, None)


async def test_the_no_session_hint_only_where_a_kept_name_is_the_likely_cause(http: Served) -> None:
    """Not on a typo of a tool, not on a pack's member, not on a connection that is the session (legacy: its
    transport session keeps the names); a kept function called afresh gets it, though a tool is spelled a bit
    like it."""
    async with http.client() as client:
        typo = await run(client, '__result__ = reed_file("notes.txt")')
        assert typo["error"]["suggested_value"] == "read_file" and typo["hint"] is None, typo
        member = await run(client, "__result__ = files.reed_file('notes.txt')")
        assert member["error"]["code"] == "NAME_NOT_FOUND" and member["hint"] is None, member
        helper = await run(client, "__result__ = my_helper(3)")
        assert helper["error"]["suggested_value"] == "help" and "earlier call" in helper["hint"], helper
    async with http.client(mode="legacy") as legacy:
        lost = await run(legacy, "__result__ = never_defined + 1")
        assert lost["error"]["code"] == "NAME_NOT_FOUND" and lost["hint"] is None, lost


async def test_the_legacy_transport_session_keeps_state_without_passing_anything(http: Served) -> None:
    async with http.client(mode="legacy") as client:
        first = await run(client, "z = 5")
        assert (await run(client, "__result__ = z * 2"))["result"] == 10
        assert (await run(client, "__result__ = z", session=first["session"]))["result"] == 5
    async with http.client() as modern:  # the handle it returned works on the other era as well
        assert (await run(modern, "__result__ = z", session=first["session"]))["result"] == 5


@pytest.mark.parametrize("era", ERAS)
async def test_unknown_guessed_and_malformed_handles_are_refused(http: Served, era: dict[str, Any]) -> None:
    async with http.client(**era) as client:
        for handle in ("A" * 32, uuid.uuid4().hex, "not a handle!", "x"):
            refused = await run(client, "__result__ = 1", session=handle)
            assert refused["status"] == "error" and refused["error"]["code"] == "SESSION_NOT_FOUND", refused
            assert "without session" in refused["error"]["solution"]
            assert refused["session"] is None


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        pytest.param({"session": 5}, "session must be a string; it got an integer", id="session-number"),
        pytest.param({"session": ["abc"]}, "session must be a string; it got a list", id="session-list"),
        pytest.param({"reset": "yes"}, "reset must be true or false; it got a string", id="reset-string"),
        pytest.param({"code": ["x = 1"]}, "code must be a string; it got a list", id="code-list"),
        pytest.param(
            {"engine": "lua"},
            'engine must be one of "python", "starlark", "asteval", "cpython"; it got "lua"',
            id="engine",
        ),
    ],
)
async def test_an_argument_of_the_wrong_type_gets_a_precise_error(
    http: Served, era: dict[str, Any], arguments: dict[str, Any], said: str
) -> None:
    """Not the SDK's pydantic report: which argument, what it got, what it takes, as every other error."""
    async with http.client(**era) as client:
        result = await client.call_tool("attp_execute", {"code": "__result__ = 1", **arguments})
    assert result.is_error and result.structured_content is not None
    error = result.structured_content["error"]
    assert error["code"] == "INVALID_ARGUMENT" and error["message"] == f"attp_execute's {said}", error
    assert error["parameter_name"] == next(iter(arguments)) and error["solution"], error
    text = result.content[0].text if result.content[0].type == "text" else ""
    assert "pydantic" not in text and "validation error" not in text


@pytest.mark.parametrize("era", ERAS)
async def test_reset_clears_the_handles_state_and_keeps_the_handle(http: Served, era: dict[str, Any]) -> None:
    async with http.client(**era) as client:
        handle = (await run(client, "w = 'kept'"))["session"]
        cleared = await run(client, "__result__ = w", session=handle, reset=True)
        assert cleared["error"]["code"] == "NAME_NOT_FOUND"
        assert (await run(client, "w = 'new'", session=handle, reset=True))["session"] == handle
        assert (await run(client, "__result__ = w", session=handle))["result"] == "new"


async def test_a_header_that_disagrees_with_the_body_is_rejected(http: Served) -> None:
    """A 2026-07-28 client mirrors session into Mcp-Param-Session; a request whose two differ gets 400."""
    async with http.client() as client:
        handle = (await run(client, "v = 1"))["session"]
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "attp_execute", "arguments": {"code": "__result__ = v", "session": handle},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}}  # fmt: skip
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
               "mcp-method": "tools/call", "mcp-name": "attp_execute"}  # fmt: skip
    other = "B" * 32
    refused = httpx.post(f"{http.url}/mcp", json=call, headers={**headers, "mcp-param-session": other})
    assert refused.status_code == 400, refused.text
    agreed = httpx.post(f"{http.url}/mcp", json=call, headers={**headers, "mcp-param-session": handle})
    assert agreed.status_code == 200 and '\\"result\\":1' in agreed.text.replace(" ", ""), agreed.text


@pytest.mark.parametrize("era", ERAS)
async def test_two_calls_on_one_handle_at_once_lose_nothing(http: Served, era: dict[str, Any]) -> None:
    """Calls on one session run one at a time: each appends after the slow tool call, none is lost."""
    async with http.client(**era) as client:
        handle = (await run(client, "items = []"))["session"]

        async def append(n: int) -> None:
            code = f"slow_echo('x', delay=0.2)\nitems = items + [{n}]"
            assert (await run(client, code, session=handle))["status"] == "ok"

        async with anyio.create_task_group() as calls:
            for n in range(5):
                calls.start_soon(append, n)
        kept = await run(client, "__result__ = sorted(items)", session=handle)
        assert kept["result"] == [0, 1, 2, 3, 4]


async def test_another_tokens_handle_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    env = {"ATTP_AUTH_TOKENS": json.dumps(TOKENS)}
    with serving_http(tmp_path / "ws", *flags(tmp_path / "data"), env=env) as served:
        alice = {"Authorization": f"Bearer {TOKENS['alice']}"}
        bob = {"Authorization": f"Bearer {TOKENS['bob']}"}
        async with served.client(headers=alice) as client:
            handle = (await run(client, "secret = 'alice only'"))["session"]
        for era in ({}, {"mode": "legacy"}):
            async with served.client(headers=bob, **era) as client:
                for code in ("__result__ = secret", "secret = 'overwritten'"):
                    refused = await run(client, code, session=handle)
                    assert refused["error"]["code"] == "SESSION_NOT_FOUND", refused
                    assert "alice" not in json.dumps(refused)
                assert (await run(client, "__result__ = secret", session=handle, reset=True))["error"]["code"] == (
                    "SESSION_NOT_FOUND"
                )
        async with served.client(headers=alice) as client:
            assert (await run(client, "__result__ = secret", session=handle))["result"] == "alice only"


async def test_state_outlives_a_restart_with_the_embedded_store(tmp_path: Path) -> None:
    with serving_http(tmp_path / "ws", *flags(tmp_path / "data")) as served:
        async with served.client() as client:
            handle = (await run(client, "notes = ['before the restart']\ndef more():\n    return notes + ['after']"))[
                "session"
            ]
    assert (tmp_path / "data" / "state.sqlite3").is_file() and (tmp_path / "data" / "secret.key").is_file()
    with serving_http(tmp_path / "ws", *flags(tmp_path / "data")) as served:
        async with served.client() as client:
            assert (await run(client, "__result__ = more()", session=handle))["result"] == [
                "before the restart",
                "after",
            ]


async def test_isolation_session_gives_each_handle_its_own_folder_on_2026_07_28(tmp_path: Path) -> None:
    with serving_http(tmp_path / "ws", *flags(tmp_path / "data", "--isolation", "session")) as served:
        async with served.client() as client:
            one = await run(client, "write_file('same.txt', 'one')\n__result__ = read_file('same.txt')")
            two = await run(client, "write_file('same.txt', 'two')\n__result__ = read_file('same.txt')")
            assert one["status"] == two["status"] == "ok", (one, two)
            assert one["session"] != two["session"] and None not in (one["session"], two["session"])
            again = await run(client, "__result__ = read_file('same.txt')", session=one["session"])
            assert again["result"] == "one"
            assert (await run(client, "__result__ = read_file('same.txt')", session=two["session"]))["result"] == "two"
        folders = sorted(p.name for p in (tmp_path / "ws" / "sessions").iterdir())
        assert len(folders) == 2 and one["session"] not in folders  # named by a keyed digest, not the handle
        assert not (tmp_path / "ws" / "same.txt").exists()


async def test_on_2026_07_28_mcp_session_id_means_nothing(http: Served) -> None:
    """Two 2026-07-28 requests with the same Mcp-Session-Id and no session share nothing."""

    def call(code: str) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "attp_execute", "arguments": {"code": code},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}}  # fmt: skip
        headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
                   "mcp-method": "tools/call", "mcp-name": "attp_execute", "mcp-session-id": "same-for-both"}  # fmt: skip
        response = httpx.post(f"{http.url}/mcp", json=body, headers=headers)
        assert response.status_code == 200, response.text
        line = next(line for line in response.text.splitlines() if line.startswith(("data:", "{")))
        return dict(json.loads(line.removeprefix("data:"))["result"]["structuredContent"])

    assert call("shared = 1")["session"] is not None
    assert call("__result__ = shared")["error"]["code"] == "NAME_NOT_FOUND"
