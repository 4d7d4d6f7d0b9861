"""The Starlark engine (``engine = "starlark"``, seed 002): runs a program with starlark-pyo3 in the worker.

Same contract as the Python engine: tools are called by name (and as ``pack.tool``) and each call
crosses back to the server; ``__result__`` (else the value of a final expression statement) is the
answer; ``print`` is captured; the deadline ends the run. What differs is the language, and with it
the policy: Starlark has no imports, no I/O, no host introspection and no ``while``, so nothing needs
an allowlist. A program reaches only what is put into its module: the Starlark builtins, plain data,
and Python callables that take and return JSON data (starlark-pyo3 converts through JSON).

Before the program, a prelude in the same module defines ``print`` (into the run's capped buffer),
``sum``, ``round``, ``pow``, ``format``, curated ``json`` and ``math`` structs and one struct per toolpack.
Starlark has no ``try``: a failing tool call ends the run with the tool's own error code, as an
uncaught ``ToolError`` does in the Python engine. A Python callable's exception cannot travel
through Starlark, so it is kept aside (`_Run.failure`) and raised again once evaluation stops.

Imported by the worker (and by the server for `check`); loads without the extra installed.
Imports nothing from the rest of ``server`` outside the sandbox.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import keyword
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attp_server.sandbox.engines import Answer
from attp_server.sandbox.engines.starlark.source import (
    INSTALL,
    MISSING_NAMES,
    EngineUnavailable,
    ImportForbidden,
    Source,
    dialect,
    explain,
    has_location,
    message,
    missing_extra_message,
)
from attp_server.sandbox.limits import Abort, Pauses, SizeLimitError, Timeout
from attp_server.sandbox.process.jsonify import to_json
from attp_server.sandbox.stdlib.namespaces import SAFE_BUILTIN_FUNCTIONS, static_namespaces

if TYPE_CHECKING:
    import starlark

__all__ = [
    "INSTALL",
    "EngineUnavailable",
    "Problem",
    "StarlarkEngine",
    "available",
    "check",
    "missing_extra_message",
]

RESULT_NAME = "__result__"
PRELUDE_FILE = "attp-prelude.star"
MAX_CALL_DEPTH = 1000
"""Starlark frames one program may nest (recursion is allowed, as in the Python engine)."""
MAX_ROUND_DIGITS = 400

STARLARK_BUILTINS = (
    "abs", "all", "any", "bool", "dict", "dir", "enumerate", "fail", "filter", "float", "getattr", "hasattr",
    "hash", "int", "len", "list", "map", "max", "min", "range", "repr", "reversed", "sorted", "str", "struct",
    "tuple", "type", "zip",
)  # fmt: skip
PRELUDE_NAMES = ("print", "sum", "round", "pow", "format", "json", "math")

_NOT_FOUND = re.compile(r"^Variable `(\w+)` not found")
_NOT_JSON = re.compile(r"Operation `serde::serialize` not supported on type `(\w+)`")


class StarlarkError(Exception):
    """An error in the program's own Starlark code (a missing key, a type mismatch, ``fail(...)``)."""


class ResultNotSerializable(Abort):
    code = "RESULT_NOT_SERIALIZABLE"


class InterpreterPanic(Abort):
    """starlark-rust panicked (a bug of the interpreter, not the program): the worker must not be reused."""

    code = "RUNTIME_ERROR"
    retire = True


def available() -> bool:
    """True when the ``starlark`` extra (starlark-pyo3) is installed."""
    return importlib.util.find_spec("starlark") is not None


@dataclass(frozen=True)
class Problem:
    """Why a program cannot start: what `check` reports, with 1-based line and column."""

    code: str
    message: str
    line: int | None = None
    column: int | None = None


def check(code: str) -> Problem | None:
    """Parse `code` as the engine would, running nothing: the static check for ``attp check``."""
    try:
        Source(code).parse(dialect())
    except (EngineUnavailable, ImportForbidden) as exc:
        line, column = getattr(exc, "attp_line", (None, None))
        return Problem(exc.code, str(exc), line, None if column is None else column + 1)
    except SyntaxError as exc:
        return Problem("SYNTAX_ERROR", str(exc.msg), exc.lineno, exc.offset)
    return None


def _not_json(kind: str) -> str:
    return (
        f"a {kind} value, which has no JSON form: only JSON data (None, bool, int, float, str, list, dict) "
        "crosses to tools, json, math and the result; convert it first, e.g. list(...) or str(...)"
    )


class _Run:
    """One run's deadline, and the exception a Python callable raised (Starlark cannot carry it)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.failure: BaseException | None = None

    def extend(self, seconds: float) -> None:
        self.deadline += seconds

    def check_cancelled(self) -> bool:
        if time.monotonic() > self.deadline:
            raise Timeout("the program ran past its time limit")
        return False

    def guard(self, function: Callable[..., Any], what: str) -> Callable[..., Any]:
        """`function` for Starlark: its result made plain JSON data, its exception kept for the worker."""

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return to_json(function(*args, **kwargs), f"the value of {what}")
            except BaseException as exc:
                self.failure = exc
                raise

        return call


class StarlarkEngine:
    """Built once per worker, while the extra can be loaded; `run` evaluates each program in a fresh module."""

    def __init__(self) -> None:
        try:
            import starlark
        except ImportError:
            raise EngineUnavailable(missing_extra_message()) from None
        self.starlark = starlark
        self.dialect = dialect()
        extensions = starlark.LibraryExtension
        self.globals = starlark.Globals.extended_by([extensions.StructType, extensions.Map, extensions.Filter])
        self.read_result = starlark.parse("attp-result.star", f"{RESULT_NAME}\n", self.dialect)
        curated = static_namespaces()
        self.json_dumps: Callable[..., Any] = curated["json"].members["dumps"]
        self.math_functions = {name: f for name, f in curated["math"].members.items() if callable(f)}
        self.math_constants = {name: v for name, v in curated["math"].members.items() if isinstance(v, float)}
        self._prelude: tuple[str, starlark.AstModule] | None = None

    def start(self, job: Mapping[str, Any], tools: Any, output: Any, deadline: float) -> StarlarkRun:
        return StarlarkRun(self, job, tools, output, deadline)

    def known_names(self, job: Mapping[str, Any]) -> list[str]:
        """Every name a program can use without defining it (for 'did you mean' suggestions)."""
        return [*job.get("tools", []), "help", "tools", *job.get("namespaces", {}), *PRELUDE_NAMES, *STARLARK_BUILTINS]

    def run(
        self,
        code: str,
        job: Mapping[str, Any],
        invoke: Callable[[str, tuple[Any, ...], dict[str, Any]], Any],
        output: Any,
        deadline: float,
        *,
        pauses: Pauses | None = None,
    ) -> tuple[dict[str, Any], tuple[Any, int | None] | None]:
        """Evaluate `code`; return ``({"__result__": value} or {}, (last expression value, line) or None)``.

        Raises what the worker maps to error codes: SyntaxError, NameError, RecursionError, the `Abort`
        family (Timeout past the deadline), a tool's ToolError, and StarlarkError for the program's own.
        """
        source = Source(code)
        program = source.parse(self.dialect)
        run = _Run(deadline)
        if pauses is not None:
            pauses.listen(run.extend)
        module = self.starlark.Module()
        tools = [name for name in [*job.get("tools", []), "help", "tools"] if _identifier(name)]
        for name in tools:
            module.add_callable(name, run.guard(_tool(invoke, name), f"{name}()"))
        for name, (function, what) in self._helpers(job, invoke, output).items():
            module.add_callable(name, run.guard(function, what))
        options = self.starlark.EvalOptions(check_cancelled=run.check_cancelled, max_callstack_size=MAX_CALL_DEPTH)
        self._eval(options, module, self._parse_prelude(self._prelude_text(job, set(tools), output)))
        unserializable: str | None = None
        try:
            value = self._eval(options, module, program)
        except self.starlark.StarlarkError as exc:
            text = str(exc)
            if run.failure is not None:
                raise _placed(run.failure, source, text) from None
            final = _NOT_JSON.search(text)
            if final is None or has_location(text):
                raise _runtime_error(source, text) from None
            value, unserializable = None, final.group(1)  # the program ran; only its last value has no JSON form
        try:
            found = {RESULT_NAME: self._eval(options, module, self.read_result)}
        except self.starlark.StarlarkError as exc:
            kind = _NOT_JSON.search(str(exc))
            if kind is not None:
                raise ResultNotSerializable(f"__result__ is {_not_json(kind.group(1))}") from None
            if f"`{RESULT_NAME}`" not in str(exc):
                raise _runtime_error(source, str(exc)) from None
            found = {}  # never assigned
        if unserializable is not None and not found:
            problem = f"__result__ was not set and the last expression is {_not_json(unserializable)}"
            raise ResultNotSerializable(problem)
        return found, ((value, source.last_expression_line) if value is not None else None)

    def _eval(self, options: starlark.EvalOptions, module: starlark.Module, ast: starlark.AstModule) -> object:
        try:
            return self.starlark.eval_with(options, module, ast, self.globals).value
        except (Exception, Abort):
            raise
        except BaseException as exc:  # pyo3's PanicException: starlark-rust itself gave up
            if type(exc).__name__ != "PanicException":
                raise
            if "out of memory" in str(exc):
                raise SizeLimitError("the program ran out of memory (the Starlark heap is full)") from None
            raise InterpreterPanic(f"the Starlark interpreter failed: {str(exc)[:200]}") from None

    def _helpers(
        self, job: Mapping[str, Any], invoke: Callable[..., Any], output: Any
    ) -> dict[str, tuple[Callable[..., Any], str]]:
        """The Python callables the prelude builds on, by module name, with what the model calls them."""
        helpers: dict[str, tuple[Callable[..., Any], str]] = {
            "_attp_write": (_writer(output), "print()"),
            "_attp_format": (SAFE_BUILTIN_FUNCTIONS["format"], "format()"),
            "_attp_round": (_round, "round()"),
            "_attp_pow": (SAFE_BUILTIN_FUNCTIONS["pow"], "pow()"),
            "_attp_json_dumps": (self.json_dumps, "json.dumps()"),
            "_attp_json_loads": (_json_loads, "json.loads()"),
        }
        helpers.update({f"_attp_math_{name}": (f, f"math.{name}()") for name, f in self.math_functions.items()})
        for pack, names in job.get("namespaces", {}).items():
            for name in names:
                if _identifier(pack) and _identifier(name):  # qualified: a bare name may be another pack's tool
                    helpers[f"_attp_tool_{pack}__{name}"] = (_tool(invoke, f"{pack}.{name}"), f"{pack}.{name}()")
        return helpers

    def _prelude_text(self, job: Mapping[str, Any], tools: set[str], output: Any) -> str:
        """The Starlark defining print, sum, round, format, json, math and the pack structs (tools win clashes)."""
        cut = int(getattr(output, "limit", 0)) + 1  # characters >= bytes: a longer text is still marked truncated
        write = f"_attp_write((sep.join([str(a) for a in args]) + end)[:{cut}])"
        math_fields = [f"{name} = {_float_literal(v)}" for name, v in sorted(self.math_constants.items())]
        math_fields += [f"{name} = _attp_math_{name}" for name in sorted(self.math_functions)]
        definitions = {
            "print": (
                'def print(*args, sep = " ", end = "\\n"):\n'
                '    sep = " " if sep == None else sep\n'
                '    end = "\\n" if end == None else end\n'
                f"    {write if getattr(output, 'enabled', True) else 'return None'}\n"
            ),
            "sum": (
                "def sum(values, start = 0):\n"
                "    total = start\n"
                "    for value in values:\n"
                "        total += value\n"
                "    return total\n"
            ),
            "round": "round = _attp_round\n",
            "pow": "pow = _attp_pow\n",
            "format": 'def format(value, spec = ""):\n    return _attp_format(value, spec)\n',
            "json": (
                "json = struct(dumps = _attp_json_dumps, loads = _attp_json_loads, "
                "encode = _attp_json_dumps, decode = _attp_json_loads)\n"
            ),
            "math": f"math = struct({', '.join(math_fields)})\n",
        }
        text = "".join(source for name, source in definitions.items() if name not in tools)
        for pack, names in job.get("namespaces", {}).items():
            if _identifier(pack):
                fields = [f"{n} = _attp_tool_{pack}__{n}" for n in names if _identifier(n)]
                text += f"{pack} = struct({', '.join(fields)})\n"
        return text

    def _parse_prelude(self, text: str) -> starlark.AstModule:
        if self._prelude is None or self._prelude[0] != text:  # the same text for every run of a server
            self._prelude = (text, self.starlark.parse(PRELUDE_FILE, text, self.dialect))
        return self._prelude[1]


class StarlarkRun:
    """One program on starlark-pyo3 (`StarlarkEngine.run`); it keeps nothing between calls."""

    check_s: float | None = None

    def __init__(
        self, engine: StarlarkEngine, job: Mapping[str, Any], tools: Any, output: Any, deadline: float
    ) -> None:
        self.engine, self.job, self.tools, self.output, self.deadline = engine, job, tools, output, deadline

    def execute(self) -> Answer:
        pauses = getattr(self.tools, "pauses", None)
        found, last = self.engine.run(
            str(self.job["code"]), self.job, self.tools, self.output, self.deadline, pauses=pauses
        )
        return Answer(found, last)

    def names(self) -> list[str]:
        return self.engine.known_names(self.job)

    def kept(self) -> dict[str, Any] | None:
        return None


def _identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name) and name != "load"


def _tool(invoke: Callable[[str, tuple[Any, ...], dict[str, Any]], Any], name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return invoke(name, args, kwargs)

    return call


def _writer(output: Any) -> Callable[[Any], None]:
    def write(text: Any) -> None:
        output.write(text if isinstance(text, str) else str(text))

    return write


def _json_loads(text: Any) -> Any:
    if not isinstance(text, str):
        raise TypeError(f"json.loads() takes a str, not {type(text).__name__}")
    return json.loads(text, parse_constant=_no_constant)


def _no_constant(name: str) -> Any:
    raise ValueError(f"json.loads(): {name} has no Starlark value")


def _round(number: Any, ndigits: Any = None) -> Any:
    if isinstance(ndigits, int) and abs(ndigits) > MAX_ROUND_DIGITS:  # round(5, -10**7) computes 10**(10**7)
        raise ValueError(f"round(): ndigits must be between -{MAX_ROUND_DIGITS} and {MAX_ROUND_DIGITS}")
    return round(number, ndigits)


def _float_literal(value: float) -> str:
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    return repr(value)


def _placed(failure: BaseException, source: Source, text: str) -> BaseException:
    """A callable's exception, placed at the program line that made the call."""
    line, column = source.where(text)
    if line is not None and not hasattr(failure, "attp_line"):
        with contextlib.suppress(AttributeError):
            _place(failure, line, column)
    return failure


def _place(error: BaseException, line: int, column: int | None) -> BaseException:
    """Mark where `error` happened, as the worker reads it: 1-based line, 0-based column."""
    error.attp_line = (line, None if column is None else column - 1)  # type: ignore[attr-defined]
    return error


def _runtime_error(source: Source, text: str) -> BaseException:
    problem = message(text)
    line, column = source.where(text)
    name = _NOT_FOUND.match(problem)
    error: BaseException
    if name is not None:
        error = NameError(f"name {name.group(1)!r} is not defined", name=name.group(1))
        if name.group(1) in MISSING_NAMES:
            error.attp_advice = MISSING_NAMES[name.group(1)]  # type: ignore[attr-defined]
    elif "call stack overflow" in problem:
        error = RecursionError(problem)
    else:
        kind = _NOT_JSON.search(problem)
        error = StarlarkError(
            f"the call passes {_not_json(kind.group(1))}" if kind else explain(problem, source.line(line))
        )
    return error if line is None else _place(error, line, column)
