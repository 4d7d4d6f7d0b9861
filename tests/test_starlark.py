"""The Starlark engine through the real path (pool -> worker process -> tool calls answered by the runtime).

`run_starlark` sends a ``run`` with ``engine = "starlark"`` straight to the pool, as `Runtime` does
once the engine is wired into `ExecuteRequest`; everything after that is the production path.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from harness import run_code, running, serving_http
from mcp import Client
from pydantic import ValidationError

from attp_server.faces.app import create_server
from attp_server.faces.cli import main as cli_main
from attp_server.run.outcome import from_worker
from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.state import RunState
from attp_server.sandbox.engines import ENGINES
from attp_server.sandbox.engines.starlark import engine as starlark_engine
from attp_server.sandbox.engines.starlark.source import MAX_NESTING, rewrite_fstrings
from attp_server.sandbox.process.pool import LONG_RUN_S, Job
from attp_server.settings import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module scope: `shared_runtime` (conftest) lives for the module


async def run_starlark(runtime: Runtime, code: str, **limits: Any) -> dict[str, Any]:
    settings = runtime.settings
    job = Job(
        code=code,
        tools=runtime.registry.callable_names(),
        namespaces=runtime.registry.namespaces(),
        timeout_s=limits.get("timeout_s", settings.timeout_s),
        max_output_bytes=limits.get("max_output_bytes", settings.max_output_bytes),
        max_result_bytes=limits.get("max_result_bytes", settings.max_result_bytes),
        max_tool_calls=limits.get("max_tool_calls", settings.max_tool_calls),
        capture_print=limits.get("capture_print", settings.capture_print),
        engine="starlark",
    )
    run = RunState()
    done = await runtime.pool.run(job, functools.partial(runtime.dispatch.traced_call, run))
    return from_worker(done, run, None, settings.max_output_bytes).model_dump(mode="json")


# Seed 002's "工具调用示例", step for step (f-strings with subscripts included), on the files and demo packs.
SEED_PROGRAM = """\
# Agent 侧调用示例

# 1. 查询所有文件
names = list_files(".")
for name in names:
    print(f"File: {name}, Size: {len(read_file(name))}")

# 2. 获取特定记录
page = records(3)[1]
print(f"Page: {page['name']}")

# 3. 创建新文件
new_index = write_file(
    path="新想法.md",
    content="关于工具调用的思考",
)

# 4. 修改/读回
edit_file(path="新想法.md", old_string="思考", new_string="想法")
print(f"Edited: {read_file(new_index['path'])}")

# 5. 搜索
results = [r for r in records(3) if r["score"] > 1]
for r in results:
    print(f"Found: {r['name']}")

# 6. 结果赋值（符合 schema）
__result__ = new_index
"""


async def test_seed_002_program_runs_and_returns_its_result(runtime: Runtime, workspace: Path) -> None:
    (workspace / "notes.md").write_text("hello")
    data = await run_starlark(runtime, SEED_PROGRAM)
    assert data["status"] == "ok", data["error"]
    assert data["result"] == {"path": "新想法.md", "bytes": 27, "created": True}
    assert data["stdout"] == (
        "File: notes.md, Size: 5\nPage: item-1\nEdited: 关于工具调用的想法\nFound: item-1\nFound: item-2\n"
    )
    assert [c["tool"] for c in data["calls"]] == [
        "list_files", "read_file", "records", "write_file", "edit_file", "read_file", "records",
    ]  # fmt: skip
    assert (workspace / "新想法.md").read_text() == "关于工具调用的想法"


BENIGN = [
    pytest.param("__result__ = add(2, 3)", 5, id="tool"),
    pytest.param("__result__ = demo.add(a=2, b=3)", 5, id="pack-namespace-kwargs"),
    pytest.param("__result__ = [r['name'] for r in records(3) if r['score'] > 1]", ["item-1", "item-2"], id="listcomp"),
    pytest.param("__result__ = {k: v for k, v in {'a': 1, 'b': 2}.items() if v > 1}", {"b": 2}, id="dictcomp"),
    pytest.param("def f(n):\n    return 1 if n < 2 else n * f(n - 1)\n__result__ = f(10)", 3628800, id="recursion"),
    pytest.param("__result__ = sorted(['b', 'A', 'c'], key=lambda s: s.lower())", ["A", "b", "c"], id="lambda-key"),
    pytest.param("__result__ = rich()", {"path": "/tmp/x", "when": "2024-01-02T03:04:05", "items": [1, 2]}, id="rich"),
    pytest.param("__result__ = (1, (2, 3))", [1, [2, 3]], id="tuple-to-list"),
    pytest.param("__result__ = [1 << 70, -(1 << 70)]", [1 << 70, -(1 << 70)], id="bigint"),
    pytest.param("__result__ = json.loads(json.dumps({'k': [1, 2.5, None]}))", {"k": [1, 2.5, None]}, id="json"),
    pytest.param("__result__ = json.decode(json.encode([True]))", [True], id="json-starlark-names"),
    pytest.param("__result__ = json.dumps({'b': 1, 'a': 2}, sort_keys=True)", '{"a": 2, "b": 1}', id="json-options"),
    pytest.param("__result__ = [math.sqrt(16), math.floor(2.7), math.factorial(5)]", [4.0, 2, 120], id="math"),
    pytest.param(
        "__result__ = [math.pi > 3.14, math.inf > 10, math.isnan(1.0)]", [True, True, False], id="math-consts"
    ),
    pytest.param(
        "__result__ = [sum([1, 2, 3]), sum([0.5], 1), round(2.567, 2), round(2.5)]", [6, 1.5, 2.57, 2], id="sum"
    ),
    pytest.param(
        "x = 3.14159\n__result__ = f'{x:.2f}|{42:>5}|{\"a\"!r}|{x=:.1f}'", '3.14|   42|"a"|x=3.1', id="fstring"
    ),
    pytest.param("d = {'k': [1, 2]}\n__result__ = f\"{d['k'][1] + 1} {{lit}}\"", "3 {lit}", id="fstring-expr"),
    pytest.param("__result__ = '%s-%d' % ('a', 3) + ' {}'.format('b')", "a-3 b", id="percent-format"),
    pytest.param("__result__ = format(1234.5, ',.1f')", "1,234.5", id="format"),
    pytest.param("__result__ = [pow(2, 10), pow(2, -1), pow(3, 4, 5)]", [1024, 0.5, 1], id="pow"),
    pytest.param(
        "__result__ = list(map(lambda x: x * 2, filter(lambda x: x > 1, [1, 2, 3])))", [4, 6], id="map-filter"
    ),
    pytest.param("s = struct(a=1)\n__result__ = s.a", 1, id="struct"),
    pytest.param("__result__ = [t['name'] for t in tools('echo')]", ["slow_echo"], id="tools-search"),
    pytest.param("__result__ = 'def add(a: int, b: int) -> int' in help('add')", True, id="help"),
    pytest.param("__result__ = None", None, id="none"),
    pytest.param("_private = 4\n__result__ = _private", 4, id="underscore-names-are-legal"),
]


@pytest.mark.parametrize(("code", "expected"), BENIGN)
async def test_benign_programs_compute_correct_answers(shared_runtime: Runtime, code: str, expected: object) -> None:
    data = await run_starlark(shared_runtime, code)
    assert data["status"] == "ok", data["error"]
    assert data["result"] == expected
    assert data["hint"] is None


ERRORS = [
    pytest.param("x = 1\ny = (", "SYNTAX_ERROR", 2, "invalid Starlark syntax", id="syntax"),
    pytest.param("x = 1\nwhile True:\n    pass", "SYNTAX_ERROR", 2, "no while loop", id="while"),
    pytest.param("try:\n    add(1, 2)\nexcept:\n    pass", "SYNTAX_ERROR", 1, "no try/except", id="try"),
    pytest.param("class A:\n    pass", "SYNTAX_ERROR", 1, "no classes", id="class"),
    pytest.param("x = 2 ** 8", "SYNTAX_ERROR", 1, "use pow(x, y)", id="power-operator"),
    pytest.param("import os", "IMPORT_FORBIDDEN", 1, "not available", id="import"),
    pytest.param("from os import path", "IMPORT_FORBIDDEN", 1, "not available", id="from-import"),
    pytest.param('load("x.star", "y")', "IMPORT_FORBIDDEN", 1, "not available", id="load"),
    pytest.param("x = 1\ny = nope + 1", "NAME_NOT_FOUND", 2, "'nope' is not defined", id="name"),
    pytest.param("open('/etc/passwd')", "NAME_NOT_FOUND", 1, "'open'", id="open"),
    pytest.param("breakpoint()", "NAME_NOT_FOUND", 1, "'breakpoint'", id="breakpoint"),
    pytest.param("x = {}\n\nx['k']", "RUNTIME_ERROR", 3, 'Key `"k"` was not found', id="key"),
    pytest.param("x = 1\nx.foo = 2", "RUNTIME_ERROR", 2, "not supported", id="setattr"),
    pytest.param("def f():\n    return 1 / 0\nf()", "RUNTIME_ERROR", 2, "division by zero", id="in-function"),
    pytest.param("fail('stop here')", "RUNTIME_ERROR", 1, "stop here", id="fail"),
    pytest.param("def f(n):\n    return f(n + 1)\nf(0)", "RUNTIME_ERROR", None, "RecursionError", id="recursion"),
    pytest.param("math.sqrt(-1)", "RUNTIME_ERROR", 1, "ValueError: math domain error", id="math-domain"),
    pytest.param("math.factorial(1000000)", "MEMORY_LIMIT", 1, "too large", id="math-size"),
    pytest.param("json.loads('NaN')", "RUNTIME_ERROR", 1, "NaN", id="json-nan"),
    pytest.param("round(5, -10000000)", "RUNTIME_ERROR", 1, "ndigits must be between", id="round-digits"),
    pytest.param("add(len, 1)", "RUNTIME_ERROR", 1, "function value, which has no JSON form", id="tool-arg-function"),
    pytest.param("add('x', 1)", "INVALID_ARGUMENT", 1, "add()", id="tool-arg-invalid"),
    pytest.param("x = 1\nrefuse('NOPE')", "NOPE", 2, "refused on purpose", id="tool-error-code"),
    pytest.param("crash()", "TOOL_ERROR", 1, "the tool broke", id="tool-crash"),
    pytest.param("__result__ = len", "RESULT_NOT_SERIALIZABLE", None, "function value", id="result-function"),
    pytest.param("range(3)", "RESULT_NOT_SERIALIZABLE", None, "last expression is a range", id="last-range"),
    pytest.param("__result__ = 'x' * 2000000", "RESULT_TOO_LARGE", None, "bytes of JSON", id="result-size"),
]


@pytest.mark.parametrize(("code", "error_code", "line", "text"), ERRORS)
async def test_errors_map_to_the_python_engine_codes(
    shared_runtime: Runtime, code: str, error_code: str, line: int | None, text: str
) -> None:
    data = await run_starlark(shared_runtime, code)
    assert data["status"] == "error"
    error = data["error"]
    assert error["code"] == error_code, error
    assert error["line"] == line, error
    assert text in error["message"], error
    if line is not None:
        assert error["source_line"] == code.splitlines()[line - 1]


COMMON_MISTAKES = [
    pytest.param(
        "for i in range(3000000000):\n    pass",
        "RUNTIME_ERROR",
        "range() takes integers from -2**31 to 2**31 - 1 (2,147,483,647) in Starlark",
        id="range-past-int32",
    ),
    pytest.param(
        "n = pow(2, 40)\nx = [i for i in range(0, n, 2)]",
        "RUNTIME_ERROR",
        "range() takes integers from -2**31 to 2**31 - 1",
        id="range-stop-past-int32",
    ),
    pytest.param(
        "parts = 'a,b'.split(',', pow(2, 33))",
        "RUNTIME_ERROR",
        "parameter `maxsplit` takes an integer from -2**31 to 2**31 - 1",
        id="other-int32-parameter",
    ),
    pytest.param("x = [0] * pow(10, 10)", "RUNTIME_ERROR", "10,000,000,000 is too big here", id="repeat-past-int32"),
    pytest.param("x = range('a')", "RUNTIME_ERROR", "Type of argument 1 doesn't match", id="positional-parameter"),
    pytest.param("for c in 'abc':\n    pass", "RUNTIME_ERROR", "loop over s.elems()", id="iterate-string"),
    pytest.param(
        "for x in 5:\n    pass", "RUNTIME_ERROR", "a value of type int cannot be looped over", id="iterate-int"
    ),
    pytest.param("x = [3, 1]\nx.sort()", "RUNTIME_ERROR", "write x = sorted(x)", id="list-sort"),
    pytest.param("d = {'a': 1}\nd.a", "RUNTIME_ERROR", 'read the key with d["a"] or d.get("a")', id="dict-attribute"),
    pytest.param("d = {}\nd.a = 1", "RUNTIME_ERROR", 'write d["a"] = value', id="dict-set-attribute"),
    pytest.param("s = 'abc'\ns[0] = 'x'", "RUNTIME_ERROR", "strings and tuples are immutable", id="immutable"),
    pytest.param("def f(a):\n    return a\nf(1, 2)", "RUNTIME_ERROR", "for call to f()", id="extra-argument"),
    pytest.param("seen = set()", "NAME_NOT_FOUND", "Starlark has no set: use a dict", id="set"),
    pytest.param("x = {1, 2}", "SYNTAX_ERROR", "Starlark has no sets", id="set-literal"),
    pytest.param("isinstance(1, 'int')", "NAME_NOT_FOUND", 'compare type(x) == "int"', id="isinstance"),
]


@pytest.mark.parametrize(("code", "error_code", "text"), COMMON_MISTAKES)
async def test_common_mistakes_get_messages_that_say_what_to_do(
    shared_runtime: Runtime, code: str, error_code: str, text: str
) -> None:
    """Issue 13: range() past 2**31 - 1 said "Error unpacking value for parameter `a1` of type `int`"."""
    error = (await run_starlark(shared_runtime, code))["error"]
    assert error["code"] == error_code, error
    assert text in error["message"], error
    assert "a1" not in error["message"] and "program.star" not in error["message"]
    if error_code == "NAME_NOT_FOUND":
        assert "suggested_value" not in error or error["suggested_value"] is None  # not 'str' for 'set'


async def test_syntax_error_has_column_and_misspelled_tool_a_suggestion(shared_runtime: Runtime) -> None:
    syntax = (await run_starlark(shared_runtime, "x = 1\ny = [1, 2\nz = 3"))["error"]
    assert (syntax["code"], syntax["line"], syntax["column"]) == ("SYNTAX_ERROR", 3, 1)
    name = (await run_starlark(shared_runtime, "reed_file('notes.md')"))["error"]
    assert (name["code"], name["suggested_value"], name["column"]) == ("NAME_NOT_FOUND", "read_file", 1)


async def test_a_failing_tool_call_ends_the_run_with_the_tools_error(shared_runtime: Runtime) -> None:
    code = "print('before')\nrefuse('GONE')\nprint('after')\n__result__ = 1"
    data = await run_starlark(shared_runtime, code)
    assert data["error"]["code"] == "GONE"
    assert data["error"]["tool_name"] == "refuse"
    assert data["error"]["suggested_value"] == "something else"
    assert data["stdout"] == "before\n"
    assert [(c["tool"], c["ok"], c["error_code"]) for c in data["calls"]] == [("refuse", False, "GONE")]


async def test_result_rule_last_expression_and_hints(shared_runtime: Runtime) -> None:
    last = await run_starlark(shared_runtime, "x = add(1, 1)\nx * 10")
    assert (last["result"], last["status"]) == (20, "ok")
    assert "last expression (line 2)" in last["hint"]
    unset = await run_starlark(shared_runtime, "x = 1")
    assert unset["result"] is None
    assert "never set" in unset["hint"]
    conditional = await run_starlark(shared_runtime, "if False:\n    __result__ = 1")
    assert "never set" in conditional["hint"]
    printed = await run_starlark(shared_runtime, "print('answer: 42')")
    assert not printed.get("hint"), printed
    both = await run_starlark(shared_runtime, "__result__ = 'chosen'\nlen")
    assert (both["status"], both["result"]) == ("ok", "chosen")


async def test_print_is_captured_capped_and_can_be_discarded(shared_runtime: Runtime) -> None:
    data = await run_starlark(
        shared_runtime, "print('a', 1, [1, (2, 3)], None, sep='|', end='!')\nprint(struct(k=True))"
    )
    assert data["stdout"] == "a|1|[1, (2, 3)]|None!struct(k=True)\n"
    assert data["truncated"] is False
    flood = await run_starlark(shared_runtime, "for i in range(1000):\n    print('x' * 100)", max_output_bytes=1000)
    assert (flood["status"], len(flood["stdout"]), flood["truncated"]) == ("ok", 1000, True)
    wide = await run_starlark(shared_runtime, "print('é' * 600)", max_output_bytes=1000)
    assert (wide["stdout"], wide["truncated"]) == ("é" * 500, True)
    quiet = await run_starlark(shared_runtime, "print('secret')\n__result__ = 1", capture_print=False)
    assert (quiet["stdout"], quiet["result"]) == ("", 1)


async def test_tool_call_limit(shared_runtime: Runtime) -> None:
    data = await run_starlark(shared_runtime, "for i in range(30):\n    add(i, 1)", max_tool_calls=20)
    assert data["error"]["code"] == "TOOL_CALL_LIMIT"
    assert len(data["calls"]) == 20


async def test_each_run_starts_with_a_fresh_module(shared_runtime: Runtime) -> None:
    await run_starlark(shared_runtime, "secret = 'left-behind'\nprint = None")
    data = await run_starlark(shared_runtime, "print('fresh')\n__result__ = secret")
    assert data["error"]["code"] == "NAME_NOT_FOUND"
    assert (await run_starlark(shared_runtime, "print('fresh')"))["stdout"] == "fresh\n"


UNREACHABLE = [
    pytest.param("dir(read_file)", [], id="dir-tool"),
    pytest.param("str(read_file)", "<python callable>", id="str-tool"),
    pytest.param(
        "[hasattr(read_file, a) for a in ['__globals__', '__call__', 'func_globals']]", [False] * 3, id="attrs"
    ),
    pytest.param("dir(json)", ["decode", "dumps", "encode", "loads"], id="json-fields"),
    pytest.param("type(math.sqrt)", "python_callable_value", id="type-of-callable"),
]


@pytest.mark.parametrize(("code", "expected"), UNREACHABLE)
async def test_injected_callables_expose_nothing_of_the_host(
    shared_runtime: Runtime, code: str, expected: object
) -> None:
    data = await run_starlark(shared_runtime, f"__result__ = {code}")
    assert data["result"] == expected, data["error"]


async def test_getattr_finds_nothing_on_a_tool(shared_runtime: Runtime) -> None:
    data = await run_starlark(shared_runtime, "__result__ = getattr(read_file, '__globals__')")
    assert data["error"]["code"] == "RUNTIME_ERROR"


# Starlark has no while and refuses to mutate what it iterates, but for-loops over huge ranges, recursion
# and single builtins that run for seconds (no check inside them: the pool kills the worker) all exist.
RUNAWAYS = [
    pytest.param("for i in range(1000000000):\n    for j in range(1000000000):\n        pass", False, id="nested-for"),
    pytest.param(
        "def f(d):\n    if d:\n        f(d - 1)\n        f(d - 1)\n        f(d - 1)\nf(40)", False, id="exp-recursion"
    ),
    pytest.param("x = [0]\nfor i in range(2000000000):\n    x[0] = i", False, id="long-range"),
    pytest.param("s = 'a' * 100000000\nfor i in range(100):\n    s.count('aa')", True, id="uninterruptible-builtin"),
    pytest.param("x = 3\nfor i in range(22):\n    x = x * x\nstr(x)", True, id="bigint-to-str"),
]


RUNAWAY_TIMEOUT_S = 0.4
"""Under the pool's LONG_RUN_S: the worker keeps its CPU priority to the deadline. A demoted one (nice 19) on a
loaded machine may not get the CPU to report its own TIMEOUT within KILL_GRACE_S, and is killed instead."""


@pytest.mark.parametrize(("code", "killed"), RUNAWAYS)
async def test_runaways_time_out_within_the_deadline(workspace: Path, code: str, killed: bool) -> None:
    assert RUNAWAY_TIMEOUT_S < LONG_RUN_S
    async with running(workspace, timeout_s=RUNAWAY_TIMEOUT_S) as runtime:
        started = time.monotonic()
        data = await run_starlark(runtime, code)
        elapsed = time.monotonic() - started
        assert data["error"]["code"] == "TIMEOUT", data["error"]
        assert elapsed < RUNAWAY_TIMEOUT_S + 0.5, f"TIMEOUT after {elapsed:.2f} s"
        assert runtime.pool.kills == int(killed)  # interruptible code stops itself at the deadline
        assert (await run_starlark(runtime, "__result__ = add(1, 2)"))["result"] == 3


MEMORY_BOMBS = [
    pytest.param("x = 'a' * 1000000000", id="str-mult"),
    pytest.param("x = list(range(100000000))", id="list-range"),
    pytest.param("s = ''\nfor i in range(1000000):\n    s += 'x'", id="garbage-in-one-statement"),
    pytest.param("x = 1 << 100000\nfor i in range(40):\n    x = x * x", id="bigint"),
]


@pytest.mark.parametrize("code", MEMORY_BOMBS)
async def test_memory_bombs_end_cleanly(shared_runtime: Runtime, code: str) -> None:
    data = await run_starlark(shared_runtime, code)
    assert data["error"]["code"] == "MEMORY_LIMIT", data["error"]
    assert (await run_starlark(shared_runtime, "__result__ = 'alive'"))["result"] == "alive"


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("x = " + "[" * 3000 + "]" * 3000, id="brackets"),
        pytest.param("x = " + "lambda: " * 1500 + "1", id="lambdas"),
        pytest.param("x = 'a'" + ".upper()" * 2500, id="method-chain"),
        pytest.param("x = 1" + " + 1" * 5000, id="operator-chain"),
    ],
)
async def test_deeply_nested_source_is_refused_before_it_can_crash_the_compiler(runtime: Runtime, code: str) -> None:
    data = await run_starlark(runtime, code)
    assert data["error"]["code"] == "SYNTAX_ERROR", data["error"]
    assert "nested too deeply" in data["error"]["message"]
    assert runtime.pool.kills == 0


async def test_a_dict_past_the_memory_limit_is_named_as_memory(runtime: Runtime) -> None:
    """Regression: starlark-rust crashes (SIGSEGV) when a dict outgrows memory_mb; the model was told to keep its
    data flat (a nesting problem), which a flat dict of three million items already is."""
    data = await run_starlark(runtime, "x = {}\nfor i in range(3000000):\n    x[str(i)] = i")
    assert data["error"]["code"] == "RUNTIME_ERROR", data["error"]
    assert f"memory limit of {runtime.settings.memory_mb} MB" in data["error"]["message"], data["error"]
    assert (await run_starlark(runtime, "__result__ = 'alive'"))["result"] == "alive"


async def test_deeply_nested_data_crashes_only_the_worker(runtime: Runtime) -> None:
    data = await run_starlark(runtime, "x = []\nfor i in range(300000):\n    x = [x]\nprint(x)")
    assert data["error"]["code"] == "RUNTIME_ERROR"
    assert "nested too deeply" in data["error"]["message"]
    assert (await run_starlark(runtime, "__result__ = 'alive'"))["result"] == "alive"


# ---------------------------------------------------------------- without a worker


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("x = f'{a}'", "x = '{}'.format((a))", id="name"),
        pytest.param("f\"{d['k']}!\"", "\"{}!\".format((d['k']))", id="subscript"),
        pytest.param("f'{x!r:>{w}}'", "'{}'.format(_attp_format(repr((x)), '>{}'.format((w))))", id="nested-spec"),
        pytest.param("f'{{a}} {b=}'", "'{{a}} b={}'.format(repr((b)))", id="escapes-and-debug"),
        pytest.param("rf'\\d{n}'", "r'\\d{}'.format((n))", id="raw"),
        pytest.param("f'{a != b}'", "'{}'.format((a != b))", id="not-equal-is-no-conversion"),
        pytest.param('f"""\n{a}\n"""', '"""\n{}\n""".format((a))', id="multi-line-keeps-lines"),
        pytest.param("'{a}' + 'f{b}'", "'{a}' + 'f{b}'", id="not-fstrings"),
        pytest.param("f'{'", "f'{'", id="malformed-left-alone"),
    ],
)
def test_fstrings_become_format_calls(source: str, expected: str) -> None:
    rewritten, lines = rewrite_fstrings(source)
    assert rewritten == expected
    assert rewritten.count("\n") == source.count("\n")
    assert lines == (frozenset() if rewritten == source else frozenset(range(1, source.count("\n") + 2)))


def test_check_parses_without_running() -> None:
    assert starlark_engine.check("x = [i for i in range(3)]\nprint(f'{x[0]}')") is None
    problem = starlark_engine.check("x = 1\ny = (")
    assert problem is not None
    assert (problem.code, problem.line, problem.column) == ("SYNTAX_ERROR", 2, 6)
    imported = starlark_engine.check("import json")
    assert imported is not None
    assert (imported.code, imported.line, imported.column) == ("IMPORT_FORBIDDEN", 1, 1)
    deep = starlark_engine.check("x = " + "(" * (MAX_NESTING + 10) + ")" * (MAX_NESTING + 10))
    assert deep is not None
    assert "nested too deeply" in deep.message


def test_missing_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "starlark", None)  # what `import starlark` sees without the extra
    assert starlark_engine.available() is False
    with pytest.raises(starlark_engine.EngineUnavailable) as raised:
        starlark_engine.StarlarkEngine()
    assert "pip install 'attp-server[starlark]'" in str(raised.value)
    assert raised.value.code == "INVALID_ARGUMENT"
    problem = starlark_engine.check("x = 1")
    assert problem is not None
    assert problem.code == "INVALID_ARGUMENT"
    assert "pip install 'attp-server[starlark]'" in problem.message


# ---------------------------------------------------------------- wired into the runtime, the CLI and the MCP tool


@pytest.fixture
async def offering_starlark(workspace: Path) -> AsyncIterator[Runtime]:
    """A runtime whose calls may pick starlark (the `engines` setting), python staying the default."""
    async with running(workspace, engines=["starlark"]) as runtime:
        yield runtime


async def test_execute_with_the_engine_input(offering_starlark: Runtime) -> None:
    runtime = offering_starlark
    code = "_rows = [r['name'] for r in records(2)]\nprint(f'{len(_rows)} rows')\n__result__ = dir(_rows)[:1]"
    result = await runtime.execute(ExecuteRequest(code=code, engine="starlark"))
    assert result.status == "ok", result.error  # `_` names and dir() are Starlark, not refused by the Python check
    assert (result.result, result.stdout) == (["append"], "2 rows\n")
    python = await runtime.execute(ExecuteRequest(code="__result__ = 2 ** 3", engine="python"))
    assert python.result == 8
    error = await runtime.execute(ExecuteRequest(code="x = {}\nx['k']", engine="starlark"))
    assert error.error is not None
    assert "no try/except" in (error.error.solution or "")


async def test_starlark_setting_changes_the_default_and_the_texts(workspace: Path) -> None:
    async with running(workspace, engine="starlark") as runtime:
        data = await run_code(runtime, "__result__ = [i * 2 for i in range(3)]")
        assert data["result"] == [0, 2, 4]
        assert "Run a short Starlark program" in runtime.catalog.description
        assert "no while" in runtime.catalog.description
        assert "Starlark" in runtime.catalog.prompt()
        assert (await run_code(runtime, "while True:\n    pass"))["error"]["code"] == "SYNTAX_ERROR"
        tam = "<|[REQUEST_TOOL]|>\ncommand:「始」add「末」\na:「始」2「末」\nb:「始」3「末」\n<|[END_TOOL]|>"
        translated = await runtime.execute(ExecuteRequest(envelope=tam))  # TAM always runs as Python
        assert translated.status == "ok", translated.error


async def test_without_the_extra_starlark_is_a_clear_error(
    offering_starlark: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = offering_starlark
    uninstalled = dataclasses.replace(ENGINES["starlark"], package="starlark_is_not_installed_here")
    monkeypatch.setitem(ENGINES, "starlark", uninstalled)  # type: ignore[index]  # the table, as a dict
    result = await runtime.execute(ExecuteRequest(code="__result__ = 1", engine="starlark"))
    assert result.error is not None
    assert (result.error.code, result.error.parameter_name) == ("INVALID_ARGUMENT", "engine")
    assert "pip install 'attp-server[starlark]'" in result.error.message
    with pytest.raises(ValidationError, match=r"pip install 'attp-server\[starlark\]'"):
        Settings(engine="starlark")


def test_attp_check_parses_starlark(capsys: pytest.CaptureFixture[str], workspace: Path) -> None:
    flags = ["--engine", "starlark", "--workspace", str(workspace), "--toolpack", "files"]
    assert cli_main(["check", *flags, "--code", "x = [1]\nfor i in x:\n    print(f'{x[0]}')"]) == 0
    assert cli_main(["check", *flags, "--code", "x = 1\nwhile x:\n    pass"]) == 1
    out = capsys.readouterr().out
    assert '"code":"SYNTAX_ERROR"' in out
    assert '"line":2' in out


async def test_mcp_tool_takes_the_engine_argument(offering_starlark: Runtime) -> None:
    async with Client(create_server(offering_starlark)) as client:
        result = await client.call_tool(
            "attp_execute", {"code": "x = add(2, 3)\n__result__ = f'{x:03d}'", "engine": "starlark"}
        )
    assert result.is_error is False
    assert result.structured_content is not None
    assert result.structured_content["result"] == "005"


MEMORY_SEED_PROGRAM = """
# 1. 获取所有段
segments = list_segments()
for seg in segments:
    print(f"Segment: {seg['id']}, Type: {seg['type']}")

# 2. 获取页面
page = get_page("usr-0")
print(f"Page: {page['name']}")

# 3. 创建新页面
new_index = create_detail_page(
    name="新想法",
    description="关于工具调用的思考",
    detail="详细内容...",
    parent_index="usr-0",
)

# 4. 展开/隐藏
expand_details(new_index)
hide_details(new_index)

# 5. 搜索
results = find_page("工具")
for r in results:
    print(f"Found: {r['name']}")

# 6. 结果赋值
__result__ = new_index
"""


@pytest.mark.process
@pytest.mark.anyio
async def test_seed_002_program_on_the_memory_pack_over_http(tmp_path: Path) -> None:
    """Seed 002's Starlark example, with its page id adapted to ours, through a real server on the memory pack."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {"ATTP_DB_PATH": str(tmp_path / "memory.sqlite3"), "ATTP_ENGINE": "starlark"}
    with serving_http(workspace, env=env) as served:
        async with served.client() as client:
            result = await client.call_tool("attp_execute", {"code": MEMORY_SEED_PROGRAM})
            view = await client.call_tool("attp_execute", {"code": "__result__ = view('usr')"})
    data = result.structured_content
    assert data is not None and data["status"] == "ok", data
    assert data["result"] == "usr-1"
    assert data["stdout"].splitlines() == [
        "Segment: sys, Type: system",
        "Segment: usr, Type: user",
        "Page: User",
        "Found: 新想法",
    ]
    assert [c["tool"] for c in data["calls"]] == [
        "list_segments", "get_page", "create_detail_page", "expand_details", "hide_details", "find_page",
    ]  # fmt: skip
    assert view.structured_content is not None and "新想法" in view.structured_content["result"]
