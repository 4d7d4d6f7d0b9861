"""Where each name of a program lives, decided before it runs, by CPython's scoping rules.

A program has one module scope and a scope per ``def``, ``lambda`` and comprehension. Every name a
scope uses is one of:

* `GLOBAL`: the run's symbol table (module-level names, builtins, tools, namespaces);
* `LOCAL`: the scope's own frame (a dict per call);
* `CELL`: a `Cell` held in the frame, shared with the inner functions that use the name (CPython's
  cell and free variables: the defining scope creates the cell, inner scopes receive it).

As in CPython: assigning a name anywhere in a function makes it local to that function, unless it is
declared ``global`` or ``nonlocal``; an inner function sees its enclosing functions' locals (never
the module's, which are globals); a comprehension is a scope of its own whose first iterable is
evaluated outside it; a walrus in a comprehension binds in the enclosing function (or module).

Nothing here runs code: the analysis reads the tree, and its mistakes can only be refusals
(`SyntaxError`, as CPython's own compiler would raise).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

GLOBAL = "global"
LOCAL = "local"
CELL = "cell"

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(eq=False)
class Scope:
    """The names of one scope, and (after `analyze`) where each lives."""

    kind: str  # "module", "function" or "comprehension"
    parent: Scope | None
    params: list[str] = field(default_factory=list)
    bound: set[str] = field(default_factory=set)
    used: set[str] = field(default_factory=set)
    declared_global: set[str] = field(default_factory=set)
    declared_nonlocal: set[str] = field(default_factory=set)
    outward: set[str] = field(default_factory=set)
    """Walrus targets inside a comprehension: they bind in the nearest enclosing non-comprehension scope."""
    children: list[Scope] = field(default_factory=list)
    where: dict[str, str] = field(default_factory=dict)
    cellvars: list[str] = field(default_factory=list)
    """Locals that inner scopes capture: the frame gets a fresh `Cell` for each at entry."""
    freevars: list[str] = field(default_factory=list)
    """Names captured from enclosing scopes: the frame gets the defining scope's `Cell` for each."""

    def lookup(self, name: str) -> str:
        return self.where.get(name, GLOBAL)

    locals: set[str] = field(default_factory=set)
    """The names this scope binds for itself (none at module level), set once the walk is done."""

    def settle(self) -> None:
        if self.kind != "module":
            self.locals = ({*self.params} | self.bound) - self.declared_global - self.declared_nonlocal - self.outward


def analyze(tree: ast.Module) -> dict[ast.AST, Scope]:
    """Return the scope of the module and of every def, lambda and comprehension node, resolved."""
    collector = _Collector()
    module = Scope("module", None)
    collector.scopes[tree] = module
    collector.visit_all(tree.body, module)
    collector.drain()
    scopes = collector.scopes
    if len(scopes) == 1:  # no def, lambda or comprehension: every name is the module's, a global
        return scopes
    for scope in scopes.values():
        scope.settle()
    for scope in scopes.values():
        _resolve(scope)
    for scope in scopes.values():
        cells = [n for n, w in scope.where.items() if w == CELL]
        if cells:
            scope.cellvars = sorted(n for n in cells if n in scope.locals)
            scope.freevars = sorted(n for n in cells if n not in scope.locals)
    return scopes


class _Collector:
    """Walks the tree once, recording for each scope what it binds, uses and declares."""

    def __init__(self) -> None:
        self.scopes: dict[ast.AST, Scope] = {}
        self.pending: list[tuple[ast.AST, Scope]] = []
        """Nodes still to visit, with the scope each belongs to (a stack: no Python call per node)."""

    def child(self, node: ast.AST, parent: Scope, kind: str) -> Scope:
        scope = Scope(kind, parent)
        parent.children.append(scope)
        self.scopes[node] = scope
        return scope

    def visit_all(self, nodes: list[ast.AST] | list[ast.expr] | list[ast.stmt], scope: Scope) -> None:
        self.pending.extend((node, scope) for node in nodes)

    def visit(self, node: ast.AST, scope: Scope) -> None:
        self.pending.append((node, scope))

    def drain(self) -> None:
        pending, special_for = self.pending, _SPECIAL.get
        while pending:
            node, scope = pending.pop()
            cls = node.__class__
            if cls is ast.Name:
                if node.ctx.__class__ is ast.Load:  # type: ignore[attr-defined]
                    scope.used.add(node.id)  # type: ignore[attr-defined]
                else:
                    scope.bound.add(node.id)  # type: ignore[attr-defined]
                continue
            special = special_for(cls)
            if special is not None:
                special(self, node, scope)
                continue
            fields = _FIELDS.get(cls)
            if fields is None:
                fields = _FIELDS[cls] = tuple(f for f in cls._fields if f not in _LEAF_FIELDS)
            for name in fields:  # every other node: its children, in the same scope
                value = getattr(node, name, None)
                if value.__class__ is list:
                    for item in value:
                        if isinstance(item, ast.AST):
                            pending.append((item, scope))
                elif isinstance(value, ast.AST):
                    pending.append((value, scope))

    def visit_namedexpr(self, node: ast.NamedExpr, scope: Scope) -> None:
        self.visit(node.value, scope)
        self.bind_outward(node.target.id, scope)

    def visit_global(self, node: ast.Global, scope: Scope) -> None:
        scope.declared_global.update(node.names)
        if scope.kind != "module":
            for name in node.names:
                self.check_declaration(name, scope, "global")

    def visit_nonlocal(self, node: ast.Nonlocal, scope: Scope) -> None:
        if scope.kind == "module":
            raise _syntax("nonlocal declaration not allowed at module level", node)
        scope.declared_nonlocal.update(node.names)
        for name in node.names:
            self.check_declaration(name, scope, "nonlocal")

    def visit_import(self, node: ast.Import | ast.ImportFrom, scope: Scope) -> None:
        for alias in node.names:
            if alias.name != "*":
                scope.bound.add(alias.asname or alias.name.split(".")[0])

    def visit_handler(self, node: ast.ExceptHandler, scope: Scope) -> None:
        if node.name:
            scope.bound.add(node.name)
        if node.type is not None:
            self.visit(node.type, scope)
        self.visit_all(node.body, scope)

    def visit_annassign(self, node: ast.AnnAssign, scope: Scope) -> None:
        self.visit(node.target, scope)  # annotations are never evaluated
        if node.value is not None:
            self.visit(node.value, scope)

    def visit_class(self, node: ast.ClassDef, scope: Scope) -> None:
        raise _syntax("class definitions are not available", node)

    def check_declaration(self, name: str, scope: Scope, kind: str) -> None:
        if name in scope.params:
            raise _syntax(f"name '{name}' is parameter and {kind}", None)
        if (kind == "global" and name in scope.declared_nonlocal) or (
            kind == "nonlocal" and name in scope.declared_global
        ):
            raise _syntax(f"name '{name}' is nonlocal and global", None)

    def visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, scope: Scope) -> None:
        arguments = node.args
        if not isinstance(node, ast.Lambda):
            self.visit_all(node.decorator_list, scope)
            scope.bound.add(node.name)
        self.visit_all(arguments.defaults, scope)
        self.visit_all([d for d in arguments.kw_defaults if d is not None], scope)
        inner = self.child(node, scope, "function")
        inner.params = [
            a.arg
            for a in [*arguments.posonlyargs, *arguments.args, arguments.vararg, *arguments.kwonlyargs, arguments.kwarg]
            if a is not None
        ]
        if isinstance(node, ast.Lambda):
            self.visit(node.body, inner)
        else:
            self.visit_all(node.body, inner)

    def visit_comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp, scope: Scope
    ) -> None:
        generators = node.generators
        self.visit(generators[0].iter, scope)  # evaluated in the enclosing scope, as CPython does
        inner = self.child(node, scope, "comprehension")
        for index, generator in enumerate(generators):
            self.visit(generator.target, inner)
            if index:
                self.visit(generator.iter, inner)
            self.visit_all(generator.ifs, inner)
        if isinstance(node, ast.DictComp):
            self.visit(node.key, inner)
            self.visit(node.value, inner)
        else:
            self.visit(node.elt, inner)

    def bind_outward(self, name: str, scope: Scope) -> None:
        """A walrus target: bound in the nearest scope that is not a comprehension, used from those between."""
        while scope.kind == "comprehension" and scope.parent is not None:
            scope.outward.add(name)
            scope.used.add(name)
            scope = scope.parent
        scope.bound.add(name)


_SPECIAL: dict[type, Callable[[_Collector, Any, Scope], None]] = {
    ast.FunctionDef: _Collector.visit_function,
    ast.AsyncFunctionDef: _Collector.visit_function,
    ast.Lambda: _Collector.visit_function,
    ast.ListComp: _Collector.visit_comprehension,
    ast.SetComp: _Collector.visit_comprehension,
    ast.DictComp: _Collector.visit_comprehension,
    ast.GeneratorExp: _Collector.visit_comprehension,
    ast.NamedExpr: _Collector.visit_namedexpr,
    ast.Global: _Collector.visit_global,
    ast.Nonlocal: _Collector.visit_nonlocal,
    ast.Import: _Collector.visit_import,
    ast.ImportFrom: _Collector.visit_import,
    ast.ExceptHandler: _Collector.visit_handler,
    ast.AnnAssign: _Collector.visit_annassign,
    ast.ClassDef: _Collector.visit_class,
}
"""Nodes that open a scope, bind names in a special way, or hide parts never evaluated (annotations)."""


_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "kind", "type_comment", "type_ignores", "value_kind"})
"""Fields that never hold a name: load/store contexts, operators, string kinds."""

_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: ()}
"""Node class -> the fields worth walking (filled as classes are met)."""


def _resolve(scope: Scope) -> None:
    """Decide where each name `scope` refers to lives, marking the cells and free names it needs."""
    if scope.kind == "module":
        return
    mine = scope.locals
    for name in scope.used | scope.bound | scope.declared_nonlocal | {*scope.params} | scope.outward:
        if name in scope.declared_global:
            scope.where[name] = GLOBAL
        elif name in mine:
            scope.where.setdefault(name, LOCAL)
        else:
            _capture(name, scope, required=name in scope.declared_nonlocal)


def _capture(name: str, scope: Scope, *, required: bool) -> None:
    """`name` is free in `scope`: find the enclosing function that binds it, or leave it global."""
    between: list[Scope] = [scope]
    outer = scope.parent
    while outer is not None and outer.kind != "module":
        if name in outer.declared_global:
            break
        if name in outer.locals:
            outer.where[name] = CELL
            for inner in between:
                inner.where[name] = CELL
            return
        between.append(outer)
        outer = outer.parent
    if required:
        raise _syntax(f"no binding for nonlocal '{name}' found", None)
    scope.where[name] = GLOBAL


def _syntax(message: str, node: ast.AST | None) -> SyntaxError:
    error = SyntaxError(message)
    error.lineno = getattr(node, "lineno", None)
    error.offset = None
    return error
