"""The static check of a Python program: syntax, the sandbox's refusals and unknown names; nothing runs.

A run's check happens in its worker, under the run's deadline and the worker's limits, so a program
built to make the check expensive costs its own run's time and never the server's: the server
process does not parse programs at all. ``attp check`` and the tests call it in the server process
through `attp_server.run.checks`, which serialises the parse and compile (see `attp_server.pyast`).

What only the server knows (the enabled tools and pack namespaces) arrives in the job, so that
``reed_file(...)`` is answered with ``suggested_value = "read_file"`` before anything is evaluated.
The work is bounded: one pass over the tree, a suggestion for the first unknown name only (at the
bounded cost of `closest`), and a deadline checked as the tree is walked.

Imported by the worker and by the server; imports nothing from the rest of ``server``.
"""

from __future__ import annotations

import ast
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from attp_server.sandbox.policy import bound_names, nodes, scan
from attp_server.sandbox.process.protocol import ErrorReport
from attp_server.sandbox.process.tools import META_TOOLS
from attp_server.sandbox.stdlib.modules import public_names
from attp_server.sandbox.stdlib.namespaces import MODULE_NAMES, SAFE_BUILTIN_FUNCTIONS, SAFE_EXCEPTIONS
from attp_server.sandbox.suggestions import closest

CHECK_BUDGET_S = 2.0
"""Longest a check may take (it takes milliseconds unless built to be slow); past it the run ends with TIMEOUT."""

CHECK_EVERY = 512
"""Tree nodes between two looks at the clock."""

Problem = ErrorReport
"""What the check refuses, as the worker reports it (`attp_server.sandbox.process.protocol.ErrorReport`)."""

SOLUTIONS = {
    "IMPORT_FORBIDDEN": "Delete the import: the available modules and the tools are already there by name; other "
    "modules cannot be used (use the tools instead).",
    "FORBIDDEN": "Rewrite that part with plain data (lists, dicts, str methods) and the available tools.",
}

_COMPILE_ADVICE = {
    "'return' outside function": "At the top level, assign the answer instead: __result__ = <value>",
    "'break' outside loop": "Use break only inside a for or while loop.",
    "'continue' not properly in loop": "Use continue only inside a for or while loop.",
}

_TOO_DEEP: Problem = {
    "code": "SYNTAX_ERROR",
    "message": "the program is nested too deeply to parse",
    "solution": "Simplify the program: fewer nested lambdas, brackets and expressions.",
}


class CheckTimeout(Exception):
    """The check ran past its budget."""


@dataclass(frozen=True)
class KnownNames:
    """Every name a program can use without defining it, by kind (for suggestions, tools come first)."""

    tools: frozenset[str]
    builtins: frozenset[str]
    namespaces: dict[str, frozenset[str]]
    members: Mapping[str, str] = field(default_factory=dict)
    """A module member's bare name -> where it lives (``Counter`` -> ``collections.Counter``)."""
    unavailable: Mapping[str, str] = field(default_factory=dict)
    """Packs whose tools cannot be called now (an upstream server that is down) -> why, and the fix."""
    kept: frozenset[str] = frozenset()
    """Names the session kept from its earlier calls (variables and functions)."""
    modules: tuple[str, ...] = MODULE_NAMES
    """The enabled curated modules: what ``import`` may name (the other namespaces are toolpacks)."""
    everything: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        everything = frozenset({*self.tools, *self.builtins, *self.namespaces, *self.kept})
        object.__setattr__(self, "everything", everything)

    def all(self) -> set[str]:
        return set(self.everything)


PARALLEL = "parallel"
"""The sandbox built-in that runs one tool over many argument dicts at once."""

DISABLED_MODULE = "<disabled module>"
"""Marks, among the unknown names, a curated module the `modules` setting leaves out."""

IMPORTED_FROM = "<imported from>"
"""Marks, among the unknown names, a ``from m import x`` of a member the module does not have."""


@functools.cache
def module_members(enabled: tuple[str, ...] = MODULE_NAMES) -> dict[str, frozenset[str]]:
    """The `enabled` curated modules' member names (built once per process and set of modules)."""
    return public_names(enabled)


def known_names(
    tools: tuple[str, ...],
    packs: tuple[tuple[str, tuple[str, ...]], ...],
    unavailable: tuple[tuple[str, str], ...] = (),
    modules: Mapping[str, frozenset[str]] | None = None,
) -> KnownNames:
    """Every name a program may use without defining it: `tools`, builtins, the enabled `modules` (name ->
    member names; default: every curated one) and the `packs` namespaces; `unavailable` packs (name, why)
    cannot be called now."""
    spaces = dict(module_members() if modules is None else modules)
    importable = tuple(spaces)
    members: dict[str, str] = {}
    for module, names in spaces.items():
        if module != "typing":  # typing's names are for annotations: never suggest typing.Counter(...)
            members.update({name: f"{module}.{name}" for name in sorted(names) if name not in members})
    spaces.update({pack: frozenset(names) for pack, names in packs})
    return KnownNames(
        tools=frozenset([*tools, *META_TOOLS]),
        builtins=frozenset([*SAFE_BUILTIN_FUNCTIONS, *SAFE_EXCEPTIONS, "ToolError", "print", PARALLEL]),
        namespaces=spaces,
        members=members,
        unavailable=dict(unavailable),
        modules=importable,
    )


def _compile(tree: ast.Module, filename: str) -> None:
    compile(tree, filename, "exec", dont_inherit=True)


def check(
    code: str,
    known: KnownNames,
    *,
    parse: Callable[[str], ast.Module] = ast.parse,
    compile_tree: Callable[[ast.Module, str], None] = _compile,
    budget_s: float = CHECK_BUDGET_S,
    allow_imports: bool = True,
) -> tuple[ast.Module | None, Problem | None]:
    """Parse and check `code`: its tree (None if it does not parse) and its first problem, or None if it may run.

    `allow_imports` False refuses every import statement (the ``allow_imports`` setting); otherwise an
    import may name the enabled modules (``known.modules``).
    """
    deadline = time.monotonic() + budget_s
    try:
        tree = parse(code)
    except SyntaxError as exc:
        return None, _syntax_error(code, exc)
    except (RecursionError, MemoryError):
        return None, Problem(**_TOO_DEEP)
    except ValueError as exc:  # e.g. source with NUL bytes
        return None, {"code": "SYNTAX_ERROR", "message": f"the program cannot be parsed: {exc}"}
    try:
        # Compiling (never executing) adds the compiler's own checks: 'return'/'break' outside their
        # block, duplicate parameter names, and so on.
        compile_tree(tree, "<program>")
        walked = nodes(tree)
        violations = scan(tree, walked, modules=known.modules, allow_imports=allow_imports)
    except SyntaxError as exc:
        return tree, _syntax_error(code, exc)
    except (RecursionError, MemoryError):
        return tree, Problem(**_TOO_DEEP)
    if violations:
        first = violations[0]
        return tree, _located(
            {"code": first.code, "message": first.message, "solution": SOLUTIONS.get(first.code)},
            code,
            first.line,
            None if first.column is None else first.column + 1,
        )
    try:
        return tree, _unknown_name(walked, code, known, deadline)
    except CheckTimeout:
        return tree, {
            "code": "TIMEOUT",
            "message": f"checking the program took more than {budget_s:g} s, so it was not run",
            "solution": "Send a shorter program: fewer names and statements, or split the work across several calls.",
        }


def source_line(code: str, line: int | None) -> str | None:
    lines = code.splitlines()
    return lines[line - 1].rstrip() if line and 0 < line <= len(lines) else None


def _located(problem: Problem, code: str, line: int | None, column: int | None) -> Problem:
    problem["line"], problem["column"], problem["source_line"] = line, column, source_line(code, line)
    return cast(Problem, {key: value for key, value in problem.items() if value is not None})


def _syntax_error(code: str, exc: SyntaxError) -> Problem:
    problem: Problem = {
        "code": "SYNTAX_ERROR",
        "message": f"invalid Python syntax: {exc.msg}",
        "solution": _COMPILE_ADVICE.get(exc.msg, "Fix the code at that line; it must be plain Python 3 statements."),
    }
    return _located(problem, code, exc.lineno, exc.offset)


_LOOKED_AT = frozenset({ast.ImportFrom, ast.Name, ast.Call, ast.Attribute})
"""The node classes `_unknown_name` reads (every other node is passed over at the cost of one set lookup)."""


def _unknown_name(walked: list[ast.AST], code: str, known: KnownNames, deadline: float) -> Problem | None:
    """The first (in source order) call of an unknown name or use of an unknown namespace member."""
    everything, namespaces = known.everything, known.namespaces
    found: set[str] | None = None

    def bound() -> set[str]:  # the names the program binds: walked for only when a name is not known
        nonlocal found
        if found is None:
            found = bound_names(walked)
            for node in walked:  # ``from m import *`` binds every member of m
                if isinstance(node, ast.ImportFrom) and node.module in namespaces and node.names[0].name == "*":
                    found |= namespaces[node.module]
        return found

    first: tuple[int, int, ast.AST, str, str | None] | None = None  # line, column, node, name, namespace
    node: Any  # its class is tested with `is` below, which the type checker does not narrow on
    for count, node in enumerate(walked):
        if not count % CHECK_EVERY and time.monotonic() > deadline:
            raise CheckTimeout
        cls = node.__class__
        if cls not in _LOOKED_AT:
            continue
        if cls is ast.ImportFrom and node.module in known.modules and node.module in namespaces:
            missing = [a.name for a in node.names if a.name != "*" and a.name not in namespaces[node.module]]
            if not missing:
                continue
            name, space = missing[0], IMPORTED_FROM
        elif cls is ast.Name and node.id in MODULE_NAMES and node.id not in everything and node.id not in bound():
            name, space = node.id, DISABLED_MODULE
        elif cls is ast.Call and node.func.__class__ is ast.Name:
            name, space = node.func.id, None
            if name in everything or name in bound():
                continue
        elif (
            cls is ast.Attribute
            and node.value.__class__ is ast.Name
            and node.value.id in namespaces
            and node.attr not in namespaces[node.value.id]
            and not node.attr.startswith("_")
            and node.value.id not in bound()
        ):
            name, space = node.attr, node.value.id
        else:
            continue
        where = (node.lineno, node.col_offset)
        if first is None or where < first[:2]:
            first = (*where, node, name, space)
    if first is None:
        return None
    line, column, node, name, space = first
    if space is IMPORTED_FROM:
        module = node.module
        suggestion = closest(name, known.namespaces[module])
        problem: Problem = {
            "code": "IMPORT_FORBIDDEN",
            "message": f"cannot import name {name!r} from {module}"
            + (f"; did you mean {suggestion!r}?" if suggestion else ""),
            "received": f"{module}.{name}",
            "suggested_value": suggestion,
            "solution": f"Import only what {module} has (help() lists the modules and tools), or use "
            f"{module}.<name> directly: the module is already available.",
        }
        return _located(problem, code, line, column + 1)
    if space is DISABLED_MODULE:
        enabled = [module for module in MODULE_NAMES if module in known.namespaces]
        problem = {
            "code": "NAME_NOT_FOUND",
            "message": f"the module {name!r} is not enabled on this server (its `modules` setting); the modules are: "
            + (", ".join(enabled) or "none"),
            "received": name,
            "solution": "Do it with the enabled modules and plain Python, or ask the operator to add the module.",
        }
        return _located(problem, code, line, column + 1)
    if space is not None and space in known.unavailable:  # its tools are unknown while it is down: say that
        problem = {
            "code": "UPSTREAM_UNAVAILABLE",
            "message": f"the MCP server {space!r} is unavailable: {known.unavailable[space]}",
            "tool_name": f"{space}.{name}",
            "solution": f"Do the task without {space}'s tools, or ask the user to fix that server; the other tools "
            "work.",
        }
        return _located(problem, code, line, column + 1)
    if space is None:
        qualified = known.members.get(name)
        suggestion = qualified or closest(name, known.tools) or closest(name, known.everything | bound())
        message = f"{name}() is not a tool or function available here"
        if qualified:
            message += f"; it is in a module: call {qualified}(...)"
        elif suggestion:
            message += f"; did you mean {suggestion}()?"
        if known.unavailable:
            message += f" (tools of {', '.join(sorted(known.unavailable))} are unknown while that server is down)"
        received, suggested = name, suggestion
    else:
        suggestion = closest(name, known.namespaces[space])
        message = f"{space} has no member {name!r}"
        if suggestion:
            message += f"; did you mean {space}.{suggestion}?"
        received, suggested = f"{space}.{name}", f"{space}.{suggestion}" if suggestion else None
    problem = {
        "code": "NAME_NOT_FOUND",
        "message": message,
        "received": received,
        "suggested_value": suggested,
        "solution": "Call only the tools listed in the tool description; help() and tools('word') list them.",
    }
    return _located(problem, code, line, column + 1)
