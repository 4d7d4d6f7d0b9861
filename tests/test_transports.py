"""End to end: the official SDK client against a real `attp serve`, over stdio, SSE and Streamable HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from harness import Served, served_over
from mcp import Client
from mcp_types import CallToolResult

pytestmark = [pytest.mark.anyio, pytest.mark.process]


@dataclass
class SharedStdio(Served):
    """One `attp serve` over stdio for the module, as a client keeps one for its whole life (Claude Desktop starts
    one per session): `client()` is that session. Tests about separate sessions use `own_client`."""

    session: Client | None = None

    def client(self, headers: dict[str, str] | None = None, **kwargs: Any) -> AbstractAsyncContextManager[Client]:
        assert self.session is not None and headers is None and not kwargs
        return _borrowed(self.session)


@asynccontextmanager
async def _borrowed(session: Client) -> AsyncIterator[Client]:
    yield session


def own_client(served: Served) -> AbstractAsyncContextManager[Client]:
    """A client with a session of its own (over stdio: its own server process)."""
    if isinstance(served, SharedStdio):
        assert served.stdio is not None
        return Client(served.stdio)
    return served.client()


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def stdio_served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[SharedStdio]:
    plain = served_over("stdio", request, tmp_path_factory)
    assert plain.stdio is not None
    async with Client(plain.stdio) as session:
        yield SharedStdio("stdio", plain.workspace, stdio=plain.stdio, session=session)


@pytest.fixture(params=["stdio", "sse", "streamable-http"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Served:
    """Here the transport is the subject: every test runs over each real one, stdio included."""
    if request.param == "stdio":
        shared: SharedStdio = request.getfixturevalue("stdio_served")
        return shared
    return served_over(request.param, request, tmp_path_factory)


MULTI_TOOL = """
write_file("notes/a.txt", "alpha\\nbeta\\n")
write_file("notes/b.txt", "gamma\\n")
lines = []
for path in list_files("notes"):
    lines.extend(read_file(path).splitlines())
scores = [r["score"] for r in records(4)]
__result__ = {
    "files": list_files("notes"),
    "lines": sorted(lines),
    "sum": add(2, 3),
    "echo": slow_echo("hi"),
    "mean": statistics.mean(scores),
    "rich": rich(),
}
"""


async def call(served: Served, arguments: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    async with served.client() as client:
        result = await client.call_tool("attp_execute", arguments)
    return result.structured_content, result


async def test_lists_exactly_attp_execute_with_catalog(served: Served) -> None:
    async with served.client() as client:
        listed = await client.list_tools()
    tools = listed.tools
    assert [t.name for t in tools] == ["attp_execute"]
    assert (listed.ttl_ms, listed.cache_scope) == (3_600_000, "private")  # no upstream can change the list
    tool = tools[0]
    assert tool.output_schema is not None and "status" in tool.output_schema["properties"]
    assert set(tool.input_schema["properties"]) == {
        "code",
        "envelope",
        "target",
        "thought",
        "engine",
        "reset",
        "session",
    }
    assert tool.input_schema["properties"]["session"]["x-mcp-header"] == "Session"
    description = tool.description or ""
    for signature in (
        "read_file(path, max_lines=1000, offset=0) -> str — Read a UTF-8 text file",
        "add(a: int, b: int) -> int — ",
    ):
        assert signature in description
    assert tool.annotations is not None and tool.annotations.destructive_hint is True


async def test_multi_tool_program(served: Served) -> None:
    data, raw = await call(served, {"code": MULTI_TOOL, "target": "collect notes", "toolCallId": "n8n-123"})
    assert raw.is_error is False
    assert data["status"] == "ok", data
    assert data["target"] == "collect notes"
    assert data["result"] == {
        "files": ["notes/a.txt", "notes/b.txt"],
        "lines": ["alpha", "beta", "gamma"],
        "sum": 5,
        "echo": "hi",
        "mean": 2.25,
        "rich": {"path": "/tmp/x", "when": "2024-01-02T03:04:05", "items": [1, 2]},
    }
    assert [c["tool"] for c in data["calls"]][:2] == ["write_file", "write_file"]
    assert all(c["ok"] for c in data["calls"])
    text = json.loads(raw.content[0].text)
    assert text["status"] == "ok" and text["result"]["sum"] == 5


async def test_envelope_input(served: Served) -> None:
    envelope = (
        'Here you go:\n```toml\nthought = "add"\n[tool_call]\nstatus = "success"\ntarget = "t"\n'
        'code = """\n__result__ = add(1, 2)\n"""\n```\nDone.'
    )
    data, raw = await call(served, {"envelope": envelope})
    assert (data["status"], data["result"], data["target"], raw.is_error) == ("ok", 3, "t", False)


async def test_declined_envelope_is_fail_not_error(served: Served) -> None:
    envelope = '[tool_call]\nstatus = "fail"\nmessage = "no delete tool"\n'
    data, raw = await call(served, {"envelope": envelope})
    assert (data["status"], data["hint"], raw.is_error) == ("fail", "no delete tool", False)


ERROR_CASES = [
    pytest.param({"envelope": "this is not toml ["}, "INVALID_ENVELOPE", id="invalid-envelope"),
    pytest.param({"code": "x = = 1"}, "SYNTAX_ERROR", id="syntax"),
    pytest.param({"code": "import os"}, "IMPORT_FORBIDDEN", id="import"),
    pytest.param({"code": "reed_file('a')"}, "NAME_NOT_FOUND", id="name-not-found"),
    pytest.param({"code": "().__class__"}, "FORBIDDEN", id="forbidden"),
    pytest.param({"code": "add('x', 2)"}, "INVALID_ARGUMENT", id="invalid-argument"),
    pytest.param({"code": "crash()"}, "TOOL_ERROR", id="tool-error"),
    pytest.param({"code": "refuse('NOT_ALLOWED')"}, "NOT_ALLOWED", id="tool-own-code"),
    pytest.param({"code": "read_file('missing.txt')"}, "FILE_NOT_FOUND", id="files-pack-code"),
    pytest.param({"code": "1 / 0"}, "RUNTIME_ERROR", id="runtime"),
    pytest.param({"code": "x = 'a' * 10**10"}, "MEMORY_LIMIT", id="memory"),
    pytest.param({"code": "__result__ = 'x' * 200000"}, "RESULT_TOO_LARGE", id="result-too-large"),
    pytest.param({"code": "__result__ = re.compile('a')"}, "RESULT_NOT_SERIALIZABLE", id="not-serializable"),
    pytest.param({"code": "for i in range(25):\n    add(i, i)"}, "TOOL_CALL_LIMIT", id="tool-call-limit"),
    pytest.param({"code": "1", "envelope": "x"}, "INVALID_ARGUMENT", id="code-and-envelope"),
]


def assert_error(data: dict[str, Any], raw: Any, code: str) -> None:
    """A failed program: an error result (isError) with `code` and a message, in both views."""
    assert data["status"] == "error"
    assert raw.is_error is True
    assert data["error"]["code"] == code, data["error"]
    assert data["error"]["message"]
    text = json.loads(raw.content[0].text)
    assert text["error"]["code"] == code


@pytest.mark.parametrize(("arguments", "code"), ERROR_CASES)
async def test_error_codes(served: Served, arguments: dict[str, Any], code: str) -> None:
    data, raw = await call(served, arguments)
    assert_error(data, raw, code)


async def test_name_not_found_suggests_closest_tool(served: Served) -> None:
    data, _ = await call(served, {"code": "__result__ = reed_file('a.txt')"})
    assert data["error"]["suggested_value"] == "read_file"
    assert data["error"]["line"] == 1


async def test_output_flood_is_truncated_and_never_reaches_server_stdout(served: Served) -> None:
    code = "for i in range(10):\n    print('FLOOD-MARKER' + 'x' * 1000000)\n__result__ = 'done'"
    async with served.client() as client:
        flood = await client.call_tool("attp_execute", {"code": code})
        after = await client.call_tool("attp_execute", {"code": "__result__ = 1"})
    data = flood.structured_content
    assert (data["status"], data["result"], data["truncated"]) == ("ok", "done", True)
    assert len(data["stdout"].encode()) == 65536
    assert after.structured_content["result"] == 1
    if served.stdout_path is not None:
        assert b"FLOOD-MARKER" not in served.stdout_path.read_bytes()


RUNAWAY = "while True:\n    pass"


@dataclass
class Runaway:
    """What one runaway program did on a transport, with another session calling while it ran."""

    stopped: CallToolResult  # the runaway's result (stopped at the server's --timeout-s)
    next_call: CallToolResult  # the next call on the runaway's session
    other_call: CallToolResult  # the other session's call, made while the runaway ran
    finished: list[str]  # which of the two calls answered first


@pytest.fixture(scope="module")
def runaways() -> dict[str, Runaway]:
    return {}


@pytest.fixture
async def runaway(served: Served, runaways: dict[str, Runaway]) -> Runaway:
    """One runaway per transport for the module: each burns a whole timeout of CPU, so the three tests about it
    (the TIMEOUT error, the next call on its session, another session answering meanwhile) read one run."""
    if served.transport not in runaways:
        runaways[served.transport] = await run_away(served)
    return runaways[served.transport]


async def run_away(served: Served) -> Runaway:
    finished: list[str] = []
    answers: dict[str, CallToolResult] = {}

    async def runaway_session() -> None:
        async with own_client(served) as client:
            answers["stopped"] = await client.call_tool("attp_execute", {"code": RUNAWAY})
            finished.append("runaway")
            answers["next_call"] = await client.call_tool("attp_execute", {"code": "__result__ = add(20, 22)"})

    async def other_session() -> None:
        async with served.client() as client:  # another session (over stdio, the module's; the runaway has its own)
            await anyio.sleep(0.3)  # let the runaway start first
            answers["other_call"] = await client.call_tool("attp_execute", {"code": "__result__ = add(1, 1)"})
            finished.append("simple")

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(runaway_session)
            tasks.start_soon(other_session)
    return Runaway(finished=finished, **answers)


async def test_runaway_is_a_timeout_error(runaway: Runaway) -> None:
    assert_error(runaway.stopped.structured_content, runaway.stopped, "TIMEOUT")


async def test_next_call_works_after_timeout(runaway: Runaway) -> None:
    assert runaway.stopped.structured_content["error"]["code"] == "TIMEOUT"
    assert runaway.next_call.structured_content["result"] == 42


async def test_concurrent_session_answers_while_another_runs_away(runaway: Runaway) -> None:
    assert runaway.other_call.structured_content["result"] == 2
    assert runaway.finished == ["simple", "runaway"]


def test_healthz_reports_workers_and_sandbox(http_server: Served) -> None:
    health = http_server.extra
    assert health["status"] == "ok"
    assert health["workers"]["size"] >= 1
    for feature in ("network_namespace", "dropped_privileges", "no_new_privs", "rlimit_as", "rlimit_fsize"):
        assert feature in health["sandbox"]
