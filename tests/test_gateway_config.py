"""Upstream server configuration and description, without starting any server: the TOML tables and the
Claude-Desktop JSON, ${VAR} expansion, tool names as identifiers, and signatures from JSON Schema."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from attp_server.errors import ConfigError
from attp_server.mcp_config import ExpansionError, expand
from attp_server.settings import load_settings
from attp_server.toolpack import format_signature
from attp_server.toolpacks.mcp.schema import identifier, shape_of


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_toml_tables_and_claude_json_are_merged(tmp_path: Path) -> None:
    toml = write(
        tmp_path / "attp.toml",
        '[mcp_servers.github]\ncommand = "npx"\nargs = ["-y", "server-github"]\n'
        'env = {GITHUB_TOKEN = "${GH_TOKEN}"}\n'
        '[mcp_servers.search]\nurl = "https://search.example/mcp"\nheaders = {Authorization = "Bearer ${KEY}"}\n',
    )
    claude = write(
        tmp_path / "claude_desktop_config.json",
        json.dumps(
            {
                "mcpServers": {
                    "filesystem": {"command": "npx", "args": ["server-filesystem", "/tmp"], "autoApprove": []},
                    "legacy": {"url": "https://old.example/sse", "type": "sse"},
                    "remote": {"type": "http", "url": "https://new.example/mcp"},
                    "off": {"command": "never", "disabled": True},
                }
            }
        ),
    )
    settings = load_settings({"mcp_config": [claude]}, toml, environ={})
    servers = settings.upstream_servers
    assert list(servers) == ["github", "search", "filesystem", "legacy", "remote"]
    assert servers["github"].transport == "stdio"
    assert servers["github"].env["GITHUB_TOKEN"].get_secret_value() == "${GH_TOKEN}"  # expanded only at start
    assert servers["search"].transport == "streamable-http"
    assert (servers["legacy"].transport, servers["remote"].transport) == ("sse", "streamable-http")
    assert "${KEY}" not in repr(settings) and "**********" in repr(settings.mcp_servers["search"])


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        pytest.param("{", "is not valid JSON", id="not-json"),
        pytest.param('{"servers": {}}', 'has no "mcpServers" object', id="no-mcpServers"),
        pytest.param('{"mcpServers": {"a": {}}}', "mcpServers.a: give either command", id="neither"),
        pytest.param('{"mcpServers": {"a": {"command": "x", "url": "http://y"}}}', "give either", id="both"),
        pytest.param('{"mcpServers": {"a": {"url": "ftp://y"}}}', "must start with http", id="bad-url"),
        pytest.param('{"mcpServers": {"a": {"url": "http://y", "type": "grpc"}}}', "unknown type 'grpc'", id="type"),
        pytest.param('{"mcpServers": {"a": {"command": "x", "headers": {"A": "b"}}}}', "headers apply", id="headers"),
    ],
)
def test_a_bad_claude_config_names_the_file_and_the_server(tmp_path: Path, content: str, problem: str) -> None:
    path = write(tmp_path / "c.json", content)
    with pytest.raises(ConfigError) as caught:
        load_settings({"mcp_config": [path]}, environ={})
    assert "mcp_config" in str(caught.value) and problem in str(caught.value)
    assert str(path) in str(caught.value) or "mcpServers" in problem


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        pytest.param("exclude_tool", "exclude_tools", id="misspelt-exclusion"),
        pytest.param("tool", "tools", id="misspelt-allow-list"),
        pytest.param("readOnly", "read_only", id="camel-read-only"),
        pytest.param("disable", "disabled", id="misspelt-disabled"),
        pytest.param("disabledTools", "exclude_tools", id="another-clients-exclusion"),
        pytest.param("includeTools", "tools", id="another-clients-allow-list"),
    ],
)
def test_an_unknown_key_in_a_filters_place_is_an_error(tmp_path: Path, key: str, meant: str) -> None:
    """Ignored, it would leave callable the tools it was meant to hide: an error naming it and the key meant."""
    path = write(tmp_path / "c.json", json.dumps({"mcpServers": {"git": {"command": "uvx", key: ["git_reset"]}}}))
    with pytest.raises(ConfigError) as caught:
        load_settings({"mcp_config": [path]}, environ={})
    assert f"{path}: mcpServers.git: unknown key {key!r}; did you mean {meant!r}?" in str(caught.value)
    assert "PosixPath" not in str(caught.value)


def test_other_unknown_keys_are_warnings_kept_with_the_server(tmp_path: Path) -> None:
    """Keys other clients write, and keys that hide nothing, are read past; each is kept as a warning (the start-up
    log, `attp tools` and /healthz say it). Every key of the TOML form is read in the JSON form too."""
    entry = {"command": "uvx", "autoApprove": ["x"], "timeout": 60, "cwdir": "/tmp", "save_media": True}
    path = write(tmp_path / "c.json", json.dumps({"mcpServers": {"git": entry}}))
    server = load_settings({"mcp_config": [path]}, environ={}).upstream_servers["git"]
    assert server.save_media is True
    assert server.ignored == (
        f"{path}: mcpServers.git: key 'autoApprove' ignored (another client's key; it means nothing to attp-server)",
        f"{path}: mcpServers.git: unknown key 'cwdir' ignored (did you mean 'cwd'?)",
        f"{path}: mcpServers.git: key 'timeout' ignored (another client's key; it means nothing to attp-server)",
    )


def test_a_server_defined_twice_is_an_error(tmp_path: Path) -> None:
    toml = write(tmp_path / "attp.toml", '[mcp_servers.time]\ncommand = "uvx"\nargs = ["mcp-server-time"]\n')
    claude = write(tmp_path / "c.json", '{"mcpServers": {"time": {"command": "uvx"}}}')
    with pytest.raises(ConfigError, match=r"'time' is defined twice: in mcp_servers and in .*c\.json"):
        load_settings({"mcp_config": [claude]}, toml, environ={})


def test_a_bad_table_never_echoes_its_secrets(tmp_path: Path) -> None:
    toml = write(
        tmp_path / "attp.toml", '[mcp_servers.x]\ncommand = "a"\nurl = "http://b"\nenv = {T = "hunter2-secret"}\n'
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(None, toml, environ={})
    assert "mcp_servers.x" in str(caught.value) and "hunter2-secret" not in str(caught.value)


def test_variables_expand_from_the_environment() -> None:
    assert expand("Bearer ${KEY}", {"KEY": "abc"}, "h") == "Bearer abc"
    assert expand("${MISSING:-fallback}/x", {}, "h") == "fallback/x"
    with pytest.raises(ExpansionError, match=r"MISSING is not set \(referenced by mcp_servers\.a\.env\.T\)"):
        expand("${MISSING}", {}, "mcp_servers.a.env.T")


@pytest.mark.parametrize(
    ("name", "taken", "expected"),
    [
        pytest.param("get-weather", set(), "get_weather", id="dash"),
        pytest.param("get.weather/v2", set(), "get_weather_v2", id="punctuation"),
        pytest.param("from", set(), "from_", id="keyword"),
        pytest.param("_private", set(), "private", id="leading-underscore"),
        pytest.param("2fa", set(), "n_2fa", id="digit"),
        pytest.param("---", set(), "tool", id="nothing-left"),
        pytest.param("get_weather", {"get_weather"}, "get_weather_2", id="clash"),
        pytest.param("get-weather", {"get_weather", "get_weather_2"}, "get_weather_3", id="second-clash"),
    ],
)
def test_tool_names_become_identifiers(name: str, taken: set[str], expected: str) -> None:
    assert identifier(name, taken) == expected


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to look for."},
        "max-results": {"type": "integer", "default": 10, "minimum": 1},
        "tags": {"type": "array", "items": {"type": "string"}},
        "mode": {"type": "string", "enum": ["fast", "deep"]},
        "strict": {"type": "boolean"},
        "where": {"type": "object"},
        "ratio": {"type": ["number", "null"]},
        "limit": {"type": "integer", "description": "Required, listed after optional ones."},
    },
    "required": ["query", "limit"],
}


def test_a_signature_and_docstring_from_the_schemas() -> None:
    output = {"type": "object", "properties": {"hits": {"type": "array", "description": "Matches."}}}
    shape = shape_of("Search the index. Slow on big ones.\nMore detail.", SCHEMA, output, "test")
    assert format_signature(shape.signature) == (
        "(query: str, limit: int, max_results: int = 10, tags: list[str] | None = None, "
        "mode: Literal['fast', 'deep'] | None = None, strict: bool | None = None, where: dict | None = None, "
        "ratio: float | None = None) -> {hits?: list}"
    )
    assert shape.doc.splitlines()[0] == "Search the index."
    assert "    max_results: (sent as 'max-results') (>= 1)" in shape.doc
    assert "    mode: One of: 'fast', 'deep'." in shape.doc
    assert "Returns:\n    dict with hits (list): Matches." in shape.doc
    assert shape.wire_arguments({"max_results": 3, "query": "q"}) == {"max-results": 3, "query": "q"}
    problem = shape.check("idx.search", {"query": "q", "limit": 2, "mode": "dep"})
    assert problem is not None
    assert (problem.parameter_name, problem.suggested_value, problem.expected) == (
        "mode",
        "deep",
        "one of 'fast', 'deep'",
    )
    assert shape.check("idx.search", {"query": "q", "limit": 2, "max_results": 5}) is None


def test_a_wrapped_result_schema_unwraps() -> None:
    output = {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]}
    shape = shape_of("Count.", {"type": "object", "properties": {}}, output, "test")
    assert shape.unwrap_result and shape.signature.return_annotation is int
    assert shape.signature.parameters == inspect.Signature().parameters
