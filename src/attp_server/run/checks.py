"""Static checks of a program in the server process, for ``attp check`` and the tests: nothing is executed.

A run's own check happens in its worker (`attp_server.sandbox.static_check`); this module gives the
same answers as `ErrorInfo` records, parsing and compiling through `attp_server.pyast`'s lock since
the server may check on several threads at once.
"""

from __future__ import annotations

import ast

from attp_server import pyast
from attp_server.errors import ErrorInfo
from attp_server.sandbox.engines.starlark import engine as starlark_engine
from attp_server.sandbox.static_check import SOLUTIONS, KnownNames, check, source_line

__all__ = ["KnownNames", "check_program", "check_starlark", "check_syntax"]


def check_program(code: str, known: KnownNames, *, allow_imports: bool = True) -> ErrorInfo | None:
    """Return the first problem of `code` as a model-facing error, or None if it may run (`allow_imports`
    False: every import statement is one)."""
    _tree, problem = check(code, known, parse=pyast.parse, compile_tree=pyast.compile_tree, allow_imports=allow_imports)
    return ErrorInfo.model_validate(problem) if problem is not None else None


def check_starlark(code: str) -> ErrorInfo | None:
    """Parse `code` as Starlark (nothing runs): its syntax errors, imports and nesting, as `check_program` reports.

    For ``attp check`` only: a run is parsed in its worker, never in the server process.
    """
    problem = starlark_engine.check(code)
    if problem is None:
        return None
    return ErrorInfo(
        code=problem.code,
        message=problem.message,
        line=problem.line,
        column=problem.column,
        source_line=source_line(code, problem.line),
        solution=SOLUTIONS.get(problem.code),
    )


def check_syntax(code: str) -> ErrorInfo | None:
    """Compile `code` as real CPython would (``engine = "cpython"``: top-level ``await`` allowed), running nothing:
    its syntax error, or None. The whole language is the program's; only the walls stand around it."""
    try:
        pyast.compile_tree(pyast.parse(code), "<program>", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError as exc:
        return ErrorInfo(
            code="SYNTAX_ERROR",
            message=str(exc.msg),
            line=exc.lineno,
            column=exc.offset,
            source_line=source_line(code, exc.lineno),
        )
    except (RecursionError, MemoryError, ValueError):
        return ErrorInfo(code="SYNTAX_ERROR", message="the program is nested too deeply to parse")
    return None
