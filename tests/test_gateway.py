"""The MCP gateway against real third-party servers: server-everything (stdio and Streamable HTTP),
server-filesystem, mcp-server-time, plus the faults a user meets (a server that cannot start, one that
is killed mid-session, one whose tool list changes) and the secrets that must not leak.

Each test starts its own runtime, so its upstream servers are started and stopped with it, except the tests that
only read a catalog and make calls that change nothing: they share a module's runtime of the same configuration.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from harness import make_settings
from upstreams import (
    EVERYTHING,
    GROWING,
    everything_http,
    everything_stdio,
    filesystem_stdio,
    processes_running,
    tapped,
    time_stdio,
)

from attp_server.faces.cli import main
from attp_server.model.atdf import atdf_descriptor
from attp_server.model.catalog import tool_text
from attp_server.run.runtime import CallContext, ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime

pytestmark = [pytest.mark.anyio, pytest.mark.process]

ATDF_SCHEMA = json.loads((Path(__file__).parent / "data" / "atdf" / "enhanced_atdf_schema.json").read_text())
SECRET = "gw-secret-7f3a9c21e5"


@asynccontextmanager
async def gateway(workspace: Path, servers: dict[str, Any], **overrides: Any) -> AsyncIterator[Runtime]:
    overrides.setdefault("toolpacks", [])  # the upstream servers alone, so the whole catalog fits the description
    settings = make_settings(workspace, mcp_servers=servers, **overrides)
    async with open_runtime(settings) as runtime:
        yield runtime


async def run(runtime: Runtime, code: str, context: CallContext | None = None) -> dict[str, Any]:
    result = await runtime.execute(ExecuteRequest(code=code), context)
    return result.model_dump(mode="json")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def everything_url() -> Iterator[str]:
    """One server-everything over Streamable HTTP for the module: each runtime connects with a session of its own."""
    with everything_http() as url:
        yield url


@pytest.fixture(scope="module")
async def with_time(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    """server-everything over stdio and mcp-server-time behind one runtime, for the tests that read its catalog
    and make calls that change nothing."""
    workspace = tmp_path_factory.mktemp("with-time") / "ws"
    workspace.mkdir()
    async with gateway(workspace, {"everything": everything_stdio(), "time": time_stdio()}) as runtime:
        yield runtime


@pytest.fixture(scope="module")
async def over_http(tmp_path_factory: pytest.TempPathFactory, everything_url: str) -> AsyncIterator[Runtime]:
    """A runtime reaching the module's server-everything over Streamable HTTP (mcp-server-time, a stdio server,
    is `with_time`'s)."""
    workspace = tmp_path_factory.mktemp("over-http") / "ws"
    workspace.mkdir()
    async with gateway(workspace, {"everything": {"url": everything_url}}) as runtime:
        yield runtime


@pytest.fixture(params=["stdio", "streamable-http"])
def everything(request: pytest.FixtureRequest) -> Runtime:
    """A module's runtime reaching server-everything over each transport server-everything has, for the tests
    whose calls change nothing: the upstream servers and the worker pool are started once."""
    name = "with_time" if request.param == "stdio" else "over_http"
    runtime: Runtime = request.getfixturevalue(name)
    return runtime


@pytest.fixture(scope="module")
async def wired(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Runtime, Path]]:
    """server-everything over stdio through the wire recorder, behind one runtime, and the recording: a test reads
    the lines recorded since it started (`since`)."""
    directory = tmp_path_factory.mktemp("wired")
    workspace = directory / "ws"
    workspace.mkdir()
    wire = directory / "wire.jsonl"
    async with gateway(workspace, {"everything": everything_stdio(tap=wire)}) as runtime:
        yield runtime, wire


def since(wire: Path, start: int) -> list[dict[str, Any]]:
    """The lines recorded on `wire` after the first `start`."""
    return tapped(wire)[start:]


# ---------------------------------------------------------------- discovery and description


async def test_upstream_tools_appear_wherever_builtin_tools_do(with_time: Runtime) -> None:
    runtime = with_time
    registry, catalog = runtime.registry, runtime.catalog
    assert "\n  get_sum(a: float, b: float) — Returns the sum of two numbers\n" in catalog.description
    assert (
        "\n  get_current_time(timezone) -> {timezone: str, datetime: str, day_of_week: str, is_dst: bool} — Get "
        "current time in a specific timezone\n"
    ) in catalog.description
    assert "def get_sum(a: float, b: float):" in catalog.attp_text()
    convert = registry.resolve("convert_time")  # its output schema names a `$defs` entry twice
    assert convert is not None and convert.pack == "time"
    assert convert.signature_text() == (
        "convert_time(source_timezone: str, time: str, target_timezone: str) -> {source: {timezone: str, datetime: "
        "str, day_of_week: str, is_dst: bool}, target: {timezone: str, datetime: str, day_of_week: str, is_dst: bool}, "
        "time_difference: str}"
    )
    found = await run(
        runtime,
        '__result__ = [help("get_sum"), tools("timezone"), help("everything"), '
        'time.get_current_time(timezone="Europe/Oslo")["timezone"]]',
    )
    assert found["status"] == "ok", found["error"]
    one, matches, pack, now = found["result"]
    assert now == "Europe/Oslo"  # structured content comes back as data
    assert "Args:\n        a: First number\n        b: Second number" in one
    assert {m["name"] for m in matches} == {"get_current_time", "convert_time"}
    assert {m["pack"] for m in matches} == {"time"}
    assert pack.startswith("everything: Tools of the MCP server 'everything'")
    structured = registry.resolve("get_structured_content")
    assert structured is not None
    doc = tool_text(structured)
    assert "location: Choose city One of: 'New York', 'Chicago', 'Los Angeles'." in doc
    assert "dict with temperature (float): Temperature in celsius; conditions (str)" in doc
    for tool in registry.tools.values():
        jsonschema.validate(atdf_descriptor(tool), ATDF_SCHEMA)
    echo = registry.resolve("everything.echo")
    assert echo is not None and echo.marks.read_only and not echo.marks.destructive
    toggle = registry.resolve("toggle_simulated_logging")
    assert toggle is not None and not toggle.marks.read_only


def test_attp_tools_lists_upstream_tools(
    workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signature of convert_time (mcp-server-time's nested output schema) is checked on `with_time`."""
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {"weather": everything_stdio()}}))
    monkeypatch.chdir(tmp_path)
    code = main(["tools", "--format", "json", "--workspace", str(workspace), "--mcp-config", str(config)])
    assert code == 0
    listed = {t["name"]: t for t in json.loads(capsys.readouterr().out)}
    assert listed["get_structured_content"]["pack"] == "weather"
    assert listed["get_structured_content"]["signature"] == (
        "get_structured_content(location: Literal['New York', 'Chicago', 'Los Angeles']) -> {temperature: float, "
        "conditions: str, humidity: float}"
    )


# ---------------------------------------------------------------- calls and results


async def test_results_come_back_as_data(everything: Runtime) -> None:
    done = await run(
        everything,
        """weather = get_structured_content(location="Chicago")
image = get_tiny_image()
env = get_env()
__result__ = {"weather": weather, "image": image, "env_is_dict": isinstance(env, dict),
              "by_pack": everything.echo(message="q"), "echo": echo(message="hi"),
              "links": get_resource_links(count=1)}""",
    )
    assert done["status"] == "ok", done["error"]
    result = done["result"]
    assert set(result["weather"]) == {"temperature", "conditions", "humidity"}
    [before, picture, after] = result["image"]
    assert picture == {"type": "image", "mimeType": "image/png", "size": picture["size"]} and picture["size"] > 1000
    assert "MCP logo" in after and isinstance(before, str)
    assert len(json.dumps(result["image"])) < 300  # described, never the base64 itself
    assert result["env_is_dict"] is True  # a text block holding JSON comes back parsed
    assert result["by_pack"] == "Echo: q"
    assert result["echo"] == "Echo: hi"
    assert result["links"][1]["type"] == "resource_link"


async def test_images_are_saved_into_the_workspace_when_asked(workspace: Path) -> None:
    server = {**everything_stdio(), "save_media": True}
    async with gateway(workspace, {"everything": server}) as runtime:
        done = await run(runtime, "__result__ = get_tiny_image()[1]")
    assert done["status"] == "ok", done["error"]
    path = done["result"]["path"]
    assert path.startswith("mcp-media/everything/") and path.endswith(".png")
    assert (workspace / path).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("call", "parameter", "expected", "received", "suggested"),
    [
        pytest.param(
            'get_structured_content(location="Chicgo")',
            "location",
            "one of 'New York', 'Chicago', 'Los Angeles'",
            "'Chicgo'",
            "Chicago",
            id="enum-with-suggestion",
        ),
        pytest.param('get_sum(a="one", b=2)', "a", "float", "'one'", None, id="wrong-type"),
        pytest.param("get_resource_links(count=50)", "count", "float <= 10", "50", None, id="over-maximum"),
        pytest.param("get_sum(a=1)", "b", None, None, None, id="missing-required"),
        pytest.param("get_sum(a=1, b=2, c=3)", "c", None, None, None, id="unknown-argument"),
    ],
)
async def test_arguments_are_checked_before_anything_is_sent(
    wired: tuple[Runtime, Path],
    call: str,
    parameter: str,
    expected: str | None,
    received: str | None,
    suggested: str | None,
) -> None:
    runtime, wire = wired
    start = len(tapped(wire))
    done = await run(runtime, f"__result__ = {call}")
    # A round trip through the recorder after the call: a request the call had sent is recorded before this one.
    pinged = await run(runtime, 'echo(message="after")')
    assert pinged["result"] == "Echo: after", pinged
    error = done["error"]
    assert error["code"] == "INVALID_ARGUMENT", error
    assert error["parameter_name"] == parameter
    if expected is not None:
        assert error["expected"] == expected
    if received is not None:
        assert error["received"] == received
    assert error["suggested_value"] == suggested
    sent = [m["msg"] for m in since(wire, start) if m["dir"] == "in" and isinstance(m["msg"], dict)]
    calls = [m["params"]["name"] for m in sent if m.get("method") == "tools/call"]
    assert [name for name in calls if name != "echo"] == [], calls  # the refused call never went out


async def test_a_long_call_is_cancelled_upstream_at_the_deadline(workspace: Path, tmp_path: Path) -> None:
    wire = tmp_path / "wire.jsonl"
    async with gateway(workspace, {"everything": everything_stdio(tap=wire)}, timeout_s=2.0) as runtime:
        done = await run(runtime, "__result__ = trigger_long_running_operation(duration=30, steps=30)")
        assert done["error"]["code"] == "TIMEOUT", done["error"]
        assert "request was cancelled" in done["error"]["message"]
        again = await run(runtime, 'echo(message="still there")')
        assert again["result"] == "Echo: still there"
    messages = [m["msg"] for m in tapped(wire) if m["dir"] == "in" and isinstance(m["msg"], dict)]
    [request] = [m for m in messages if m.get("method") == "tools/call" and "long" in m["params"]["name"]]
    cancels = [m for m in messages if m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancels] == [request["id"]]


async def test_a_long_call_over_http_ends_at_the_deadline(workspace: Path, everything_url: str) -> None:
    async with gateway(workspace, {"everything": {"url": everything_url}}, timeout_s=2.0) as runtime:
        done = await run(runtime, "__result__ = trigger_long_running_operation(duration=30, steps=30)")
        assert done["error"]["code"] == "TIMEOUT", done["error"]
        again = await run(runtime, 'echo(message="next")')
        assert again["result"] == "Echo: next"


async def test_upstream_progress_becomes_our_progress(everything: Runtime) -> None:
    seen: list[tuple[float, str]] = []

    async def progress(value: float, message: str) -> None:
        seen.append((value, message))

    done = await run(
        everything, "__result__ = trigger_long_running_operation(duration=1, steps=4)", CallContext(progress=progress)
    )
    assert done["status"] == "ok", done["error"]
    values = [value for value, _ in seen]
    assert values == sorted(set(values)) and values[-1] == 1  # increasing, ending at the one finished call
    upstream = [message for _, message in seen if message.startswith("trigger_long_running_operation:")]
    assert upstream[:3] == [f"trigger_long_running_operation: {i}/4" for i in (1, 2, 3)]


# ---------------------------------------------------------------- parallel()


async def test_parallel_has_every_call_in_flight_at_once(wired: tuple[Runtime, Path]) -> None:
    runtime, wire = wired
    start = len(tapped(wire))
    done = await run(
        runtime,
        "__result__ = parallel(trigger_long_running_operation, [{'duration': 0.5, 'steps': 1} for i in range(5)])",
    )
    assert done["status"] == "ok", done["error"]
    assert len(done["result"]) == 5 and all("completed" in r for r in done["result"])
    assert [c["tool"] for c in done["calls"]] == ["trigger_long_running_operation"] * 5
    log = since(wire, start)
    requests = [i for i, m in enumerate(log) if m["dir"] == "in" and m["msg"].get("method") == "tools/call"]
    answers = [i for i, m in enumerate(log) if m["dir"] == "out" and "result" in m["msg"]]
    first_answer = min(i for i in answers if i > requests[0])
    assert len(requests) == 5 and max(requests) < first_answer  # all five sent before the first came back


async def test_parallel_keeps_order_counts_calls_and_reports_errors(workspace: Path) -> None:
    servers = {"everything": everything_stdio()}
    async with gateway(workspace, servers, max_tool_calls=6, toolpacks=["demo_pack:toolpack"]) as runtime:
        ordered = await run(runtime, "__result__ = parallel(add, [{'a': i, 'b': 10} for i in range(4)])")
        assert ordered["result"] == [10, 11, 12, 13]  # a built-in tool, in the order of the items
        raised = await run(
            runtime, "__result__ = parallel(get_sum, [{'a': 1, 'b': 2}, {'a': 'x', 'b': 2}, {'a': 3, 'b': 4}])"
        )
        assert raised["error"]["code"] == "INVALID_ARGUMENT" and raised["error"]["parameter_name"] == "a"
        assert len(raised["calls"]) == 3  # the others still ran: the first error is raised after all finished
        in_place = await run(
            runtime,
            """out = parallel(everything.get_sum, [{'a': 1, 'b': 2}, {'a': 'x', 'b': 2}], return_errors=True)
__result__ = [r.code if isinstance(r, ToolError) else r for r in out]""",
        )
        assert in_place["result"] == ["The sum of 1 and 2 is 3.", "INVALID_ARGUMENT"]
        too_many = await run(runtime, "__result__ = parallel(add, [{'a': i, 'b': 1} for i in range(7)])")
        assert too_many["error"]["code"] == "TOOL_CALL_LIMIT"
        misuse = await run(runtime, "__result__ = parallel(add, [1, 2])")
        assert misuse["error"]["code"] == "INVALID_ARGUMENT" and "items[0]" in misuse["error"]["message"]


# ---------------------------------------------------------------- names


async def test_filesystem_server_beside_the_files_pack(workspace: Path) -> None:
    async with gateway(workspace, {"filesystem": filesystem_stdio(workspace)}, toolpacks=["files"]) as runtime:
        description = runtime.catalog.description
        assert "\n  read_file(path, max_lines=1000, offset=0) -> str — " in description
        assert (
            "\n  filesystem.read_file(path, tail: float = None, head: float = None) -> {content: str} — " in description
        )
        done = await run(
            runtime,
            f"""write_file("notes/a.txt", "alpha\\nbeta\\n")
root = {str(workspace)!r}
via_upstream = read_text_file(path=root + "/notes/a.txt")
via_qualified = filesystem.read_file(path=root + "/notes/a.txt", head=1)
found = search_files(path=root, pattern="**/*.txt")
__result__ = [via_upstream, via_qualified, found, read_file("notes/a.txt")]""",
        )
    assert done["status"] == "ok", done["error"]
    upstream, qualified, found, builtin = done["result"]
    assert upstream == {"content": "alpha\nbeta\n"}
    assert qualified == {"content": "alpha"}
    assert str(workspace / "notes" / "a.txt") in found["content"]
    assert builtin == "alpha\nbeta\n"
    assert [c["tool"] for c in done["calls"]] == [
        "write_file",
        "read_text_file",
        "filesystem.read_file",
        "search_files",
        "read_file",
    ]


async def test_two_servers_with_the_same_tool_are_reached_by_pack(workspace: Path) -> None:
    servers = {"one": everything_stdio(), "two-b": everything_stdio()}
    async with gateway(workspace, servers) as runtime:
        refs = set(runtime.registry.tools)
        assert {"one.echo", "two_b.echo", "one.get_sum", "two_b.get_sum"} <= refs
        assert "def one.echo(message: str):" in runtime.catalog.attp_text()
        done = await run(runtime, '__result__ = [one.echo(message="1"), two_b.echo(message="2")]')
        assert done["result"] == ["Echo: 1", "Echo: 2"]
        bare = await run(runtime, '__result__ = echo(message="?")')
        assert bare["error"]["code"] == "NAME_NOT_FOUND"


# ---------------------------------------------------------------- faults


async def test_servers_that_cannot_start_do_not_stop_the_others(workspace: Path, tmp_path: Path) -> None:
    servers = {
        "missing": {"command": "attp-no-such-command"},
        "crashing": {"command": "python3", "args": ["-c", "import sys; sys.exit(3)"]},
        "nowhere": {"url": "http://127.0.0.1:9/mcp"},
        "unset": {"command": "python3", "env": {"TOKEN": "${ATTP_TEST_UNSET_VARIABLE}"}},
        "everything": everything_stdio(),
    }
    async with gateway(workspace, servers, mcp_startup_timeout_s=10) as runtime:
        down = runtime.registry.unavailable()
        assert set(down) == {"missing", "crashing", "nowhere", "unset"}
        assert "attp-no-such-command" in down["missing"] and "Fix: install it" in down["missing"]
        assert "ATTP_TEST_UNSET_VARIABLE is not set" in down["unset"]
        assert "Fix: check that the server is running" in down["nowhere"]
        description = runtime.catalog.description
        assert "MCP servers down now (their tools are missing until they are back):" in description
        for name in down:
            assert f"\n  {name}: unavailable, the operator has been told\n" in description
        assert "Fix:" not in description and "ATTP_TEST_UNSET_VARIABLE" not in description
        done = await run(runtime, "__result__ = missing.do_things()")
        assert done["error"]["code"] == "UPSTREAM_UNAVAILABLE"
        assert "the MCP server 'missing' is unavailable" in done["error"]["message"]
        works = await run(runtime, "__result__ = get_sum(a=2, b=3)")
        assert works["status"] == "ok" and works["result"] == "The sum of 2 and 3 is 5.", works
        health = runtime.registry.packs["nowhere"].live
        assert health is not None and health.health()["status"] == "unavailable"


def own_everything(others: set[int]) -> list[int]:
    """The server-everything processes this test's runtime started: children of this process (other pytest workers
    and other suites run their own, which a test must neither count nor kill) not among `others` (the module's
    shared ones)."""
    return [pid for pid in processes_running(str(EVERYTHING)) if pid not in others and parent(pid) == os.getpid()]


def parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


async def test_a_killed_server_is_started_again_on_the_next_call(workspace: Path) -> None:
    others = set(processes_running(str(EVERYTHING)))
    async with gateway(workspace, {"everything": everything_stdio()}) as runtime:
        assert (await run(runtime, 'echo(message="1")'))["result"] == "Echo: 1"
        assert own_everything(others), "the upstream server should be running"
        for pid in own_everything(others):
            os.kill(pid, signal.SIGKILL)
        await anyio.sleep(0.2)
        after = await run(runtime, 'echo(message="2")')  # died while idle: restarted, and this call goes through
        assert after["result"] == "Echo: 2", after["error"]
        during = await run(
            runtime,
            "__result__ = trigger_long_running_operation(duration=5, steps=5)",
            CallContext(progress=_kill_after_first_progress(others)),
        )
        assert during["error"]["code"] == "UPSTREAM_UNAVAILABLE", during["error"]
        assert (
            "started again on the next call" in during["error"]["message"]
            or "restarted" in (during["error"]["message"])
        )
        last = await run(runtime, 'echo(message="3")')
        assert last["result"] == "Echo: 3", last["error"]
        live = runtime.registry.packs["everything"].live
        assert live is not None and live.health()["connects"] == 3


def _kill_after_first_progress(others: set[int]) -> Any:
    async def progress(_value: float, message: str) -> None:
        if message.startswith("trigger_long_running_operation:"):
            for pid in own_everything(others):
                os.kill(pid, signal.SIGKILL)

    return progress


async def test_shutdown_leaves_no_child_process(workspace: Path) -> None:
    others = set(processes_running(str(EVERYTHING)))  # the module's shared servers, still running
    async with gateway(workspace, {"a": everything_stdio(), "b": filesystem_stdio(workspace)}) as runtime:
        assert own_everything(others), "the upstream server should be running"
        assert not runtime.registry.unavailable()
    for _ in range(100):
        if not own_everything(others) and not processes_running("server-filesystem"):
            break
        await anyio.sleep(0.05)
    assert own_everything(others) == []


async def test_a_changed_tool_list_refreshes_the_pack(workspace: Path) -> None:
    told: list[str] = []
    async with gateway(workspace, {"grower": {"command": sys.executable, "args": [str(GROWING)]}}) as runtime:

        async def listener() -> None:
            told.append(runtime.catalog.description)

        runtime.listeners.append(listener)
        assert "shiny" not in runtime.catalog.description
        grown = await run(runtime, '__result__ = grow(name="shiny-new")')
        assert grown["result"] == "added shiny-new", grown["error"]
        for _ in range(100):
            if told:
                break
            await anyio.sleep(0.05)
        assert told and "\n  shiny_new() -> str — Return 'shiny-new'." in told[-1]
        called = await run(runtime, "__result__ = shiny_new()")
        assert called["result"] == "shiny-new"


# ---------------------------------------------------------------- secrets


async def test_credentials_stay_out_of_every_output(
    workspace: Path, everything_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("GW_TEST_TOKEN", SECRET)
    servers = {"everything": {**everything_stdio(), "env": {"API_TOKEN": "${GW_TEST_TOKEN}"}}}
    servers["remote"] = {"url": everything_url, "headers": {"Authorization": "Bearer ${GW_TEST_TOKEN}"}}
    settings = make_settings(workspace, mcp_servers=servers, workers=1)
    async with open_runtime(settings) as runtime:
        outputs = [
            runtime.catalog.description,
            runtime.catalog.attp_text(),
            repr(settings),
            settings.model_dump_json(),
            json.dumps([atdf_descriptor(t) for t in runtime.registry.tools.values()]),
            json.dumps({n: p.live.health() for n, p in runtime.registry.packs.items() if p.live is not None}),
        ]
        done = await run(runtime, "env = everything.get_env()\n__result__ = env")
        assert done["status"] == "ok", done["error"]
        assert done["result"]["API_TOKEN"] == "[redacted]"  # the upstream echoed it; we blanked it out
        outputs.append(json.dumps(done))
        failed = await run(runtime, "remote.get_sum(a=1)")
        outputs.append(json.dumps(failed))
        workers = runtime.pool.worker_pids()
        assert workers
        outputs += [Path(f"/proc/{pid}/environ").read_bytes().decode("utf-8", "replace") for pid in workers]
    outputs.append(caplog.text)
    leaks = [i for i, text in enumerate(outputs) if SECRET in text]
    assert leaks == [], f"the secret appears in outputs {leaks}"


async def test_a_program_is_told_why_a_server_is_down_without_the_hosts_path(workspace: Path) -> None:
    """The operator reads the PATH that was searched (log, /healthz, attp tools); the program reads the reason and
    the fix, not the host's folders."""
    servers = {"uvxed": {"command": "uvx-not-installed-here", "args": ["mcp-server-git"]}}
    async with gateway(workspace, servers, mcp_startup_timeout_s=10) as runtime:
        live = runtime.registry.packs["uvxed"].live
        assert live is not None and live.problem is not None and live.told is not None
        done = await run(runtime, "uvxed.git_status(repo_path='.')")
    path = os.environ["PATH"]
    assert f"was not found on the PATH attp-server was started with ({path[:300]})" in live.problem
    assert done["error"]["code"] == "UPSTREAM_UNAVAILABLE"
    assert "was not found on the PATH attp-server was started with" in done["error"]["message"]
    assert path[:300] not in done["error"]["message"] and path[:300] not in live.told


async def test_a_server_that_dies_says_why_without_its_secrets(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 24: the reason is the server's own last stderr line, with the values of its env blanked out."""
    leak = (
        "import os, sys\n"
        "print('starting with', os.environ['DATABASE_URL'], file=sys.stderr)\n"
        "raise RuntimeError('cannot log in with ' + os.environ['API_TOKEN'])\n"
    )
    env = {"API_TOKEN": "sk-live-0123456789", "DATABASE_URL": "postgres://app:hunter2hunter2@db/app"}
    servers = {"leaky": {"command": sys.executable, "args": ["-c", leak], "env": env}}
    with caplog.at_level("INFO"):
        async with gateway(workspace, servers, mcp_startup_timeout_s=10) as runtime:
            problem = runtime.registry.unavailable()["leaky"]
            done = await run(runtime, "leaky.anything()")
    assert "it exited at start; its stderr said: RuntimeError: cannot log in with [redacted]" in problem
    assert (
        done["error"]["code"] == "UPSTREAM_UNAVAILABLE" and "cannot log in with [redacted]" in done["error"]["message"]
    )
    logged = caplog.text
    assert "mcp server 'leaky' (stderr): starting with [redacted]" in logged
    for secret in env.values():
        assert secret not in logged and secret not in problem and secret not in json.dumps(done)
