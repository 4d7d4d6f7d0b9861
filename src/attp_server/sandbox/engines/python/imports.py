"""``import m``, ``import m as n``, ``from m import a, b``: the run's curated namespaces, by the names models write.

A module is importable when the run has it (`Evaluator.modules`: the namespaces the worker was given,
never a real module). ``import m`` binds the same namespace the program already sees as ``m``;
``from m import a`` binds that namespace's member. ``from __future__ import ...`` changes nothing and
is accepted. Everything else (another module, a dotted or relative import, any import when the
``allow_imports`` setting is off) ends the run with IMPORT_FORBIDDEN, naming what is available.

Its compilers are listed in `attp_server.sandbox.engines.python.table`.
"""

from __future__ import annotations

import ast
import difflib
from typing import Any

from attp_server.sandbox.engines.python.expressions import Context, store_name
from attp_server.sandbox.engines.python.functions import Frame
from attp_server.sandbox.engines.python.statements import Stmt, located
from attp_server.sandbox.limits import ImportForbidden


def find_module(evaluator: Any, name: str) -> Any:
    """The namespace `name` names for this run, or `ImportForbidden`; records the import for the result's hint."""
    modules = evaluator.modules
    if not evaluator.allow_imports:
        raise ImportForbidden(
            f"import statements are not allowed on this server (found import of {name}). "
            f"Pre-injected modules: {', '.join(modules)}; delete the import line and use them by name."
        )
    space = modules.get(name)
    if space is None:
        raise ImportForbidden(unavailable(name, list(modules)))
    if name not in evaluator.imported:
        evaluator.imported.append(name)
    return space


def unavailable(name: str, modules: list[str]) -> str:
    """The message for an import of a module the run does not have."""
    close = difflib.get_close_matches(name.split(".", maxsplit=1)[0], modules, n=1)
    hint = f" Did you mean {close[0]}?" if close else ""
    return (
        f"module {name!r} is not available in the sandbox.{hint} Available modules: {', '.join(modules)} "
        "(already loaded: use them by name, no import needed); tools are called directly by name."
    )


def member(space: Any, module: str, name: str) -> Any:
    try:
        return space.members[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(space.members), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ImportForbidden(f"cannot import name {name!r} from {module}{hint}") from None


def compile_import(ctx: Context, node: ast.Import) -> Stmt:
    evaluator = ctx.evaluator
    bindings = []
    for alias in node.names:
        bound = alias.asname or alias.name.split(".")[0]  # `import a.b` binds `a` (no dotted module exists here)
        bindings.append((alias.name, store_name(ctx, bound)))

    def import_(f: Frame) -> None:
        for module, store in bindings:
            store(f, find_module(evaluator, module))

    return located(node, import_)


def compile_importfrom(ctx: Context, node: ast.ImportFrom) -> Stmt:
    evaluator = ctx.evaluator
    module = "." * node.level + (node.module or "")
    if module == "__future__":
        return lambda f: None  # compiler directives: nothing to do for an evaluator
    star = any(alias.name == "*" for alias in node.names)
    bindings = [(alias.name, store_name(ctx, alias.asname or alias.name)) for alias in node.names if alias.name != "*"]
    symbols = ctx.globals

    def import_from(f: Frame) -> None:
        space = find_module(evaluator, module)
        if star:
            symbols.update(space.members)
        for name, store in bindings:
            store(f, member(space, module, name))

    return located(node, import_from)
