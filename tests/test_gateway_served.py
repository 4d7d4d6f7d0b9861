"""The gateway as a user runs it: ``attp serve`` with a config naming real MCP servers, and real MCP
clients (the Python SDK's Client, MCP Inspector's CLI) running one program that uses two of them.

The config mixes both ways of naming servers: ``[mcp_servers.NAME]`` tables in attp.toml and a
Claude-Desktop-style JSON file given with ``--mcp-config``; one server in it cannot start.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
import tomli_w
from harness import server_env, serving_http
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from upstreams import GROWING, everything_stdio, filesystem_stdio, run_inspector, time_stdio

pytestmark = [pytest.mark.anyio, pytest.mark.process]

PROGRAM = """now = time.get_current_time(timezone="Asia/Tokyo")
total = get_sum(a=2, b=3)
echoed = parallel(echo, [{"message": m} for m in ["a", "b"]])
__result__ = {"zone": now["timezone"], "sum": total, "echoed": echoed}"""


WORKING = frozenset({"everything", "grower", "time", "filesystem"})


def write_configs(root: Path, workspace: Path, working: frozenset[str] = WORKING) -> tuple[Path, Path]:
    """attp.toml with two [mcp_servers] tables, and a claude_desktop_config.json with two more, one that cannot
    start and one disabled. `working` names the real servers a test keeps (each costs a process start)."""
    toml = root / "attp.toml"
    servers = {"everything": everything_stdio(), "grower": {"command": sys.executable, "args": [str(GROWING)]}}
    toml.write_text(
        tomli_w.dumps(
            {
                "toolpacks": {"enabled": ["files"]},
                "mcp_servers": {name: server for name, server in servers.items() if name in working},
            }
        )
    )
    claude = root / "claude_desktop_config.json"
    servers = {"time": time_stdio(), "filesystem": filesystem_stdio(workspace)}
    claude.write_text(
        json.dumps(
            {
                "mcpServers": {
                    **{name: server for name, server in servers.items() if name in working},
                    "broken": {"command": "attp-no-such-server", "args": ["--stdio"], "autoApprove": []},
                    "off": {"command": "attp-never-started", "disabled": True},
                }
            }
        )
    )
    return toml, claude


def check_result(data: dict[str, Any]) -> None:
    assert data["status"] == "ok", data["error"]
    assert data["result"] == {"zone": "Asia/Tokyo", "sum": "The sum of 2 and 3 is 5.", "echoed": ["Echo: a", "Echo: b"]}
    assert [c["tool"] for c in data["calls"]] == ["get_current_time", "get_sum", "echo", "echo"]


async def test_attp_serve_in_front_of_real_servers(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    toml, claude = write_configs(tmp_path, workspace)
    with serving_http(workspace, "--config", str(toml), "--mcp-config", str(claude)) as served:
        assert served.url is not None
        upstream = httpx.get(served.url + "/healthz").json()["upstream"]
        assert {name: s["status"] for name, s in upstream.items()} == {
            "everything": "ok",
            "grower": "ok",
            "time": "ok",
            "filesystem": "ok",
            "broken": "unavailable",
        }
        assert "attp-no-such-server" in upstream["broken"]["problem"]
        assert upstream["broken"]["ignored"] == [
            f"{claude}: mcpServers.broken: key 'autoApprove' ignored (another client's key; it means nothing to "
            "attp-server)"
        ]
        async with served.client() as client:
            [tool] = (await client.list_tools()).tools
            # The model is told which server is down, in one line; why is in /healthz (above) and the log.
            assert "\n  broken: unavailable, the operator has been told\n" in (tool.description or "")
            assert "attp-no-such-server" not in (tool.description or "")
            result = await client.call_tool("attp_execute", {"code": PROGRAM})
            assert result.structured_content is not None
            check_result(result.structured_content)
            down = await client.call_tool("attp_execute", {"code": "broken.anything()"})
            assert down.is_error and down.structured_content is not None
            assert down.structured_content["error"]["code"] == "UPSTREAM_UNAVAILABLE"


async def test_clients_hear_that_the_tool_list_changed(tmp_path: Path) -> None:
    """A handshake-era client gets notifications/tools/list_changed; a 2026 one gets it on its listen stream."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    toml, _ = write_configs(tmp_path, workspace, frozenset({"grower"}))  # the server that changes its tools
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "attp_server", "serve", "--config", str(toml), "--workspace", str(workspace)],
        env=server_env(),
        cwd=str(tmp_path),
    )
    heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.set()

    async with Client(params, mode="legacy", message_handler=on_message) as client:
        before = (await client.list_tools()).tools[0].description or ""
        grown = await client.call_tool("attp_execute", {"code": '__result__ = grow(name="sparkle")'})
        assert grown.structured_content is not None and grown.structured_content["result"] == "added sparkle"
        with anyio.fail_after(10):
            await heard.wait()
        after = (await client.list_tools()).tools[0].description or ""
        assert "sparkle" not in before and "sparkle" in after

    async with Client(params) as modern:
        async with modern.listen(tools_list_changed=True) as subscription:
            await modern.call_tool("attp_execute", {"code": '__result__ = grow(name="glitter")'})
            with anyio.fail_after(10):
                event = await subscription.__anext__()
        assert type(event).__name__ == "ToolsListChanged"


def test_inspector_runs_a_program_across_two_servers(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    toml, claude = write_configs(tmp_path, workspace, frozenset({"everything", "time"}))  # one from each file
    server = {
        "command": sys.executable,
        "args": [
            "-m",
            "attp_server",
            "serve",
            "--config",
            str(toml),
            "--mcp-config",
            str(claude),
            "--workspace",
            str(workspace),
        ],
        "env": {k: v for k, v in server_env().items() if k == "PYTHONPATH" or k.startswith("ATTP_")},
        "cwd": str(tmp_path),
    }
    inspector_config = tmp_path / "inspector.json"
    inspector_config.write_text(json.dumps({"mcpServers": {"attp": server}}))
    (tmp_path / "home").mkdir()
    done = run_inspector(
        tmp_path / "home",
        *("--config", str(inspector_config), "--server", "attp"),
        *("--method", "tools/call", "--tool-name", "attp_execute", "--tool-arg", f"code={PROGRAM}"),
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["isError"] is False
    check_result(answer["structuredContent"])
