"""Real third-party MCP servers for the gateway tests: where they are, and how to start the HTTP one.

The npm servers are pinned in tests/clients/package.json (``npm ci --prefix tests/clients``); the PyPI
ones, ``mcp-server-time`` and ``mcp-server-git``, are in the ``test`` extra; ``mcp-server-sqlite``
needs ``mcp<2``, so it lives in a venv of its own (`sqlite_command` builds it once from
sqlite-requirements.txt; .ci/run builds it first). A missing one fails the test with the command that
installs it: these tests never skip.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import upstream_venv
from harness import free_port, stop_process

SUPPORT = Path(__file__).parent
PACKAGES = SUPPORT.parent / "clients" / "node_modules" / "@modelcontextprotocol"
EVERYTHING = PACKAGES / "server-everything" / "dist" / "index.js"
FILESYSTEM = PACKAGES / "server-filesystem" / "dist" / "index.js"
MEMORY = PACKAGES / "server-memory" / "dist" / "index.js"
BROKEN = SUPPORT / "broken_server.py"
TAP = SUPPORT / "mcp_tap.py"
GROWING = SUPPORT / "growing_server.py"


def node() -> str:
    found = shutil.which("node")
    if found is None or not EVERYTHING.is_file() or not FILESYSTEM.is_file():
        pytest.fail("the gateway tests need Node.js and `npm ci --prefix tests/clients`", pytrace=False)
    return found


def everything_stdio(tap: Path | None = None) -> dict[str, Any]:
    """``[mcp_servers.everything]`` for server-everything over stdio (through the wire recorder with `tap`)."""
    command = [node(), str(EVERYTHING), "stdio"]
    if tap is not None:
        command = [sys.executable, str(TAP), str(tap), "--", *command]
    return {"command": command[0], "args": command[1:]}


def filesystem_stdio(root: Path) -> dict[str, Any]:
    return {"command": node(), "args": [str(FILESYSTEM), str(root)]}


def time_stdio() -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


def git_stdio(repository: Path) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(repository)]}


def memory_stdio(path: Path) -> dict[str, Any]:
    """@modelcontextprotocol/server-memory (the knowledge graph), keeping its graph in `path`."""
    if not MEMORY.is_file():
        pytest.fail("the gateway trial needs `npm ci --prefix tests/clients`", pytrace=False)
    return {"command": node(), "args": [str(MEMORY)], "env": {"MEMORY_FILE_PATH": str(path)}}


def broken_stdio() -> dict[str, Any]:
    """A Python server that dies at start with an AttributeError on stderr."""
    return {"command": sys.executable, "args": [str(BROKEN)]}


def sqlite_stdio(database: Path) -> dict[str, Any]:
    return {"command": str(sqlite_command()), "args": ["--db-path", str(database)]}


def sqlite_command() -> Path:
    """``mcp-server-sqlite`` in its own venv (it needs mcp<2): see upstream_venv."""
    try:
        return upstream_venv.sqlite_command()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


@contextmanager
def everything_http() -> Iterator[str]:
    """server-everything's Streamable HTTP transport on a free loopback port; yields its /mcp URL."""
    port = free_port()
    process = subprocess.Popen(
        [node(), str(EVERYTHING), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"server-everything exited with {process.returncode}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        else:
            raise TimeoutError("server-everything did not listen")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)


def tapped(log: Path) -> list[dict[str, Any]]:
    """The recorded JSON-RPC lines of a tapped server, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def processes_running(path_part: str) -> list[int]:
    """Pids of live processes whose command line contains `path_part` (zombies excluded)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if path_part in cmdline and state != "Z":
            found.append(int(entry))
    return found


def run_inspector(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """MCP Inspector's CLI (pinned in tests/clients), never interactive, with a scratch HOME and no proxy."""
    inspector_dir = PACKAGES / "inspector"
    manifest = json.loads((inspector_dir / "package.json").read_text())
    launcher = inspector_dir / manifest["bin"]["mcp-inspector"]
    env = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_VARIABLES and k != "NODE_OPTIONS"}
    env |= {"HOME": str(home), "MCP_INSPECTOR_SECRET_STORE": "memory", "NO_COLOR": "1"}
    return subprocess.run(
        [node(), str(launcher), "--cli", *args],
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )


PROXY_VARIABLES = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
