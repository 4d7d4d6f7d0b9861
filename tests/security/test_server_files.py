"""The server's own files are out of every program's reach (SECURITY.md, "The server's own files"; issue 33, items 1,
3 and the file modes of 7), through the real `attp serve`, `attp exec`, `attp config` and the MCP Bundle.

The red team's finding: with a watched configuration file inside the workspace (``./attp.toml`` of a project served
with ``--workspace .``, an ``--mcp-config`` file kept in the workspace folder), a program appended an upstream server
whose command is ``/bin/sh -c 'id > marker'`` with ``write_file``, and the live reload started it within its poll;
with the data folder inside the workspace a program read ``.attp/secret.key``. Such a layout is now refused at
start, naming what to move where; each test below starts the server the way a user would and, where the server
does serve (as before the fix), makes the attack and shows what it did.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from harness import execute, free_port, server_env, stop_process
from mcp import Client
from mcp.client.stdio import StdioServerParameters

pytestmark = pytest.mark.anyio

EVIL = ["/bin/sh", "-c", "id > marker"]


def attp(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "attp_server", *args],
        capture_output=True, text=True, cwd=cwd, env=server_env(), timeout=timeout, check=False,
    )  # fmt: skip


def serve_http(project: Path, *flags: str) -> tuple[subprocess.Popen[str], str]:
    """`attp serve --transport http --workspace .` started in `project`, as a user runs it from a project folder."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "attp_server", "serve", "--transport", "http", "--port", str(port),
         "--workspace", ".", *flags],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=project, env=server_env(),
        start_new_session=True,
    )  # fmt: skip
    return process, f"http://127.0.0.1:{port}"


def serving_or_refused(process: subprocess.Popen[str], url: str, timeout: float = 30) -> bool:
    """True once the server answers /healthz; False once it has exited (refused to start)."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=1.0) as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return False
            try:
                if http.get(url + "/healthz").status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    raise TimeoutError("the server neither served nor exited")


async def wait_for(path: Path, seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        while not path.exists():
            await anyio.sleep(0.1)
    return path.exists()


@pytest.mark.parametrize(
    ("watched", "flags", "append"),
    [
        pytest.param(
            "attp.toml",
            [],
            '\n[mcp_servers.evil]\ncommand = "/bin/sh"\nargs = ["-c", "id > marker"]\n',
            id="project-attp.toml",
        ),
        pytest.param("servers.json", ["--mcp-config", "servers.json"], None, id="mcp-config-in-the-workspace"),
    ],
)
async def test_a_program_cannot_make_the_server_run_a_command_through_a_watched_config_file(
    tmp_path: Path, watched: str, flags: list[str], append: str | None
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "attp.toml").write_text('config_poll_s = 0.2\n[toolpacks]\nenabled = ["files"]\n')
    if watched == "servers.json":
        (project / "servers.json").write_text('{"mcpServers": {}}')
    flags = [*flags, "--db-path", str(tmp_path / "data" / "memory.sqlite3")]  # the data folder is fine here
    process, url = serve_http(project, *flags)
    try:
        if serving_or_refused(process, url):
            if append is not None:
                program = f"write_file({watched!r}, read_file({watched!r}) + {append!r})"
            else:
                servers = {"mcpServers": {"evil": {"command": EVIL[0], "args": EVIL[1:]}}}
                program = f"write_file({watched!r}, {json.dumps(servers)!r})"
            async with Client(f"{url}/mcp") as client:
                wrote = await execute(client, program)
            ran = await wait_for(project / "marker", 5)
            pytest.fail(f"the server served a workspace holding {watched} (the program: {wrote['status']}); "
                        f"the command it appended ran: {ran}")  # fmt: skip
        _, stderr = process.communicate(timeout=10)
    finally:
        stop_process(process)
    assert process.returncode == 2
    assert not (project / "marker").exists()
    assert f"refusing to start: the workspace {project} holds the server's own files" in stderr
    named = "the config file" if watched == "attp.toml" else "an upstream servers file (mcp_config)"
    assert f"{project / watched}, {named}: the server reads it again while serving" in stderr
    assert f"Move it to {Path.home() / '.attp-server' / watched}" in stderr
    assert "Traceback" not in stderr


async def test_the_data_folder_inside_the_workspace_is_refused_over_stdio(tmp_path: Path) -> None:
    """`attp serve --workspace .` from a project folder without a config file: the default data folder, .attp/,
    would be in the workspace (a program listed, read and overwrote secret.key)."""
    project = tmp_path / "project"
    project.mkdir()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "attp_server", "serve", "--workspace", ".", "--toolpack", "files"],
        env=server_env(),
        cwd=str(project),
    )
    try:
        async with Client(params) as client:
            data = await execute(client, "__result__ = [read_file('.attp/secret.key'), list_files('.attp')]")
        pytest.fail(f"the server served with its data folder in the workspace; the program read: {data}")
    except Exception as exc:  # the server exited before the handshake: the client's connection failed
        if isinstance(exc, pytest.fail.Exception):
            raise
    done = attp("serve", "--workspace", ".", "--toolpack", "files", cwd=project)
    assert done.returncode == 2, done.stderr
    assert f"{project / '.attp'}, the data folder (the folder of db_path" in done.stderr
    assert f"Give --db-path {Path.home() / '.attp-server' / 'memory.sqlite3'}" in done.stderr
    assert not (project / ".attp" / "secret.key").exists()


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param("secret-file-inside", id="secret_file"),
        pytest.param("audit-log-inside", id="audit_log"),
        pytest.param("sqlite-url-inside", id="database_url"),
        pytest.param("workspace-is-a-symlink", id="symlinked-workspace"),
        pytest.param("dotdot", id="dot-dot"),
        pytest.param("hard-link", id="hard-link"),
        pytest.param("isolation-subfolder", id="isolation"),
    ],
)
def test_every_server_file_is_refused_inside_the_workspace_however_it_is_spelled(tmp_path: Path, layout: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    data = tmp_path / "data"
    data.mkdir()
    flags = ["--workspace", str(ws), "--db-path", str(data / "memory.sqlite3"), "--toolpack", "files"]
    expected = ""
    if layout == "secret-file-inside":
        (ws / "key").write_text("s" * 40)
        flags += ["--secret-file", str(ws / "key")]
        expected = f"{ws / 'key'}, the secret_file: a program could read the server's secret"
    elif layout == "audit-log-inside":
        (tmp_path / "attp.toml").write_text(f'audit_log = "{ws / "logs" / "audit.jsonl"}"\n')
        flags += ["--config", str(tmp_path / "attp.toml")]
        expected = f"{ws / 'logs' / 'audit.jsonl'}, the audit_log: a program could erase or forge the record"
    elif layout == "sqlite-url-inside":
        flags += ["--database-url", f"sqlite:///{ws / 'state.sqlite3'}"]
        expected = f"{ws / 'state.sqlite3'}, the store (database_url)"
    elif layout == "workspace-is-a-symlink":
        (tmp_path / "link").symlink_to(ws)
        (ws / "servers.json").write_text('{"mcpServers": {}}')
        flags[1] = str(tmp_path / "link")
        flags += ["--mcp-config", str(ws / "servers.json")]
        expected = f"{ws / 'servers.json'}, an upstream servers file (mcp_config)"
    elif layout == "dotdot":
        flags[3] = str(ws / "sub" / ".." / ".attp" / "memory.sqlite3")
        expected = f"{ws / '.attp'}, the data folder"
    elif layout == "hard-link":
        (data / "secret.key").write_text("h" * 64)
        os.link(data / "secret.key", ws / "innocent.txt")
        expected = f"{data / 'secret.key'} (the data folder (the folder of db_path: the store, secret.key, the memory"
        expected += " database)) has another name (a hard link) on the workspace's file system"
    elif layout == "isolation-subfolder":
        (tmp_path / "attp.toml").write_text('isolation = "session"\n')
        flags += ["--config", str(tmp_path / "attp.toml"), "--db-path", str(ws / "sessions" / "m.sqlite3")]
        expected = f"{ws / 'sessions'}, the data folder"
    done = attp("exec", *flags, "--code", "__result__ = 1", cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert expected in done.stderr
    assert done.stdout == ""


def test_a_layout_with_every_file_outside_the_workspace_serves(tmp_path: Path) -> None:
    """The safe layouts the refusal suggests, and the default one (./workspace beside ./.attp and ./attp.toml)."""
    (tmp_path / "attp.toml").write_text('[toolpacks]\nenabled = ["files"]\n')
    done = attp("exec", "--code", "write_file('a.txt', 'x')\n__result__ = list_files('.')", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "workspace" / "a.txt").is_file() and (tmp_path / ".attp").is_dir()
    sub = attp("exec", "--workspace", "workspace/inner", "--code", "__result__ = 1", cwd=tmp_path)
    assert sub.returncode == 0, sub.stderr


def test_attp_config_never_prints_a_layout_with_the_servers_files_in_the_workspace(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    done = attp("config", "claude", "--workspace", ".", cwd=project)
    assert done.returncode == 0, done.stderr
    args = json.loads(done.stdout)["mcpServers"]["attp"]["args"]
    moved = Path.home() / ".attp-server" / "memory.sqlite3"
    assert args[args.index("--db-path") + 1] == str(moved)
    assert f"the data folder {project / '.attp'} would be inside the workspace" in done.stderr
    n8n = attp("config", "n8n", "--workspace", ".", cwd=project)
    assert f"--workspace {project} --db-path {moved}" in n8n.stdout

    (project / "attp.toml").write_text('[toolpacks]\nenabled = ["files"]\n')
    refused = attp("config", "claude", "--workspace", ".", cwd=project)
    assert refused.returncode == 2 and refused.stdout == ""
    assert f"attp: this layout would not start: the workspace {project} holds the server's own files" in refused.stderr
    assert f"{project / 'attp.toml'}, the config file" in refused.stderr


async def test_a_config_edit_that_names_a_file_in_the_workspace_is_not_applied(tmp_path: Path) -> None:
    """The config file is outside the workspace; an edit that adds an mcp_config file inside it (which a program
    could then rewrite) is refused while serving, and the servers stay as they were."""
    ws = tmp_path / "ws"
    ws.mkdir()
    config = tmp_path / "attp.toml"
    config.write_text('config_poll_s = 0.2\n[toolpacks]\nenabled = ["files"]\n')
    servers = {"mcpServers": {"evil": {"command": EVIL[0], "args": EVIL[1:], "cwd": str(ws)}}}
    (ws / "servers.json").write_text(json.dumps(servers))
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "attp_server", "serve", "--transport", "http", "--port", str(port),
             "--workspace", str(ws), "--config", str(config), "--db-path", str(tmp_path / "data" / "m.sqlite3")],
            stdout=subprocess.DEVNULL, stderr=stderr, text=True, cwd=tmp_path, env=server_env(),
            start_new_session=True,
        )  # fmt: skip
        try:
            assert serving_or_refused(process, f"http://127.0.0.1:{port}")
            config.write_text(f'mcp_config = ["{ws / "servers.json"}"]\n' + config.read_text())
            deadline = time.monotonic() + 10
            while "configuration edit not applied" not in log.read_text() and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            assert not await wait_for(ws / "marker", 1)
        finally:
            stop_process(process)
    text = log.read_text()
    assert f"configuration edit not applied (the running servers stay as they are): the workspace {ws}" in text
    assert f"{ws / 'servers.json'}, an upstream servers file (mcp_config)" in text


def _mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


async def test_the_servers_databases_and_folders_are_its_users_alone(tmp_path: Path) -> None:
    """The store, the memory database, their -wal and -shm files and the secret are 0600, the data folder 0700
    (they were 0644 in a 0755 folder: every user of the machine could read every session's kept state)."""
    data = tmp_path / "data" / "attp"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "attp_server", "serve", "--workspace", str(tmp_path / "ws"), "--db-path",
              str(data / "memory.sqlite3"), "--toolpack", "files", "--toolpack", "memory"],
        env=server_env(),
        cwd=str(tmp_path),
    )  # fmt: skip
    async with Client(params) as client:
        done = await execute(client, "kept = 1\n__result__ = len(list_segments())")
        assert done["status"] == "ok", done
        files = sorted(p.name for p in data.iterdir())
        modes = {name: _mode(data / name) for name in files}
    assert {"memory.sqlite3", "memory.sqlite3-wal", "state.sqlite3", "state.sqlite3-wal", "secret.key"} <= set(files)
    assert modes == dict.fromkeys(files, "0o600"), modes
    assert _mode(data) == _mode(data.parent) == "0o700"
