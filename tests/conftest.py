"""Fixtures: an in-process runtime over a real worker pool, and a real server on every transport."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "support"))

from harness import (
    SERVE_FLAGS,
    Served,
    free_port,
    running,
    served_over,
    server_env,
    stop_process,
    wait_for_health,
)
from postgres import Postgres, running_postgres

from attp_server.run.runtime import Runtime

LONGEST_FIRST = (
    "test_bench.py",
    "security/test_hostile_gateway.py",
    "test_budgets.py",
    "test_gateway.py",
    "security/test_redteam.py",
    "test_replicas.py",
    "test_clients.py",
    "test_gateway_newcomer.py",
    "test_transports.py",
    "test_cpython_served.py",
    "toolpacks/test_memory_acceptance.py",
    "test_approvals.py",
    "security/test_containment.py",
    "test_client_config.py",
    "test_handles_replicas.py",
)
"""The files that take longest (tens of seconds each, most of it real processes), run first. With ``-n N --dist
loadfile --no-loadscope-reorder`` (what `.ci/run` uses) xdist hands out files in this order, so no worker is left
with a long file at the end while the other cores idle; its own order (most tests first) started the four-test,
75-second bench file last."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent

    def rank(item: pytest.Item) -> int:
        name = item.path.relative_to(tests).as_posix() if item.path.is_relative_to(tests) else ""
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file's tests keep their order, and the other files theirs


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
async def runtime(workspace: Path) -> AsyncIterator[Runtime]:
    async with running(workspace) as rt:
        yield rt


@pytest.fixture(scope="module")
async def shared_runtime(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    """One runtime (and worker pool) for a module's tests that only run a program and read its answer: they need
    no fresh workspace, counters or worker, and a worker per test would cost most of such a file's time. The
    module must set `anyio_backend` at module scope too."""
    workspace = tmp_path_factory.mktemp("shared") / "ws"
    workspace.mkdir()
    async with running(workspace) as rt:
        yield rt


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A real PostgreSQL server (Debian's binaries, a fresh cluster in a temporary folder) for the whole run."""
    with running_postgres() as server:
        yield server


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    workspace = tmp_path_factory.mktemp("http-ws")
    port = free_port()
    stdout_path = workspace.parent / "server-stdout.txt"
    with stdout_path.open("wb") as stdout:
        process = subprocess.Popen(
            [sys.executable, "-m", "attp_server", "serve", "--transport", "http", "--port", str(port),
             "--workspace", str(workspace), *SERVE_FLAGS],
            stdout=stdout, stderr=subprocess.DEVNULL, env=server_env(), cwd=workspace.parent,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            health = wait_for_health(url, process)
            yield Served("streamable-http", workspace, url=url, process=process, stdout_path=stdout_path, extra=health)
        finally:
            stop_process(process)


@pytest.fixture(params=["memory", "sse", "streamable-http"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Served:
    """The server over each transport: in this process (memory streams, a server per client as over stdio), and
    a real process over SSE and Streamable HTTP (one per module). Where the transport itself is the subject,
    a module asks for stdio too (tests/test_transports.py overrides this fixture with `served_over`)."""
    return served_over(request.param, request, tmp_path_factory)
