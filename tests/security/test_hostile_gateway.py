"""Red team, third pass (issue 22): a hostile upstream MCP server behind a real `attp serve`.

The upstream (tests/support/hostile_upstream.py) is configured as the issue describes, with secrets in
its env whose names do not all look secret; a real server over stdio (the SDK client, protocol
2026-07-28 and the handshake) or Streamable HTTP runs the programs through its worker. Each test is
the regression test of one finding and failed before its fix.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from harness import Served, serving_http, stdio_client
from harness import execute as run
from mcp import Client
from mcp_types import ElicitRequestParams, ElicitResult

pytestmark = pytest.mark.anyio

UPSTREAM = Path(__file__).parent.parent / "support" / "hostile_upstream.py"
KEY = "sk-UPSECRET-123456789"
DATABASE_URL = "postgres://admin:DBPASS-987654@db/x"
SECRET_PARTS = ("UPSECRET", "DBPASS", "123456789", "987654")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    """One real `attp serve` over stdio (protocol 2026-07-28) with the hostile upstream, for the sandbox's cases."""
    directory = tmp_path_factory.mktemp("served")
    async with stdio_client(directory / "ws", *flags(directory)) as client:  # the config file beside the workspace
        yield client


def config(directory: Path) -> Path:
    """The issue's ``[mcp_servers.hostile]``, as the Claude-Desktop JSON ``--mcp-config`` reads."""
    path = directory / "hostile.json"
    server = {
        "command": sys.executable,
        "args": [str(UPSTREAM)],
        "env": {"UP_API_KEY": KEY, "DATABASE_URL": DATABASE_URL},
    }
    path.write_text(json.dumps({"mcpServers": {"hostile": server}}))
    return path


def flags(directory: Path, *more: str) -> list[str]:
    return ["--toolpack", "files", "--mcp-config", str(config(directory)), "--timeout-s", "5", *more]


def assert_no_secret(data: Any) -> None:
    text = json.dumps(data)
    leaked = [part for part in SECRET_PARTS if part in text]
    assert not leaked, (leaked, text[:2000])


class User:
    """The person behind the client: allows every call (for the session when `for_session`), and notes the questions."""

    def __init__(self, *, for_session: bool) -> None:
        self.for_session = for_session
        self.questions: list[str] = []

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        self.questions.append(params.message)
        return ElicitResult(action="accept", content={"allow_for_session": self.for_session})


# ---------------------------------------------------------------- 1. the server-wide ReDoS


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_backtracking_schema_pattern_does_not_hold_the_server(
    mode: str, served: Client, approving: Served
) -> None:
    """Regression: ``^(a+)+$`` was matched by `re` on the event loop: the server hung at 100 % CPU for minutes.
    On 2026-07-28 the module's stdio server answers (the call holds no state); legacy mode connects anew to
    the module's HTTP server (the same upstream; its approvals ask about destructive calls, ``redos`` is not)."""
    async with AsyncExitStack() as stack:
        client = served if mode == "auto" else await stack.enter_async_context(approving.client(mode=mode))
        started = time.monotonic()
        with anyio.fail_after(20):
            refused = await run(client, "__result__ = hostile.redos(s='a' * 40 + '!')")
            fitting = await run(client, "__result__ = hostile.redos(s='a' * 100_000)")
        assert time.monotonic() - started < 10
    assert refused["error"]["code"] == "INVALID_ARGUMENT", refused
    assert "'^(a+)+$'" in refused["error"]["message"], refused["error"]
    assert refused["error"]["parameter_name"] == "s"
    assert fitting["status"] == "ok", fitting
    assert fitting["result"] == "upstream redos ran with ['s']"


# ---------------------------------------------------------------- 6. builtins shadowed by upstream tool names

SHADOWED = """
out = {'len': len([1, 2, 3]), 'sorted': sorted([3, 1, 2]), 'range': list(range(2)), 'str': str(5)}
try:
    int('x')
except ValueError:
    out['except'] = 'ValueError caught'
out['dict'] = dict(a=1)
out['isinstance'] = isinstance(3, int)
out['json'] = json.dumps([1])
out['upstream'] = hostile.len()
__result__ = out
"""


async def test_upstream_tools_named_like_builtins_keep_only_their_qualified_name(served: Client) -> None:
    """Regression: ``len([1,2,3])`` called the upstream, ``sorted(secret)`` sent the program's data to it, and
    ``except ValueError`` stopped working."""
    data = await run(served, SHADOWED)
    listing = await run(served, "__result__ = [tools('len'), help('hostile.ValueError')]")
    description = next(t for t in (await served.list_tools()).tools if t.name == "attp_execute").description
    assert data["status"] == "ok", data
    assert data["result"] == {
        "len": 3,
        "sorted": [1, 2, 3],
        "range": [0, 1],
        "str": "5",
        "except": "ValueError caught",
        "dict": {"a": 1},
        "isinstance": True,
        "json": "[1]",
        "upstream": "upstream len",
    }
    assert [c["tool"] for c in data["calls"]] == ["hostile.len"]
    assert listing["status"] == "ok", listing
    found, helped = listing["result"]
    assert "hostile.len" in str(found), found
    assert "hostile.ValueError(" in str(helped), helped
    assert description is not None
    lines = [line.strip() for line in description.splitlines()]
    for name in ("len", "sorted", "ValueError", "json", "print", "parallel"):
        assert any(line.startswith(f"hostile.{name}(") for line in lines), name
        assert not any(line.startswith(f"{name}(") for line in lines), name  # the catalog lists no bare name


# ---------------------------------------------------------------- 2. approvals by pack and tool

ALLOW_BUILTIN = 'write_file("mine.txt", "1")\n__result__ = "built-in allowed"'
UPSTREAM_WRITES = {
    "python": "__result__ = hostile.write_file(path='/etc/x', content='y')",
    "parallel": "__result__ = parallel('hostile.write_file', [{'path': '/etc/x', 'content': 'y'}])",
    "starlark": "__result__ = hostile.write_file(path='/etc/x', content='y')",
    "tam": (
        "<|[REQUEST_TOOL]|>\ncommand1:「始」hostile.write_file「末」\npath1:「始」/etc/x「末」\ncontent1:「始」y「末」\n"
        "<|[END_TOOL]|>"
    ),
}


@pytest.fixture(scope="module")
def approving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One real `attp serve --transport http --approval destructive` for the approval cases, each of which
    connects anew: on 2026-07-28 a client's first call is sessionless, so it starts a session (and its
    allowances) of its own; on the legacy protocol a session is a connection's (``Mcp-Session-Id``)."""
    directory = tmp_path_factory.mktemp("approving")
    with serving_http(
        directory / "ws", *flags(directory, "--approval", "destructive", "--engines", "starlark")
    ) as served:
        yield served


@pytest.mark.parametrize("way", list(UPSTREAM_WRITES))
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_allowing_a_builtin_tool_for_the_session_does_not_allow_an_upstream_tool_of_that_name(
    way: str, mode: str, approving: Served
) -> None:
    """Regression: after "allow write_file for the rest of the session", ``hostile.write_file(...)`` (and
    ``parallel('hostile.write_file', ...)``) ran unasked: the allowance was remembered by the bare tool name.
    Each test connects anew to the module's approving server: on 2026-07-28 its first call starts a fresh
    session; on the legacy protocol the session is the connection."""
    user = User(for_session=True)
    async with approving.client(mode=mode, elicitation_callback=user) as client:
        first = await run(client, ALLOW_BUILTIN)
        assert first.get("session") or mode == "legacy", first  # a fresh session per test on the shared server
        # On 2026-07-28 the session is the handle the reply carries (a connection is not a conversation).
        same = {"session": first["session"]} if first.get("session") else {}
        program = UPSTREAM_WRITES[way]
        if way == "tam":
            result = await client.call_tool("attp_execute", {"envelope": program, **same})
            second = dict(result.structured_content or {})
        else:
            second = await run(client, program, **same, **({"engine": "starlark"} if way == "starlark" else {}))
        third = await run(client, UPSTREAM_WRITES["python"], **same)  # allowed for the session: not asked again
    assert first["status"] == "ok" and second["status"] == "ok" and third["status"] == "ok", (
        first,
        second["error"],
        third,
    )
    assert len(user.questions) == 2, user.questions
    assert "files.write_file(path='mine.txt', content='1')" in user.questions[0]
    assert "hostile.write_file(path='/etc/x', content='y')" in user.questions[1], user.questions[1]


# ---------------------------------------------------------------- 3, 4, 5. the upstream's secrets

SECRETS_PROGRAM = """
out = {}
try:
    hostile.err_env()
except ToolError as e:
    out['rpc_error'] = [e.message, str(e), repr(e)]
out['echo'] = hostile.echo_env()
try:
    hostile.err_env_iserror()
except ToolError as e:
    out['is_error'] = e.message
__result__ = out
"""


async def test_the_upstreams_secrets_reach_no_program(served: Client) -> None:
    """Regressions: a JSON-RPC error's message came through unscrubbed (3); ``DATABASE_URL`` was not redacted
    since its name does not look secret (4); an ``isError`` text was cut at 2,000 characters before it was
    scrubbed, so the key's prefix survived (5)."""
    data = await run(served, SECRETS_PROGRAM)
    uncaught = await run(served, "__result__ = hostile.err_env()")
    assert data["status"] == "ok", data["error"]
    out = data["result"]
    assert "upstream failed with key [redacted] and db [redacted]" in out["rpc_error"][0], out
    assert out["echo"] == "key=[redacted] db=[redacted]", out
    assert out["is_error"].startswith("x" * 1990) and "sk-" not in out["is_error"], out["is_error"][1980:]
    assert uncaught["error"]["code"] == "TOOL_ERROR", uncaught
    assert_no_secret(data)
    assert_no_secret(uncaught)


async def test_healthz_and_the_log_never_show_an_upstreams_secret(tmp_path: Path) -> None:
    """An upstream that fails to list its tools, quoting its key: ``/healthz`` and the log say why, scrubbed."""
    path = config(tmp_path)
    servers = json.loads(path.read_text())
    broken = dict(servers["mcpServers"]["hostile"])
    broken["env"] = {**broken["env"], "FAIL_LIST": "1"}
    servers["mcpServers"]["broken"] = broken
    path.write_text(json.dumps(servers))
    log = tmp_path / "server.log"
    with serving_http(tmp_path / "ws", "--toolpack", "files", "--mcp-config", str(path), stderr=log) as served:
        assert served.url is not None
        async with served.client() as client:
            data = await run(client, SECRETS_PROGRAM)
            failed = await run(client, "__result__ = broken.nuke()")
        health = httpx.get(served.url + "/healthz", timeout=10).json()
    assert data["status"] == "ok", data
    problem = json.dumps(health)
    assert "cannot list tools with key [redacted]" in problem, problem
    assert failed["error"]["code"] in ("UPSTREAM_UNAVAILABLE", "NAME_NOT_FOUND"), failed
    assert_no_secret([data, failed, health])
    # Regression (found with finding 3): the upstream's error -32000, JSON-RPC's code for a server's own errors,
    # was taken for the SDK's "connection closed" (also -32000), and every failing call restarted the server.
    assert (health["upstream"]["hostile"]["connects"], health["upstream"]["hostile"]["failures"]) == (1, 0), health
    text = log.read_text()
    assert "[redacted]" in text and "UPSECRET" not in text and "DBPASS" not in text, text[-3000:]


# ---------------------------------------------------------------- 7. a made-up Mcp-Session-Id on a modern request


PICTURES = Path(__file__).parent.parent / "support" / "hostile_server.py"


@pytest.fixture(scope="module")
def isolated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One real `attp serve --transport http --isolation session`, with an upstream (``pics``) whose media is
    saved (``save_media``), for the isolation cases; its workspace is ``workspace`` in a folder of its own."""
    root = tmp_path_factory.mktemp("isolated")
    workspace = root / "workspace"
    workspace.mkdir()
    config = root / "attp.toml"
    config.write_text(
        f"[mcp_servers.pics]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(PICTURES))}]\n"
        "save_media = true\n"
    )
    flags = ["--toolpack", "files", "--isolation", "session", "--config", str(config)]
    with serving_http(workspace, *flags) as served:
        yield served


async def test_a_modern_request_gets_no_session_from_an_mcp_session_id_it_sends(approving: Served) -> None:
    """Regression: a 2026-07-28 request carrying a made-up ``Mcp-Session-Id`` got a session (kept variables, a
    folder of its own); with a victim's live id it read the victim's state. The SDK checks the header only on
    the handshake path, so a modern request's header must mean nothing. (The module's HTTP server with the
    default isolation answers; its approvals ask about destructive calls, and these programs make none.)"""
    async with approving.client(headers={"Mcp-Session-Id": "made-up-session"}) as client:  # protocol 2026-07-28
        kept = await run(client, "x = 'kept'\n__result__ = 'set'")
        read = await run(client, "__result__ = x")
    assert kept["status"] == "ok", kept
    assert read["error"]["code"] == "NAME_NOT_FOUND", read


async def test_a_modern_request_under_session_isolation_has_no_folder_of_its_own(isolated: Served) -> None:
    """A made-up ``Mcp-Session-Id`` on a 2026-07-28 request means nothing: the call gets a fresh handle of the
    server's minting (and that handle's own folder), never the header's session or a folder named for it."""
    async with isolated.client(headers={"Mcp-Session-Id": "made-up-session"}) as client:
        data = await run(client, "write_file('mine.txt', 'x')")
        again = await run(client, "__result__ = read_file('mine.txt')")
    assert data["status"] == "ok" and data["session"] and data["session"] != "made-up-session", data
    assert again["status"] == "error" and again["session"] != data["session"], again  # a second fresh handle
    [written] = list(isolated.workspace.rglob("mine.txt"))
    assert "made-up-session" not in str(written)


# ---------------------------------------------------------------- 9. integer size

INTEGER_BOMBS = {
    "from-bytes": "x = (0).from_bytes(b'\\xff' * 10_000_000, 'big')",
    "int-from-bytes": "x = int.from_bytes(b'\\xff' * 10_000_000, 'big')",
    "from-bytes-list": "x = int.from_bytes([255] * 200_000, 'big')",
    "add": "x = 1 << 999_999\nx = x + x + x",
    "augmented-add": "x = 1 << 999_999\nx += x\nx += x",
    "sub": "x = -(1 << 999_999)\nx = x - (1 << 999_999) - (1 << 999_999)",
    "sum": "x = 1 << 999_999\ny = sum([x] * 8)",
    "operator-add": "x = 1 << 999_999\ny = operator.add(x, x)",
    "operator-sub": "x = 1 << 999_999\ny = operator.sub(-x, x)",
    "doubling-loop": "x = 1 << 999_990\nfor _ in range(20):\n    x = x + x",
    "call-argument": "x = 1 << 999_999\ny = abs(-x - x)",
    "call-argument-sub": "x = 1 << 999_999\ny = -x\nz = abs(y - x)",
}


@pytest.mark.parametrize("name", list(INTEGER_BOMBS))
async def test_no_integer_grows_past_the_limit(served: Client, name: str) -> None:
    """Regression: ``(0).from_bytes(b"\\xff" * 10_000_000, "big")`` built an 80,000,000-bit integer (the limit is
    1,000,000) and ``x + x`` of such integers was not checked."""
    code = "import operator\n" + INTEGER_BOMBS[name] + "\n__result__ = 'built'"
    data = await run(served, code)
    assert data["error"] is not None and data["error"]["code"] == "MEMORY_LIMIT", data
    assert "1,000,000 bits" in data["error"]["message"], data["error"]


async def test_integers_within_the_limit_still_work(served: Client) -> None:
    code = (
        "x = int.from_bytes(b'\\x01\\x00', 'big')\ny = (0).from_bytes(bytes([1, 2]), 'little', signed=True)\n"
        "big = 1 << 999_998\n__result__ = [x, y, (big + big).bit_length(), len(bin(big)), sum([1, 2]), 7 - 10]"
    )
    data = await run(served, code)
    assert data["result"] == [256, 513, 1_000_000, 1_000_001, 3, -3], data


# ---------------------------------------------------------------- 8. opaque reprs

HELD = [
    "json.loads", "random.random", "random.choice", "io.StringIO()", "io.StringIO().write", "parallel", "print", "bin",
    "sum", "format", "iter([1])", "iter({1: 2})", "reversed([1])", "map(str, [1])", "filter(None, [1])",
    "zip([1], [2])", "enumerate([1])", "csv.reader(['a'])", "csv.writer(io.StringIO())", "csv.DictReader(['a'])",
    "csv.DictWriter(io.StringIO(), ['a'])", "hashlib.sha256()", "hashlib.sha256().update",
    "difflib.SequenceMatcher(None, 'a', 'b')", "functools.lru_cache(maxsize=2)(lambda x: x)",
    "functools.lru_cache(maxsize=2)(lambda x: x).cache_parameters", "functools.cmp_to_key(lambda a, b: 0)",
    "itertools.chain([1])", "itertools.islice([1], 1)", "re.finditer('a', 'aa')", "re.sub", "operator.add",
    "statistics.mean", "uuid.uuid4", "string.Template('a')", "textwrap.TextWrapper()", "textwrap.dedent",
    "copy.deepcopy", "base64.b64encode", "tomllib.loads", "ToolError", "'a'.upper", "[].append",
    "datetime.datetime.now", "int.from_bytes",
]  # fmt: skip
"""Objects a program can hold whose own repr showed an address or an internal module path (41 of 45 before)."""

OPAQUE = (
    "import collections, csv, difflib, functools, hashlib, io, itertools, operator, statistics, string, textwrap\n"
    "import uuid, copy, base64, tomllib\n"
    f"held = [{', '.join(HELD)}]\n"
    "texts = [repr(h) for h in held] + [str(h) for h in held] + [f'{h}' for h in held] + [f'{h!r:>5}' for h in held]\n"
    "texts += ['%s %r' % (h, h) for h in held] + ['{} {!r}'.format(h, h) for h in held] + [format(h) for h in held]\n"
    "texts += [ascii(held), repr([held, {'k': held}]), str(ValueError(held[0])), repr(collections.deque(held))]\n"
    "print(*held)\n"
    "try:\n    {}[held[0]]\nexcept KeyError as e:\n    texts.append(str(e))\n"
    "__result__ = texts\n"
)


async def test_no_object_a_program_holds_shows_an_address_or_an_internal_path(served: Client) -> None:
    """Regression: ``repr(json.loads)``, ``repr(io.StringIO())``, iterators, csv readers, hash objects,
    ``lru_cache(...)``, ... showed ``0x...`` addresses and ``attp_server....`` module paths."""
    data = await run(served, OPAQUE)
    assert data["status"] == "ok", data["error"]
    shown = json.dumps([data["result"], data["stdout"]])
    for marker in (" at 0x", "0x7f", "attp_server", "_loads", "<lambda> at"):
        assert marker not in shown, (marker, shown[:3000])
    texts = data["result"]
    assert texts[0] == "<function json.loads>"
    assert texts[HELD.index("io.StringIO()")] == "<io.StringIO object>"
    assert texts[HELD.index("parallel")] == "<built-in function parallel>"


async def test_lru_cache_parameters_are_no_real_function(served: Client) -> None:
    """Regression: ``functools.lru_cache(...).cache_parameters`` handed the program functools' own lambda."""
    code = (
        "import functools\ncached = functools.lru_cache(maxsize=2)(lambda x: x * 2)\nparameters = cached.cache_parameters\n"
        "__result__ = [cached(4), parameters(), repr(parameters)]\n"
    )
    data = await run(served, code)
    assert data["status"] == "ok", data["error"]
    assert data["result"][:2] == [8, {"maxsize": 2, "typed": False}]
    assert "0x" not in data["result"][2] and "lambda" not in data["result"][2], data["result"][2]
    attribute = await run(served, "import functools\n__result__ = functools.lru_cache(lambda: 1).cache_parameters.x")
    assert attribute["error"]["code"] == "FORBIDDEN", attribute


# ---------------------------------------------------------------- fresh red team: one session's SERVER_BUSY flood

FLOOD_ENV = {"ATTP_MAX_WORKERS": "3", "ATTP_MAX_RUNS_PER_SESSION": "2", "ATTP_QUEUE_TIMEOUT_S": "0.5"}
FLOOD = 4
"""A flood of more runaways than max_workers; each runs to a deadline (1 s) past the queue timeout, so that
runaways holding every worker would leave the other sessions SERVER_BUSY. They take turns, each burning its
second of CPU: one more than the workers proves the point (twice as many, 8 on 4 workers, burnt 4 CPU-s more)."""


async def test_one_sessions_flood_leaves_the_other_sessions_answered(tmp_path: Path) -> None:
    """Four runaway programs at once from one session: they take turns (one session runs one program at a
    time); another session, and a sessionless 2026-07-28 client, are answered meanwhile."""
    with serving_http(tmp_path, "--toolpack", "files", "--timeout-s", "1", env=FLOOD_ENV) as served:
        outcomes: list[str] = []
        answered: dict[str, tuple[str, float]] = {}

        async def runaway(client: Client) -> None:
            data = await run(client, "while True:\n    pass")
            outcomes.append(data["error"]["code"])

        async def normal(name: str, client: Client) -> None:
            await anyio.sleep(0.3)  # the flood is in
            started = time.monotonic()
            data = await run(client, "__result__ = 'answered'")
            answered[name] = (str(data["result"] or data["error"]["code"]), time.monotonic() - started)

        async with (
            served.client(mode="legacy") as flooder,
            served.client(mode="legacy") as other,
            served.client() as sessionless,
            anyio.create_task_group() as tasks,
        ):
            for _ in range(FLOOD):
                tasks.start_soon(runaway, flooder)
            tasks.start_soon(normal, "other", other)
            tasks.start_soon(normal, "sessionless", sessionless)
    assert answered["other"][0] == "answered" and answered["sessionless"][0] == "answered", answered
    assert max(seconds for _, seconds in answered.values()) < 5, answered
    # Calls on one session take turns (its lease in the store): each runaway runs alone, to its deadline, or
    # gives up waiting for its turn with SERVER_BUSY; none is lost, and they never hold more than one worker.
    assert len(outcomes) == FLOOD and set(outcomes) <= {"SERVER_BUSY", "TIMEOUT"}, outcomes


# ---------------------------------------------------------------- fresh red team: save_media under isolation


async def test_media_an_upstream_returns_lands_in_the_callers_own_folder(isolated: Served) -> None:
    """Found by this red team: under ``isolation = "session"`` the media an upstream returned was saved in the
    shared workspace root, at a path the session's own file tools could not reach; it goes into the session's
    own folder now (the upstream is shared, what it returns to a caller is that caller's)."""
    async with isolated.client(mode="legacy") as first, isolated.client(mode="legacy") as second:
        code = "saved = pics.picture(kb=1)['path']\n__result__ = [saved, list_files('mcp-media/pics')]"
        mine = await run(first, code)
        theirs = await run(second, "__result__ = list_files('.')")
    assert mine["status"] == "ok", mine["error"]
    path, listed = mine["result"]
    assert path.startswith("mcp-media/pics/") and listed == [path], mine["result"]
    assert not (isolated.workspace / "mcp-media").exists()
    assert "mcp-media/" not in theirs["result"], theirs


# ---------------------------------------------------------------- fresh red team: a 50 MB upstream message


async def test_a_huge_upstream_message_is_refused_unread_and_the_server_stays_responsive(tmp_path: Path) -> None:
    """Found by this red team: a 50 MB answer over stdio was read by joining every 64 KiB chunk to all the
    ones before it, on the event loop (the SDK's stdio client), and then parsed there: more than 30 s, with
    /healthz stalled; a line of any length was held in memory. The gateway's own stdio transport reads in
    linear time and refuses a message past twice ``max_result_bytes`` (plus 1 MiB) unread. The timings are
    the bench's; here: it ends in far less than the run's limit, and the next call works."""
    with serving_http(tmp_path / "ws", "--mcp-config", str(config(tmp_path)), "--timeout-s", "30") as served:
        async with served.client() as client:
            started = time.monotonic()
            huge = await run(client, "__result__ = len(hostile.huge(mb=50))")
            elapsed = time.monotonic() - started
            after = await run(client, "__result__ = [len(hostile.huge(mb=1)), hostile.len()]")
    assert huge["error"]["code"] == "RESULT_TOO_LARGE", huge
    assert "a message of 50,000," in huge["error"]["message"] and "refused unread" in huge["error"]["message"]
    assert elapsed < 15, elapsed
    assert after["result"] == [1_000_000, "upstream len"], after
