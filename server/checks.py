"""Static checks of a program before anything runs: syntax, the sandbox's refusals, unknown names.

Nothing is executed here. The refusals themselves (imports, ``_`` names, classes, ...) come from
`attp_server.sandbox.policy.scan`, which the worker applies again; this module adds what only the server
knows: which tools exist, so that ``reed_file(...)`` is answered with ``suggested_value = "read_file"``
before a worker is even involved.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field

from attp_server import pyast
from attp_server.errors import ErrorCode, ErrorInfo, suggest
from attp_server.sandbox import starlark_engine
from attp_server.sandbox.namespaces import MODULE_NAMES
from attp_server.sandbox.policy import bound_names, nodes, scan

_SOLUTIONS = {
    "IMPORT_FORBIDDEN": "Delete the import: the available modules and the tools are already there by name; other "
    "modules cannot be used (use the tools instead).",
    "FORBIDDEN": "Rewrite that part with plain data (lists, dicts, str methods) and the available tools.",
}


_COMPILE_ADVICE = {
    "'return' outside function": "At the top level, assign the answer instead: __result__ = <value>",
    "'break' outside loop": "Use break only inside a for or while loop.",
    "'continue' not properly in loop": "Use continue only inside a for or while loop.",
}


@dataclass(frozen=True)
class KnownNames:
    """Every name a program can use without defining it, by kind (for suggestions, tools come first)."""

    tools: frozenset[str]
    builtins: frozenset[str]
    namespaces: dict[str, frozenset[str]]
    members: dict[str, str] = field(default_factory=dict)
    """A module member's bare name -> where it lives (``Counter`` -> ``collections.Counter``)."""
    unavailable: Mapping[str, str] = field(default_factory=dict)
    """Packs whose tools cannot be called now (an upstream server that is down) -> why, and the fix."""
    kept: frozenset[str] = frozenset()
    """Names the session kept from its earlier calls (variables and functions)."""
    modules: tuple[str, ...] = MODULE_NAMES
    """The modules the run has (importable by name), as opposed to toolpacks."""

    def all(self) -> set[str]:
        return {*self.tools, *self.builtins, *self.namespaces, *self.kept}


def _source_line(code: str, line: int | None) -> str | None:
    lines = code.splitlines()
    return lines[line - 1].rstrip() if line and 0 < line <= len(lines) else None


def _syntax_error(code: str, exc: SyntaxError) -> ErrorInfo:
    return ErrorInfo(
        code=ErrorCode.SYNTAX_ERROR,
        message=f"invalid Python syntax: {exc.msg}",
        line=exc.lineno,
        column=exc.offset,
        source_line=_source_line(code, exc.lineno),
        solution=_COMPILE_ADVICE.get(exc.msg, "Fix the code at that line; it must be plain Python 3 statements."),
    )


_TOO_DEEP = ErrorInfo(
    code=ErrorCode.SYNTAX_ERROR,
    message="the program is nested too deeply to parse",
    solution="Simplify the program: fewer nested lambdas, brackets and expressions.",
)


def check_program(code: str, known: KnownNames, *, allow_imports: bool = True) -> ErrorInfo | None:
    """Return the first problem of `code` as a model-facing error, or None if it may run.

    `allow_imports` False refuses every import statement (the ``allow_imports`` setting).
    """
    try:
        tree = pyast.parse(code)
        # Compiling (never executing) adds the compiler's own checks: 'return'/'break' outside their
        # block, duplicate parameter names, and so on.
        pyast.compile_tree(tree, "<program>")
        walked = nodes(tree)
        violations = scan(tree, walked, modules=known.modules, allow_imports=allow_imports)
    except SyntaxError as exc:
        return _syntax_error(code, exc)
    except (RecursionError, MemoryError):
        return _TOO_DEEP.model_copy()
    except ValueError as exc:  # e.g. source with NUL bytes
        return ErrorInfo(code=ErrorCode.SYNTAX_ERROR, message=f"the program cannot be parsed: {exc}")
    if violations:
        first = violations[0]
        return ErrorInfo(
            code=first.code,
            message=first.message,
            line=first.line,
            column=None if first.column is None else first.column + 1,
            source_line=_source_line(code, first.line),
            solution=_SOLUTIONS.get(first.code),
        )
    return _unknown_name(walked, code, known)


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
        source_line=_source_line(code, problem.line),
        solution=_SOLUTIONS.get(problem.code),
    )


def _unknown_name(walked: list[ast.AST], code: str, known: KnownNames) -> ErrorInfo | None:
    bound = bound_names(walked)
    available = known.all() | bound
    problems: list[tuple[int, int, ErrorInfo]] = []
    for node in walked:
        if isinstance(node, ast.ImportFrom) and node.module in known.modules and node.module in known.namespaces:
            problems.extend(_missing_members(node, known.namespaces[node.module], code))
        elif isinstance(node, ast.Name) and node.id in MODULE_NAMES and node.id not in available:
            problems.append((node.lineno, node.col_offset, _disabled_module(node, code, known)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            if name in available:
                continue
            qualified = known.members.get(name)
            suggestion = qualified or suggest(name, known.tools) or suggest(name, available)
            message = f"{name}() is not a tool or function available here"
            if qualified:
                message += f"; it is in a module: call {qualified}(...)"
            elif suggestion:
                message += f"; did you mean {suggestion}()?"
            if known.unavailable:
                message += f" (tools of {', '.join(sorted(known.unavailable))} are unknown while that server is down)"
            problems.append((node.lineno, node.col_offset, _not_found(message, name, suggestion, node, code)))
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in known.namespaces
            and node.value.id not in bound
            and node.attr not in known.namespaces[node.value.id]
            and not node.attr.startswith("_")
        ):
            space = node.value.id
            if space in known.unavailable:  # its tools are unknown while it is down: say that, not "no member"
                problems.append((node.lineno, node.col_offset, _unavailable(space, node, code, known)))
                continue
            suggestion = suggest(node.attr, known.namespaces[space])
            message = f"{space} has no member {node.attr!r}"
            if suggestion:
                message += f"; did you mean {space}.{suggestion}?"
            full = f"{space}.{suggestion}" if suggestion else None
            problems.append(
                (node.lineno, node.col_offset, _not_found(message, f"{space}.{node.attr}", full, node, code))
            )
    if not problems:
        return None
    problems.sort(key=lambda p: (p[0], p[1]))
    return problems[0][2]


def _missing_members(node: ast.ImportFrom, members: frozenset[str], code: str) -> list[tuple[int, int, ErrorInfo]]:
    """``from m import x`` where the module `m` has no member `x`."""
    found = []
    for alias in node.names:
        if alias.name == "*" or alias.name in members:
            continue
        suggestion = suggest(alias.name, members)
        message = f"cannot import name {alias.name!r} from {node.module}"
        info = ErrorInfo(
            code=ErrorCode.IMPORT_FORBIDDEN,
            message=message + (f"; did you mean {suggestion!r}?" if suggestion else ""),
            line=node.lineno,
            column=node.col_offset + 1,
            source_line=_source_line(code, node.lineno),
            received=f"{node.module}.{alias.name}",
            suggested_value=suggestion,
            solution=f"Import only what {node.module} has (help() lists the modules and tools), or use "
            f"{node.module}.<name> directly: the module is already available.",
        )
        found.append((node.lineno, node.col_offset, info))
    return found


def _disabled_module(node: ast.Name, code: str, known: KnownNames) -> ErrorInfo:
    enabled = [name for name in MODULE_NAMES if name in known.namespaces]
    return ErrorInfo(
        code=ErrorCode.NAME_NOT_FOUND,
        message=f"the module {node.id!r} is not enabled on this server (its `modules` setting); the modules are: "
        + (", ".join(enabled) or "none"),
        line=node.lineno,
        column=node.col_offset + 1,
        source_line=_source_line(code, node.lineno),
        received=node.id,
        solution="Do it with the enabled modules and plain Python, or ask the operator to add the module.",
    )


def _unavailable(space: str, node: ast.Attribute, code: str, known: KnownNames) -> ErrorInfo:
    return ErrorInfo(
        code=ErrorCode.UPSTREAM_UNAVAILABLE,
        message=f"the MCP server {space!r} is unavailable: {known.unavailable[space]}",
        line=node.lineno,
        column=node.col_offset + 1,
        source_line=_source_line(code, node.lineno),
        tool_name=f"{space}.{node.attr}",
        solution=f"Do the task without {space}'s tools, or ask the user to fix that server; the other tools work.",
    )


def _not_found(message: str, name: str, suggestion: str | None, node: ast.expr, code: str) -> ErrorInfo:
    return ErrorInfo(
        code=ErrorCode.NAME_NOT_FOUND,
        message=message,
        line=node.lineno,
        column=node.col_offset + 1,
        source_line=_source_line(code, node.lineno),
        received=name,
        suggested_value=suggestion,
        solution="Call only the tools listed in the tool description; help() and tools('word') list them.",
    )
