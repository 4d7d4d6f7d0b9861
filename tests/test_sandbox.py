"""The sandbox through the real path (runtime -> worker process -> tool calls back): rules, limits, containment."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest
from harness import run_code, running

from attp_server.run.runtime import Runtime

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module scope: `shared_runtime` (conftest) lives for the module


BENIGN = [
    pytest.param("__result__ = [x * x for x in range(5)]", [0, 1, 4, 9, 16], id="listcomp"),
    pytest.param("__result__ = sum(x for x in range(10) if x % 2)", 25, id="genexp"),
    pytest.param(
        "d = {'a': 1}\nd.update(b=2)\n__result__ = sorted(d.items())", [["a", 1], ["b", 2]], id="dict-methods"
    ),
    pytest.param("__result__ = f'{3.14159:.2f}|{42:>5}|{\"x\"!r}'", "3.14|   42|'x'", id="fstring"),
    pytest.param("__result__ = '{} and {name}'.format(1, name='two')", "1 and two", id="str-format"),
    pytest.param("__result__ = '%05.1f %s' % (3.14159, 'ok')", "003.1 ok", id="percent-format"),
    pytest.param("__result__ = json.loads(json.dumps({'k': [1, 2]}))", {"k": [1, 2]}, id="json"),
    pytest.param("__result__ = re.findall(r'\\d+', 'a1b22c333')", ["1", "22", "333"], id="re"),
    pytest.param("m = re.match(r'(\\w+)@(\\w+)', 'ann@host')\n__result__ = m.groups()", ["ann", "host"], id="match"),
    pytest.param("__result__ = statistics.median([3, 1, 2])", 2, id="statistics"),
    pytest.param("__result__ = math.factorial(10) + math.floor(2.7)", 3628802, id="math"),
    pytest.param("__result__ = datetime.parse('2024-05-01').isoformat()", "2024-05-01", id="datetime-parse"),
    pytest.param(
        "d = datetime.datetime(2024, 1, 1) + datetime.timedelta(days=31)\n__result__ = d.date()",
        "2024-02-01",
        id="datetime-classes",
    ),
    pytest.param("__result__ = datetime.today().year > 2000 and datetime.now().year > 2000", True, id="today"),
    pytest.param("random.seed(1)\n__result__ = 0 <= random.random() < 1", True, id="random"),
    pytest.param("def f(n):\n    return 1 if n < 2 else n * f(n - 1)\n__result__ = f(10)", 3628800, id="recursion"),
    pytest.param("__result__ = sorted(['b', 'A', 'c'], key=str.lower)", ["A", "b", "c"], id="unbound-method"),
    pytest.param(
        "try:\n    refuse('NOPE')\nexcept ToolError as e:\n    __result__ = [e.code, e.message]",
        ["NOPE", "refused on purpose with NOPE"],
        id="catch-tool-error",
    ),
    pytest.param(
        "try:\n    int('x')\nexcept (TypeError, ValueError) as e:\n    __result__ = 'caught'",
        "caught",
        id="except-tuple",
    ),
    pytest.param("a, (b, c) = 1, (2, 3)\n__result__ = [a, b, c, *[4, 5]]", [1, 2, 3, 4, 5], id="unpacking"),
    pytest.param("__result__ = {**{'a': 1}, 'b': 2}", {"a": 1, "b": 2}, id="dict-unpack"),
    pytest.param("__result__ = max(records(3), key=lambda r: r['score'])['name']", "item-2", id="lambda-key"),
    pytest.param("__result__ = help('add')", None, id="help"),
    pytest.param("__result__ = [t['name'] for t in tools('echo')]", ["slow_echo"], id="tools-search"),
    pytest.param("__result__ = files.list_files('.')", [], id="pack-namespace"),
    pytest.param("__result__ = file_reader", None, id="alias-exists"),
]


@pytest.mark.parametrize(("code", "expected"), BENIGN)
async def test_benign_programs_compute_correct_answers(shared_runtime: Runtime, code: str, expected: object) -> None:
    data = await run_code(shared_runtime, code)
    if code.startswith("__result__ = file_reader"):
        assert data["error"]["code"] == "RESULT_NOT_SERIALIZABLE"
        return
    assert data["status"] == "ok", data["error"]
    if code.startswith("__result__ = help"):
        assert "def add(a: int, b: int) -> int" in data["result"]
    else:
        assert data["result"] == expected


UNREACHABLE = [
    pytest.param("json.codecs", id="json.codecs"),
    pytest.param("re.enum", id="re.enum"),
    pytest.param("statistics.sys", id="statistics.sys"),
    pytest.param("math.sys", id="math.sys"),
    pytest.param("datetime.sys", id="datetime.sys"),
    pytest.param("random._os", id="random._os"),
    pytest.param("read_file.__globals__", id="tool-globals"),
    pytest.param("add.__call__.__globals__", id="tool-call-globals"),
    pytest.param("open('/etc/passwd')", id="open"),
    pytest.param("print.__self__", id="print-self"),
    pytest.param("str.mro()", id="str-mro"),
    pytest.param("'{0.__class__.__bases__}'.format(1)", id="format-dunder"),
    pytest.param("'{0.real.__class__}'.format(1)", id="format-nested-dunder"),
    pytest.param("x = {}\nx.keys().mapping", id="dict-view-mapping"),
    pytest.param("re.compile('a').scanner('a')", id="pattern-scanner"),
    pytest.param("try:\n    1/0\nexcept Exception as e:\n    e.with_traceback", id="exception-traceback"),
    pytest.param("(lambda: 1).func_globals", id="lambda-attrs"),
    pytest.param("f = lambda: 1\nf.name", id="procedure-attrs"),
    pytest.param("math.sqrt.__self__", id="builtin-self"),
    pytest.param("json.loads.__globals__", id="namespace-function-globals"),
]


@pytest.mark.parametrize("code", UNREACHABLE)
async def test_interpreter_internals_are_unreachable(shared_runtime: Runtime, code: str) -> None:
    data = await run_code(shared_runtime, code)
    assert data["status"] == "error"
    assert data["error"]["code"] in {"FORBIDDEN", "RUNTIME_ERROR", "NAME_NOT_FOUND"}, data["error"]
    assert data["result"] is None


@pytest.mark.parametrize(
    "path", ["../x", "/etc/passwd", "a/../../x", "link-out/passwd", "link-file"], ids=lambda p: p.replace("/", "|")
)
async def test_files_paths_outside_the_workspace_are_refused(runtime: Runtime, workspace: Path, path: str) -> None:
    (workspace / "link-out").symlink_to("/etc")
    (workspace / "link-file").symlink_to("/etc/hostname")
    data = await run_code(runtime, f"__result__ = read_file({path!r})")
    assert data["status"] == "error"
    assert data["error"]["code"] == "PATH_OUTSIDE_WORKSPACE", data["error"]
    write = await run_code(runtime, f"write_file({path!r}, 'pwned')")
    assert write["error"]["code"] == "PATH_OUTSIDE_WORKSPACE"


async def test_python_loop_times_out_and_next_call_works(workspace: Path) -> None:
    async with running(workspace, timeout_s=1.0) as runtime:
        started = time.monotonic()
        data = await run_code(runtime, "while True:\n    pass")
        elapsed = time.monotonic() - started
        assert data["error"]["code"] == "TIMEOUT"
        assert elapsed < 5, "a runaway loop must end near its deadline, not hang"
        assert (await run_code(runtime, "__result__ = 7"))["result"] == 7


async def test_c_level_hang_is_killed(workspace: Path) -> None:
    async with running(workspace, timeout_s=1.0) as runtime:
        data = await run_code(runtime, "sum(range(10 ** 15))")  # one C call that never looks at signals
        assert data["error"]["code"] == "TIMEOUT"
        assert runtime.pool.kills == 1
        assert (await run_code(runtime, "__result__ = 8"))["result"] == 8


async def test_regex_hang_ends_at_its_deadline(workspace: Path) -> None:
    """The regex engine checks for signals, so the deadline's alarm stops it: no kill needed."""
    async with running(workspace, timeout_s=1.0) as runtime:
        started = time.monotonic()
        data = await run_code(runtime, "re.match('(a+)+$', 'a' * 40 + 'b')")
        assert data["error"]["code"] == "TIMEOUT"
        assert time.monotonic() - started < 5
        assert (await run_code(runtime, "__result__ = 8"))["result"] == 8


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("'a' * 10**10", id="str-mult"),
        pytest.param("[0] * 10**9", id="list-mult"),
        pytest.param("2 ** 10**8", id="int-pow"),
        pytest.param("1 << 10**9", id="lshift"),
        pytest.param("'x'.ljust(10**9)", id="ljust"),
        pytest.param("f'{1:>{10**8}}'", id="format-width"),
        pytest.param("bytearray(10**10)", id="bytearray"),
        pytest.param("math.factorial(10**7)", id="factorial"),
        pytest.param("x = list(range(10**8))", id="list-range"),
        pytest.param("','.join(['x' * 1000] * 10**5) * 1", id="join"),
    ],
)
async def test_memory_bombs_end_cleanly(shared_runtime: Runtime, code: str) -> None:
    data = await run_code(shared_runtime, code)
    assert data["error"]["code"] in {"MEMORY_LIMIT", "TIMEOUT"}, data["error"]
    assert (await run_code(shared_runtime, "__result__ = 'alive'"))["result"] == "alive"


async def test_uncatchable_limits(shared_runtime: Runtime) -> None:
    code = "try:\n    'a' * 10**10\nexcept:\n    __result__ = 'caught'"
    data = await run_code(shared_runtime, code)
    assert data["error"]["code"] == "MEMORY_LIMIT"


async def test_each_run_starts_with_fresh_symbols(shared_runtime: Runtime) -> None:
    await run_code(shared_runtime, "secret = 'left-behind'\nmath_copy = math")
    data = await run_code(shared_runtime, "__result__ = secret")
    assert data["error"]["code"] == "NAME_NOT_FOUND"


async def test_concurrent_runs_use_different_workers(workspace: Path) -> None:
    async with running(workspace, workers=2) as runtime:
        results: list[dict[str, object]] = []

        async def one() -> None:
            results.append(await run_code(runtime, "__result__ = slow_echo('x', 0.5)"))

        async with anyio.create_task_group() as tasks:
            for _ in range(3):
                tasks.start_soon(one)
        assert [r["result"] for r in results] == ["x", "x", "x"]
        assert runtime.pool.stats()["busy"] == 0


async def test_killed_worker_is_replaced_and_not_reused(workspace: Path) -> None:
    async with running(workspace, timeout_s=1.0) as runtime:
        await run_code(runtime, "__result__ = 1")
        before = set(runtime.pool.worker_pids())
        await run_code(runtime, "re.match('(a+)+$', 'a' * 40 + 'b')")
        with anyio.fail_after(20):
            while not runtime.pool.worker_pids():
                await anyio.sleep(0.05)
        for pid in before:
            assert pid not in runtime.pool.worker_pids()
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)


@pytest.mark.parametrize("code", ["str(10 ** 5000)", "json.dumps([10 ** 5000])", "f'{10 ** 5000}'"])
async def test_an_integer_too_long_for_text_gets_advice_the_program_can_follow(
    shared_runtime: Runtime, code: str
) -> None:
    """CPython's own message suggests sys.set_int_max_str_digits(), which no program can reach."""
    error = (await run_code(shared_runtime, code))["error"]
    assert error["code"] == "RUNTIME_ERROR"
    assert "4300 digits" in error["message"] and "sys." not in error["message"]


async def test_deadline_during_tool_calls_leaves_the_protocol_clean(workspace: Path) -> None:
    """The deadline's alarm waits for a tool call's reply: a run timed out mid-loop of calls ends as TIMEOUT
    and the worker pipe never holds half a message (the next runs get their own replies)."""
    async with running(workspace, timeout_s=0.3, max_tool_calls=100000) as runtime:
        for _ in range(6):
            data = await run_code(runtime, "n = 0\nwhile True:\n    n = add(n, 1)")
            assert data["error"]["code"] == "TIMEOUT", data["error"]
            assert data["calls"], "the run made tool calls before its deadline"
            assert (await run_code(runtime, "__result__ = add(2, 3)"))["result"] == 5


@pytest.mark.parametrize(
    ("code", "hint"),
    [
        pytest.param("x = 1", "__result__ was never set", id="silent-program"),
        pytest.param("print('answer: 42')", None, id="answered-on-stdout"),
        pytest.param("print('answer')\n__result__ = 1", None, id="printed-and-set"),
    ],
)
async def test_a_program_that_answers_with_print_gets_no_hint_about_result(
    shared_runtime: Runtime, code: str, hint: str | None
) -> None:
    """The trial's model printed its answers on purpose and was told each time that __result__ was never set."""
    data = await run_code(shared_runtime, code)
    assert data["status"] == "ok"
    if hint is None:
        assert not data.get("hint"), data
    else:
        assert hint in data["hint"]
