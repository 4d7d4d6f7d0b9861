"""The rewrite of a checked program into Python that CPython compiles and runs, with guards where the policy needs one.

A program reaches here after the static check (`attp_server.sandbox.static_check`): it parses, it compiles, and
it names nothing the sandbox refuses. `Transformer` walks its tree once and hands each node to the rule that
`table.REWRITES` names for the node's class (the rules are `rules`): most nodes stay what they are, and a few
become calls of the guards in `guards`. A node class the table does not name is refused. The rewrite changes the
tree it is given; every node it adds carries the location of the node it stands for (`at`), so errors point at
the program's own lines, and it records where the program's statements are (`Transformer.spans`) for the
evaluator to report errors by.

What the walk keeps track of, for the rules: the scope it is in (the module, a ``def``/``lambda``, a
comprehension: where a ``:=`` temporary binds, `Transformer.hold`), whether it is inside a comprehension's
iterable (where Python allows no ``:=``), which attribute names are read with an inline type check (their plain
types go in the run's globals), and how many duplicated forms were made (one never holds another, so the
rewritten code is at most about twice the size of the program's).
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from attp_server.sandbox.engines.python.guards import name
from attp_server.sandbox.limits import Forbidden
from attp_server.sandbox.policy import _UNSUPPORTED, get_attribute, refused_name

_Node = TypeVar("_Node", bound=ast.AST)

Span = tuple[int, int, int, int, int, int]
"""Where a located node is (first line, column, last line, end column) and where its errors are reported (line,
column): statements, and a lambda's expression."""


@dataclass(frozen=True)
class Rewrites:
    """Node class -> its rule, for expressions and for statements (`table.REWRITES`)."""

    expressions: Mapping[type, Callable[[Transformer, Any], ast.expr]]
    statements: Mapping[type, Callable[[Transformer, Any], list[ast.stmt]]]


class Transformer:
    """One rewrite of one program tree. `attributes` and `spans` are what its runs need besides the code."""

    def __init__(self, rewrites: Rewrites) -> None:
        self.rewrites = rewrites
        self.attributes: set[str] = set()
        """Attribute names read with an inline type check (their plain types go in the run's builtins)."""
        self.spans: list[Span] = []
        self.constants: dict[str, Any] = {}
        """Checked stand-ins of constants' methods, by the name the rewritten code reads them by."""
        self.doubled = 0
        """How many duplicated forms were made so far (one must not hold another)."""
        self.function = 0
        """How many ``def``/``lambda`` bodies enclose the node being rewritten (0: the module's own code)."""
        self.scopes: list[str] = ["module"]
        """The scopes around the node: ``module``, ``function`` (a def or lambda) or ``comprehension``."""
        self.iterable = 0
        """Above 0 inside a comprehension's iterable, where Python allows no ``:=`` (so no temporary)."""

    # ------------------------------------------------------------ walking

    def module(self, tree: ast.Module) -> ast.Module:
        body: list[ast.stmt] = []
        for statement in tree.body:
            if statement.__class__ is ast.Expr:  # the program's answer when it sets no __result__
                self.locate(statement)
                value = self.expr(statement.value)
                record = call_guard("last", value, ast.Constant(statement.lineno))
                body.append(at(ast.Expr(value=at(record, statement)), statement))
            else:
                body.extend(self.stmt(statement))
        tree.body = body
        return tree

    def expr(self, node: ast.expr) -> ast.expr:
        rule = self.rewrites.expressions.get(node.__class__)
        if rule is None:
            raise Forbidden(f"{node.__class__.__name__} is not available in the sandbox")
        return rule(self, node)

    def stmt(self, node: ast.stmt) -> list[ast.stmt]:
        """`node` rewritten; a refusal is stamped with its line, as an error of the run would be."""
        try:
            rule = self.rewrites.statements.get(node.__class__)
            if rule is None:
                raise Forbidden(f"{node.__class__.__name__} statements are not available in the sandbox")
            self.locate(node)
            return rule(self, node)
        except Forbidden as refusal:
            if not hasattr(refusal, "attp_line"):
                refusal.attp_line = (node.lineno, node.col_offset)  # type: ignore[attr-defined]
            raise

    def block(self, nodes: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for node in nodes:
            out.extend(self.stmt(node))
        return out or [at(ast.Pass(), nodes[0])] if nodes else []

    def exprs(self, nodes: list[ast.expr]) -> list[ast.expr]:
        return [self.expr(node) for node in nodes]

    def children(self, node: ast.AST) -> None:
        """Rewrite every child of `node` in place (its expressions, statement blocks and other parts)."""
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, ast.expr):
                setattr(node, field, self.expr(value))
            elif isinstance(value, list) and value:
                if isinstance(value[0], ast.stmt):
                    setattr(node, field, self.block(value))
                    continue
                for index, item in enumerate(value):  # expressions (a dict display's keys may be None)
                    if isinstance(item, ast.expr):
                        value[index] = self.expr(item)
                    elif isinstance(item, ast.comprehension):
                        self.comprehension(item)
            elif isinstance(value, ast.arguments):
                self.arguments(value)

    def locate(self, node: ast.stmt | ast.expr, report: ast.AST | None = None) -> None:
        """Remember `node` as a place errors are reported at (by its own start, or `report`'s)."""
        start: ast.AST = node
        for decorator in getattr(node, "decorator_list", ()):  # a decorator's error is the def's
            if (decorator.lineno, decorator.col_offset) < (start.lineno, start.col_offset):  # type: ignore[attr-defined]
                start = decorator
        at = report or node
        self.spans.append(
            (
                start.lineno,  # type: ignore[attr-defined]
                start.col_offset,  # type: ignore[attr-defined]
                node.end_lineno or node.lineno,
                node.end_col_offset if node.end_col_offset is not None else node.col_offset,
                at.lineno,  # type: ignore[attr-defined]
                at.col_offset,  # type: ignore[attr-defined]
            )
        )

    # ------------------------------------------------------------ parts that are not expressions or statements

    def arguments(self, node: ast.arguments) -> None:
        """A signature: its defaults rewritten, its annotations dropped (never evaluated, never kept)."""
        for parameter in [*node.posonlyargs, *node.args, node.vararg, *node.kwonlyargs, node.kwarg]:
            if parameter is not None:
                check_name(parameter.arg, store=True)
                parameter.annotation = None
                parameter.type_comment = None
        node.defaults = self.exprs(node.defaults)
        node.kw_defaults = [None if d is None else self.expr(d) for d in node.kw_defaults]

    def comprehension(self, node: ast.comprehension) -> None:
        """One ``for ... in ... if ...`` of a comprehension (its scope entered by `comprehension`, the rule)."""
        if node.is_async:
            raise Forbidden(_UNSUPPORTED[ast.AsyncFor])
        node.target = self.expr(node.target)
        node.iter = self.iterable_expr(node.iter)
        node.ifs = self.exprs(node.ifs)

    def iterable_expr(self, node: ast.expr) -> ast.expr:
        self.iterable += 1
        try:
            return self.expr(node)
        finally:
            self.iterable -= 1

    def constant_attribute(self, receiver: ast.Constant, node: ast.Attribute) -> ast.expr:
        """``'text'.name`` that the allowlist answers with a checked stand-in (``', '.join``): the stand-in, made once
        for the program (it holds nothing but the constant). Refused or absent: the guard, at run time."""
        try:
            found = get_attribute(receiver.value, node.attr)
        except (Forbidden, AttributeError):
            return at(call_guard("attr", receiver, ast.Constant(node.attr)), node)
        held = name(f"k{next(_CONSTANTS)}")  # unique in the worker: two programs may run in one table
        self.constants[held] = found
        return at(load(held), node)

    def inside(self, scope: str) -> _Scope:
        return _Scope(self, scope)

    def hold(self, value: ast.expr) -> tuple[ast.expr, ast.expr] | None:
        """`value` for a form that reads it twice: (its first read, a read again). A name is read twice; anything
        else is kept in a temporary by ``:=`` (None where Python allows none: a comprehension's iterable)."""
        if isinstance(value, ast.Name):
            return value, value
        if self.iterable:
            return None
        temp = name("tc") if self.scopes[-1] == "comprehension" else name("t")
        return at(ast.NamedExpr(target=store(temp), value=value), value), at(load(temp), value)

    def call_arguments(self, node: ast.Call, callee: ast.expr | None) -> ast.Call:
        """`node`'s arguments rewritten; ``**mapping`` checked (`guards.keywords`: `callee`, a name read again, tells
        whether it is a function of the program's own), and a literal ``_`` keyword routed through `guards.call`."""
        node.args = self.exprs(node.args)
        private = False
        for keyword in node.keywords:
            keyword.value = self.expr(keyword.value)
            if keyword.arg is None:
                owner = load(callee.id) if isinstance(callee, ast.Name) else ast.Constant(None)
                keyword.value = at(call_guard("kwargs", owner, keyword.value), keyword.value)
            elif keyword.arg.startswith("_"):
                private = True
        if private:
            return at(call_guard_with("call", [node.func, *node.args], node.keywords), node)
        return node


class _Scope:
    """``with t.inside("function"):``: the rewrite is in a scope of that kind meanwhile."""

    def __init__(self, transformer: Transformer, scope: str) -> None:
        self.transformer, self.scope, self.iterable = transformer, scope, 0

    def __enter__(self) -> None:
        t = self.transformer
        t.scopes.append(self.scope)
        if self.scope == "function":  # a lambda in an iterable is a scope of its own: `:=` is allowed in it
            self.iterable, t.iterable = t.iterable, 0
            t.function += 1

    def __exit__(self, *exc: object) -> None:
        t = self.transformer
        t.scopes.pop()
        if self.scope == "function":
            t.iterable = self.iterable
            t.function -= 1


_CONSTANTS = itertools.count()
"""Numbers the stand-ins of `Transformer.constant_attribute`."""


# ---------------------------------------------------------------- helpers


def at(new: _Node, old: ast.AST) -> _Node:
    """`new`, and every node made with it that has no place yet, located where `old` is (the program's own nodes
    keep theirs): the compiler needs a place on every node, and errors are reported by it."""
    where = (old.lineno, old.col_offset, old.end_lineno, old.end_col_offset)  # type: ignore[attr-defined]
    pending: list[ast.AST] = [new]
    while pending:
        node = pending.pop()
        if hasattr(node, "lineno") or not node._attributes:
            continue
        node.lineno, node.col_offset, node.end_lineno, node.end_col_offset = where  # type: ignore[attr-defined]
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, ast.AST):
                pending.append(value)
            elif isinstance(value, list):
                pending.extend(item for item in value if isinstance(item, ast.AST))
    return new


def guard(which: str) -> ast.Name:
    """The guard `which` (`guards.STATIC`), read by its name."""
    return load(name(which))


def load(identifier: str) -> ast.Name:
    return ast.Name(id=identifier, ctx=ast.Load())


def store(identifier: str) -> ast.Name:
    return ast.Name(id=identifier, ctx=ast.Store())


def call_guard(which: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=guard(which), args=list(args), keywords=[])


def call_guard_with(which: str, args: list[ast.expr], keywords: list[ast.keyword]) -> ast.Call:
    return ast.Call(func=guard(which), args=args, keywords=keywords)


def type_of(value: ast.expr) -> ast.expr:
    """``type(value)``, by the guard's name (a program may have bound ``type`` to anything)."""
    return at(call_guard("type", value), value)


def check_name(identifier: str, *, store: bool) -> None:
    """A second look at what the static check refused: no ``__`` name but ``__result__`` (and reading ``__name__``)."""
    if refused_name(identifier, store=store):
        raise Forbidden(f"names starting with '__' are not allowed: {identifier!r}")
