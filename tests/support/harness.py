"""Test helpers shared by the suites: settings, an in-process runtime, and a real server process."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from attp_server.faces.app import create_server
from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime
from attp_server.settings import Settings
from attp_server.toolpack import ToolCall, reset_current_call, set_current_call

SUPPORT = Path(__file__).parent

DEMO_PACKS = ["files", "demo_pack:toolpack"]


@contextmanager
def past_deadline() -> Iterator[None]:
    """Run the block as a tool call whose run's deadline has passed (`current_call().remaining()` is 0)."""
    token = set_current_call(ToolCall(deadline=time.monotonic() - 1))
    try:
        yield
    finally:
        reset_current_call(token)


def make_settings(workspace: Path, **overrides: Any) -> Settings:
    """Test settings; the data folder (memory database, the store, the secret) beside the workspace, never the
    checkout's."""
    values: dict[str, Any] = {
        "workspace": workspace,
        "toolpacks": DEMO_PACKS,
        "workers": 1,
        "timeout_s": 5.0,
        "db_path": workspace.parent / ".attp" / "memory.sqlite3",
    }
    values.update(overrides)
    return Settings(**values)


@asynccontextmanager
async def running(workspace: Path, **overrides: Any) -> AsyncIterator[Runtime]:
    async with open_runtime(make_settings(workspace, **overrides)) as runtime:
        yield runtime


async def run_code(runtime: Runtime, code: str) -> dict[str, Any]:
    result = await runtime.execute(ExecuteRequest(code=code))
    return result.model_dump(mode="json")


# ---------------------------------------------------------------- a real server process


def descendants(pid: int) -> dict[int, str]:
    """Every live descendant of `pid` -> its state letter (``Z`` for a zombie), read from /proc: a server's or a
    pool's fork server and the workers it forked."""
    parents: dict[int, list[tuple[int, str]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents.setdefault(int(fields[1]), []).append((int(entry), fields[0]))
    found: dict[int, str] = {}
    waiting = [pid]
    while waiting:
        for child, state in parents.get(waiting.pop(), []):
            found[child] = state
            waiting.append(child)
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTP_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SUPPORT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["ATTP_MAX_RESULT_BYTES"] = "100000"
    return env


SERVE_FLAGS = ["--toolpack", "files", "--toolpack", "demo_pack:toolpack", "--timeout-s", "2", "--max-tool-calls", "20"]


def serve_settings(workspace: Path) -> Settings:
    """The settings `SERVE_FLAGS` and `server_env` give a served process, for the same server in process."""
    return Settings(
        workspace=workspace,
        toolpacks=["files", "demo_pack:toolpack"],
        timeout_s=2,
        max_tool_calls=20,
        max_result_bytes=100_000,
        db_path=workspace.parent / ".attp" / "memory.sqlite3",  # a served process runs in workspace.parent
    )


@asynccontextmanager
async def in_process(settings: Settings, **options: Any) -> AsyncIterator[Client]:
    """A client of the MCP face in this process (`mcp.Client(server)`, memory streams): a server of its own per
    client, as over stdio, without starting a process."""
    async with open_runtime(settings) as runtime, Client(create_server(runtime), **options) as client:
        yield client


@dataclass
class Served:
    """A running `attp serve` (or, for transport "memory", the same server in this process) and how to reach it."""

    transport: str
    workspace: Path
    url: str | None = None
    stdio: StdioServerParameters | None = None
    process: subprocess.Popen[bytes] | None = None
    stdout_path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    settings: Settings | None = None

    def over_sse(self) -> Served:
        """The same HTTP server, reached over its SSE transport."""
        return Served("sse", self.workspace, url=self.url, process=self.process, stdout_path=self.stdout_path)

    def client(self, headers: dict[str, str] | None = None, **kwargs: Any) -> AbstractAsyncContextManager[Client]:
        if self.transport == "memory":
            assert self.settings is not None and headers is None
            return in_process(self.settings, **kwargs)
        if self.transport == "stdio":
            assert self.stdio is not None
            return Client(self.stdio, **kwargs)
        assert self.url is not None
        if self.transport == "sse":
            return Client(
                sse_client(self.url + "/sse", headers=headers, httpx_client_factory=mcp_http_client), **kwargs
            )
        return Client(_streamable(self.url + "/mcp", headers), **kwargs)


def served_over(transport: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Served:
    """The `served` fixture's value for `transport`: memory, stdio, sse or streamable-http."""
    if transport == "memory":
        workspace = tmp_path_factory.mktemp("memory-ws")
        return Served("memory", workspace, settings=serve_settings(workspace))
    if transport == "stdio":
        workspace = tmp_path_factory.mktemp("stdio-ws")
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "attp_server", "serve", "--workspace", str(workspace), *SERVE_FLAGS],
            env=server_env(),
            cwd=str(workspace.parent),
        )
        return Served("stdio", workspace, stdio=params)
    http: Served = request.getfixturevalue("http_server")
    return Served(transport, http.workspace, url=http.url, process=http.process, stdout_path=http.stdout_path)


def stdio_client(workspace: Path, *flags: str, env: dict[str, str] | None = None, **options: Any) -> Client:
    """A client that starts its own `attp serve` over stdio (one session, one process)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "attp_server", "serve", "--workspace", str(workspace), *flags],
        env={**server_env(), **(env or {})},
    )
    return Client(params, **options)


async def execute(client: Client, code: str | None = None, **arguments: Any) -> dict[str, Any]:
    """Call attp_execute with `code` (or other arguments) and return its structured content."""
    result = await client.call_tool("attp_execute", {**({"code": code} if code is not None else {}), **arguments})
    assert result.structured_content is not None
    return dict(result.structured_content)


_TLS: list[ssl.SSLContext] = []


def mcp_http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
    **options: Any,
) -> httpx2.AsyncClient:
    """The HTTP client the SDK's transports make (``create_mcp_http_client``: its timeouts), with one TLS context
    for the whole process: the SDK's loads the CA bundle for every client, ~23 ms of CPU, and the suite connects
    hundreds of clients (to plain-HTTP servers on loopback). `options` go to ``httpx2.AsyncClient``."""
    if not _TLS:
        _TLS.append(ssl.create_default_context())
    timeout = timeout or httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, verify=_TLS[0], **options)


@asynccontextmanager
async def _streamable(url: str, headers: dict[str, str] | None) -> AsyncIterator[Any]:
    """Streamable HTTP (with extra `headers`); the transport never closes a client it was given, so this does."""
    http = mcp_http_client(headers=headers)
    async with http, streamable_http_client(url, http_client=http) as streams:
        yield streams


@contextmanager
def serving_http(
    workspace: Path,
    *flags: str,
    env: dict[str, str] | None = None,
    stderr: Path | None = None,
    port: int | None = None,
) -> Iterator[Served]:
    """A real `attp serve --transport http` on a free loopback port (or `port`), in its own process group; killed
    after."""
    port = port or free_port()
    log = stderr.open("wb") if stderr is not None else subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "attp_server", "serve", "--transport", "http", "--port", str(port),
         "--workspace", str(workspace), *flags],
        stdout=subprocess.DEVNULL, stderr=log, env={**server_env(), **(env or {})}, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        health = wait_for_health(url, process)
        yield Served("streamable-http", workspace, url=url, process=process, extra=health)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if stderr is not None:
            log.close()  # type: ignore[union-attr]


def stop_process(process: subprocess.Popen[Any]) -> None:
    """Terminate a server the tests started, and kill it if it does not exit within 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_for_health(url: str, process: subprocess.Popen[bytes], timeout: float = 30.0) -> dict[str, Any]:
    """Poll ``/healthz`` until the server answers 200; its JSON. One client for every poll: ``httpx.get`` builds
    a client (and loads the CA bundle) each time, ~20 ms of CPU per poll while the server starts."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=1.0) as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"server exited with {process.returncode}")
            try:
                response = http.get(url + "/healthz")
                if response.status_code == 200:
                    return dict(response.json())
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    raise TimeoutError(f"server at {url} did not become healthy")


def run_quick_bench(module: str, output: Path) -> tuple[str, dict[str, Any]]:
    """Run `python -m <module> --quick --output <output>` from the checkout; its stdout and JSON."""
    # A process group of its own: on a timeout, the servers the bench started go with it (no orphans).
    bench = subprocess.Popen(
        [sys.executable, "-m", module, "--quick", "--output", str(output)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=SUPPORT.parents[1], start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = bench.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(bench.pid, signal.SIGKILL)
        stdout, stderr = bench.communicate()
        raise AssertionError(f"python -m {module} --quick ran past 300 s; its stderr:\n{stderr[-4000:]}") from None
    finally:
        with suppress(ProcessLookupError):
            os.killpg(bench.pid, signal.SIGKILL)  # anything the bench left behind
    assert bench.returncode == 0, stderr
    return stdout, dict(json.loads(output.read_text()))
