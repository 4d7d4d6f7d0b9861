"""The MCP face in-process (`mcp.Client(server)`): the tool's shape, description, output and isError."""

from __future__ import annotations

import json
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from harness import running
from mcp import Client, Implementation
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from attp_server.faces.app import create_server
from attp_server.model.catalog import DESCRIPTION_BUDGET
from attp_server.model.results import ExecutionResult
from attp_server.run.startup import open_runtime
from attp_server.settings import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture
async def server(workspace: Path) -> AsyncIterator[MCPServer]:
    async with running(workspace) as runtime:
        yield create_server(runtime)


async def test_one_tool_with_declared_schemas_and_truthful_annotations(server: MCPServer) -> None:
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == ["attp_execute"]
    tool = tools[0]
    assert tool.output_schema is not None
    assert set(tool.output_schema["properties"]) == set(ExecutionResult.model_fields)
    assert tool.annotations is not None
    assert (tool.annotations.read_only_hint, tool.annotations.destructive_hint) == (False, True)
    assert tool.annotations.open_world_hint is False


async def test_description_has_rules_and_catalog_within_budget(server: MCPServer) -> None:
    async with Client(server) as client:
        description = (await client.list_tools()).tools[0].description or ""
    assert len(description) <= DESCRIPTION_BUDGET
    for needle in (
        "__result__",
        "without import",
        "ToolError",
        "help(",
        "math, json, datetime, re, random, statistics",
    ):
        assert needle in description
    for signature in ("write_file(path, content) -> dict — ", "slow_echo(text, delay=0.0) -> str"):
        assert signature in description
    assert "file_reader = read_file" in description


@pytest.mark.parametrize(
    ("arguments", "status", "is_error"),
    [
        pytest.param({"code": "__result__ = add(2, 2)"}, "ok", False, id="ok"),
        pytest.param({"code": "1/0"}, "error", True, id="error"),
        pytest.param({"envelope": '[tool_call]\nstatus = "fail"\nmessage = "no"\n'}, "fail", False, id="fail"),
        pytest.param({"code": "1", "toolCallId": "x", "sessionId": "y"}, "ok", False, id="extra-arguments-ignored"),
    ],
)
async def test_is_error_exactly_for_status_error(
    server: MCPServer, arguments: dict[str, str], status: str, is_error: bool
) -> None:
    async with Client(server) as client:
        result = await client.call_tool("attp_execute", arguments)
    assert result.structured_content is not None
    assert (result.structured_content["status"], result.is_error) == (status, is_error)
    rendered = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert rendered["status"] == status


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_name_this_server_does_not_publish_is_a_protocol_error(server: MCPServer, mode: str) -> None:
    """JSON-RPC -32602 naming what is published, as the specification's tools and prompts pages say: not a tool
    result marked isError (a client takes that for a tool that ran), not an internal error."""
    async with Client(server, mode=mode) as client:
        with pytest.raises(MCPError) as tool:
            await client.call_tool("attp_exec", {"code": "1"})
        with pytest.raises(MCPError) as prompt:
            await client.get_prompt("system_prompt")
        assert (await client.get_prompt("attp_system_prompt")).messages
        assert (await client.call_tool("attp_execute", {"code": "__result__ = 1"})).structured_content
    assert tool.value.code == INVALID_PARAMS
    assert tool.value.error.message.startswith("Unknown tool: 'attp_exec' (did you mean 'attp_execute'?)")
    assert prompt.value.code == INVALID_PARAMS
    assert prompt.value.error.message == (
        "Unknown prompt: 'system_prompt' (did you mean 'attp_system_prompt'?); "
        "the prompts this server publishes (prompts/list): attp_system_prompt"
    )


async def test_text_is_the_lean_json_view_and_structured_content_the_whole_result(workspace: Path) -> None:
    async with running(workspace) as runtime, Client(create_server(runtime)) as client:
        result = await client.call_tool("attp_execute", {"code": "add(1, 2)\n__result__ = [1, None]", "target": "t"})
    assert json.loads(result.content[0].text) == {  # type: ignore[union-attr]
        "status": "ok",
        "result": [1, None],
        "tool_calls": "add: 1",
    }
    assert result.structured_content is not None
    assert result.structured_content["result"] == [1, None]
    assert result.structured_content["target"] == "t"
    assert [c["tool"] for c in result.structured_content["calls"]] == ["add"]
    assert result.structured_content["elapsed_ms"] > 0


async def test_toml_result_format(workspace: Path) -> None:
    async with running(workspace, result_format="toml") as runtime, Client(create_server(runtime)) as client:
        result = await client.call_tool("attp_execute", {"code": "__result__ = {'a': 1}"})
    assert tomllib.loads(result.content[0].text) == {"status": "ok", "result": {"a": 1}}  # type: ignore[union-attr]


N8N_NODE = "@n8n/n8n-nodes-langchain.mcpClient"
TOML = {"result_format": "toml"}


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # n8n's SDK sends clientInfo in an initialize handshake
@pytest.mark.parametrize(
    ("client_name", "overrides", "text_is_json"),
    [
        pytest.param(N8N_NODE, TOML, True, id="n8n-mcp-client-node-gets-json"),
        pytest.param(N8N_NODE + "Tool", TOML, False, id="n8n-agent-sub-node-keeps-toml"),
        pytest.param("mcp", TOML, False, id="other-client-keeps-toml"),
        pytest.param(N8N_NODE, {"json_clients": [], **TOML}, False, id="json-clients-empty-turns-it-off"),
        pytest.param("my-agent", {"json_clients": ["my-agent"], **TOML}, True, id="json-clients-names-any-client"),
        pytest.param("mcp", {}, True, id="json-by-default-for-everyone"),
    ],
)
async def test_text_format_follows_the_client_name(
    workspace: Path, client_name: str, overrides: dict[str, Any], text_is_json: bool, mode: str
) -> None:
    """n8n's MCP Client node JSON-parses the text into the workflow: it gets JSON, so `status` is testable."""
    async with running(workspace, **overrides) as runtime:
        client = Client(create_server(runtime), client_info=Implementation(name=client_name, version="1"), mode=mode)
        async with client:
            result = await client.call_tool("attp_execute", {"code": "1/0"})
    text = result.content[0].text  # type: ignore[union-attr]
    rendered = json.loads(text) if text_is_json else tomllib.loads(text)
    assert rendered["status"] == "error" and rendered["error"]["code"] == "RUNTIME_ERROR"


async def test_the_tool_annotations_follow_the_marks_of_the_enabled_tools(tmp_path: Path) -> None:
    """Read-only packs make a read-only attp_execute; one destructive or open-world tool marks it so."""
    cases = {
        ("skills",): (True, False, False),
        ("skills", "files"): (False, True, False),
        ("skills", "shell"): (False, True, True),
    }
    for packs, (read_only, destructive, open_world) in cases.items():
        settings = Settings(workspace=tmp_path / "ws", toolpacks=list(packs), workers=0)
        async with open_runtime(settings) as runtime, Client(create_server(runtime)) as client:
            annotations = (await client.list_tools()).tools[0].annotations
        assert annotations is not None
        got = (annotations.read_only_hint, annotations.destructive_hint, annotations.open_world_hint)
        assert got == (read_only, destructive, open_world), packs


def test_built_in_tools_carry_marks(tmp_path: Path) -> None:
    from attp_server.run.startup import build_registry

    registry = build_registry(
        Settings(workspace=tmp_path / "ws", db_path=tmp_path / "m.db", toolpacks=["files", "memory", "shell"])
    )
    marks = {name: tool.marks for name, tool in registry.tools.items()}
    assert marks["read_file"].read_only and not marks["read_file"].destructive
    assert marks["write_file"].destructive and marks["edit_file"].destructive
    assert marks["find_page"].read_only and marks["remove_page"].destructive
    assert not marks["expand_details"].destructive and not marks["expand_details"].read_only
    assert marks["bash"].destructive and marks["bash"].open_world
