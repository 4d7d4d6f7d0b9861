"""Live configuration: edits of attp.toml's [mcp_servers] and of an --mcp-config file, applied while ``attp serve``
runs, seen by real SDK clients on both protocol eras. Added servers start, removed ones stop, changed ones
restart; a program running during the edit finishes on the servers it started with; a broken edit is logged
and changes nothing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
import tomli_w
from harness import execute, serving_http
from upstreams import everything_stdio, filesystem_stdio

from attp_server.ops.live import ConfigWatch, config_stamp
from attp_server.settings import Settings

pytestmark = pytest.mark.anyio

SLOW = """started = everything.echo(message="before")
everything.trigger_long_running_operation(duration=10, steps=5)
__result__ = [started, everything.echo(message="after")]"""


def write_toml(path: Path, fs_server: dict[str, Any]) -> None:
    path.write_text(tomli_w.dumps({"toolpacks": {"enabled": ["files"]}, "mcp_servers": {"fs": fs_server}}))


def write_json(path: Path, servers: dict[str, Any]) -> None:
    """Written to a new file and renamed over the old one, as editors save."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps({"mcpServers": servers}))
    os.replace(partial, path)


def children(pid: int, word: str) -> list[int]:
    """Processes whose parent is `pid` and whose command line has `word` (the upstream servers attp started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and word in command:
            found.append(int(entry.name))
    return found


async def wait_until(check: Any, timeout: float = 20.0) -> None:
    with anyio.fail_after(timeout):
        while not check():
            await anyio.sleep(0.1)


async def test_edits_apply_while_serving(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    other = tmp_path / "other"  # the root of the server-filesystem added during the run
    other.mkdir()
    toml, claude = tmp_path / "attp.toml", tmp_path / "upstream.json"
    write_toml(toml, filesystem_stdio(workspace))
    write_json(claude, {"everything": everything_stdio()})
    log = tmp_path / "stderr.log"
    flags = ("--config", str(toml), "--mcp-config", str(claude), "--timeout-s", "40")
    with serving_http(workspace, *flags, env={"ATTP_CONFIG_POLL_S": "0.2"}, stderr=log) as served:
        assert served.url is not None and served.process is not None
        pid = served.process.pid

        def upstream() -> dict[str, Any]:
            return dict(httpx.get(served.url + "/healthz").json()["upstream"])  # type: ignore[operator]

        assert set(upstream()) == {"fs", "everything"}
        assert children(pid, "server-everything")
        heard = anyio.Event()

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                heard.set()

        async with served.client(mode="legacy", message_handler=on_message) as legacy, served.client() as modern:
            before = (await modern.list_tools()).tools[0].description or ""
            assert "trigger_long_running_operation" in before and "get_file_info" in before
            running: dict[str, Any] = {}

            async def slow() -> None:
                running.update(await execute(legacy, SLOW))

            async with anyio.create_task_group() as group:
                group.start_soon(slow)
                await anyio.sleep(1.0)  # the program is inside the 10 s operation
                # Remove everything, add fs2 (filtered), change fs (an exclusion): all while it runs.
                write_json(claude, {"fs2": {**filesystem_stdio(other), "tools": ["list_allowed_directories"]}})
                write_toml(toml, {**filesystem_stdio(workspace), "exclude_tools": ["get_file_info"]})
                with anyio.fail_after(20):
                    await heard.wait()
                assert running == {}, "the program is still running"
                assert set(upstream()) == {"fs", "fs2"}
                assert children(pid, "server-everything"), "a server a running program uses is kept until it ends"
            assert running["status"] == "ok", running["error"]
            assert running["result"] == ["Echo: before", "Echo: after"]

            # tools/list carries a cache hint (ttlMs); a client that was not listening asks the server again.
            after = (await modern.list_tools(cache_mode="refresh")).tools[0].description or ""
            assert "trigger_long_running_operation" not in after and "get_file_info" not in after
            assert "fs2" in after
            await wait_until(lambda: not children(pid, "server-everything"))
            gone = await execute(modern, '__result__ = everything.echo(message="x")')
            assert gone["error"]["code"] == "NAME_NOT_FOUND", gone
            hidden = await execute(modern, "__result__ = get_file_info(path='.')")
            assert hidden["error"]["code"] == "NAME_NOT_FOUND", hidden
            roots = await execute(
                modern,
                "__result__ = [fs.list_allowed_directories()['content'], fs2.list_allowed_directories()['content']]",
            )
            assert roots["result"] == [f"Allowed directories:\n{workspace}", f"Allowed directories:\n{other}"], roots

            # A broken edit is logged and changes nothing.
            claude.write_text('{"mcpServers": {"fs2": ')
            write_toml(toml, {"command": "x", "url": "http://127.0.0.1:1/mcp"})
            deadline = time.monotonic() + 10
            while "configuration edit not applied" not in log.read_text() and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            assert "configuration edit not applied" in log.read_text()
            assert set(upstream()) == {"fs", "fs2"}
            still = await execute(modern, "__result__ = fs2.list_allowed_directories()['content']")
            assert still["result"] == f"Allowed directories:\n{other}", still
            assert (await modern.list_tools(cache_mode="refresh")).tools[0].description == after

            # So is a misspelt filter (it would leave callable what it was meant to hide): named, with the key meant.
            write_toml(toml, {**filesystem_stdio(workspace), "exclude_tools": ["get_file_info"]})
            write_json(claude, {"fs2": {**filesystem_stdio(other), "exclude_tool": ["list_allowed_directories"]}})
            misspelt = "unknown key 'exclude_tool'; did you mean 'exclude_tools'?"
            deadline = time.monotonic() + 10
            while misspelt not in log.read_text() and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            assert f"configuration edit not applied (the running servers stay as they are): invalid settings: " \
                f"mcp_config: {claude}: mcpServers.fs2: {misspelt}" in log.read_text()  # fmt: skip
            still = await execute(modern, "__result__ = fs2.list_allowed_directories()['content']")
            assert still["result"] == f"Allowed directories:\n{other}", still


async def test_a_file_written_while_it_is_read_is_read_again(tmp_path: Path) -> None:
    """The watcher in process: an edit landing while the settings are read (after the stamp that saw the first
    edit) is not lost: the next look reads the file again and applies what it says now."""
    upstream = tmp_path / "upstream.json"
    write_json(upstream, {"a": everything_stdio()})
    reads: list[list[str]] = []
    applied: list[list[str]] = []

    def load() -> Settings:
        reads.append(sorted(json.loads(upstream.read_text())["mcpServers"]))
        if reads[-1] == ["a", "b"]:  # the second edit lands just after this read
            write_json(upstream, {"a": everything_stdio(), "b": everything_stdio(), "c": everything_stdio()})
        return Settings(workspace=tmp_path, mcp_config=[upstream])

    async def apply(settings: Settings) -> None:
        applied.append(reads[-1])

    watch = ConfigWatch(load, None, Settings(workspace=tmp_path, mcp_config=[upstream]), apply)
    assert await watch.check() is False
    write_json(upstream, {"a": everything_stdio(), "b": everything_stdio()})
    assert await watch.check() is True
    assert await watch.check() is True  # the edit made during the read
    assert await watch.check() is False
    assert applied == [["a", "b"], ["a", "b", "c"]]


async def test_an_edit_made_while_the_servers_start_is_applied_at_the_first_look(tmp_path: Path) -> None:
    """The watcher in process, given the stamp from before the settings were read and the upstream servers
    started (as `open_runtime` takes it): an edit made in between is applied at its first look."""
    upstream = tmp_path / "upstream.json"
    write_json(upstream, {"a": everything_stdio()})
    settings = Settings(workspace=tmp_path, mcp_config=[upstream])
    before = config_stamp(None, settings)
    write_json(upstream, {"a": everything_stdio(), "b": everything_stdio()})  # while the servers start
    applied: list[Settings] = []

    async def apply(new: Settings) -> None:
        applied.append(new)

    watch = ConfigWatch(lambda: settings, None, settings, apply, before)
    assert await watch.check() is True
    assert applied == [settings]
    assert await watch.check() is False
