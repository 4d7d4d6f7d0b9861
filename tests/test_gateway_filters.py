"""Filters per upstream server (``tools``, ``exclude_tools``, ``read_only``) as a user runs them: ``attp serve``
in front of real servers, an SDK client on both protocol eras. A filtered tool is absent from everything the
model reads and refused by any name it might guess, ``parallel()`` included."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w
from harness import Served, execute, server_env, serving_http
from mcp.shared.exceptions import MCPError
from upstreams import everything_stdio, filesystem_stdio

from attp_server.mcp_config import McpServer, read_claude_config

pytestmark = pytest.mark.anyio

HIDDEN = ("get_env", "toggle_simulated_logging", "gzip_file_as_resource", "simulate_research_query", "get_file_info")
SHOWN = ("echo", "get_sum", "list_directory")


def write_configs(root: Path) -> tuple[Path, Path]:
    """server-filesystem in attp.toml (allow list), everything in Claude JSON (read_only plus an exclusion by its
    own name)."""
    toml = root / "attp.toml"
    fs = {**filesystem_stdio(root), "tools": ["list_*"]}
    toml.write_text(tomli_w.dumps({"toolpacks": {"enabled": ["files"]}, "mcp_servers": {"fs": fs}}))
    claude = root / "claude_desktop_config.json"
    claude.write_text(
        json.dumps(
            {"mcpServers": {"everything": {**everything_stdio(), "read_only": True, "exclude_tools": ["get-env"]}}}
        )
    )
    return toml, claude


GUESSES = [
    "get_env()",
    "everything.get_env()",
    "everything.toggle_simulated_logging()",
    "fs.get_file_info(path='.')",
    "get_file_info(path='.')",
]


@pytest.fixture(scope="module")
def filtered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    """attp serve in front of the filtered servers, once for the module (no test here changes its state), and its
    audit log: a test reads the lines written since it started."""
    root = tmp_path_factory.mktemp("filtered")
    workspace = root / "ws"
    workspace.mkdir()
    toml, claude = write_configs(root)
    log = root / "audit.jsonl"
    flags = ("--config", str(toml), "--mcp-config", str(claude))
    with serving_http(workspace, *flags, env={"ATTP_AUDIT_LOG": str(log)}) as served:
        yield served, log


def audit_lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_filtered_tools_are_hidden_and_refused(filtered: tuple[Served, Path], mode: str) -> None:
    served, _ = filtered
    assert served.url is not None
    upstream = httpx.get(served.url + "/healthz").json()["upstream"]
    assert upstream["fs"]["status"] == upstream["everything"]["status"] == "ok"
    assert upstream["fs"]["hidden"] == 11 and upstream["everything"]["hidden"] == 5
    async with served.client(mode=mode) as client:
        [tool] = (await client.list_tools()).tools
        description = tool.description or ""
        for name in SHOWN:
            assert name in description
        for name in HIDDEN:
            assert name not in description
        seen = await execute(
            client,
            "__result__ = {'sum': get_sum(a=1, b=2), 'roots': list_allowed_directories()['content']}",
        )
        assert seen["status"] == "ok", seen["error"]
        for guess in GUESSES:
            refused = await execute(client, f"__result__ = {guess}")
            assert refused["status"] == "error" and refused["error"]["code"] == "NAME_NOT_FOUND", (guess, refused)
            # Said to be hidden by the operator's configuration, with no suggestion to call it or a session to pass.
            error, name = refused["error"], guess.partition("(")[0]
            assert error["message"].startswith(f"{name} is a tool of the MCP server "), error
            assert (
                "that the operator's configuration hides (its tool filters): programs cannot call it"
                in error["message"]
            )
            assert error["suggested_value"] is None and refused["hint"] is None, refused
            assert error["tool_name"].endswith("." + name.rpartition(".")[2]), error
        # A name built at run time gets past every static check: the server refuses it, once for the batch.
        dynamic = await execute(client, "name = 'everything.' + 'get' + '_env'\n__result__ = parallel(name, [{}, {}])")
        assert dynamic["error"]["code"] == "NAME_NOT_FOUND", dynamic
        assert dynamic["calls"] == [] or all(not c["ok"] for c in dynamic["calls"])
        helped = await execute(client, "help('get_env')\nprint(tools('env'))\nprint(tools('directory'))")
        assert helped["status"] == "ok", helped["error"]
        assert "environment" not in helped["stdout"].lower() and "get_file_info" not in helped["stdout"]
        assert "list_directory" in helped["stdout"]
        listing = await client.read_resource("attp://tools")
        text = "".join(getattr(c, "text", "") for c in listing.contents)
        assert "def echo" in text or "echo(" in text
        assert not any(f"{name}(" in text for name in HIDDEN)
        for uri in (
            "attp://tools/get_env",
            "attp://tools/everything.get_env/atdf",
            "attp://tools/get_file_info",
        ):
            with pytest.raises(MCPError, match="no tool named"):
                await client.read_resource(uri)


async def test_a_refusal_by_a_filter_leaves_one_audit_line(filtered: tuple[Served, Path]) -> None:
    """Each guess at a filtered tool, by any name (``parallel()`` with a name built at run time included), leaves
    one ``filter_refused`` line naming ``pack.tool``; a name no server has leaves none. A line is written before
    the program hears its refusal, so the log is complete when the last call returns."""
    served, log = filtered
    start = len(audit_lines(log))
    async with served.client() as client:
        for guess in GUESSES:
            refused = await execute(client, f"__result__ = {guess}")
            assert refused["error"]["code"] == "NAME_NOT_FOUND", (guess, refused)
        dynamic = await execute(client, "__result__ = parallel('everything.' + 'get_env', [{}, {}])")
        assert dynamic["error"]["code"] == "NAME_NOT_FOUND", dynamic
        unknown = await execute(client, "__result__ = no_such_tool()")
        assert unknown["error"]["code"] == "NAME_NOT_FOUND", unknown
    lines = audit_lines(log)[start:]
    assert [(line["event"], line["tool"], line["outcome"]) for line in lines] == [
        ("filter_refused", tool, "NAME_NOT_FOUND")
        for tool in (
            "everything.get_env",
            "everything.get_env",
            "everything.toggle_simulated_logging",
            "fs.get_file_info",
            "fs.get_file_info",
            "everything.get_env",
        )
    ]
    assert all(line["principal"] == "anonymous" for line in lines)


def test_attp_tools_lists_only_what_the_filters_keep(tmp_path: Path) -> None:
    toml, claude = write_configs(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "attp_server", "tools", "--format", "atdf", "--config", str(toml), "--mcp-config",
         str(claude), "--workspace", str(tmp_path)],
        capture_output=True, text=True, env=server_env(), cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    names = {d["name"] for d in json.loads(done.stdout)}
    assert {"echo", "get_sum", "list_directory"} <= names
    assert not names & set(HIDDEN)


def test_filter_keys_in_toml_and_claude_json(tmp_path: Path) -> None:
    server = McpServer.model_validate(
        {"command": "x", "tools": ["read_*", "list-dirs"], "exclude_tools": ["read_secret"]}
    )
    assert server.admits(("read_file",), read_only=False)
    assert server.admits(("list-dirs", "list_dirs"), read_only=False)
    assert not server.admits(("read_secret",), read_only=True)
    assert not server.admits(("write_file",), read_only=True)
    only_reads = McpServer.model_validate({"command": "x", "read_only": True})
    assert only_reads.admits(("anything",), read_only=True) and not only_reads.admits(("anything",), read_only=False)
    path = tmp_path / "claude.json"
    path.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "tools": ["a*"], "read_only": True}}}))
    assert read_claude_config(path)["s"].tools == ["a*"]
    path.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "tools": "a*"}}}))
    with pytest.raises(ValueError, match=r"mcpServers\.s: tools: Input should be a valid list"):
        read_claude_config(path)
    path.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "exclude_tools": [""]}}}))
    with pytest.raises(ValueError, match="cannot be empty"):
        read_claude_config(path)
