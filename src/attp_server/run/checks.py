"""Static checks of a program in the server process, for ``attp check`` and the tests: nothing is executed.

A run's own check happens in its worker (`attp_server.sandbox.static_check`); this module gives the
same answers as `ErrorInfo` records, parsing and compiling through `attp_server.pyast`'s lock since
the server may check on several threads at once.
"""

from __future__ import annotations

import ast

from attp_server import pyast
from attp_server.errors import ErrorCode, ErrorInfo
from attp_server.sandbox.engines import ENGINE_NAMES, ENGINES
from attp_server.sandbox.engines.asteval.lacks import lacking
from attp_server.sandbox.engines.starlark import engine as starlark_engine
from attp_server.sandbox.policy import scan
from attp_server.sandbox.static_check import SOLUTIONS, KnownNames, check, source_line

__all__ = ["KnownNames", "check_asteval", "check_code", "check_program", "check_starlark", "check_syntax"]


def check_code(code: str, engine: str, known: KnownNames, *, allow_imports: bool = True) -> ErrorInfo | None:
    """`code`'s first problem on `engine`, as the engine's own check finds it (nothing runs)."""
    if engine == "starlark":
        return check_starlark(code)
    if engine == "asteval":
        return check_asteval(code, known, allow_imports=allow_imports)
    if engine == "python":
        return check_program(code, known, allow_imports=allow_imports)
    if engine == "cpython":
        return check_syntax(code)
    return ErrorInfo(
        code=ErrorCode.INVALID_ARGUMENT,
        message=f"unknown engine {engine!r}; the engines are {', '.join(ENGINE_NAMES)}",
        parameter_name="engine",
        received=engine,
        expected=f"one of {', '.join(ENGINE_NAMES)}",
    )


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


def check_asteval(code: str, known: KnownNames, *, allow_imports: bool = True) -> ErrorInfo | None:
    """Parse `code` for the asteval engine (nothing runs): its syntax errors, what asteval's language lacks, and
    imports of modules the server does not have, as a run would report them before it starts."""
    try:
        tree = pyast.parse(code)
    except SyntaxError as exc:
        return ErrorInfo(
            code=ErrorCode.SYNTAX_ERROR,
            message=str(exc.msg),
            line=exc.lineno,
            column=exc.offset,
            source_line=source_line(code, exc.lineno),
        )
    except (ValueError, RecursionError, MemoryError) as exc:
        return ErrorInfo(code=ErrorCode.SYNTAX_ERROR, message=f"the program cannot be parsed: {exc}")
    found = lacking(tree)
    if found is not None:
        message, node = found
        line, column = getattr(node, "lineno", None), getattr(node, "col_offset", None)
        return ErrorInfo(
            code=ErrorCode.FORBIDDEN,
            message=message,
            line=line,
            column=None if column is None else column + 1,
            source_line=source_line(code, line),
            solution=ENGINES["asteval"].language.solutions.get(ErrorCode.FORBIDDEN),
        )
    imports: list[ast.stmt] = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
    refused = scan(ast.Module(body=imports, type_ignores=[]), modules=known.modules, allow_imports=allow_imports)
    if refused:
        first = refused[0]
        return ErrorInfo(
            code=first.code,
            message=first.message,
            line=first.line,
            column=None if first.column is None else first.column + 1,
            source_line=source_line(code, first.line),
            solution=SOLUTIONS.get(first.code),
        )
    return None


def check_syntax(code: str) -> ErrorInfo | None:
    """Compile `code` as real CPython would (``engine = "cpython"``: top-level ``await`` allowed), running nothing:
    its syntax error, or None. The whole language is the program's; only the walls stand around it."""
    try:
        pyast.compile_tree(pyast.parse(code), "<program>", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError as exc:
        return ErrorInfo(
            code=ErrorCode.SYNTAX_ERROR,
            message=str(exc.msg),
            line=exc.lineno,
            column=exc.offset,
            source_line=source_line(code, exc.lineno),
        )
    except (ValueError, RecursionError, MemoryError) as exc:
        return ErrorInfo(code=ErrorCode.SYNTAX_ERROR, message=f"the program cannot be parsed: {exc}")
    return None
