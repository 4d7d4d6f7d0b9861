"""Approvals: a destructive tool call waits for the user's yes, asked through MCP elicitation.

Through a real server on every transport, with the SDK client's ``elicitation_callback`` as the
user: one that accepts, one that declines, one that cannot be asked; the run's clock stops while
the user decides. Handshake protocols (stdio, SSE, Streamable HTTP ``mode="legacy"``) are asked in
the middle of the call; protocol 2026-07-28 (stdio and Streamable HTTP by default) across
``input_required`` rounds. The TypeScript client answering one is in test_clients.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import SERVE_FLAGS, Served, running, serving_http, stdio_client
from harness import execute as run
from mcp import Client
from mcp_types import ElicitRequestParams, ElicitResult

from attp_server.faces.app import create_server

pytestmark = [pytest.mark.anyio, pytest.mark.process]

APPROVAL_FLAGS = [*SERVE_FLAGS, "--approval", "destructive", "--timeout-s", "1"]
WRITE = (
    'write_file("approved.txt", "written")\ntotal = sum(i for i in range(5000))\n__result__ = read_file("approved.txt")'
)
"""After the approval the program goes on long enough for the worker to check its own deadline."""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving_http(tmp_path_factory.mktemp("approval-ws"), *APPROVAL_FLAGS) as served:
        yield served


class User:
    """The person behind the client: answers every question the same way, after `delay` seconds."""

    def __init__(self, action: str, *, delay: float = 0.0, for_session: bool = False) -> None:
        self.action = action
        self.delay = delay
        self.for_session = for_session
        self.questions: list[ElicitRequestParams] = []

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        self.questions.append(params)
        await anyio.sleep(self.delay)
        content = {"allow_for_session": self.for_session} if self.action == "accept" else None
        return ElicitResult(action=self.action, content=content)  # type: ignore[arg-type]


class Relay:
    """The person behind a stdio client that a module's tests share: hands each question to the user of the test
    running now, and refuses any that comes outside a test."""

    def __init__(self) -> None:
        self.user: User | None = None

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        assert self.user is not None, f"asked outside a test: {params.message}"
        return await self.user(context, params)


@dataclass
class SharedStdio:
    """A stdio server per protocol era (`mode` -> its client), all asking `relay`, in one workspace."""

    workspace: Path
    relay: Relay = field(default_factory=Relay)
    clients: dict[str, Client] = field(default_factory=dict)


@pytest.fixture(scope="module")
async def stdio(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SharedStdio]:
    """The tests whose stdio client can be asked differ only in what their user answers, so they share a server
    per protocol era: starting `attp serve` costs more CPU than any of those tests. (A client that cannot be asked
    says so when it connects: those tests start a server of their own.)"""
    shared = SharedStdio(tmp_path_factory.mktemp("stdio-ws"))
    async with AsyncExitStack() as stack:
        for mode in ("legacy", "auto"):
            client = stdio_client(shared.workspace, *APPROVAL_FLAGS, mode=mode, elicitation_callback=shared.relay)
            shared.clients[mode] = await stack.enter_async_context(client)
        yield shared


WAYS = [
    pytest.param("stdio", "legacy", id="stdio-handshake"),
    pytest.param("stdio", "auto", id="stdio-2026"),
    pytest.param("sse", "legacy", id="sse"),
    pytest.param("http", "legacy", id="http-handshake"),
    pytest.param("http", "auto", id="http-2026"),
]


@asynccontextmanager
async def connect(
    transport: str, mode: str, http: Served, stdio: SharedStdio, user: User | None
) -> AsyncIterator[Client]:
    """A client over `transport` whose questions `user` answers (None: a client that cannot be asked)."""
    options: dict[str, Any] = {"elicitation_callback": user} if user is not None else {}
    if transport == "stdio" and user is not None:
        stdio.relay.user = user
        try:
            yield stdio.clients[mode]
        finally:
            stdio.relay.user = None
        return
    if transport == "stdio":
        client = stdio_client(stdio.workspace, *APPROVAL_FLAGS, mode=mode)
    elif transport == "sse":
        client = http.over_sse().client(**options)
    else:
        client = http.client(mode=mode, **options)
    async with client:
        yield client


def workspace_for(transport: str, http: Served, stdio: SharedStdio) -> Path:
    return stdio.workspace if transport == "stdio" else http.workspace


@pytest.mark.parametrize(("transport", "mode"), WAYS)
async def test_an_accepted_call_runs_with_the_clock_stopped(
    transport: str, mode: str, http: Served, stdio: SharedStdio
) -> None:
    user = User("accept", delay=1.5)  # longer than timeout_s = 1: only the program's own time counts
    target = f"accept-{transport}-{mode}.txt"
    async with connect(transport, mode, http, stdio, user) as client:
        data = await run(client, WRITE.replace("approved.txt", target))
    assert data["status"] == "ok", data
    assert data["result"] == "written"
    assert len(user.questions) == 1
    message = user.questions[0].message
    assert f"write_file(path='{target}', content='written')" in message, message
    assert (workspace_for(transport, http, stdio) / target).read_text() == "written"


@pytest.mark.parametrize(("transport", "mode"), WAYS)
async def test_a_declined_call_does_nothing(transport: str, mode: str, http: Served, stdio: SharedStdio) -> None:
    user = User("decline")
    target = f"decline-{transport}-{mode}.txt"
    async with connect(transport, mode, http, stdio, user) as client:
        data = await run(client, WRITE.replace("approved.txt", target))
    assert data["error"]["code"] == "APPROVAL_DENIED", data
    assert "declined" in data["error"]["message"] and data["error"]["tool_name"] == "write_file"
    assert [(c["tool"], c["ok"], c["error_code"]) for c in data["calls"]] == [("write_file", False, "APPROVAL_DENIED")]
    assert not (workspace_for(transport, http, stdio) / target).exists()


@pytest.mark.parametrize(("transport", "mode"), WAYS)
async def test_a_client_that_cannot_be_asked_is_refused(
    transport: str, mode: str, http: Served, stdio: SharedStdio
) -> None:
    target = f"unavailable-{transport}-{mode}.txt"
    async with connect(transport, mode, http, stdio, None) as client:
        data = await run(client, WRITE.replace("approved.txt", target))
        reading = await run(client, "__result__ = list_files('.')")  # read-only tools need no approval
    assert data["error"]["code"] == "APPROVAL_UNAVAILABLE", data
    assert "elicitation" in data["error"]["message"]
    assert reading["status"] == "ok"
    assert not (workspace_for(transport, http, stdio) / target).exists()


# ---------------------------------------------------------------- in process, both protocol eras


MODES = [pytest.param("legacy", id="handshake"), pytest.param("auto", id="2026")]


@asynccontextmanager
async def served_in_process(workspace: Path, mode: str, user: User | None, **settings: Any) -> AsyncIterator[Client]:
    async with running(workspace, **{"approval": "destructive", **settings}) as runtime:
        options: dict[str, Any] = {"elicitation_callback": user} if user is not None else {}
        async with Client(create_server(runtime), mode=mode, **options) as client:
            yield client


@pytest.mark.parametrize("mode", MODES)
async def test_allow_for_the_rest_of_the_session(workspace: Path, mode: str) -> None:
    user = User("accept", for_session=True)
    async with served_in_process(workspace, mode, user) as client:
        first = await run(client, 'write_file("a.txt", "1")\nwrite_file("b.txt", "2")')
        assert first["session"] is not None  # an approval for the rest of the session keeps a session
        second = await run(client, 'write_file("c.txt", "3")\nedit_file("c.txt", "3", "4")', session=first["session"])
    assert first["status"] == second["status"] == "ok", (first, second)
    assert [q.message.split("call ")[1].split("(")[0] for q in user.questions] == [
        "files.write_file",
        "files.edit_file",
    ]
    schema = user.questions[0].requested_schema
    assert schema["properties"]["allow_for_session"]["type"] == "boolean"


@pytest.mark.parametrize("mode", MODES)
async def test_no_answer_in_time_is_a_denial(workspace: Path, mode: str) -> None:
    user = User("accept", delay=1.5)  # three times approval_timeout_s
    async with served_in_process(workspace, mode, user, approval_timeout_s=0.5) as client:
        data = await run(client, 'write_file("late.txt", "x")')
    assert data["error"]["code"] == "APPROVAL_DENIED"
    assert "approval_timeout_s = 0.5" in data["error"]["message"]
    assert not (workspace / "late.txt").exists()


@pytest.mark.parametrize("mode", MODES)
async def test_a_tam_chain_stops_at_a_declined_step(workspace: Path, mode: str) -> None:
    tam = (
        "<|[REQUEST_TOOL]|>\ncommand1:「始」write_file「末」\npath1:「始」t.txt「末」\ncontent1:「始」x「末」\n"
        "command2:「始」read_file「末」\npath2:「始」t.txt「末」\n<|[END_TOOL]|>"
    )
    user = User("decline")
    async with served_in_process(workspace, mode, user) as client:
        result = await client.call_tool("attp_execute", {"envelope": tam})
    data = result.structured_content or {}
    assert data["error"]["code"] == "APPROVAL_DENIED", data
    assert len(user.questions) == 1 and not (workspace / "t.txt").exists()


APPROVAL_SETTINGS = [
    pytest.param({"approval": "always"}, 'read_file("r.txt")', 1, "ok", id="always-asks-for-reads"),
    pytest.param({"approval": "destructive"}, 'read_file("r.txt")', 0, "ok", id="reads-are-not-destructive"),
    pytest.param({"approval": "never"}, 'write_file("w.txt", "x")', 0, "ok", id="never"),
]


@pytest.mark.parametrize(("settings", "code", "asked", "status"), APPROVAL_SETTINGS)
async def test_what_is_asked(workspace: Path, settings: dict[str, Any], code: str, asked: int, status: str) -> None:
    (workspace / "r.txt").write_text("r")
    user = User("accept")
    async with served_in_process(workspace, "legacy", user, **settings) as client:
        data = await run(client, code)
    assert (len(user.questions), data["status"]) == (asked, status), data


async def test_the_fallback_can_allow_a_client_that_cannot_be_asked(workspace: Path) -> None:
    async with served_in_process(workspace, "legacy", None, approval_fallback="allow") as client:
        data = await run(client, 'write_file("f.txt", "x")')
    assert data["status"] == "ok" and (workspace / "f.txt").read_text() == "x"


async def test_long_arguments_are_shortened_in_the_question(workspace: Path) -> None:
    user = User("decline")
    async with served_in_process(workspace, "legacy", user) as client:
        await run(client, 'write_file("long.txt", "x" * 100000)')
    message = user.questions[0].message
    assert len(message) < 1000 and "long.txt" in message and "..." in message


async def test_a_starlark_program_waits_with_its_clock_stopped_too(workspace: Path) -> None:
    user = User("accept", delay=1.5)  # longer than timeout_s = 1
    async with served_in_process(workspace, "legacy", user, timeout_s=1.0, engines=["starlark"]) as client:
        code = 'write_file("s.txt", "star")\ntotal = 0\nfor i in range(20000):\n    total += i\n__result__ = total'
        data = await run(client, code, engine="starlark")
    assert data["status"] == "ok", data
    assert (workspace / "s.txt").read_text() == "star" and len(user.questions) == 1
