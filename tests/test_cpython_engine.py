"""The ``cpython`` engine through the real path: runtime -> a data-stack worker forked from its fork server, locked
down -> tool calls back to the server. The language, the tools and their errors, the result rule, files through the
files pack, pictures, imports, limits, and what a handle keeps (sealed to it)."""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import AsyncIterator
from typing import Any

import pytest
from harness import make_settings

from attp_server.errors import ConfigError
from attp_server.model.results import ExecutionResult
from attp_server.run.runtime import CallContext, ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime
from attp_server.sessions.registry import Caller
from attp_server.settings import load_settings

pytest.importorskip("pandas")
pytest.importorskip("matplotlib")

pytestmark = pytest.mark.anyio

SALES = "region,amount,day\nnorth,10,2024-01-01\nsouth,20,2024-01-02\nnorth,5,2024-01-03\neast,7.5,2024-01-03\n"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def data_runtime(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    """One cpython runtime for the module (its fork server loads the data stack once)."""
    workspace = tmp_path_factory.mktemp("cpython") / "ws"
    workspace.mkdir()
    (workspace / "sales.csv").write_text(SALES)
    (workspace / "blob.bin").write_bytes(bytes(range(256)))
    settings = make_settings(workspace, engine="cpython", timeout_s=20.0, max_tool_calls=50)
    async with open_runtime(settings) as runtime:
        yield runtime


async def run(runtime: Runtime, code: str, session: str | None = None, **options: Any) -> ExecutionResult:
    request = ExecuteRequest(code=code, session=session, **options)
    return await runtime.execute(request, CallContext(caller=Caller()))


def ok(result: ExecutionResult) -> Any:
    assert result.status == "ok", result.error
    return result.result


LANGUAGE = [
    pytest.param(
        "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n    y: int = 2\n"
        "__result__ = P(1).y + P(3, 4).x",
        5,
        id="dataclass",
    ),
    pytest.param(
        "class Stack:\n    def __init__(self): self.items = []\n    def __enter__(self): return self\n"
        "    def __exit__(self, *a): self.items.append('closed')\n"
        "with Stack() as s:\n    s.items.append('used')\n__result__ = s.items",
        ["used", "closed"],
        id="with",
    ),
    pytest.param(
        "def squares(n):\n    for i in range(n):\n        yield i * i\n__result__ = list(squares(4))",
        [0, 1, 4, 9],
        id="generator",
    ),
    pytest.param(
        "import asyncio\nasync def twice(x):\n    await asyncio.sleep(0.01)\n    return 2 * x\n"
        "__result__ = asyncio.run(twice(21))",
        42,
        id="asyncio-run",
    ),
    pytest.param(
        "import asyncio\nasync def one(i):\n    await asyncio.sleep(0.01 * i)\n    return i\n"
        "__result__ = await asyncio.gather(*(one(i) for i in range(3)))",
        [0, 1, 2],
        id="top-level-await",
    ),
    pytest.param(
        "match {'kind': 'point', 'x': 3}:\n    case {'kind': 'point', 'x': x}:\n        __result__ = x", 3, id="match"
    ),
    pytest.param("__result__ = type(3).__name__ + str(getattr([], '__len__')())", "int0", id="introspection"),
    pytest.param(
        "import decimal, fractions\n__result__ = [str(decimal.Decimal('1.1') + decimal.Decimal('0.1')), str(fractions.Fraction(1, 10) * 5)]",
        ["1.2", "1/2"],
        id="stdlib",
    ),
    pytest.param("__result__ = json.dumps({'a': math.pi})[:9]", '{"a": 3.1', id="modules-by-name"),
    pytest.param("x = 5\nx * 2", 10, id="last-expression"),
    pytest.param(
        "import numpy as np\n__result__ = {'mean': np.arange(10).mean(), 'arr': np.arange(3) * 2, 'i': np.int64(7)}",
        {"mean": 4.5, "arr": [0, 2, 4], "i": 7},
        id="numpy-values",
    ),
    pytest.param(
        "import pandas as pd\ndf = pd.DataFrame({'k': ['a', 'b', 'a'], 'v': [1, 2, 3]})\n"
        "__result__ = {'by': df.groupby('k').v.sum(), 'rows': df.head(2), 'ts': pd.Timestamp('2024-01-02')}",
        {"by": {"a": 4, "b": 2}, "rows": [{"k": "a", "v": 1}, {"k": "b", "v": 2}], "ts": "2024-01-02T00:00:00"},
        id="pandas-values",
    ),
]


@pytest.mark.parametrize(("code", "expected"), LANGUAGE)
async def test_the_whole_language_runs(data_runtime: Runtime, code: str, expected: object) -> None:
    assert ok(await run(data_runtime, code)) == expected


async def test_tools_by_name_and_by_pack_with_parallel_help_and_tools(data_runtime: Runtime) -> None:
    code = (
        "import numpy as np\n"
        "a = add(2, np.int64(3))\n"  # numpy arguments cross as plain data
        "b = demo.add(a=1, b=1)\n"
        "c = parallel(add, [{'a': i, 'b': 1} for i in range(3)])\n"
        "__result__ = [a, b, c, 'Add two integers' in help('add'), [t['name'] for t in tools('echo')]]"
    )
    assert ok(await run(data_runtime, code)) == [5, 2, [1, 2, 3], True, ["slow_echo"]]


async def test_tool_errors_carry_their_fields_and_end_the_run_when_uncaught(data_runtime: Runtime) -> None:
    caught = (
        "try:\n    refuse('NOPE')\nexcept ToolError as e:\n    __result__ = [e.code, e.suggested_value, e.solution]"
    )
    assert ok(await run(data_runtime, caught)) == ["NOPE", "something else", "do not"]
    result = await run(data_runtime, "x = 1\nrefuse('NOPE')\n")
    assert result.error is not None
    assert (result.error.code, result.error.line, result.error.suggested_value) == ("NOPE", 2, "something else")


ERRORS = [
    pytest.param("x = 1\n1 / 0\n", "RUNTIME_ERROR", "ZeroDivisionError: division by zero", 2, id="zero-division"),
    pytest.param(
        "import pandas as pd\ndf = pd.DataFrame({'a': [1]})\ndf['missing']\n",
        "RUNTIME_ERROR",
        "KeyError: 'missing'",
        3,
        id="pandas-key",
    ),
    pytest.param("def f():\n    return nope\nf()\n", "NAME_NOT_FOUND", "name 'nope' is not defined", 2, id="name"),
    pytest.param("x = (\n", "SYNTAX_ERROR", "'(' was never closed", 1, id="syntax"),
    pytest.param("import sys\nsys.exit(3)\n", "RUNTIME_ERROR", "ProgramExit: the program called exit(3)", 2, id="exit"),
    pytest.param(
        "import scipy\n", "RUNTIME_ERROR", "ModuleNotFoundError: No module named 'scipy' here", 1, id="not-preloaded"
    ),
]


@pytest.mark.parametrize(("code", "error_code", "message", "line"), ERRORS)
async def test_errors_name_the_type_the_message_and_the_line(
    data_runtime: Runtime, code: str, error_code: str, message: str, line: int
) -> None:
    result = await run(data_runtime, code)
    assert result.error is not None
    assert result.error.code == error_code
    assert result.error.message.startswith(message), result.error.message
    assert result.error.line == line


async def test_an_import_that_was_not_preloaded_names_the_setting(data_runtime: Runtime) -> None:
    result = await run(data_runtime, "import scipy\n")
    assert result.error is not None and "cpython_packages" in result.error.message


async def test_no_type_checker_is_loaded_with_the_packages(data_runtime: Runtime) -> None:
    """numpy's mypy plugin imports mypy where it is installed (the tests' environment): 145 modules, 8 MB more in the
    fork server and so in every fork, which no program runs."""
    code = "import sys\n__result__ = sorted(name for name in sys.modules if name.partition('.')[0] == 'mypy')"
    assert ok(await run(data_runtime, code)) == []


def test_cpython_without_containment_required_is_refused_at_start() -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings({"engine": "cpython"}, environ={"ATTP_CONTAINMENT": "best-effort"})
    message = str(refused.value)
    assert "containment: engine 'cpython' runs only where every containment layer holds" in message
    assert message.endswith("(from environment variable ATTP_CONTAINMENT)"), message


async def test_each_run_draws_its_own_random_numbers(data_runtime: Runtime) -> None:
    code = (
        "import random, numpy as np, pandas as pd\n__result__ = [random.random(), float(np.random.rand()), "
        "pd.Series(range(1000)).sample(3).tolist()]"
    )
    first, second = ok(await run(data_runtime, code)), ok(await run(data_runtime, code))
    assert all(a != b for a, b in zip(first, second, strict=True)), (first, second)


async def test_running_out_of_memory_names_the_line_and_the_setting(data_runtime: Runtime) -> None:
    result = await run(data_runtime, "import numpy as np\nsizes = [1, 2]\nhuge = np.ones((1 << 40,), dtype=np.int8)\n")
    assert result.error is not None and result.error.code == "MEMORY_LIMIT"
    assert result.error.line == 3 and "cpython_memory_mb" in result.error.message, result.error


async def test_print_and_warnings_come_back_as_stdout(data_runtime: Runtime) -> None:
    code = "import warnings, sys\nprint('hello', 42)\nprint('to stderr', file=sys.stderr)\nwarnings.warn('careful')"
    result = await run(data_runtime, code)
    assert result.stdout.startswith("hello 42\nto stderr\n")
    assert "UserWarning: careful" in result.stdout


async def test_output_is_capped_and_marked(data_runtime: Runtime) -> None:
    result = await run(data_runtime, "print('x' * 200_000)")
    assert result.truncated and len(result.stdout) <= data_runtime.settings.max_output_bytes


async def test_a_huge_dataframe_result_is_refused_with_advice(data_runtime: Runtime) -> None:
    code = "import pandas as pd, numpy as np\n__result__ = pd.DataFrame({'a': np.arange(2_000_000)})"
    result = await run(data_runtime, code)
    assert result.error is not None and result.error.code == "RESULT_TOO_LARGE"
    assert "df.head(20)" in result.error.message


async def test_the_environment_holds_nothing_of_the_server(data_runtime: Runtime) -> None:
    code = "import os\n__result__ = sorted(os.environ)"
    names = ok(await run(data_runtime, code))
    assert not [name for name in names if name.startswith("ATTP_") or "TOKEN" in name or "SECRET" in name]
    assert "HOME" in names


# ---------------------------------------------------------------- files through the files pack


async def test_pandas_and_matplotlib_read_and_write_workspace_files(data_runtime: Runtime) -> None:
    code = (
        "import pandas as pd, matplotlib.pyplot as plt\n"
        "import os\n"
        "os.makedirs('out', exist_ok=True)\n"  # pandas, as anywhere, writes only into a folder that exists
        "df = pd.read_csv('sales.csv', parse_dates=['day'])\n"
        "df.to_parquet('out/sales.parquet')\n"
        "df.to_excel('out/sales.xlsx', index=False)\n"
        "df.to_csv('out/sales_copy.csv', index=False)\n"
        "fig, ax = plt.subplots()\n"
        "df.groupby('region').amount.sum().plot.bar(ax=ax)\n"
        "fig.savefig('out/chart.png')\n"
        "plt.close(fig)\n"
        "back = pd.read_parquet('out/sales.parquet')\n"
        "excel = pd.read_excel('out/sales.xlsx')\n"
        "__result__ = [len(back), list(excel.columns), back.amount.sum()]"
    )
    assert ok(await run(data_runtime, code)) == [4, ["region", "amount", "day"], 42.5]
    out = data_runtime.settings.workspace / "out"
    assert (out / "chart.png").read_bytes().startswith(b"\x89PNG")
    assert (out / "sales_copy.csv").read_text().splitlines()[0] == "region,amount,day"
    assert (out / "sales.parquet").read_bytes()[:4] == b"PAR1"


async def test_a_new_file_and_a_missing_one_are_answers_not_failed_calls(data_runtime: Runtime) -> None:
    """The file layer asks whether a path exists before it writes (savefig, mode 'x', os.path.exists): the model's
    tool-call summary must not show that question as a failed call (a model trial read 'file_info: 1 (1 failed:
    FILE_NOT_FOUND)' after a savefig that worked)."""
    code = (
        "import os, matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\n"
        "ax.plot([1, 2, 3])\n"
        "fig.savefig('new_chart.png')\n"
        "plt.close(fig)\n"
        "with open('fresh.txt', 'x') as f:\n"
        "    f.write('hello')\n"
        "try:\n"
        "    os.stat('missing.txt')\n"
        "    stat = 'found'\n"
        "except FileNotFoundError as e:\n"
        "    stat = e.errno\n"
        "__result__ = [os.path.exists('missing.txt'), os.path.exists('fresh.txt'), os.path.isdir('.'), stat]"
    )
    result = await run(data_runtime, code)
    assert ok(result) == [False, True, True, 2]
    assert [call for call in result.calls if not call.ok] == []
    assert (data_runtime.settings.workspace / "new_chart.png").read_bytes().startswith(b"\x89PNG")


async def test_open_os_pathlib_and_glob_see_the_workspace(data_runtime: Runtime) -> None:
    code = (
        "import os, glob, pathlib\n"
        "with open('notes/a.txt', 'w') as f:\n    f.write('one\\n')\n"
        "with open('notes/a.txt', 'a') as f:\n    f.write('two\\n')\n"
        "pathlib.Path('notes/b.bin').write_bytes(bytes([0, 255]))\n"
        "__result__ = {\n"
        "    'text': open('notes/a.txt').read(),\n"
        "    'binary': list(open('blob.bin', 'rb').read()[250:]),\n"
        "    'exists': [os.path.exists('sales.csv'), os.path.isfile('notes/b.bin'), os.path.isdir('notes')],\n"
        "    'size': os.path.getsize('blob.bin'),\n"
        "    'glob': sorted(glob.glob('notes/*')),\n"
        "    'listdir': sorted(os.listdir('notes')),\n"
        "    'pathlib': sorted(p.name for p in pathlib.Path('.').glob('*.csv')),\n"
        "    'cwd': os.getcwd(),\n"
        "}"
    )
    assert ok(await run(data_runtime, code)) == {
        "text": "one\ntwo\n",
        "binary": [250, 251, 252, 253, 254, 255],
        "exists": [True, True, True],
        "size": 256,
        "glob": ["notes/a.txt", "notes/b.bin"],
        "listdir": ["a.txt", "b.bin"],
        "pathlib": ["sales.csv"],
        "cwd": "/workspace",
    }


FILE_ERRORS = [
    pytest.param("open('no_such.csv')", "FileNotFoundError", id="missing"),
    pytest.param("import pandas as pd\npd.read_csv('salse.csv')", "Did you mean 'sales.csv'?", id="suggestion"),
    pytest.param("open('/etc/passwd')", "PermissionError", id="outside"),
    pytest.param("open('../../etc/passwd')", "Only files inside the workspace", id="escape"),
    pytest.param("import os\nos.remove('sales.csv')", "cannot remove", id="remove"),
]


@pytest.mark.parametrize(("code", "expected"), FILE_ERRORS)
async def test_file_errors_are_the_ones_python_raises(data_runtime: Runtime, code: str, expected: str) -> None:
    result = await run(data_runtime, code)
    assert result.error is not None and expected in result.error.message, result.error


async def test_files_go_through_the_files_pack_calls(data_runtime: Runtime) -> None:
    result = await run(data_runtime, "import pandas as pd\n__result__ = len(pd.read_csv('sales.csv'))")
    assert ok(result) == 4
    tools = [call.tool for call in result.calls]
    assert "files.read_bytes" in tools and all(tool.startswith("files.") for tool in tools)


# ---------------------------------------------------------------- pictures


async def test_figures_shown_and_left_open_come_back_as_png(data_runtime: Runtime) -> None:
    code = (
        "import matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\nax.plot([1, 3, 2])\nax.set_title('Sales $x^2$')\nshow(fig)\n"
        "plt.figure()\nplt.bar(['a', 'b'], [1, 2])\n"  # left open: returned at the end
        "__result__ = 'drawn'"
    )
    result = await run(data_runtime, code)
    assert ok(result) == "drawn"
    assert len(result.pictures) == 2
    for picture in result.pictures:
        assert base64.b64decode(picture.data).startswith(b"\x89PNG\r\n\x1a\n")
        assert picture.bytes == len(base64.b64decode(picture.data))


async def test_pictures_past_max_result_bytes_are_named_in_the_hint(data_runtime: Runtime) -> None:
    code = "import matplotlib.pyplot as plt\nfor i in range(12):\n    plt.figure()\n    plt.plot([i, i + 1])"
    result = await run(data_runtime, code)
    assert result.status == "ok" and len(result.pictures) == 10
    assert result.hint is not None and "at most 10 pictures" in result.hint


# ---------------------------------------------------------------- what a handle keeps


async def test_a_session_keeps_dataframes_functions_classes_and_imports(data_runtime: Runtime) -> None:
    first = await run(
        data_runtime,
        "import pandas as pd\nfrom dataclasses import dataclass\n"
        "@dataclass\nclass Total:\n    region: str\n    amount: float\n"
        "def top(frame):\n    return frame.groupby('region').amount.sum().idxmax()\n"
        "df = pd.read_csv('sales.csv')\nkeep_me = Total('x', 1.0)\nhandle = open('sales.csv')\n",
    )
    assert first.status == "ok" and first.session is not None
    assert first.hint is not None and "handle (it cannot be pickled" in first.hint
    second = await run(data_runtime, "__result__ = [top(df), len(df), keep_me.amount, pd.__name__]", first.session)
    assert ok(second) == ["south", 4, 1.0, "pandas"]
    third = await run(data_runtime, "__result__ = len(df)", first.session)  # the second sent nothing back: unchanged
    assert ok(third) == 4


async def test_kept_state_is_sealed_to_its_handle(data_runtime: Runtime) -> None:
    mine = await run(data_runtime, "secret_rows = [1, 2, 3]")
    other = await run(data_runtime, "other_rows = ['x']")
    assert mine.session and other.session
    database = data_runtime.settings.db_path.parent / "state.sqlite3"
    with sqlite3.connect(database) as db:
        rows = dict(db.execute("select key, state from attp_state").fetchall())
        key_of = data_runtime.sessions.key_of  # type: ignore[union-attr]
        mine_key, other_key = key_of(mine.session), key_of(other.session)
        db.execute("update attp_state set state = ? where key = ?", (rows[mine_key], other_key))  # swapped in
    swapped = await run(data_runtime, "__result__ = sorted(n for n in dir() if n.endswith('rows'))", other.session)
    assert ok(swapped) == []
    assert swapped.hint is not None and "did not carry this server's seal" in swapped.hint
    assert json.loads(rows[mine_key])["pickle"]  # the row held a pickle, and the server never read it


async def test_a_state_left_as_it_was_is_not_sent_back() -> None:
    from attp_server.sandbox.engines.cpython.state import collect, restore

    first = collect({"rows": [1, 2], "name": "x"}, {}, {}, 1 << 20)
    assert first is not None and first["names"] == ["name", "rows"]
    namespace: dict[str, Any] = {}
    restored = restore(first["pickle"], namespace)
    assert collect(namespace, {}, {}, 1 << 20, restored.kept) is None
    namespace["rows"].append(3)
    changed = collect(namespace, {}, {}, 1 << 20, restored.kept)
    assert changed is not None and changed["names"] == ["name", "rows"]
