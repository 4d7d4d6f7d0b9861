"""``attp config claude|n8n``: what it prints works as printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness import server_env
from mcp import Client
from mcp.client.stdio import StdioServerParameters

pytestmark = pytest.mark.process

ATTP = Path(sys.executable).parent / "attp"


def attp(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(ATTP)] if ATTP.is_file() else [sys.executable, "-m", "attp_server"]
    environment = {**server_env(), **(env or {})}
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, cwd=cwd, env=environment, timeout=60, check=False
    )


def attp_config(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[str, str]:
    done = attp("config", *args, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


@pytest.mark.anyio
async def test_claude_entry_works_as_printed(tmp_path: Path) -> None:
    """Take exactly the printed command and args, start them from another directory, complete a session."""
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "attp.toml").write_text('[profiles.init]\ntoolpacks = ["files"]\ntimeout_s = 5\n')
    stdout, stderr = attp_config(
        "claude", "--workspace", "ws", "--profile", "init", "--name", "mine", cwd=tmp_path / "project"
    )
    entry = json.loads(stdout)["mcpServers"]["mine"]
    assert "claude_desktop_config.json" in stderr
    assert Path(entry["command"]).is_absolute()
    assert entry["args"][entry["args"].index("--workspace") + 1] == str(tmp_path / "project" / "ws")
    assert entry["args"][entry["args"].index("--config") + 1] == str(tmp_path / "project" / "attp.toml")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # Claude Desktop starts the command with a minimal environment and its own working directory.
    params = StdioServerParameters(command=entry["command"], args=entry["args"], cwd=str(elsewhere))
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        result = await client.call_tool(
            "attp_execute", {"code": 'write_file("hello.txt", "hi")\n__result__ = read_file("hello.txt")'}
        )
    assert [tool.name for tool in tools] == ["attp_execute"]
    assert "use_skill" not in (tools[0].description or "")  # the profile's toolpacks, not the defaults
    assert result.structured_content is not None and result.structured_content["result"] == "hi"
    assert (tmp_path / "project" / "ws" / "hello.txt").read_text() == "hi"
    assert os.listdir(elsewhere) == []


def test_claude_entry_without_profile_has_no_config(tmp_path: Path) -> None:
    stdout, _ = attp_config("claude", cwd=tmp_path)
    args = json.loads(stdout)["mcpServers"]["attp"]["args"]
    assert args == [
        "serve",
        "--workspace",
        str(tmp_path / "workspace"),
        "--db-path",
        str(tmp_path / ".attp" / "memory.sqlite3"),
    ]


@pytest.mark.parametrize("docker", [False, True])
def test_n8n_settings(tmp_path: Path, docker: bool) -> None:
    args = ["n8n", "--port", "9123", *(["--docker"] if docker else [])]
    stdout, _ = attp_config(*args, cwd=tmp_path)
    host = "host.docker.internal" if docker else "127.0.0.1"
    assert f"http://{host}:9123/mcp" in stdout
    assert f"http://{host}:9123/sse" in stdout
    assert "X-API-Key" in stdout and "Bearer" in stdout
    if docker:
        assert "ATTP_ALLOWED_HOSTS='host.docker.internal:*'" in stdout
        assert "--host 0.0.0.0" in stdout
        assert "host-gateway" in stdout


def test_claude_entry_carries_isolation_and_approval(tmp_path: Path) -> None:
    stdout, _ = attp_config("claude", "--approval", "destructive", "--isolation", "session", cwd=tmp_path)
    args = json.loads(stdout)["mcpServers"]["attp"]["args"]
    assert args[-4:] == ["--isolation", "session", "--approval", "destructive"]


@pytest.fixture(scope="module")
def n8n_default(tmp_path_factory: pytest.TempPathFactory) -> str:
    """What `attp config n8n` prints with no flags and no settings: read by two tests, printed once."""
    stdout, _ = attp_config("n8n", cwd=tmp_path_factory.mktemp("n8n-default"))
    return stdout


N8N_NOTES = [
    pytest.param(["--approval", "destructive"], "APPROVAL_UNAVAILABLE", id="approval"),
    pytest.param(["--isolation", "session"], "do not outlive one n8n execution", id="session-isolation"),
    pytest.param(["--isolation", "tenant"], "own token", id="tenant-isolation"),
    pytest.param([], None, id="neither"),
]


@pytest.mark.parametrize(("flags", "note"), N8N_NOTES)
def test_n8n_settings_say_what_sessions_mean_for_n8n(
    tmp_path: Path, flags: list[str], note: str | None, request: pytest.FixtureRequest
) -> None:
    stdout = request.getfixturevalue("n8n_default") if not flags else attp_config("n8n", *flags, cwd=tmp_path)[0]
    if note is None:
        assert "Approvals:" not in stdout and "Isolation:" not in stdout
    else:
        assert note in stdout


def test_n8n_covers_both_nodes_and_how_to_check_status(tmp_path: Path, n8n_default: str) -> None:
    """The standalone MCP Client node reports a failed program as a successful step: the status check is printed.

    tests/n8n/ runs the same IF expression in a real n8n (opt-in).
    """
    client, agent = n8n_default.split("\nMCP Client node")[1].split("\nMCP Client Tool node")
    assert "Tool: attp_execute" in client and "Input Mode: JSON" in client
    assert "{{ $json.content[0].text.status }}  is equal to  ok" in client
    assert "{{ $json.content[0].text.error.message }}" in client
    assert "ignores isError" in client and "note:" not in client
    assert "Tools to Include: All" in agent and "MCP_Client_Tool_attp_execute" in agent

    example = json.loads(client.split("JSON: ", 1)[1].splitlines()[0])
    done = attp("exec", "--code", example["code"], "--toolpack", "files", "--workspace", "ws", "--json", cwd=tmp_path)
    assert (done.returncode, json.loads(done.stdout)["result"]) == (0, "hi"), done.stderr


@pytest.mark.parametrize(
    ("environment", "note"),
    [
        pytest.param({"ATTP_JSON_CLIENTS": "[]", "ATTP_RESULT_FORMAT": "toml"}, True, id="json-clients-off-and-toml"),
        pytest.param({"ATTP_RESULT_FORMAT": "toml"}, False, id="toml-but-json-clients-name-the-node"),
        pytest.param({"ATTP_JSON_CLIENTS": "[]"}, False, id="json-for-everyone-by-default"),
    ],
)
def test_n8n_notes_when_the_mcp_client_node_would_get_a_string(
    tmp_path: Path, environment: dict[str, str], note: bool
) -> None:
    stdout, _ = attp_config("n8n", cwd=tmp_path, env=environment)
    assert ("is the result text as one string" in stdout) is note


def test_printing_a_client_entry_loads_no_mcp_sdk(tmp_path: Path) -> None:
    """`attp config` and `attp check` answer at once: they never import the MCP SDK (0.7 s of imports, which
    only the commands that serve or connect need)."""
    script = (
        "import contextlib, io, sys\n"
        "from attp_server.faces.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    for argv in (['config', 'claude'], ['config', 'n8n'], ['check', '--code', '__result__ = 1']):\n"
        "        main(argv)\n"
        "print(sorted(name for name in sys.modules if name == 'mcp' or name.startswith('mcp.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False, capture_output=True, text=True, cwd=tmp_path, env=server_env(), timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
