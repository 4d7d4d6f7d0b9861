"""The model-fit corpus (`tests/corpus/`) and its oracle, for `tests/test_corpus.py` and `bench/engine_passes.py`.

A program of the corpus, its header read (`read_program`); the oracle: the same program run by real CPython
against the same tools on a fresh copy of the workspace (`run_oracle`); and `verdict`, the one definition of a
program run "as CPython runs it" (an ok program: the same result and stdout as the oracle; a program that must
fail: the error code its header names, and its message when it names one).
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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pydantic_core

from attp_server.errors import ErrorInfo
from attp_server.model.catalog import Catalog
from attp_server.model.results import ExecutionResult
from attp_server.run.startup import build_registry
from attp_server.settings import Settings
from attp_server.toolpack import Tool
from attp_server.toolpack import ToolError as ServerToolError

CORPUS = Path(__file__).parent.parent / "corpus"
WORKSPACE = CORPUS / "workspace"

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


def corpus_settings(root: Path, **overrides: Any) -> Settings:
    workspace = root / "workspace"
    if not workspace.exists():
        shutil.copytree(WORKSPACE, workspace)
    values: dict[str, Any] = {"workers": 0, "timeout_s": TIMEOUT_S, **overrides}
    return Settings(workspace=workspace, db_path=root / "memory.sqlite3", **values)


def verdict(program: Program, got: ExecutionResult, oracle: Callable[[], tuple[Any, str]]) -> str | None:
    """None when `got` is what the corpus expects of `program`, else what differs; `oracle` runs CPython."""
    if program.expect != "ok":
        if got.error is None:
            return f"expected {program.expect}, got status {got.status}: {got.result!r}"
        if got.error.code != program.expect:
            return f"expected {program.expect}, got {got.error.code}: {got.error.message}"
        if program.message is not None and program.message not in got.error.message:
            return f"the message lacks {program.message!r}: {got.error.message}"
        return None
    if got.status != "ok":
        error = got.error
        return f"{error.code}: {error.message}" if error is not None else f"status {got.status}"
    if program.result is not _UNSET:
        return None if got.result == program.result else f"result {got.result!r}, expected {program.result!r}"
    expected, stdout = oracle()
    if got.result != expected:
        return f"result {got.result!r}, CPython's {expected!r}"
    if got.stdout != stdout:
        return f"stdout {got.stdout!r}, CPython's {stdout!r}"
    return None
