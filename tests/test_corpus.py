"""The model-fit corpus (issue 13): programs written the way models write them, run through the real path.

Each ``tests/corpus/*.py`` is one program with a header of ``# key: value`` lines:

- ``expect``: ``ok``, or ``error CODE`` for a program that must fail (refused, or a tool error it
  does not catch) with that error code;
- ``result`` (JSON), optional: the expected ``__result__``. Without it an ok program's result and
  stdout come from the oracle: the same program run by real CPython against the same tools on a
  fresh copy of the same workspace, so no expectation is a hand-typed guess. Only programs the oracle
  cannot run the same way (the seed's ``datetime.parse`` shorthand, random ids) carry a ``result``;
- ``message``, optional: text the error message must contain;
- ``needs``, optional: features not on main yet (`FEATURES`). Such a program is expected to fail,
  strictly: once the feature lands it passes, the xfail fails, and the header line must go.

Every program runs through `Runtime.execute` (static check, worker process, tool calls answered by
the real default toolpacks) in its own copy of ``tests/corpus/workspace`` with its own memory
database; one worker pool serves them all.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import datetime as dt
import importlib
import io
import json
import math
import re
import shutil
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pydantic_core
import pytest

from attp_server.errors import ErrorInfo
from attp_server.model.catalog import Catalog
from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import build_registry
from attp_server.sandbox.process.pool import WorkerPool
from attp_server.settings import Settings
from attp_server.toolpack import Tool
from attp_server.toolpack import ToolError as ServerToolError

CORPUS = Path(__file__).parent / "corpus"
WORKSPACE = CORPUS / "workspace"
README = Path(__file__).parent.parent / "README.md"
CORPUS_DOC = Path(__file__).parent.parent / "docs" / "corpus.md"

FEATURES: dict[str, str] = {}
"""What a program may need that main does not offer yet, and why it is expected to fail until then."""

ORACLE_MODULES = (
    "math", "json", "datetime", "re", "random", "statistics", "collections", "itertools", "functools", "operator",
    "csv", "io", "string", "textwrap", "copy", "heapq", "bisect", "base64", "hashlib", "difflib", "uuid", "tomllib",
    "typing",
)  # fmt: skip
"""What the oracle's CPython has by name, as the sandbox has (the `modules` setting's default)."""

TIMEOUT_S = 5.0

_UNSET = object()


@dataclass(frozen=True)
class Program:
    name: str
    code: str
    expect: str
    """``ok`` or an error code."""
    result: Any = _UNSET
    message: str | None = None
    needs: tuple[str, ...] = ()


def read_program(path: Path) -> Program:
    header: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        found = re.match(r"# (\w+): (.*)$", line)
        if found is None:
            break
        header[found.group(1)] = found.group(2).strip()
    unknown = set(header) - {"expect", "result", "message", "needs"}
    assert not unknown, f"{path.name}: unknown header keys {sorted(unknown)}"
    expect = header.get("expect", "")
    assert expect == "ok" or expect.startswith("error "), f"{path.name}: '# expect: ok' or '# expect: error CODE'"
    needs = tuple(n.strip() for n in header.get("needs", "").split(",") if n.strip())
    assert set(needs) <= set(FEATURES), f"{path.name}: unknown needs {sorted(set(needs) - set(FEATURES))}"
    return Program(
        name=path.stem,
        code=path.read_text(encoding="utf-8"),
        expect=expect.removeprefix("error "),
        result=json.loads(header["result"]) if "result" in header else _UNSET,
        message=header.get("message"),
        needs=needs,
    )


PROGRAMS = [read_program(path) for path in sorted(CORPUS.glob("*.py"))]


def params() -> list[Any]:
    out = []
    for program in PROGRAMS:
        marks = []
        if program.needs:
            reason = "needs " + "; ".join(FEATURES[n] for n in program.needs)
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        out.append(pytest.param(program, id=program.name, marks=marks))
    return out


# ---------------------------------------------------------------- the oracle: real CPython, the same tools


class OracleToolError(Exception):
    """What a failed tool call raises in the sandbox, with the same fields (SPEC §6)."""

    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(info.message)
        self.code = info.code
        self.message = info.message
        self.tool_name = info.tool_name
        self.parameter_name = info.parameter_name
        self.suggested_value = info.suggested_value
        self.solution = info.solution


def oracle_tool(tool: Tool) -> Callable[..., Any]:
    """`tool` called as the runtime calls it: JSON arguments validated, errors as ToolError, a JSON result."""

    def call(*args: Any, **kwargs: Any) -> Any:
        bound = tool.bind(plain(list(args)), plain(kwargs))
        if isinstance(bound, ErrorInfo):
            raise OracleToolError(bound)
        try:
            value = tool.function(**bound)
        except ServerToolError as exc:
            raise OracleToolError(exc.info(tool.name)) from None
        return pydantic_core.to_jsonable_python(value)

    return call


def plain(value: Any) -> Any:
    """A Python value as the sandbox sends it (tool arguments) or returns it (``__result__``): JSON data."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return (
            value
            if math.isfinite(value)
            else ("NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity"))
        )
    if isinstance(value, Mapping):
        return {
            key if isinstance(key, str) else "null" if key is None else str(key): plain(v) for key, v in value.items()
        }
    if isinstance(value, set | frozenset):
        items = [plain(v) for v in value]
        with contextlib.suppress(TypeError):
            items.sort()
        return items
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, Iterable) and not isinstance(value, bytes | bytearray):
        return [plain(v) for v in value]
    raise TypeError(f"the oracle has no JSON form for {type(value).__name__}")


def run_oracle(program: Program, root: Path) -> tuple[Any, str]:
    """Run `program` with CPython against the default toolpacks in a fresh copy of the workspace."""
    settings = corpus_settings(root)
    registry = build_registry(settings)
    catalog = Catalog(registry, settings)
    namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": "__main__"}
    namespace.update({name: importlib.import_module(name) for name in ORACLE_MODULES})
    for name in registry.callable_names():
        tool = registry.resolve(name)
        assert tool is not None and not tool.is_async, name
        namespace[name] = oracle_tool(tool)
    for pack, names in registry.namespaces().items():
        namespace[pack] = SimpleNamespace(**{name: namespace[name] for name in names})
    namespace.update(help=catalog.help, tools=catalog.search, ToolError=OracleToolError)
    tree = ast.parse(program.code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(tree, program.name, "exec"), namespace)
        value = eval(compile(ast.Expression(last.value), program.name, "eval"), namespace) if last else None
    result = namespace.get("__result__", value)
    return plain(result), output.getvalue()


# ---------------------------------------------------------------- the real path


def corpus_settings(root: Path) -> Settings:
    workspace = root / "workspace"
    if not workspace.exists():
        shutil.copytree(WORKSPACE, workspace)
    return Settings(workspace=workspace, db_path=root / "memory.sqlite3", workers=0, timeout_s=TIMEOUT_S)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def pool() -> AsyncIterator[WorkerPool]:
    async with WorkerPool(size=2, max_workers=4, memory_mb=256) as workers:
        yield workers


@pytest.mark.anyio
@pytest.mark.parametrize("program", params())
async def test_corpus_program(program: Program, pool: WorkerPool, tmp_path: Path) -> None:
    settings = corpus_settings(tmp_path / "sandbox")
    runtime = Runtime(settings, build_registry(settings), pool)
    got = await runtime.execute(ExecuteRequest(code=program.code, target=program.name))
    if program.expect != "ok":
        assert got.error is not None, f"expected {program.expect}, got status {got.status}: {got.result!r}"
        assert got.error.code == program.expect, got.error
        if program.message is not None:
            assert program.message in got.error.message, got.error
        return
    assert got.status == "ok", got.error
    if program.result is not _UNSET:
        assert got.result == program.result
        return
    expected, stdout = await anyio.to_thread.run_sync(run_oracle, program, tmp_path / "oracle")
    assert got.result == expected
    assert got.stdout == stdout


def test_corpus_is_large_and_varied() -> None:
    assert len(PROGRAMS) >= 150
    refused = [p for p in PROGRAMS if p.expect != "ok"]
    assert len(refused) >= 20
    names = {p.name.split("_")[0] for p in PROGRAMS}
    assert {"basics", "sorting", "strings", "dates", "functions", "imports", "modules", "tools"} <= names


@pytest.mark.parametrize("document", [README, CORPUS_DOC], ids=["README", "docs-corpus"])
def test_the_docs_state_the_pass_rate(document: Path) -> None:
    """README and docs/corpus.md report how many corpus programs pass on this branch; the xfail headers are the truth."""
    passing = sum(1 for p in PROGRAMS if not p.needs)
    stated = re.findall(r"(\d+) of (\d+) corpus\s+programs\s+pass", document.read_text(encoding="utf-8"))
    assert stated, f"{document.name} must say 'N of M corpus programs pass'"
    assert {(int(n), int(m)) for n, m in stated} == {(passing, len(PROGRAMS))}
