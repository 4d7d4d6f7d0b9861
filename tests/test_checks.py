"""Static checks before anything runs (SPEC §3): syntax, the sandbox's refusals, unknown names with suggestions."""

from __future__ import annotations

import difflib
import sys
import threading

import pytest

from attp_server.errors import ErrorInfo
from attp_server.run.checks import KnownNames, check_program
from attp_server.sandbox.static_check import check
from attp_server.sandbox.suggestions import MAX_COMPARED, closest
from attp_server.toolpack import Toolpack, ToolRegistry


def read_file(path: str) -> str:
    """Read a text file of the workspace.

    Args:
        path: File path relative to the workspace.

    Returns:
        The file's text.
    """
    return ""


def write_file(path: str, content: str) -> dict:
    """Write a text file of the workspace, replacing it.

    Args:
        path: File path relative to the workspace.
        content: The new text.

    Returns:
        {"path": ..., "bytes": ...}
    """
    return {"path": path, "bytes": len(content)}


def list_files(directory: str = ".") -> list[str]:
    """List the files of a directory.

    Args:
        directory: Directory relative to the workspace.

    Returns:
        File paths.
    """
    return []


PACK = Toolpack(
    name="files",
    description="Read and write the workspace.",
    tools=[read_file, write_file, list_files],
    aliases={"file_reader": "read_file"},
)


@pytest.fixture(scope="module")
def known(tmp_path_factory: pytest.TempPathFactory) -> KnownNames:
    registry = ToolRegistry([PACK], tmp_path_factory.mktemp("ws"), {})
    return registry.known_names()


def problem(code: str, known: KnownNames) -> ErrorInfo:
    info = check_program(code, known)
    assert info is not None, f"expected a problem in {code!r}"
    assert info.message
    return info


# --- syntax --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "line", "source_line"),
    [
        pytest.param("x = (", 1, "x = (", id="unclosed-paren"),
        pytest.param("a = 1\nb = )\n", 2, "b = )", id="second-line"),
        pytest.param("for i in range(3)\n    print(i)\n", 1, "for i in range(3)", id="missing-colon"),
        pytest.param("if True:\nprint(1)\n", 2, "print(1)", id="missing-indent"),
        pytest.param("x = 'abc\n", 1, "x = 'abc", id="unterminated-string"),
    ],
)
def test_syntax_error_has_line_column_and_source(code: str, line: int, source_line: str, known: KnownNames) -> None:
    info = problem(code, known)
    assert info.code == "SYNTAX_ERROR"
    assert info.line == line
    assert info.column is not None
    assert info.source_line == source_line
    assert info.solution


def test_null_byte_is_a_syntax_error(known: KnownNames) -> None:
    assert problem("x = 1\x00", known).code == "SYNTAX_ERROR"


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("return 1", id="top-level"),
        pytest.param("x = 1\nif x:\n    return x\n", id="inside-if"),
        pytest.param("for i in range(3):\n    return i\n", id="inside-loop"),
        pytest.param("def f():\n    return 1\nreturn f()\n", id="after-function"),
    ],
)
def test_return_outside_a_function_is_a_syntax_error(code: str, known: KnownNames) -> None:
    info = problem(code, known)
    assert info.code == "SYNTAX_ERROR"
    assert "return" in info.message
    assert info.solution is not None
    assert "__result__" in info.solution
    assert info.source_line is not None
    assert info.source_line.strip().startswith("return")


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("x = 1\nbreak\nx = 2\n__result__ = x\n", id="top-level-break"),
        pytest.param("def f():\n    continue\n    return 5\n__result__ = f()\n", id="continue-in-function"),
    ],
)
def test_break_continue_outside_a_loop_is_a_syntax_error(code: str, known: KnownNames) -> None:
    assert problem(code, known).code == "SYNTAX_ERROR"


def test_columns_use_one_convention(known: KnownNames) -> None:
    syntax = problem("x = (", known)  # the culprit '(' is at index 4
    dunder = problem("a, __b = x", known)  # the culprit name is at index 3
    unknown = problem("x = reed_file('a')", known)  # the culprit call is at index 4
    assert syntax.column is not None
    assert dunder.column is not None
    assert unknown.column is not None
    assert syntax.column - 4 == dunder.column - 3 == unknown.column - 4


# --- imports -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "module"),
    [
        pytest.param("import os", "os", id="import-os"),
        pytest.param("import os.path", "os.path", id="import-submodule"),
        pytest.param("import subprocess as sp", "subprocess", id="import-as"),
        pytest.param("from os import path", "os", id="from-os"),
        pytest.param("from json.decoder import JSONDecoder", "json.decoder", id="from-submodule"),
        pytest.param("from . import x", ".", id="relative"),
        pytest.param("x = 1\nif x:\n    import sys\n", "sys", id="nested"),
        pytest.param("def f():\n    import socket\n", "socket", id="in-function"),
        pytest.param("import json, os", "os", id="second-of-two"),
    ],
)
def test_imports_of_unavailable_modules_are_forbidden(code: str, module: str, known: KnownNames) -> None:
    info = problem(code, known)
    assert info.code == "IMPORT_FORBIDDEN"
    assert module in info.message
    assert "math, json, datetime, re" in info.message  # what is available
    assert info.line is not None
    assert info.solution


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import json\n__result__ = json.dumps(1)", id="import"),
        pytest.param("import datetime as dt\n__result__ = dt.date(2024, 1, 1)", id="import-as"),
        pytest.param("from datetime import datetime, timedelta", id="from-import"),
        pytest.param("from math import sqrt as root\n__result__ = root(4)", id="from-import-as"),
        pytest.param("def f():\n    import math\n    return math.pi\n", id="in-function"),
        pytest.param("from math import *", id="star"),
        pytest.param("from __future__ import annotations", id="future"),
    ],
)
def test_imports_of_available_modules_pass(code: str, known: KnownNames) -> None:
    assert check_program(code, known) is None


def test_importing_a_name_the_module_lacks_suggests_the_closest(known: KnownNames) -> None:
    info = problem("from math import sqroot", known)
    assert (info.code, info.suggested_value, info.received) == ("IMPORT_FORBIDDEN", "sqrt", "math.sqroot")
    assert "cannot import name 'sqroot' from math" in info.message


@pytest.mark.parametrize("module", ["json", "math", "datetime", "re", "random", "statistics"])
def test_strict_imports_say_the_module_is_already_available(module: str, known: KnownNames) -> None:
    """With allow_imports off (the seed's strict dialect) every import is refused, with the reason."""
    info = check_program(f"import {module}\n__result__ = 1", known, allow_imports=False)
    assert info is not None
    assert info.code == "IMPORT_FORBIDDEN"
    assert f"{module} is already available" in info.message
    assert (info.line, info.source_line) == (1, f"import {module}")


def test_dunder_import_is_forbidden(known: KnownNames) -> None:
    info = problem("__import__('os')", known)
    assert info.code == "FORBIDDEN"
    assert "__import__" in info.message


# --- names and attributes starting with _ --------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "culprit"),
    [
        pytest.param("__x = 1", "__x", id="dunder-prefixed-name"),
        pytest.param("x = 1\ny = x.__class__", "__class__", id="dunder-class"),
        pytest.param("().__class__.__bases__", "__bases__", id="class-bases-chain"),
        pytest.param("x = [].__len__()", "__len__", id="dunder-method"),
        pytest.param("__builtins__", "__builtins__", id="builtins"),
        pytest.param("def __helper():\n    return 1\n", "__helper", id="dunder-function"),
        pytest.param("def f(__a):\n    return 1\n", "__a", id="dunder-parameter"),
        pytest.param("try:\n    x = 1\nexcept Exception as __e:\n    pass\n", "__e", id="dunder-except-name"),
        pytest.param("x = {}\nx._secret", "_secret", id="private-attribute"),
        pytest.param("__name__ = 'x'", "__name__", id="assign-name"),
        pytest.param("def f():\n    global __builtins__\n", "__builtins__", id="global-dunder"),
    ],
)
def test_dunder_names_and_underscore_attributes_are_forbidden(code: str, culprit: str, known: KnownNames) -> None:
    info = problem(code, known)
    assert info.code == "FORBIDDEN"
    assert culprit in info.message


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("for _ in range(3):\n    pass\n", id="underscore-loop-var"),
        pytest.param("a, _ = 1, 2", id="underscore-unpacking"),
        pytest.param("_tmp = 1\n__result__ = _tmp", id="private-name"),
        pytest.param("def _helper(_a):\n    return _a\n", id="private-function-and-parameter"),
        pytest.param("if __name__ == '__main__':\n    __result__ = 1\n", id="main-guard"),
        pytest.param("first, *rest = [1, 2, 3]", id="starred-assignment"),
        pytest.param("global x\nx = 0", id="module-global"),
    ],
)
def test_names_models_use_pass(code: str, known: KnownNames) -> None:
    assert check_program(code, known) is None


@pytest.mark.parametrize(
    ("code", "advice"),
    [
        pytest.param("try:\n    1 / 0\nexcept Exception as e:\n    n = type(e).__name__", "repr(e)", id="type-name"),
        pytest.param(
            "try:\n    1 / 0\nexcept Exception as e:\n    n = e.__class__.__name__", "repr(e)", id="class-name"
        ),
        pytest.param("d = {}\nd.__dict__", "keep the data in a dict", id="dict"),
        pytest.param("x = [1]\nn = x.__len__()", "len(x)", id="len"),
        pytest.param("x = 1\nt = type(x)", "isinstance(x, list)", id="type"),
        pytest.param("x = [1]\nt = type(x).__name__", "isinstance(x, list)", id="type-of-data-name"),
        pytest.param("x = {}\nt = x.__class__", "isinstance(x, list)", id="data-class"),
    ],
)
def test_common_dunders_name_the_allowed_equivalent(code: str, advice: str, known: KnownNames) -> None:
    info = problem(code, known)
    assert info.code == "FORBIDDEN"
    assert advice in info.message


def test_result_name_is_allowed(known: KnownNames) -> None:
    assert check_program("__result__ = 1\n__result__ = __result__ + 1", known) is None


# --- forbidden builtins --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "name"),
    [
        pytest.param("open('notes.md')", "open", id="open"),
        pytest.param("eval('1 + 1')", "eval", id="eval"),
        pytest.param("exec('x = 1')", "exec", id="exec"),
        pytest.param("compile('1', 'f', 'eval')", "compile", id="compile"),
        pytest.param("getattr([], 'append')", "getattr", id="getattr"),
        pytest.param("setattr(x, 'a', 1)", "setattr", id="setattr"),
        pytest.param("delattr(x, 'a')", "delattr", id="delattr"),
        pytest.param("type(1)", "type", id="type"),
        pytest.param("globals()", "globals", id="globals"),
        pytest.param("vars()", "vars", id="vars"),
        pytest.param("dir([])", "dir", id="dir"),
        pytest.param("breakpoint()", "breakpoint", id="breakpoint"),
        pytest.param("input('name? ')", "input", id="input"),
        pytest.param("object()", "object", id="object"),
        pytest.param("f = open\nf('x')", "open", id="open-as-value"),
        pytest.param("print(eval)", "eval", id="eval-as-argument"),
    ],
)
def test_forbidden_builtins(code: str, name: str, known: KnownNames) -> None:
    info = problem(code, known)
    assert info.code == "FORBIDDEN"
    assert repr(name) in info.message
    assert info.line == 1
    assert info.solution


def test_a_variable_the_program_binds_may_shadow_a_forbidden_name(known: KnownNames) -> None:
    assert check_program("input = read_file('in.txt')\n__result__ = input.splitlines()", known) is None


# --- unsupported syntax --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "words"),
    [
        pytest.param("class A: pass", "class", id="class"),
        pytest.param("with x: pass", "with", id="with"),
        pytest.param("def gen():\n    yield 1\n", "yield", id="yield"),
        pytest.param("def gen():\n    yield from [1]\n", "yield", id="yield-from"),
        pytest.param("async def f(): pass", "async", id="async-def"),
        pytest.param("match x:\n    case 1:\n        pass\n", "match", id="match"),
        pytest.param("x = [1]\nx.append = 2", "assigning", id="attribute-assignment"),
        pytest.param("x = {}\ndel x.keys", "deleting", id="attribute-delete"),
    ],
)
def test_unsupported_syntax_is_forbidden(code: str, words: str, known: KnownNames) -> None:
    info = problem(code, known)
    assert info.code == "FORBIDDEN"
    assert words in info.message
    assert info.line is not None
    assert info.source_line is not None


def test_first_problem_in_source_order(known: KnownNames) -> None:
    info = problem("x = 1\nclass A: pass\nimport os\n", known)
    assert (info.code, info.line) == ("FORBIDDEN", 2)


# --- unknown names -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "received", "suggested"),
    [
        pytest.param("reed_file('x')", "reed_file", "read_file", id="tool-typo"),
        pytest.param("__result__ = writefile('a', 'b')", "writefile", "write_file", id="tool-missing-underscore"),
        pytest.param("Read_File('x')", "Read_File", "read_file", id="tool-case"),
        pytest.param("json.lodas('1')", "json.lodas", "json.loads", id="module-member-typo"),
        pytest.param("statistics.meen([1])", "statistics.meen", "statistics.mean", id="statistics-typo"),
        pytest.param("files.reed_file('x')", "files.reed_file", "files.read_file", id="pack-namespace-typo"),
        pytest.param("lenn([1])", "lenn", "len", id="builtin-typo"),
    ],
)
def test_unknown_name_suggests_the_closest(code: str, received: str, suggested: str, known: KnownNames) -> None:
    info = problem(code, known)
    assert info.code == "NAME_NOT_FOUND"
    assert info.received == received
    assert info.suggested_value == suggested
    assert suggested in info.message
    assert info.line == 1
    assert info.source_line == code
    assert info.solution


def test_unknown_name_without_a_close_match(known: KnownNames) -> None:
    info = problem("send_email_now_please('boss')", known)
    assert info.code == "NAME_NOT_FOUND"
    assert info.received == "send_email_now_please"
    assert info.suggested_value is None


def test_first_unknown_name_is_reported(known: KnownNames) -> None:
    info = problem("x = 1\ny = bar(x)\nz = foo(x)\n", known)
    assert (info.received, info.line) == ("bar", 2)


def test_tool_suggestion_beats_builtin(known: KnownNames) -> None:
    assert problem("list_file('.')", known).suggested_value == "list_files"


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("def helper(x):\n    return x * 2\n__result__ = helper(2)\n", id="own-function"),
        pytest.param("for fn in [len, sum]:\n    fn([1])\n", id="loop-variable"),
        pytest.param("for name, fn in [('a', len)]:\n    fn(name)\n", id="tuple-loop-variable"),
        pytest.param("__result__ = [f(1) for f in (abs, str)]\n", id="comprehension-variable"),
        pytest.param("__result__ = {k: g(k) for k, g in [(1, str)]}\n", id="dict-comprehension-variables"),
        pytest.param("try:\n    read_file('x')\nexcept ToolError as err:\n    err.args\n", id="except-as"),
        pytest.param("def apply(fn, x):\n    return fn(x)\n__result__ = apply(len, 'ab')\n", id="parameter"),
        pytest.param("double = lambda v: v * 2\n__result__ = double(3)\n", id="lambda-bound"),
        pytest.param("if (size := len('ab')) > 1:\n    __result__ = size\n", id="walrus"),
        pytest.param("__result__ = helper()\ndef helper():\n    return 1\n", id="defined-later"),
        pytest.param("json = {'loads': 1}\n__result__ = json.keys()\n", id="shadowed-module"),
    ],
)
def test_names_the_program_defines_are_fine(code: str, known: KnownNames) -> None:
    assert check_program(code, known) is None


def test_known_names_hold_tools_aliases_builtins_and_modules(known: KnownNames) -> None:
    assert {"read_file", "write_file", "list_files", "file_reader", "help", "tools"} <= known.tools
    assert {"len", "print", "sorted", "ToolError", "ValueError"} <= known.builtins
    assert {"math", "json", "datetime", "re", "random", "statistics", "files"} <= set(known.namespaces)
    assert {"read_file", "file_reader"} <= known.namespaces["files"]
    assert {"open", "eval", "getattr", "type"}.isdisjoint(known.all())


# --- realistic programs that must pass -----------------------------------------------------------

BENIGN = [
    pytest.param('__result__ = read_file("notes.md")', id="one-tool-call"),
    pytest.param(
        'text = read_file("notes.md")\n__result__ = len(text.splitlines())\n',
        id="count-lines",
    ),
    pytest.param(
        "sizes = {}\nfor path in list_files('.'):\n    sizes[path] = len(read_file(path))\n"
        "__result__ = sorted(sizes.items(), key=lambda kv: kv[1], reverse=True)[:3]\n",
        id="loop-and-sorted-with-key",
    ),
    pytest.param(
        "paths = [p for p in list_files('docs') if p.endswith('.md')]\n"
        "__result__ = {p: read_file(p)[:100] for p in paths}\n",
        id="comprehensions",
    ),
    pytest.param(
        "name = 'world'\ncount = 3\nprint(f'hello {name}, {count:>4} items, {count / 7:.2f}')\n",
        id="f-strings",
    ),
    pytest.param(
        "results = []\nfor path in ['a.txt', 'b.txt']:\n    try:\n        results.append(read_file(path))\n"
        "    except ToolError as e:\n        results.append(f'{path}: {e.code} {e.message}')\n__result__ = results\n",
        id="try-except-tool-error",
    ),
    pytest.param(
        "stamp = datetime.now().isoformat()\nwrite_file('log.txt', stamp + '\\n')\n__result__ = stamp\n",
        id="datetime-now",
    ),
    pytest.param(
        "start = datetime.datetime(2024, 1, 1)\nend = start + datetime.timedelta(days=30)\n"
        "__result__ = [start.date().isoformat(), end.strftime('%Y-%m-%d'), str(datetime.parse('2024-05-01'))]\n",
        id="datetime-habits",
    ),
    pytest.param(
        "text = read_file('log.txt')\n__result__ = re.findall(r'ERROR (\\w+)', text, re.IGNORECASE)\n",
        id="re-findall",
    ),
    pytest.param(
        "data = {'a': 1, 'b': [1, 2]}\nwrite_file('out.json', json.dumps(data, indent=2, sort_keys=True))\n"
        "__result__ = json.loads(read_file('out.json'))\n",
        id="json-dumps-loads",
    ),
    pytest.param(
        "scores = [3, 5, 8, 13]\n__result__ = {'mean': statistics.mean(scores), "
        "'median': statistics.median(scores), 'stdev': round(statistics.stdev(scores), 2)}\n",
        id="statistics",
    ),
    pytest.param(
        "counts = {}\nfor word in read_file('a.txt').lower().split():\n    counts[word] = counts.get(word, 0) + 1\n"
        "top = sorted(counts, key=counts.get, reverse=True)\ncounts.pop('the', None)\ncounts.update({'x': 1})\n"
        "__result__ = {'top': top[:5], 'keys': list(counts.keys())}\n",
        id="dict-methods",
    ),
    pytest.param(
        "items = [3, 1, 2]\nitems.append(4)\nitems.extend([5, 6])\nitems.sort()\nitems.reverse()\n"
        "items.insert(0, 0)\n__result__ = items.index(4), items.count(1), items[1:3]\n",
        id="list-methods",
    ),
    pytest.param(
        "rows = [{'name': 'a', 'score': 3}, {'name': 'b', 'score': 9}]\n"
        "best = max(rows, key=lambda r: r['score'])\n"
        "names = list(map(lambda r: r['name'].upper(), rows))\n"
        "__result__ = {'best': best['name'], 'names': names, 'total': sum(r['score'] for r in rows)}\n",
        id="lambda-max-map-genexpr",
    ),
    pytest.param(
        "def chunks(items, size):\n    out = []\n    for i in range(0, len(items), size):\n"
        "        out.append(items[i:i + size])\n    return out\n__result__ = chunks(list(range(10)), 3)\n",
        id="helper-function",
    ),
    pytest.param(
        "n = 0\nwhile True:\n    n += 1\n    if n % 2 == 0:\n        continue\n    if n > 9:\n        break\n"
        "__result__ = n\n",
        id="while-break-continue",
    ),
    pytest.param(
        "pairs = list(zip(['a', 'b'], [1, 2]))\nfor i, (k, v) in enumerate(pairs):\n    print(i, k, v, sep=', ')\n"
        "__result__ = dict(pairs)\n",
        id="zip-enumerate-print",
    ),
    pytest.param(
        "area = math.pi * math.sqrt(16) ** 2\nroll = random.randint(1, 6)\n"
        "__result__ = {'area': math.floor(area), 'roll': roll, 'pick': random.choice(['x', 'y'])}\n",
        id="math-random",
    ),
    pytest.param(
        "value = read_file('n.txt').strip()\ntry:\n    number = int(value)\nexcept ValueError:\n    number = None\n"
        "else:\n    number = number * 2\nfinally:\n    print('parsed')\n"
        "if number is None:\n    raise ValueError(f'not a number: {value!r}')\n__result__ = number\n",
        id="try-else-finally-raise",
    ),
    pytest.param("print(tools('file'))\n__result__ = help('read_file')\n", id="meta-tools"),
    pytest.param("__result__ = files.read_file('a') + file_reader('b')\n", id="pack-namespace-and-alias"),
    pytest.param(
        "seen = set()\nunique = []\nfor x in [1, 2, 2, 3]:\n    if x not in seen:\n        seen.add(x)\n"
        "        unique.append(x)\nassert unique, 'empty'\ntotal: int = 0\ntotal += sum(unique)\n"
        "__result__ = {'unique': unique, 'total': total, 'any': any(unique), 'all': all(unique)}\n",
        id="set-assert-annotated",
    ),
    pytest.param(
        "lines = read_file('t.csv').splitlines()\nheader, rows = lines[0].split(','), lines[1:]\n"
        "table = [dict(zip(header, row.split(','))) for row in rows]\n"
        "__result__ = ', '.join(sorted({r.get('city', '?') for r in table}))\n",
        id="csv-parse",
    ),
    pytest.param("read_file('notes.md')", id="last-expression-result"),
]


@pytest.mark.parametrize("code", BENIGN)
def test_benign_programs_pass(code: str, known: KnownNames) -> None:
    assert len(BENIGN) >= 15
    assert check_program(code, known) is None


class _Finalized:
    def __del__(self) -> None:
        pass


def test_concurrent_checks_on_threads_never_fail_a_valid_program(known: KnownNames) -> None:
    """The server checks programs on worker threads. CPython 3.11's AST constructor counts its
    recursion in interpreter-wide state, so a thread switch mid-tree (here: garbage collections that
    run finalizers, and a tiny switch interval) made ~5% of parallel parses of a valid program fail
    with ``SystemError: AST constructor recursion depth mismatch`` - an INTERNAL_ERROR for the caller."""
    code = "\n".join(f"rows_{i} = [{{'n': n, 'sq': n * n}} for n in range(10) if n % 2]" for i in range(30))
    assert check_program(code, known) is None
    problems: list[object] = []

    def check_many() -> None:
        for _ in range(50):
            garbage: list[object] = [_Finalized() for _ in range(5)]
            garbage.append(garbage)  # a cycle: freed by a collection in the middle of someone's parse
            try:
                problem = check_program(code, known)
            except Exception as exc:
                problems.append(exc)
            else:
                if problem is not None:
                    problems.append(problem)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=check_many) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert problems == []


# ---------------------------------------------------------------- bounded work (issue 12)


def _long_name_bomb() -> str:
    stem = "x" * 145
    return "\n".join([f"b{stem}{i:04d}=0" for i in range(65)] + [f"u{stem}{i:04d}()" for i in range(65)])


def test_long_name_bomb_compares_no_names_in_full(known: KnownNames, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 12: 65 names of 150 characters bound, 65 near-identical ones called; difflib cost ~10 s of CPU."""
    compared: list[str] = []
    original = difflib.SequenceMatcher.ratio

    def counting(self: difflib.SequenceMatcher[str]) -> float:
        compared.append(str(self.a))
        return original(self)

    monkeypatch.setattr(difflib.SequenceMatcher, "ratio", counting)
    info = problem(_long_name_bomb(), known)
    assert info.code == "NAME_NOT_FOUND" and info.line == 66
    assert compared == []  # names past MAX_NAME_CHARS get no fuzzy suggestion at all


def test_a_suggestion_compares_a_bounded_number_of_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    original = difflib.SequenceMatcher.ratio

    def counting(self: difflib.SequenceMatcher[str]) -> float:
        nonlocal calls
        calls += 1
        return original(self)

    monkeypatch.setattr(difflib.SequenceMatcher, "ratio", counting)
    names = [f"{'x' * 40}{i:05d}" for i in range(20_000)]
    assert closest("x" * 40 + "9999z", names) is not None
    assert calls <= MAX_COMPARED


def test_a_check_past_its_budget_is_a_timeout_error(known: KnownNames) -> None:
    _tree, found = check("a = b()\n" * 2000, known, budget_s=0.0)
    assert found is not None and found["code"] == "TIMEOUT"
    assert "checking the program took more than" in found["message"]
