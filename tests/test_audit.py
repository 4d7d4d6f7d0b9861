"""The audit log and rate limits (issue 25, SPEC §15): one line per change, approval decision and refusal, no
secret in it, and a new file after logrotate moves the old one."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import SERVE_FLAGS, Served, execute, make_settings, serving_http
from mcp_types import ElicitResult

from attp_server.ops.audit import canonical_json
from attp_server.run.runtime import CallContext, ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime
from attp_server.sessions.approvals import Answer, Question
from attp_server.sessions.registry import Caller

pytestmark = pytest.mark.anyio

SECRET = "sk-planted-0f9e8d7c6b5a"
HANDLE = "http:handle-3c5e7a9b1d"
ALICE = Caller(session=HANDLE, tenant="alice", label="alice")


@asynccontextmanager
async def audited(workspace: Path, **overrides: Any) -> AsyncIterator[tuple[Runtime, Path]]:
    log = workspace.parent / "audit" / "audit.jsonl"
    settings = make_settings(workspace, audit_log=log, **overrides)
    async with open_runtime(settings) as runtime:
        yield runtime, log


def lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def run(runtime: Runtime, code: str, ask: Any = None) -> dict[str, Any]:
    result = await runtime.execute(ExecuteRequest(code=code), CallContext(caller=ALICE, ask=ask))
    return result.model_dump(mode="json")


async def declining(_question: Question) -> Answer:
    return Answer.DECLINE


async def test_a_write_and_an_edit_each_leave_one_line_and_a_read_none(workspace: Path) -> None:
    async with audited(workspace) as (runtime, log):
        wrote = await run(runtime, f'write_file("notes.txt", "key = {SECRET}\\n")')
        after_write = lines(log)
        read = await run(runtime, '__result__ = read_file("notes.txt")')
        after_read = lines(log)
        edited = await run(runtime, f'edit_file("notes.txt", old_string="{SECRET}", new_string="gone")')
        after_edit = lines(log)
    assert (wrote["status"], read["status"], edited["status"]) == ("ok", "ok", "ok"), (wrote, read, edited)
    assert SECRET in read["result"]
    assert len(after_write) == 1 and after_read == after_write and len(after_edit) == 2
    write, edit = after_edit
    assert write["event"] == edit["event"] == "tool_call"
    assert (write["tool"], edit["tool"]) == ("files.write_file", "files.edit_file")
    assert write["principal"] == "alice" and write["outcome"] == "ok" and write["duration_ms"] >= 0
    arguments = {"path": "notes.txt", "content": f"key = {SECRET}\n"}
    assert write["arguments_sha256"] == hashlib.sha256(canonical_json(arguments)).hexdigest()
    assert write["arguments_bytes"] == len(canonical_json(arguments))
    # the session's handle (here the one ALICE's transport session stands for), digested
    assert runtime.sessions is not None
    handle = runtime.sessions.implicit_handle(ALICE)
    assert handle is not None and write["session"] == edit["session"]
    assert write["session"] == hashlib.sha256(handle.encode()).hexdigest()[:16]
    assert write["time"].endswith("Z")
    text = log.read_text()
    assert SECRET not in text and HANDLE not in text and "handle-3c5e" not in text
    assert "arguments" not in write  # audit_arguments is off


async def test_a_declined_approval_leaves_one_line_and_runs_nothing(workspace: Path) -> None:
    async with audited(workspace, approval="destructive") as (runtime, log):
        data = await run(runtime, f'write_file("no.txt", "{SECRET}")', ask=declining)
    assert data["error"]["code"] == "APPROVAL_DENIED"
    assert not (workspace / "no.txt").exists()
    (line,) = lines(log)
    assert (line["event"], line["tool"], line["outcome"]) == ("approval", "files.write_file", "APPROVAL_DENIED")
    assert SECRET not in log.read_text()


async def test_a_granted_approval_and_its_call_each_leave_a_line(workspace: Path) -> None:
    async def allowing(_question: Question) -> Answer:
        return Answer.ALLOW

    async with audited(workspace, approval="destructive") as (runtime, log):
        data = await run(runtime, 'write_file("yes.txt", "ok")', ask=allowing)
    assert data["status"] == "ok"
    assert [(x["event"], x["outcome"]) for x in lines(log)] == [("approval", "granted"), ("tool_call", "ok")]


async def test_a_rate_limited_call_leaves_one_line(workspace: Path) -> None:
    async with audited(workspace, rate_limit_per_minute={"alice": 2}) as (runtime, log):
        first = await run(runtime, '__result__ = read_file("missing.txt") if False else 1\nlist_files()\nlist_files()')
        before = lines(log)
        limited = await run(runtime, f'write_file("late.txt", "{SECRET}")')
        after = lines(log)
    assert first["status"] == "ok"
    assert before == []  # reads are not audited, but they count against the limit
    assert limited["error"]["code"] == "RATE_LIMITED"
    assert "'alice' are limited to 2 a minute" in limited["error"]["message"]
    assert "allowed in 30 s" in limited["error"]["message"]  # one call's worth of a 2-a-minute refill
    assert not (workspace / "late.txt").exists()
    (line,) = after
    assert (line["event"], line["tool"], line["outcome"]) == ("rate_limited", "files.write_file", "RATE_LIMITED")
    assert SECRET not in log.read_text()


async def test_rotation_starts_a_new_file(workspace: Path) -> None:
    async with audited(workspace) as (runtime, log):
        await run(runtime, 'write_file("a.txt", "1")')
        rotated = log.with_name("audit.jsonl.1")
        log.rename(rotated)  # what logrotate does (without copytruncate)
        await run(runtime, 'write_file("b.txt", "2")')
        await run(runtime, 'write_file("c.txt", "3")')
    assert [x["tool"] for x in lines(rotated)] == ["files.write_file"]
    assert len(lines(log)) == 2
    assert json.loads(rotated.read_text())["arguments_sha256"] != lines(log)[0]["arguments_sha256"]


async def test_audit_arguments_writes_values_but_never_the_servers_secrets(workspace: Path) -> None:
    token = "tok-" + SECRET
    async with audited(workspace, audit_arguments=True, auth_tokens={"alice": token}) as (runtime, log):
        await run(runtime, f'write_file("t.txt", "the token is {token}")\nwrite_file("u.txt", "plain words")')
    first, second = lines(log)
    assert first["arguments"] == {"path": "t.txt", "content": "[redacted]"}
    assert second["arguments"] == {"path": "u.txt", "content": "plain words"}
    assert token not in log.read_text()


def test_the_audit_log_of_a_real_server(tmp_path: Path) -> None:
    """`attp serve` with ``ATTP_AUDIT_LOG``: a call over Streamable HTTP leaves its line (anonymous on loopback)."""

    log = tmp_path / "audit.jsonl"
    with serving_http(tmp_path / "ws", *SERVE_FLAGS, env={"ATTP_AUDIT_LOG": str(log)}) as served:

        async def call() -> dict[str, Any]:
            async with served.client(mode="legacy") as client:
                return await execute(client, 'write_file("x.txt", "y")\n__result__ = read_file("x.txt")')

        assert anyio.run(call)["result"] == "y"
        (line,) = lines(log)
    assert (line["principal"], line["tool"], line["outcome"]) == ("anonymous", "files.write_file", "ok")
    assert line["session"] is not None and len(line["session"]) == 16


@pytest.fixture(scope="module")
def approving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    """A served attp that asks before destructive calls, and its audit log: one for both protocol eras."""
    root = tmp_path_factory.mktemp("audited")
    log = root / "audit.jsonl"
    flags = [*SERVE_FLAGS, "--approval", "destructive"]
    with serving_http(root / "ws", *flags, env={"ATTP_AUDIT_LOG": str(log)}) as served:
        yield served, log


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_declined_approval_over_http_leaves_one_line(approving: tuple[Served, Path], mode: str) -> None:
    """The user declines through MCP elicitation (in the call on the handshake era; across input_required
    rounds on 2026-07-28): one `approval` line, nothing written, no `tool_call` line."""

    served, log = approving
    asked: list[str] = []

    async def decline(_context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="decline")

    async def call() -> dict[str, Any]:
        async with served.client(mode=mode, elicitation_callback=decline) as client:
            return await execute(client, f'write_file("no.txt", "{SECRET}")')

    before = len(lines(log))
    data = anyio.run(call)
    (line,) = lines(log)[before:]  # the one line this call left
    assert data["error"]["code"] == "APPROVAL_DENIED" and len(asked) == 1
    assert (line["event"], line["tool"], line["outcome"]) == ("approval", "files.write_file", "APPROVAL_DENIED")
    assert SECRET not in log.read_text()
    assert not (served.workspace / "no.txt").exists()


async def test_audit_arguments_redact_an_upstreams_credentials_as_expanded(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33, item 5: the configured ``${VAR}`` of an upstream's env is not the secret; its value, expanded when
    the server starts, is (so is an OAuth token the server holds), and the audit log redacts it too."""
    from upstreams import time_stdio

    from attp_server.mcp_config import McpServer

    value = "planted-" + SECRET
    monkeypatch.setenv("ATTP_TEST_PLANTED", value)
    server = McpServer.model_validate({**time_stdio(), "env": {"API_KEY": "${ATTP_TEST_PLANTED}"}})
    async with audited(workspace, audit_arguments=True, mcp_servers={"clock": server}) as (runtime, log):
        data = await run(runtime, f'write_file("k.txt", "the key is {value}")')
        assert data["status"] == "ok", data
    [line] = lines(log)
    assert line["arguments"] == {"path": "k.txt", "content": "[redacted]"}
    assert value not in log.read_text()
