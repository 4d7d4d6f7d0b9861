"""``attp bundle``: the .mcpb file is checked by the official MCP Bundle CLI (``@anthropic-ai/mcpb``, pinned in
tests/clients), and its server is started as Claude Desktop starts an installed bundle: the manifest's command
with the user's choices filled in by the same library's getMcpConfigForManifest, then driven over stdio by the
SDK client."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from harness import execute, server_env
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from upstreams import everything_stdio

pytestmark = pytest.mark.anyio

CLIENTS = Path(__file__).parent / "clients"
MCPB = CLIENTS / "node_modules" / ".bin" / "mcpb"


def mcpb(*args: str) -> subprocess.CompletedProcess[str]:
    if not MCPB.is_file() or shutil.which("node") is None:
        pytest.fail("the bundle tests need Node.js and `npm ci --prefix tests/clients`", pytrace=False)
    return subprocess.run([str(MCPB), *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One bundle for the module (every test only reads it): the file, and where it is unpacked."""
    return make_bundle(tmp_path_factory.mktemp("bundle"))


def make_bundle(tmp_path: Path) -> tuple[Path, Path]:
    """`attp bundle --output`, and the bundle unpacked as Claude Desktop installs it."""
    bundle = tmp_path / "attp.mcpb"
    done = subprocess.run(
        [sys.executable, "-m", "attp_server", "bundle", "--output", str(bundle)],
        capture_output=True, text=True, env=server_env(), cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout
    unpacked = tmp_path / "installed"
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(unpacked)
    return bundle, unpacked


def claude_desktop_commands(unpacked: Path, choices: list[dict[str, Any]], home: Path) -> list[dict[str, Any]]:
    """What Claude Desktop starts for each of the user's `choices` (one Node run for all of them)."""
    done = subprocess.run(
        ["node", str(CLIENTS / "mcpb_config.mjs"), str(unpacked), *map(json.dumps, choices)],
        capture_output=True, text=True, timeout=60, check=False, env={**os.environ, "HOME": str(home)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    commands = [dict(json.loads(line)) for line in done.stdout.splitlines()]
    assert len(commands) == len(choices), done.stdout
    return commands


def test_the_official_cli_accepts_the_bundle(built: tuple[Path, Path]) -> None:
    bundle, unpacked = built
    validated = mcpb("validate", str(unpacked / "manifest.json"))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "validation passes" in validated.stdout
    info = mcpb("info", str(bundle))
    assert info.returncode == 0, info.stdout + info.stderr
    assert "attp.mcpb" in info.stdout
    manifest = json.loads((unpacked / "manifest.json").read_text())
    assert set(manifest["user_config"]) == {"workspace", "upstream_servers", "approval"}
    assert Path(manifest["server"]["mcp_config"]["command"]).is_absolute()


def test_a_bundle_without_a_workspace_is_not_started(built: tuple[Path, Path]) -> None:
    _, unpacked = built
    done = subprocess.run(
        ["node", str(CLIENTS / "mcpb_config.mjs"), str(unpacked), "{}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and "required configuration is missing" in done.stderr


def test_wrong_output_name_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "attp_server", "bundle", "--output", str(tmp_path / "attp.zip")],
        capture_output=True, text=True, env=server_env(), timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "must end in .mcpb" in done.stderr


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_installed_bundle_serves_with_the_users_choices(
    built: tuple[Path, Path], tmp_path: Path, mode: str
) -> None:
    _, unpacked = built
    workspace = tmp_path / "My Files"
    workspace.mkdir()
    upstream = tmp_path / "upstream.json"
    upstream.write_text(json.dumps({"mcpServers": {"everything": everything_stdio()}}))
    home = tmp_path / "home"
    home.mkdir()
    started_in = tmp_path / "claude"
    started_in.mkdir()
    approvals = ("never", "always")
    configs = claude_desktop_commands(
        unpacked,
        [{"workspace": str(workspace), "upstream_servers": str(upstream), "approval": a} for a in approvals],
        home,
    )
    for approval, config in zip(approvals, configs, strict=True):
        assert config["env"]["ATTP_DB_PATH"] == str(home / ".attp-server" / "memory.sqlite3")
        params = StdioServerParameters(
            command=config["command"], args=config["args"], env=config["env"], cwd=str(started_in)
        )
        async with Client(params, mode=mode) as client:
            [tool] = (await client.list_tools()).tools
            assert tool.name == "attp_execute" and "get_sum(" in (tool.description or "")
            data = await execute(
                client, f'write_file("{approval}.txt", "hi")\n__result__ = everything.get_sum(a=2, b=3)'
            )
        if approval == "never":
            assert data["status"] == "ok", data["error"]
            assert data["result"] == "The sum of 2 and 3 is 5."
            assert (workspace / "never.txt").read_text() == "hi"
        else:  # the user chose to be asked; this client cannot answer, so nothing is written
            assert data["error"]["code"].startswith("APPROVAL"), data
            assert not (workspace / "always.txt").exists()
    assert (home / ".attp-server" / "secret.key").is_file()  # the server's data in the user's folder,
    assert os.listdir(started_in) == []  # not where Claude Desktop started it
    assert sorted(os.listdir(workspace)) == ["never.txt"]  # nor in the workspace the programs see


def test_a_workspace_chosen_around_the_servers_own_files_is_refused(built: tuple[Path, Path], tmp_path: Path) -> None:
    """The install dialog's choices are the user's: an upstream servers file inside the chosen workspace (a program
    could add a server to it, and the live reload would start it), or the home folder as the workspace (it holds
    ~/.attp-server), make the server refuse to start, saying what to move where."""
    _, unpacked = built
    home = tmp_path / "home"
    workspace = home / "Projects"
    workspace.mkdir(parents=True)
    (workspace / "servers.json").write_text(json.dumps({"mcpServers": {}}))
    choices = [
        {"workspace": str(workspace), "upstream_servers": str(workspace / "servers.json"), "approval": "never"},
        {"workspace": str(home), "approval": "never"},
    ]
    expected = [
        f"{workspace / 'servers.json'}, an upstream servers file (mcp_config): the server reads it again while serving",
        f"{home / '.attp-server'}, the data folder",
    ]
    for config, named in zip(claude_desktop_commands(unpacked, choices, home), expected, strict=True):
        done = subprocess.run(
            [config["command"], *config["args"]],
            env={**config["env"], "HOME": str(home)}, cwd=tmp_path, capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL,
            check=False,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "refusing to start: the workspace" in done.stderr and named in done.stderr
    assert not (home / ".attp-server").exists()
