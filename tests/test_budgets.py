"""Server-side budgets (issue 12): what a program makes the server do is bounded, and no work outlives its run.

Every test runs the real server process (workers and all) and asserts functional properties: the
answer a call gets, what ``/healthz`` reports, how many threads the server has and how much CPU the
server process itself spends. No test asserts a latency.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from harness import Served, serving_http
from mcp import Client

from attp_server.run.runtime import ExecuteRequest
from attp_server.run.startup import open_runtime
from attp_server.sandbox.process.pool import LONG_RUN_NICE
from attp_server.settings import Settings
from attp_server.toolpack import Toolpack, ToolpackLoadError, ToolRegistry
from bench.load import run_load

pytestmark = [pytest.mark.anyio, pytest.mark.process]

NAME_LENGTH = 150


def static_check_bomb() -> str:
    """Issue 12's finding 1: 19,890 characters, 65 long names bound and 65 near-identical ones called."""
    stem = "x" * (NAME_LENGTH - 5)
    lines = [f"b{stem}{i:04d}=0" for i in range(65)] + [f"u{stem}{i:04d}()" for i in range(65)]
    return "\n".join(lines)


MANY_TERMS = 'q = " ".join(["t%06d" % i for i in range(60000)])\n__result__ = len(find_page(q))'
"""Issue 12's finding 2: a find_page query of 60,000 terms."""


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process itself has used, its children not included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


async def settled_cpu(pid: int, window: float = 1.0, patience: float = 20.0) -> float:
    """The server's CPU use (CPU seconds per second) over the first quiet `window`, waiting up to `patience`."""
    give_up = time.monotonic() + patience
    while True:
        before, started = cpu_seconds(pid), time.monotonic()
        await anyio.sleep(window)
        rate = (cpu_seconds(pid) - before) / (time.monotonic() - started)
        if rate < 0.1 or time.monotonic() > give_up:
            return rate


async def execute(client: Client, code: str) -> dict[str, Any]:
    result = await client.call_tool("attp_execute", {"code": code})
    assert result.structured_content is not None
    return dict(result.structured_content)


async def healthz(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=60) as http:
        response = await http.get(url + "/healthz")
    return dict(response.json())


@asynccontextmanager
async def sessions(served: Served, count: int, transport: str = "streamable-http") -> AsyncIterator[list[Client]]:
    """`count` clients of `served`. Over SSE each is one MCP session; the sessionless Streamable HTTP wire
    knows a client only by its connection, and concurrent calls of one client take several connections."""
    view = Served(transport, served.workspace, url=served.url)
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(view.client()) for _ in range(count)]


def pid_of(served: Served) -> int:
    assert served.process is not None
    return served.process.pid


# ---------------------------------------------------------------- finding 1: the static check


@pytest.fixture(scope="module")
def files_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One real `attp serve --transport http --toolpack files` for the static-check cases (each ends when every
    one of its programs has answered, so the next finds the server idle)."""
    with serving_http(tmp_path_factory.mktemp("files-ws"), "--toolpack", "files") as served:
        yield served


async def test_static_check_bomb_costs_the_server_process_little_cpu(files_server: Served) -> None:
    """Before: about 5-10 s of the server's own CPU (difflib against every bound name, in a server thread)."""
    served = files_server
    async with served.client() as client:
        await execute(client, "__result__ = 1")
        before = cpu_seconds(pid_of(served))
        data = await execute(client, static_check_bomb())
        spent = cpu_seconds(pid_of(served)) - before
    assert data["error"]["code"] == "NAME_NOT_FOUND", data["error"]
    assert data["error"]["line"] == 66
    assert spent < 1.0, f"the server process spent {spent:.2f} CPU-s on one program's static check"


SUBSTITUTIONS = {
    "function": "s = re.sub('a', lambda m: 'x' * 10_000_000, 'a' * 10)\n__result__ = len(s)",
    "method": "s = re.compile('a').sub(lambda m: 'x' * 10_000_000, 'a' * 10)\n__result__ = len(s)",
    "subn": "s, n = re.subn('a', lambda m: 'x' * 10_000_000, 'a' * 10)\n__result__ = len(s)",
    "group-reference": "s = re.sub('(a+)', '\\\\1' * 1000, 'a' * 100_000)\n__result__ = len(s)",
}
"""Issue 33's item 7: a substitution whose replacements add up to 100,000,000 characters (the limit is 10,000,000):
a function returning a long text for each match, or a template repeating what each match found."""


@pytest.mark.parametrize("way", list(SUBSTITUTIONS))
async def test_a_substitution_never_builds_more_than_the_size_limit(files_server: Served, way: str) -> None:
    async with files_server.client() as client:
        data = await execute(client, SUBSTITUTIONS[way])
        fits = await execute(client, "__result__ = re.sub('a', lambda m: m.group() * 3, 'banana')")
    assert data["status"] == "error" and data["error"]["code"] == "MEMORY_LIMIT", data
    assert "re.sub" in data["error"]["message"] and "10,000,000" in data["error"]["message"], data["error"]
    assert fits["result"] == "baaanaaanaaa"


async def test_forty_static_check_bombs_at_once_leave_a_normal_call_and_healthz_answering(files_server: Served) -> None:
    """Before: the forty checks held the GIL and every thread of the limiter; nothing else answered for minutes."""
    outcomes: list[str] = []

    async def bomb(client: Client) -> None:
        data = await execute(client, static_check_bomb())
        outcomes.append(data["error"]["code"])

    served = files_server
    assert served.url is not None
    async with sessions(served, 9) as clients:
        hostile, normal = clients[:8], clients[8]
        with anyio.fail_after(90):  # a safety net, not a latency target: before the fix this fires
            async with anyio.create_task_group() as tasks:
                for i in range(40):
                    tasks.start_soon(bomb, hostile[i % len(hostile)])
                await anyio.sleep(0.5)  # the bombs are in
                data = await execute(normal, "__result__ = 1 + 1")
                health = await healthz(served.url)
    assert data["status"] == "ok" and data["result"] == 2, data
    assert health["status"] == "ok"
    assert len(outcomes) == 40
    assert set(outcomes) <= {"NAME_NOT_FOUND", "SERVER_BUSY"}, outcomes


# ---------------------------------------------------------------- finding 2: a tool call that outlives its run


async def test_find_page_with_60000_terms_leaves_no_thread_burning(workspace: Path, tmp_path: Path) -> None:
    """Before: TIMEOUT, then the abandoned thread kept the server at ~0.7 CPU-s per second for over a minute."""
    flags = ["--toolpack", "memory", "--db-path", str(tmp_path / "memory.sqlite3"), "--timeout-s", "2"]
    with serving_http(workspace, *flags) as served:
        assert served.url is not None
        async with served.client() as client:
            data = await execute(client, MANY_TERMS)
            assert data["status"] == "error"
            rate = await settled_cpu(pid_of(served), patience=10)
            health = await healthz(served.url)
            after = await execute(client, '__result__ = len(find_page("hello"))')
    assert rate < 0.1, f"the server still burns {rate:.2f} CPU-s per second after the run ended"
    assert health["tools"]["abandoned"] == 0, health["tools"]
    assert after["status"] == "ok", after


# ---------------------------------------------------------------- tool threads, async tools, admission


BUDGET_FLAGS = ["--toolpack", "budget_pack:toolpack", "--timeout-s", "1"]


async def test_abandoned_tool_calls_are_counted_and_cannot_take_other_sessions_threads(workspace: Path) -> None:
    """A sync tool that outlives its run keeps its thread; one session keeps at most its share of them."""
    env = {"ATTP_TOOL_THREADS": "4", "ATTP_MAX_RUNS_PER_SESSION": "2"}
    with serving_http(workspace, *BUDGET_FLAGS, env=env) as served:
        assert served.url is not None
        async with sessions(served, 2, "sse") as (hostile, normal):
            codes = [(await execute(hostile, "__result__ = nap(30)"))["error"]["code"] for _ in range(5)]
            health = await healthz(served.url)
            data = await execute(normal, "__result__ = nap(0)")
            threads = thread_count(pid_of(served))
    assert codes[:2] == ["TIMEOUT", "TIMEOUT"]
    # Its share (2 threads) is held by its own abandoned calls: nap() waits for a thread until the run's
    # deadline, then fails with SERVER_BUSY (or the run's TIMEOUT comes first on a slow machine).
    assert set(codes[2:]) <= {"SERVER_BUSY", "TIMEOUT"}, codes
    assert health["tools"]["abandoned"] == 2 and health["tools"]["started"] <= 4, health["tools"]
    assert data["status"] == "ok" and data["result"] == 0, data
    assert threads < 40, f"{threads} threads in the server"


@pytest.fixture(scope="module")
def one_run_per_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One real server of the budget pack where a session runs one program at a time (more wait 0.2 s, then
    SERVER_BUSY); max_workers is the default (16), so sessions of their own never wait."""
    env = {"ATTP_MAX_RUNS_PER_SESSION": "1", "ATTP_QUEUE_TIMEOUT_S": "0.2"}
    with serving_http(tmp_path_factory.mktemp("budget-ws"), *BUDGET_FLAGS, env=env) as served:
        yield served


async def test_server_busy_names_the_session_share_and_when_to_retry(one_run_per_session: Served) -> None:
    outcomes: list[dict[str, Any]] = []

    async def runaway(client: Client) -> None:
        outcomes.append(await execute(client, "while True:\n    pass"))

    async with sessions(one_run_per_session, 2, "sse") as (greedy, other), anyio.create_task_group() as tasks:
        for _ in range(3):
            tasks.start_soon(runaway, greedy)
        await anyio.sleep(0.5)
        data = await execute(other, "__result__ = 6 * 7")
    codes = sorted(o["error"]["code"] for o in outcomes)
    assert codes == ["SERVER_BUSY", "SERVER_BUSY", "TIMEOUT"], codes
    busy = next(o["error"] for o in outcomes if o["error"]["code"] == "SERVER_BUSY")
    assert "max_runs_per_session" in busy["message"]
    assert "retry in" in busy["solution"].lower()
    assert data["result"] == 42  # another session is not held back by the greedy one


async def test_server_busy_when_every_slot_is_taken(workspace: Path) -> None:
    env = {"ATTP_MAX_WORKERS": "2", "ATTP_QUEUE_TIMEOUT_S": "0.2"}
    with serving_http(workspace, *BUDGET_FLAGS, env=env) as served:
        async with sessions(served, 3) as (first, second, third):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(execute, first, "while True:\n    pass")
                tasks.start_soon(execute, second, "while True:\n    pass")
                await anyio.sleep(0.3)
                data = await execute(third, "__result__ = 1")
            after = await execute(third, "__result__ = 1")
    assert data["error"]["code"] == "SERVER_BUSY", data
    assert "max_workers" in data["error"]["message"]
    assert after["result"] == 1


async def test_async_tool_is_cancelled_with_its_run(one_run_per_session: Served, tmp_path: Path) -> None:
    """One run on a session of its own (the module's budget-pack server; its share of one run is not reached)."""
    marker = tmp_path / "wait"
    async with one_run_per_session.client() as client:
        data = await execute(client, f"__result__ = wait_and_mark(30, {str(marker)!r})")
    assert data["error"]["code"] == "TIMEOUT"
    assert (tmp_path / "wait.cancelled").exists()


# ---------------------------------------------------------------- the load test, short form


EXPECTED = {
    "static_check_bomb": {"NAME_NOT_FOUND", "SERVER_BUSY"},
    "find_page_60000_terms": {"INVALID_ARGUMENT", "SERVER_BUSY"},
    "bytearray_width": {"MEMORY_LIMIT", "SERVER_BUSY"},
    "bytearray_join": {"MEMORY_LIMIT", "SERVER_BUSY"},
    "runaway_loop": {"TIMEOUT", "SERVER_BUSY"},
    "runaway_regex": {"TIMEOUT", "SERVER_BUSY"},
}


LOAD_S = 2.0
"""The hostile load's length in the short form: the normal client's window is its 0.5 s minimum from 1 s after the
hostile side starts; the hostile calls count only if they end within the load, and on 2 busy cores ten refused
ReDoS calls need the time."""


async def test_hostile_load_leaves_a_normal_session_answered_and_the_server_settles(tmp_path: Path) -> None:
    """`python -m bench --only load` in short: its functional properties, never its timings."""
    result = await run_load(tmp_path, hostile=3, duration=LOAD_S, cpu_after=False)
    assert result.latencies, "the normal client made no call"
    assert result.errors == []
    assert result.health_latencies
    assert result.max_threads < 60 and result.threads_after < 30, (result.max_threads, result.threads_after)
    assert result.settle_s is not None, "the server did not go idle after the hostile load"
    assert result.abandoned_after == 0
    assert result.hostile, f"the hostile clients made no call; their stderr: {result.attacker_stderr}"
    for outcome in result.hostile:
        shape, code = outcome.split(":")
        assert code in EXPECTED[shape], outcome


async def test_a_redos_flood_leaves_a_normal_session_answered_and_the_server_settles(tmp_path: Path) -> None:
    """Issue 22: ten programs hitting an upstream tool whose schema pattern backtracks (``^(a+)+$``): each is
    refused at once, a normal session is answered, the server goes idle. The timings are the bench's."""
    result = await run_load(tmp_path, hostile=10, duration=LOAD_S, programs="redos", cpu_after=False)
    assert result.latencies, "the normal client made no call"
    assert result.errors == []
    assert result.settle_s is not None, "the server did not go idle after the ReDoS flood"
    assert result.hostile, f"the hostile clients made no call; their stderr: {result.attacker_stderr}"
    assert set(result.hostile) <= {"redos:INVALID_ARGUMENT", "redos:SERVER_BUSY"}, result.hostile
    assert result.hostile.get("redos:INVALID_ARGUMENT", 0) >= 10


# ---------------------------------------------------------------- inline tools (issue 16: no thread hop for cheap tools)


def where() -> str:
    """Name the thread the tool runs on."""
    return threading.current_thread().name


async def async_where() -> str:
    """Name the thread the tool runs on."""
    return threading.current_thread().name


def spin(ms: float) -> str:
    """Burn `ms` milliseconds of CPU, then name the thread the tool ran on.

    Args:
        ms: Milliseconds of CPU to burn.
    """
    started = time.thread_time()
    while time.thread_time() - started < ms / 1000:
        pass
    return threading.current_thread().name


INLINE_PACK = Toolpack(name="probe", description="Where tools run.", tools=[where, spin], inline=["where", "spin"])


async def test_inline_tools_run_on_the_event_loop_until_they_prove_slow(workspace: Path) -> None:
    registry = ToolRegistry([INLINE_PACK], workspace, {})
    async with open_runtime(Settings(workspace=workspace, toolpacks=[], workers=1), registry=registry) as runtime:
        loop_thread = threading.current_thread().name
        cheap = await runtime.execute(ExecuteRequest(code="__result__ = [where(), spin(0)]"))
        assert cheap.result == [loop_thread, loop_thread]
        slow = await runtime.execute(ExecuteRequest(code="__result__ = [spin(5) for i in range(4)]"))
        assert slow.result is not None
        assert slow.result[:3] == [loop_thread] * 3  # three strikes over INLINE_BUDGET_S ...
        assert slow.result[3].startswith("attp-tool-")  # ... and it runs on a tool thread
        assert runtime.dispatch.slow_inline == {"spin"}
        again = await runtime.execute(ExecuteRequest(code="__result__ = where()"))
        assert again.result == loop_thread


@pytest.mark.parametrize(
    ("pack", "says"),
    [
        pytest.param(
            Toolpack(name="p", description="d", tools=[where], inline=["wher"]), "inline names unknown", id="unknown"
        ),
        pytest.param(
            Toolpack(name="p", description="d", tools=[async_where], inline=["async_where"]), "is async", id="async"
        ),
    ],
)
def test_a_wrong_inline_declaration_is_a_load_error(pack: Toolpack, says: str, workspace: Path) -> None:
    with pytest.raises(ToolpackLoadError, match=says):
        ToolRegistry([pack], workspace, {})


# ---------------------------------------------------------------- CPU priority of long runs


def nice_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


async def test_a_long_run_drops_to_the_lowest_cpu_priority_and_its_worker_retires(workspace: Path) -> None:
    """On a busy CPU short runs go first: a run past LONG_RUN_S is niced to 19, and its worker is not reused."""
    settings = Settings(workspace=workspace, toolpacks=[], workers=1, timeout_s=3.0)
    async with open_runtime(settings, registry=ToolRegistry([], workspace, {})) as runtime:
        niced: list[int] = []

        async def watch() -> None:
            while not runtime.pool.running_pids():
                await anyio.sleep(0.01)
            pid = runtime.pool.running_pids()[0]
            assert nice_of(pid) == nice_of(os.getpid())
            while nice_of(pid) != LONG_RUN_NICE:
                await anyio.sleep(0.05)
            niced.append(pid)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(watch)
            result = await runtime.execute(ExecuteRequest(code="x = 0\nfor i in range(10**9):\n    x += 1"))
        assert result.error is not None and result.error.code == "TIMEOUT"
        assert niced and niced[0] not in runtime.pool.worker_pids()
        quick = await runtime.execute(ExecuteRequest(code="__result__ = 1"))
        assert quick.result == 1
