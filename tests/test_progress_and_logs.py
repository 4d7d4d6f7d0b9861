"""Progress per tool call, cancellation that kills the worker at once, and one log line per call."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from harness import SERVE_FLAGS, Served, descendants, serving_http

pytestmark = [pytest.mark.anyio, pytest.mark.process]

SECRET_IN_CODE = "code-secret-4f1d9"
TOKEN = "log-token-99a0c3-never-logged"


async def test_progress_reports_each_tool_call(served: Served) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with served.client() as client:
        result = await client.call_tool(
            "attp_execute",
            {"code": "total = 0\nfor i in range(3):\n    total = add(total, i)\n__result__ = total"},
            progress_callback=on_progress,
        )
    assert result.structured_content is not None and result.structured_content["result"] == 3
    for _ in range(100):  # progress notifications are delivered asynchronously to the callback
        if len(seen) == 3:
            break
        await anyio.sleep(0.01)
    assert [p for p, _, _ in seen] == [1, 2, 3]
    assert all(message is not None and "add" in message for _, _, message in seen)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Runaway programs here would run for 60 s: only a cancellation can end them quickly."""
    workspace = tmp_path_factory.mktemp("cancel-ws")
    with serving_http(workspace, "--toolpack", "files", "--timeout-s", "60") as served:
        yield served


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_cancellation_kills_the_worker(slow_server: Served, transport: str) -> None:
    assert slow_server.process is not None and slow_server.url is not None
    server_pid = slow_server.process.pid
    client_view = Served(transport, slow_server.workspace, url=slow_server.url)
    health = slow_server.url + "/healthz"
    # One HTTP client for every poll below (httpx.get builds one, ~20 ms of CPU, each time).
    async with httpx.AsyncClient() as http:
        async with client_view.client() as client:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(client.call_tool, "attp_execute", {"code": "while True:\n    pass"})
                    while (await http.get(health)).json()["workers"]["busy"] == 0:
                        await anyio.sleep(0.01)
                    before = set(descendants(server_pid))  # its fork server and the workers forked from it
                    cancelled_before = (await http.get(health)).json()["workers"]["cancelled"]
                    scope.cancel()
            cancelled = time.monotonic()
            while (await http.get(health)).json()["workers"]["cancelled"] == cancelled_before:
                assert time.monotonic() - cancelled < 5, "the cancelled run's worker was not killed"
                await anyio.sleep(0.002)
            # The count goes up as the kill starts; the busy worker process is gone (killed and reaped) just after.
            while not {pid for pid in before if not alive(pid)}:
                assert time.monotonic() - cancelled < 5, "the busy worker process is gone (killed and reaped)"
                await anyio.sleep(0.002)
            elapsed_ms = (time.monotonic() - cancelled) * 1000
            print(f"cancel -> worker killed: {elapsed_ms:.1f} ms ({transport})")
            # The session and the server carry on.
            result = await client.call_tool("attp_execute", {"code": "__result__ = 6 * 7"})
        assert result.structured_content is not None and result.structured_content["result"] == 42
        assert (await http.get(health)).json()["workers"]["busy"] == 0


@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_one_log_line_per_call_without_secrets(tmp_path: Path, log_format: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    stderr = tmp_path / "stderr.log"
    env = {"ATTP_AUTH_TOKEN": TOKEN, "ATTP_LOG_FORMAT": log_format}
    with serving_http(workspace, *SERVE_FLAGS, env=env, stderr=stderr) as served:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with served.client(headers=headers) as client:
            ok = await client.call_tool(
                "attp_execute", {"code": f'x = "{SECRET_IN_CODE}"\n__result__ = add(1, 2)', "thought": SECRET_IN_CODE}
            )
            failed = await client.call_tool("attp_execute", {"code": f'reed_file("{SECRET_IN_CODE}")'})
        assert ok.structured_content is not None and failed.structured_content is not None
    text = stderr.read_text()
    assert SECRET_IN_CODE not in text
    assert TOKEN not in text
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if "attp_execute" in line and "status" in line]
    assert len(lines) == 2, text
    if log_format == "json":
        entries = [json.loads(line) for line in lines]
        assert [(e["status"], e["error"], e["tool_calls"]) for e in entries] == [
            ("ok", None, 1),
            ("error", "NAME_NOT_FOUND", 0),
        ]
        for entry in entries:
            assert {"time", "level", "call", "session", "ms"} <= set(entry)
            assert entry["session"] not in ("", "-")
        assert entries[0]["call"] != entries[1]["call"]
    else:
        assert "status=ok error=- tool_calls=1" in lines[0]
        assert "status=error error=NAME_NOT_FOUND tool_calls=0" in lines[1]
        assert all(" call=" in line and " session=" in line and " ms=" in line for line in lines)
