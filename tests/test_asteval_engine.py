"""``engine = "asteval"``: asteval's own Interpreter through the real path (runtime -> worker process -> tools).

Every sentence the description says of asteval's language (`sandbox/engines/asteval/language.py`) is run here:
what works, what is refused with what to write instead, and asteval's own semantics (scoping, ``except``
matching) that differ from Python.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from harness import DEMO_PACKS, execute, in_process, run_code, running, stdio_client

from attp_server.access_config import AccessRule
from attp_server.faces.cli import main as cli_main
from attp_server.run.checks import check_asteval
from attp_server.run.runtime import CallContext, ExecuteRequest, Runtime
from attp_server.sandbox.engines import ENGINES
from attp_server.sandbox.engines.asteval import language
from attp_server.sessions.registry import Caller
from attp_server.settings import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def asteval(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    """One runtime whose default engine is asteval, with two workers (each asteval run retires its worker)."""
    workspace = tmp_path_factory.mktemp("asteval") / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    async with running(workspace, engine="asteval", workers=2) as runtime:
        yield runtime


async def run(runtime: Runtime, code: str) -> dict[str, Any]:
    return await run_code(runtime, code)


# ---------------------------------------------------------------- the same tools, modules, result and print


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param("__result__ = read_file('notes.txt').split()", ["alpha", "beta"], id="tool"),
        pytest.param("__result__ = files.read_file('notes.txt').count('a')", 3, id="pack-tool"),
        pytest.param("__result__ = add(2, 3) + add(a=1, b=1)", 7, id="keywords"),
        pytest.param("__result__ = parallel(add, [{'a': 1, 'b': 2}, {'a': 3, 'b': 4}])", [3, 7], id="parallel"),
        pytest.param("__result__ = 'def add(a: int, b: int) -> int' in help('add')", True, id="help"),
        pytest.param("__result__ = json.loads(json.dumps({'k': [1, 2]}))", {"k": [1, 2]}, id="json"),
        pytest.param("import json\n__result__ = json.dumps([1])", "[1]", id="import"),
        pytest.param(
            "from collections import Counter\n__result__ = Counter('abca').most_common(1)", [["a", 2]], id="from-import"
        ),
        pytest.param(
            "__result__ = [math.floor(2.5), statistics.mean([1, 2, 3]), re.findall(r'\\d', 'a1b2')]",
            [2, 2, ["1", "2"]],
            id="modules",
        ),
        pytest.param("__result__ = datetime.date(2024, 1, 2).isoformat()", "2024-01-02", id="datetime"),
        pytest.param(
            "r = random.Random(7)\n__result__ = r.randint(1, 99) == random.Random(7).randint(1, 99)",
            True,
            id="seeded-random",
        ),
        pytest.param(
            "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n__result__ = fib(15)", 610, id="recursion"
        ),
        pytest.param(
            "__result__ = sorted({'a': 3, 'b': 1}.items(), key=lambda kv: kv[1])", [["b", 1], ["a", 3]], id="lambda-key"
        ),
        pytest.param(
            "__result__ = [f'{3.14159:.2f}', '%s-%d' % ('a', 3), __name__]",
            ["3.14", "a-3", "__main__"],
            id="formatting",
        ),
        pytest.param("with io.StringIO() as f:\n    f.write('hi')\n    __result__ = f.getvalue()", "hi", id="with"),
        pytest.param("d = {'a': 1, 'b': 2}\ndel d['a']\nassert d == {'b': 2}\n__result__ = d", {"b": 2}, id="del"),
        pytest.param("for i in range(3):\n    pass\nelse:\n    __result__ = i", 2, id="for-else"),
        pytest.param(
            "out = []\ntry:\n    out.append(1)\nexcept Exception:\n    out.append(2)\nelse:\n    out.append(3)\n"
            "finally:\n    out.append(4)\n__result__ = out",
            [1, 3, 4],
            id="try-else-finally",
        ),
        pytest.param(
            "__result__ = [sorted({x % 3 for x in range(9)}), {k: k * 2 for k in 'ab'}]",
            [[0, 1, 2], {"a": "aa", "b": "bb"}],
            id="comprehensions",
        ),
    ],
)
async def test_programs_run_with_the_same_tools_and_modules(asteval: Runtime, code: str, expected: object) -> None:
    data = await run(asteval, code)
    assert data["status"] == "ok", data["error"]
    assert data["result"] == expected


async def test_a_tools_error_keeps_every_field_caught_or_not(asteval: Runtime) -> None:
    caught = await run(
        asteval, "try:\n    read_file('note.txt')\nexcept ToolError as e:\n    __result__ = [e.code, e.suggested_value]"
    )
    assert caught["result"] == ["FILE_NOT_FOUND", "notes.txt"]
    uncaught = await run(asteval, "x = 1\n\nread_file('note.txt')")
    error = uncaught["error"]
    assert (error["code"], error["line"], error["tool_name"], error["suggested_value"]) == (
        "FILE_NOT_FOUND", 3, "read_file", "notes.txt"
    )  # fmt: skip


async def test_print_last_expression_and_hints_as_on_python(asteval: Runtime) -> None:
    data = await run(asteval, "print('a', 'b', sep='-', end='!')\nprint(1)\n2 + 3\nx = 4")
    assert (data["stdout"], data["result"]) == ("a-b!1\n", 5)
    assert "last expression (line 3)" in data["hint"]
    assert "already available by name" in (await run(asteval, "import math\n__result__ = 1"))["hint"]
    assert (await run(asteval, "from math import sqrt\n__result__ = sqrt(4)"))["hint"] is None  # binds a new name
    refused = await run(asteval, "print('x', file=None or 1)")
    assert refused["error"]["code"] == "FORBIDDEN"


# ---------------------------------------------------------------- errors: the same codes, with lines


@pytest.mark.parametrize(
    ("code", "error_code", "line", "text"),
    [
        pytest.param("x = (\n", "SYNTAX_ERROR", 1, "never closed", id="syntax"),
        pytest.param("y = 1\nz = undefined_thing + y", "NAME_NOT_FOUND", 2, "undefined_thing", id="name"),
        pytest.param("def f(a):\n    return {}[a]\n\nf(3)", "RUNTIME_ERROR", 2, "KeyError: 3", id="in-function"),
        pytest.param("raise ValueError('boom')", "RUNTIME_ERROR", 1, "ValueError: boom", id="raise"),
        pytest.param("import os", "IMPORT_FORBIDDEN", 1, "module 'os' is not available", id="import"),
        pytest.param("from json import nope", "IMPORT_FORBIDDEN", 1, "cannot import name 'nope'", id="from-import"),
        pytest.param(
            "x = 1\nopen('notes.txt')", "FORBIDDEN", 2, "files are read and written with the tools", id="open"
        ),
        pytest.param("eval('1')", "FORBIDDEN", 1, "'eval' is not available", id="eval"),
        pytest.param("'{}'.format(1)", "FORBIDDEN", 1, "write an f-string", id="str-format"),
        pytest.param("x = 2 ** 20000", "RUNTIME_ERROR", 1, "max exponent is 10000", id="asteval-exponent"),
        pytest.param("def r(n):\n    return r(n + 1)\nr(0)", "RUNTIME_ERROR", None, "RecursionError", id="recursion"),
        pytest.param("a = [0] * (10 ** 9)", "MEMORY_LIMIT", 1, "out of memory", id="memory"),
        pytest.param("__result__ = print", "RESULT_NOT_SERIALIZABLE", None, "", id="result"),
        pytest.param("for i in range(300):\n    add(1, 2)", "TOOL_CALL_LIMIT", 1, "", id="tool-calls"),
    ],
)
async def test_errors_map_to_the_same_codes_with_lines(
    asteval: Runtime, code: str, error_code: str, line: int | None, text: str
) -> None:
    error = (await run(asteval, code))["error"]
    assert error is not None
    assert (error["code"], error.get("line")) == (error_code, line), error
    assert text in error["message"]


async def test_a_runaway_ends_at_the_deadline(asteval: Runtime) -> None:
    """asteval has no time limit: the worker's alarm stops it at its line (or, on a loaded machine, the server's
    kill a moment later, which has no line to give)."""
    error = (await run(asteval, "x = 0\nwhile True:\n    x += 1"))["error"]
    assert error["code"] == "TIMEOUT"
    assert error.get("line") in (2, None)


async def test_a_misspelled_tool_gets_a_suggestion(asteval: Runtime) -> None:
    error = (await run(asteval, "read_fil('notes.txt')"))["error"]
    assert (error["code"], error["suggested_value"]) == ("NAME_NOT_FOUND", "read_file")


# ---------------------------------------------------------------- the language, as the description says it


LACKING = [
    pytest.param("class A:\n    pass", "class", id="class"),
    pytest.param("__result__ = sum(x for x in [1, 2])", "sum([x * x for x in xs])", id="generator-expression"),
    pytest.param("def g():\n    yield 1", "yield", id="yield"),
    pytest.param("n = 0\ndef f():\n    global n\n    n = 1", "global", id="global"),
    pytest.param("def f():\n    n = 0\n    def g():\n        nonlocal n", "nonlocal", id="nonlocal"),
    pytest.param("def f(a, b):\n    return a\nf(*[1, 2])", "star unpacking", id="star-call"),
    pytest.param("first, *rest = [1, 2, 3]", "star unpacking", id="star-assign"),
    pytest.param("a = {'x': 1}\nb = {**a}", "{**mapping}", id="dict-unpacking"),
    pytest.param("if (n := 3) > 1:\n    pass", ":=", id="walrus"),
    pytest.param("match 1:\n    case 1:\n        pass", "match", id="match"),
    pytest.param("def d(f):\n    return f\n@d\ndef g():\n    pass", "decorators", id="decorator"),
    pytest.param("def f(a, *, b=1):\n    return a + b", "keyword-only", id="keyword-only"),
    pytest.param("try:\n    pass\nexcept (KeyError, ValueError):\n    pass", "one class per except", id="except-tuple"),
    pytest.param("try:\n    pass\nexcept KeyError:\n    raise", "bare raise", id="bare-raise"),
    pytest.param("try:\n    pass\nexcept KeyError as e:\n    raise ValueError('x') from e", "from", id="raise-from"),
    pytest.param("x: int = 1", "annotated", id="annotated"),
]


@pytest.mark.parametrize(("code", "text"), LACKING)
async def test_what_the_language_lacks_is_refused_before_anything_runs(asteval: Runtime, code: str, text: str) -> None:
    data = await run(asteval, "write_file('ran.txt', 'yes')\n" + code)
    assert data["error"]["code"] == "FORBIDDEN", data
    assert text in data["error"]["message"]
    assert data["error"]["line"] > 1
    assert (await run(asteval, "__result__ = list_files('.')"))["result"] == ["notes.txt"]  # nothing ran
    assert check_asteval(code, asteval.registry.known_names()) is not None  # `attp check` says the same


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param("total = 0\ndef f():\n    total = 5\nf()\n__result__ = total", 0, id="assignments-dropped"),
        pytest.param("seen = []\ndef f(v):\n    seen.append(v)\nf(1)\n__result__ = seen", [1], id="mutations-kept"),
        pytest.param("x = 1\ndef f():\n    return x\nx = 2\n__result__ = f()", 2, id="names-at-call-time"),
        pytest.param(
            "try:\n    {}['a']\nexcept ToolError:\n    __result__ = 'caught'", "caught", id="except-toolerror"
        ),
    ],
)
async def test_asteval_semantics_the_description_states(asteval: Runtime, code: str, expected: object) -> None:
    data = await run(asteval, code)
    assert data["status"] == "ok", data["error"]
    assert data["result"] == expected


async def test_a_returned_function_does_not_keep_its_makers_names(asteval: Runtime) -> None:
    code = "def outer():\n    k = 5\n    def inner():\n        return k\n    return inner\n__result__ = outer()()"
    assert (await run(asteval, code))["error"]["code"] == "NAME_NOT_FOUND"


async def test_finally_does_not_run_after_a_return_in_its_try(asteval: Runtime) -> None:
    code = (
        "log = []\ndef f():\n    try:\n        return 1\n    finally:\n        log.append('f')\nf()\n__result__ = log"
    )
    assert (await run(asteval, code))["result"] == []


async def test_a_raise_directly_in_a_try_block_is_not_caught(asteval: Runtime) -> None:
    data = await run(asteval, "try:\n    raise ValueError('bad')\nexcept ValueError:\n    __result__ = 'caught'")
    assert data["error"]["message"] == "ValueError: bad"
    inside = "def f():\n    raise ValueError('bad')\ntry:\n    f()\nexcept ValueError:\n    __result__ = 'caught'"
    assert (await run(asteval, inside))["result"] == "caught"  # raised in a function: caught


def test_the_description_says_what_is_measured_here() -> None:
    stated = " ".join(language.LANGUAGE.rules)
    for construct in ("class", "generator expressions", "global/nonlocal", "*unpacking", "{**d}", ":=", "match",
                      "decorators", "keyword-only", "str.format", "except (A, B)", "bare raise", "raise ... from",
                      "except ToolError` catches every error", "directly in a try", "finally does not run"):  # fmt: skip
        assert construct in stated, construct


# ---------------------------------------------------------------- the symbol table and the process


async def test_nothing_of_asteval_s_default_symbol_table(asteval: Runtime) -> None:
    """asteval's default table has a read-only open, math's functions by bare name, and numpy when installed."""
    for name in ("open", "sqrt", "pi", "Group", "type", "dir", "array", "linspace", "SystemExit", "BaseException"):
        error = (await run(asteval, f"x = {name}"))["error"]
        assert error is not None and error["code"] in ("NAME_NOT_FOUND", "FORBIDDEN"), (name, error)
    shown = await run(asteval, "__result__ = [repr(read_file), repr(json), repr(print), repr(files)]")
    assert shown["result"] == ["<tool read_file>", "<namespace json>", "<built-in function print>",
                               "<namespace files>"]  # fmt: skip


async def test_numpy_installed_beside_it_is_not_in_the_symbols(workspace: Path) -> None:
    """asteval imports numpy when it is installed and puts ~180 of its functions in its default table; here the
    engine keeps working (the worker's lockdown holds with numpy installed) and none of them is a name."""
    pytest.importorskip("numpy")  # installed beside attp-server in .ci/run (numpy in the same environment)
    async with running(workspace, engine="asteval") as runtime:
        assert (await run(runtime, "__result__ = sum([1, 2])"))["result"] == 3
        for name in ("array", "linspace", "ndarray", "numpy"):
            assert (await run(runtime, f"x = {name}"))["error"]["code"] == "NAME_NOT_FOUND"


async def test_a_module_cannot_be_changed(asteval: Runtime) -> None:
    assert (await run(asteval, "json.dumps = 1"))["error"]["message"] == "AttributeError: json is read-only"
    assert "does not support item assignment" in (await run(asteval, "json.members['x'] = 1"))["error"]["message"]


async def test_what_a_run_sets_on_shared_objects_is_gone_in_the_next(workspace: Path) -> None:
    """asteval lets a program set attributes on a function it reaches; the worker it ran in is never reused, so
    the next run (one worker: the same one if it were reused) does not see it."""
    async with running(workspace, engine="asteval", workers=1) as runtime:
        assert (await run(runtime, "json.dumps.left = 'by run 1'\n__result__ = json.dumps.left"))["result"]
        assert (await run(runtime, "__result__ = json.dumps.left"))["result"] is None
    assert ENGINES["asteval"].reuse is False


async def test_kept_names_across_calls_of_a_session(workspace: Path) -> None:
    settings = Settings(workspace=workspace, toolpacks=DEMO_PACKS, engine="asteval", db_path=workspace.parent / "m.db")
    async with in_process(settings) as client:
        first = await execute(client, "total = add(2, 3)\ndef double(v):\n    return v * 2")
        second = await execute(client, "__result__ = double(total)", session=first["session"])
    assert second["result"] == 10, second


# ---------------------------------------------------------------- the engines setting and the call's choice


async def test_the_engines_setting_and_a_calls_choice(workspace: Path) -> None:
    async with running(workspace, engines=["asteval"]) as runtime:
        assert "Engines: python runs a program unless" in runtime.catalog.description
        assert 'engine="asteval" is asteval\'s interpreter' in runtime.catalog.description
        python = await runtime.execute(ExecuteRequest(code="__result__ = sum(x for x in [1, 2])"))
        assert python.result == 3
        chosen = await runtime.execute(ExecuteRequest(code="__result__ = sum(x for x in [1, 2])", engine="asteval"))
        assert chosen.error is not None and chosen.error.code == "FORBIDDEN"
        envelope = '[tool_call]\nstatus = "success"\nengine = "asteval"\ncode = "class A:\\n    pass"'
        declared = await runtime.execute(ExecuteRequest(envelope=envelope))
        assert declared.error is not None and "asteval's language" in declared.error.message
        both = await runtime.execute(ExecuteRequest(envelope=envelope, engine="python"))
        assert both.error is not None and both.error.parameter_name == "engine"
        refused = await runtime.execute(ExecuteRequest(code="__result__ = 1", engine="starlark"))
        assert refused.error is not None
        assert refused.error.message == "engine 'starlark' is not offered by this server; it offers python, asteval"
        assert (refused.error.parameter_name, refused.error.suggested_value) == ("engine", "python")
        unknown = await runtime.execute(ExecuteRequest(code="__result__ = 1", engine="ruby"))
        assert unknown.error is not None and unknown.error.expected == "one of python, asteval"


async def test_an_envelope_cannot_name_an_engine_the_callers_rules_refuse(workspace: Path) -> None:
    """[access.NAME] engines hold for the engine a call runs on, however it was named (argument or envelope)."""
    rules = {"pythonists": AccessRule(principals=["dan"], tools=["files.*"], engines=["python"])}
    async with running(workspace, engines=["asteval"], access=rules) as runtime:
        dan = CallContext(caller=Caller(person="dan"))
        envelope = '[tool_call]\nstatus = "success"\nengine = "asteval"\ncode = "__result__ = 1"'
        declared = await runtime.execute(ExecuteRequest(envelope=envelope), dan)
        assert declared.error is not None and declared.error.code == "FORBIDDEN", declared
        argument = await runtime.execute(ExecuteRequest(code="__result__ = 1", engine="asteval"), dan)
        assert argument.error is not None and argument.error.code == "FORBIDDEN"
        assert (await runtime.execute(ExecuteRequest(code="__result__ = 1"), dan)).result == 1


def test_the_client_entry_carries_the_engines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--workspace", str(tmp_path / "ws"), "--engines", "asteval", "--engines", "starlark"]
    assert cli_main(["config", "claude", *flags]) == 0
    entry = json.loads(capsys.readouterr().out.split("\nMerge into")[0])
    args = entry["mcpServers"]["attp"]["args"]
    assert args[args.index("--engines") :][:4] == ["--engines", "asteval", "--engines", "starlark"]


def test_a_single_engine_server_says_so_and_settings_check_the_names() -> None:
    assert Settings().offered_engines == ("python",)
    assert Settings(engine="asteval", engines=["python", "asteval"]).offered_engines == ("asteval", "python")
    with pytest.raises(ValueError, match="engines"):
        Settings(engines=["ruby"])  # type: ignore[list-item]


@pytest.mark.process
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_served_over_stdio_on_both_protocol_eras(workspace: Path, mode: str) -> None:
    """A real `attp serve` offering python and asteval: the input schema lists both, and asteval runs a program."""
    flags = ["--toolpack", "files", "--toolpack", "demo_pack:toolpack", "--engines", "asteval"]
    async with stdio_client(workspace, *flags, mode=mode) as client:
        tool = (await client.list_tools()).tools[0]
        assert tool.input_schema["properties"]["engine"]["enum"] == ["python", "asteval"]
        assert 'engine="asteval" is asteval\'s interpreter' in (tool.description or "")
        done = await execute(client, "print('on asteval')\n__result__ = add(2, 3)", engine="asteval")
        assert (done["status"], done["result"], done["stdout"]) == ("ok", 5, "on asteval\n")
        refused = await execute(client, "__result__ = 1", engine="starlark")
        assert "it offers python, asteval" in refused["error"]["message"]
