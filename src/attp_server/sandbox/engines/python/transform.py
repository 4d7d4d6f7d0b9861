"""The rewrite of a checked program into Python that CPython compiles and runs, with guards where the policy needs one.

A program reaches here after the static check (`attp_server.sandbox.static_check`): it parses, it compiles, and
it names nothing the sandbox refuses. `Transformer` walks its tree once and hands each node to the rule that
`table.REWRITES` names for the node's class: most nodes stay what they are (`native`: loops, calls, arithmetic,
subscripts, comprehensions run as CPython runs them), and a few become calls of the guards in `guards`
(attribute reads, text, the size-checked operators, ``except``/``finally``, ``raise``, imports). A node class the
table does not name is refused. The rewrite changes the tree it is given; every node it adds carries the
location of the node it stands for, so errors point at the program's own lines.

The shapes, for a reader of the rewritten code (``T`` is ``type``, ``P_name`` the types ``name`` is plainly
read on, ``attr`` the allowlist):

* ``recv.name(args)`` -> ``recv.name(args) if T(recv) in P_name else attr(recv, 'name')(args)`` when ``recv`` is a
  name (CPython's own method call, with no bound method made), else ``attr(recv, 'name')(args)``;
* ``n % d`` -> ``n % d if T(n) is int else mod(n, d)``; ``x ** y`` -> ``pow(x, y)``; ``'-' * n`` -> ``mul('-', n)``;
* ``str(x)`` -> ``str(x) if T(x) in scalars else str_guard(str, x)``; ``f'{x}'`` -> ``f'{x if T(x) in scalars else
  shown(x)}'``;
* ``except E:`` -> ``except nothing if aborting() else catch(E):``; a ``finally:`` block starts with
  ``if aborting(): raise``;
* ``import m`` -> ``m = import('m')``; a top-level expression statement records its value (the answer when
  ``__result__`` is not set).

A duplicated operand (the arguments of a guarded method call, the right side of ``%``) never holds another
duplicated form, so the rewritten code is at most about twice the size of the program's.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from attp_server.sandbox.engines.python.guards import name, plain_name
from attp_server.sandbox.limits import Forbidden, SizeLimitError
from attp_server.sandbox.policy import _UNSUPPORTED, get_attribute, plain_attribute, plain_types, refused_name
from attp_server.sandbox.stdlib.namespaces import check_format_spec

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
                record = _call("last", value, ast.Constant(statement.lineno))
                body.append(_at(ast.Expr(value=_at(record, statement)), statement))
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
        rule = self.rewrites.statements.get(node.__class__)
        if rule is None:
            raise Forbidden(f"{node.__class__.__name__} statements are not available in the sandbox")
        self.locate(node)
        return rule(self, node)

    def block(self, nodes: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for node in nodes:
            out.extend(self.stmt(node))
        return out or [_at(ast.Pass(), nodes[0])] if nodes else []

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
                _check_name(parameter.arg, store=True)
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
            return _at(_call("attr", receiver, ast.Constant(node.attr)), node)
        held = name(f"k{next(_CONSTANTS)}")  # unique in the worker: two programs may run in one table
        self.constants[held] = found
        return _at(_load(held), node)

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
        return _at(ast.NamedExpr(target=_store(temp), value=value), value), _at(_load(temp), value)

    def call_arguments(self, node: ast.Call, callee: ast.expr | None) -> ast.Call:
        """`node`'s arguments rewritten; ``**mapping`` checked (`guards.keywords`: `callee`, a name read again, tells
        whether it is a function of the program's own), and a literal ``_`` keyword routed through `guards.call`."""
        node.args = self.exprs(node.args)
        private = False
        for keyword in node.keywords:
            keyword.value = self.expr(keyword.value)
            if keyword.arg is None:
                owner = _load(callee.id) if isinstance(callee, ast.Name) else ast.Constant(None)
                keyword.value = _at(_call("kwargs", owner, keyword.value), keyword.value)
            elif keyword.arg.startswith("_"):
                private = True
        if private:
            return _at(_call_with("call", [node.func, *node.args], node.keywords), node)
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


# ---------------------------------------------------------------- rules


def native(t: Transformer, node: Any) -> Any:
    """The node as CPython runs it, its children rewritten."""
    t.children(node)
    return node if isinstance(node, ast.expr) else [node]


def refused(t: Transformer, node: Any) -> Any:
    """A node the sandbox does not offer (the static check refused it first, with the same message)."""
    raise Forbidden(_UNSUPPORTED.get(node.__class__, f"{node.__class__.__name__} is not available in the sandbox"))


def name_(t: Transformer, node: ast.Name) -> ast.expr:
    _check_name(node.id, store=node.ctx.__class__ is not ast.Load)
    return node


def lambda_(t: Transformer, node: ast.Lambda) -> ast.expr:
    t.arguments(node.args)
    t.locate(node.body)
    with t.inside("function"):
        node.body = t.expr(node.body)
    return node


def comprehension(t: Transformer, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> ast.expr:
    """A comprehension: its first iterable read in the enclosing scope, the rest in a scope of its own."""
    first, *rest = node.generators
    first.iter = t.iterable_expr(first.iter)
    with t.inside("comprehension"):
        if first.is_async:
            raise Forbidden(_UNSUPPORTED[ast.AsyncFor])
        first.target = t.expr(first.target)
        first.ifs = t.exprs(first.ifs)
        for generator in rest:
            t.comprehension(generator)
        if isinstance(node, ast.DictComp):
            node.key, node.value = t.expr(node.key), t.expr(node.value)
        else:
            node.elt = t.expr(node.elt)
    return node


def attribute(t: Transformer, node: ast.Attribute) -> ast.expr:
    """``recv.name`` read: the allowlist, inline for a name whose type the allowlist opens `name` on plainly."""
    if node.ctx.__class__ is not ast.Load:
        raise Forbidden(f"assigning or deleting attributes is not allowed ('.{node.attr}')")
    if node.attr.startswith("_"):
        raise Forbidden(f"attributes starting with '_' are not allowed: '.{node.attr}'")
    receiver = node.value
    if isinstance(receiver, ast.Constant):
        if plain_attribute(type(receiver.value), node.attr):
            return node
        return t.constant_attribute(receiver, node)
    receiver = t.expr(receiver)
    held = t.hold(receiver) if plain_types(node.attr) else None
    if held is None:
        return _at(_call("attr", receiver, ast.Constant(node.attr)), node)
    first, again = held
    t.attributes.add(node.attr)
    node.value = again
    guarded = _at(_call("attr", again, ast.Constant(node.attr)), node)
    return _at(ast.IfExp(test=_plainly(first, again, node.attr), body=node, orelse=guarded), node)


def call(t: Transformer, node: ast.Call) -> ast.expr:
    func = node.func
    if isinstance(func, ast.Attribute) and func.ctx.__class__ is ast.Load:
        return _method_call(t, node, func)
    if isinstance(func, ast.Name) and func.id == "str":
        return _text_call(t, node, func)
    node.func = t.expr(func)
    return t.call_arguments(node, node.func)


def _method_call(t: Transformer, node: ast.Call, func: ast.Attribute) -> ast.expr:
    """``recv.name(args)``: CPython's own method call when the receiver's type opens `name` plainly."""
    if func.attr.startswith("_"):
        raise Forbidden(f"attributes starting with '_' are not allowed: '.{func.attr}'")
    receiver = func.value
    if isinstance(receiver, ast.Constant):  # `", ".join(parts)`: the type is known now
        if plain_attribute(type(receiver.value), func.attr):
            return t.call_arguments(node, None)
        node.func = t.constant_attribute(receiver, func)
        return t.call_arguments(node, None)
    receiver = t.expr(receiver)
    held = t.hold(receiver) if plain_types(func.attr) else None
    before = t.doubled
    fast = t.call_arguments(node, None)
    if held is None or t.doubled != before or fast is not node:
        guarded_func = _at(_call("attr", receiver, ast.Constant(func.attr)), func)
        if fast is node:
            node.func = guarded_func
            return node
        fast.args[0] = guarded_func  # routed through guards.call: the callee is its first argument
        return fast
    first, again = held
    t.attributes.add(func.attr)
    t.doubled += 1
    func.value = again
    guarded_func = _at(_call("attr", again, ast.Constant(func.attr)), func)
    slow = _at(ast.Call(func=guarded_func, args=node.args, keywords=node.keywords), node)
    return _at(ast.IfExp(test=_plainly(first, again, func.attr), body=node, orelse=slow), node)


def _text_call(t: Transformer, node: ast.Call, func: ast.Name) -> ast.expr:
    """``str(x)``: the value's safe text when ``str`` is the builtin (a program may have bound it to its own)."""
    _check_name(func.id, store=False)
    if len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred):
        value = t.expr(node.args[0])
        held = t.hold(value)
        if held is None:
            return _at(_call("str", _load("str"), value), node)
        first, again = held
        node.args = [again]
        guarded = _at(_call("str", _load("str"), again), node)
        test = _at(ast.Compare(left=_type_of(first), ops=[ast.In()], comparators=[_guard("scalars")]), node)
        return _at(ast.IfExp(test=test, body=node, orelse=guarded), node)
    routed = t.call_arguments(node, func)
    if routed is not node:
        return routed
    return _at(_call_with("str_call", [func, *node.args], node.keywords), node)


def binop(t: Transformer, node: ast.BinOp) -> ast.expr:
    """``**`` and ``<<`` size-checked always; ``*`` with a literal sequence; ``%`` unless its left side is an int;
    an integer ``+`` or ``-`` checked for size unless one side is small (`_small`: ``n - 1`` grows a bit at most)."""
    op = node.op.__class__
    left = node.left
    if op is ast.Pow or op is ast.LShift:
        guard = "pow" if op is ast.Pow else "lshift"
        return _at(_call(guard, t.expr(left), t.expr(node.right)), node)
    if op is ast.Mult and (_literal_sequence(left) or _literal_sequence(node.right)):
        return _at(_call("mul", t.expr(left), t.expr(node.right)), node)
    if op is ast.Mod and not _number(left):
        left = t.expr(left)
        held = t.hold(left)
        before = t.doubled
        node.right = t.expr(node.right)
        if held is None or t.doubled != before:
            return _at(_call("mod", left, node.right), node)
        first, again = held
        t.doubled += 1
        node.left = again
        guarded = _at(_call("mod", again, node.right), node)
        test = _at(ast.Compare(left=_type_of(first), ops=[ast.Is()], comparators=[_guard("int")]), node)
        return _at(ast.IfExp(test=test, body=node, orelse=guarded), node)
    t.children(node)
    if op in _GROWING and not (_small(node.left) or _small(node.right)):
        return _int_checked(t, node, _GROWING[op])
    return node


def formatted(t: Transformer, node: ast.FormattedValue) -> ast.expr:
    """``{value!c:spec}`` in an f-string: a value that is not a plain scalar is shown by its safe text, and a spec
    computed at run time is checked like ``format``'s."""
    value = t.expr(node.value)
    held = t.hold(value)
    if held is None:
        node.value = _at(_call("shown", value), value)
    else:
        first, again = held
        test = _at(ast.Compare(left=_type_of(first), ops=[ast.In()], comparators=[_guard("scalars")]), value)
        node.value = _at(ast.IfExp(test=test, body=again, orelse=_at(_call("shown", again), value)), value)
    spec = node.format_spec
    if spec is not None:
        parts = spec.values if isinstance(spec, ast.JoinedStr) else [spec]
        fixed = "".join(p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str))
        if all(isinstance(p, ast.Constant) for p in parts) and _spec_allowed(fixed):
            return node
        checked = _at(_call("spec", t.expr(spec)), spec)
        node.format_spec = _at(ast.JoinedStr(values=[_at(ast.FormattedValue(checked, -1, None), spec)]), spec)
    return node


# ---------------------------------------------------------------- statements


def function_def(t: Transformer, node: ast.FunctionDef) -> list[ast.stmt]:
    _check_name(node.name, store=True)
    node.decorator_list = t.exprs(node.decorator_list)
    t.arguments(node.args)
    node.returns = None
    node.type_comment = None
    with t.inside("function"):
        node.body = t.block(node.body)
    return [node]


def assign(t: Transformer, node: ast.Assign | ast.Delete) -> list[ast.stmt]:
    for target in node.targets:
        _no_attribute_target(target)
    t.children(node)
    return [node]


def annotated(t: Transformer, node: ast.AnnAssign) -> list[ast.stmt]:
    """``x: T = v`` is ``x = v``; a bare ``x: T`` binds nothing (in a function it still makes ``x`` local, as in
    Python). Annotations are never evaluated."""
    _no_attribute_target(node.target)
    target = t.expr(node.target)
    if node.value is not None:
        return [_at(ast.Assign(targets=[target], value=t.expr(node.value)), node)]
    if t.function and isinstance(target, ast.Name):
        local = _at(ast.Assign(targets=[target], value=ast.Constant(None)), node)
        return [_at(ast.If(test=ast.Constant(False), body=[local], orelse=[]), node)]
    return [_at(ast.Pass(), node)]


def augmented(t: Transformer, node: ast.AugAssign) -> list[ast.stmt]:
    """``x **= y`` and ``x <<= y`` size-checked like ``**`` and ``<<``; an integer ``x += y`` (or ``-=``) checked
    after it is done, like ``+`` (in place, so a list ``+=`` still extends the list its aliases see). The target's
    container and key are read once, as in Python."""
    target = node.target
    _no_attribute_target(target)
    op = node.op.__class__
    guard = {ast.Pow: "pow", ast.LShift: "lshift"}.get(op)
    growing = op in _GROWING and not _small(node.value)
    if guard is None and not growing:
        t.children(node)
        return [node]
    value = t.expr(node.value)
    before: list[ast.stmt] = []
    if isinstance(target, ast.Name):
        _check_name(target.id, store=True)
        read: ast.expr = _at(_load(target.id), target)
        store: ast.Name | ast.Subscript = target
    else:
        assert isinstance(target, ast.Subscript)  # the compiler allows nothing else here
        container, key = t.expr(target.value), t.expr(target.slice)
        if isinstance(key, ast.Slice):  # a slice: nothing to check but a size, read the target twice
            if guard is None:
                target.value, target.slice, node.value = container, key, value
                return [node]
            read = _at(ast.Subscript(value=container, slice=key, ctx=ast.Load()), target)
            store = _at(ast.Subscript(value=container, slice=key, ctx=ast.Store()), target)
        else:
            held, index = name("container"), name("key")
            before = [
                _at(ast.Assign(targets=[_store(held)], value=container), node),
                _at(ast.Assign(targets=[_store(index)], value=key), node),
            ]
            read = _at(ast.Subscript(value=_load(held), slice=_load(index), ctx=ast.Load()), target)
            store = _at(ast.Subscript(value=_load(held), slice=_load(index), ctx=ast.Store()), target)
    if guard is not None:
        return [*before, _at(ast.Assign(targets=[store], value=_at(_call(guard, read, value), node)), node)]
    node.target, node.value = store, value
    over = _at(_call("over", read, ast.Constant(_GROWING[op] + "=")), node)
    too_big = ast.BoolOp(
        op=ast.And(),
        values=[
            ast.Compare(left=_type_of(read), ops=[ast.Is()], comparators=[_guard("int")]),
            ast.UnaryOp(op=ast.Not(), operand=_within(read)),
        ],
    )
    check = _at(ast.If(test=_at(too_big, node), body=[_at(ast.Expr(value=over), node)], orelse=[]), node)
    return [*before, node, check]


def try_(t: Transformer, node: ast.Try) -> list[ast.stmt]:
    """No ``except`` clause catches, and no ``finally`` block runs for, what ends the run (`guards.catch`)."""
    node.body = t.block(node.body)
    for handler in node.handlers:
        if handler.name:
            _check_name(handler.name, store=True)
        classes = t.expr(handler.type) if handler.type is not None else ast.Constant(None)
        # `nothing if aborting() else catch(classes)`: the clause's own expression is not even evaluated then
        caught = ast.IfExp(test=_call("aborting"), body=_guard("nothing"), orelse=_call("catch", classes))
        handler.type = _at(caught, handler)
        handler.body = t.block(handler.body)
    node.orelse = t.block(node.orelse)
    if node.finalbody:
        first = node.finalbody[0]
        ending = _at(ast.If(test=_at(_call("aborting"), first), body=[_at(ast.Raise(), first)], orelse=[]), first)
        node.finalbody = [ending, *t.block(node.finalbody)]
    return [node]


def raise_(t: Transformer, node: ast.Raise) -> list[ast.stmt]:
    if node.exc is not None:
        node.exc = _at(_call("raise", t.expr(node.exc)), node.exc)
    if node.cause is not None and not (isinstance(node.cause, ast.Constant) and node.cause.value is None):
        node.cause = _at(_call("cause", t.expr(node.cause)), node.cause)
    return [node]


def declaration(t: Transformer, node: ast.Global | ast.Nonlocal) -> list[ast.stmt]:
    for declared in node.names:
        _check_name(declared, store=True)
    return [node]


def import_(t: Transformer, node: ast.Import) -> list[ast.stmt]:
    """``import a`` / ``import a as b`` / ``import a.b`` (which binds ``a``): the run's namespace of that name."""
    out: list[ast.stmt] = []
    for alias in node.names:
        bound = alias.asname or alias.name.split(".")[0]
        _check_name(bound, store=True)
        found = _at(_call("import", ast.Constant(alias.name)), node)
        out.append(_at(ast.Assign(targets=[_store(bound)], value=found), node))
    return out


def import_from(t: Transformer, node: ast.ImportFrom) -> list[ast.stmt]:
    """``from m import a, b as c`` binds members of the run's namespace ``m``; ``from __future__`` changes nothing."""
    module = "." * node.level + (node.module or "")
    if module == "__future__":
        return [_at(ast.Pass(), node)]
    out: list[ast.stmt] = []
    for alias in node.names:
        if alias.name == "*":
            out.append(_at(ast.Expr(value=_at(_call("import_star", ast.Constant(module)), node)), node))
            continue
        bound = alias.asname or alias.name
        _check_name(bound, store=True)
        found = _at(_call("import_from", ast.Constant(module), ast.Constant(alias.name)), node)
        out.append(_at(ast.Assign(targets=[_store(bound)], value=found), node))
    return out


# ---------------------------------------------------------------- helpers


def _at(new: _Node, old: ast.AST) -> _Node:
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


def _guard(guard: str) -> ast.Name:
    return _load(name(guard))


def _load(identifier: str) -> ast.Name:
    return ast.Name(id=identifier, ctx=ast.Load())


def _store(identifier: str) -> ast.Name:
    return ast.Name(id=identifier, ctx=ast.Store())


def _call(guard: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=_guard(guard), args=list(args), keywords=[])


def _call_with(guard: str, args: list[ast.expr], keywords: list[ast.keyword]) -> ast.Call:
    return ast.Call(func=_guard(guard), args=args, keywords=keywords)


def _type_of(value: ast.expr) -> ast.expr:
    return _at(_call("type", value), value)


def _plainly(first: ast.expr, again: ast.expr, attribute_name: str) -> ast.expr:
    """``T(receiver) is F_name or T(receiver) in P_name``: the allowlist's answer is a plain read for this value (the
    commonest type looked at first: one comparison less for it)."""
    usual = ast.Compare(left=_type_of(first), ops=[ast.Is()], comparators=[_load(plain_name(attribute_name, "f"))])
    if len(plain_types(attribute_name)) == 1:
        return _at(usual, first)
    rest = ast.Compare(left=_type_of(again), ops=[ast.In()], comparators=[_load(plain_name(attribute_name))])
    return _at(ast.BoolOp(op=ast.Or(), values=[usual, rest]), first)


def _literal_sequence(node: ast.expr) -> bool:
    """A sequence written in the program (``'-' * n``, ``[0] * n``, ``f'...' * n``): its repeat is size-checked."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str | bytes | tuple)
    return isinstance(node, ast.List | ast.Tuple | ast.JoinedStr | ast.ListComp)


_GROWING: dict[type, str] = {ast.Add: "+", ast.Sub: "-"}
"""Operators whose integer result is checked against the size limit (`_int_checked`). Not ``*``: a product of two
integers can square a big one, but that is bounded by the deadline and the worker's memory like any other
computation, and a check on every ``d * d`` costs more than its message is worth."""

SMALL_BITS = 64
"""An integer constant of at most this many bits makes an operand small: ``x + 1`` grows an integer by a bit at most,
so only a loop of them grows it past the limit, bounded by the deadline (it runs unchecked)."""

_NOT_NUMBERS = (ast.JoinedStr, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp)
"""Displays: a ``+`` with one of them is never an integer sum."""


def _number(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _small(node: ast.expr) -> bool:
    """An operand written in the program that makes a ``+`` or ``-`` no big integer sum: a small number (`SMALL_BITS`),
    a float, or text (`_textual`)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    if isinstance(node, ast.Constant):
        return type(node.value) is not int or node.value.bit_length() <= SMALL_BITS
    return _textual(node)


def _textual(node: ast.expr) -> bool:
    """Text or a display by the look of it (``'a' + x``, ``f'...'``, ``'%s' % x``, ``[...]``): never an integer."""
    while isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Add) and _textual(node.right):
            return True
        if not isinstance(node.op, ast.Add | ast.Mod):
            return False
        node = node.left
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str | bytes)
    return isinstance(node, _NOT_NUMBERS)


def _within(value: ast.expr) -> ast.expr:
    """``low < value < high``: an integer within the size limit."""
    return ast.Compare(left=_guard("low"), ops=[ast.Lt(), ast.Lt()], comparators=[value, _guard("high")])


def _int_checked(t: Transformer, node: ast.expr, op: str) -> ast.expr:
    """`node`'s value, refused (`guards.over`) when it is an integer past the size limit."""
    held = t.hold(node)
    if held is None or isinstance(node, ast.Name):
        return _at(_call("checked", node, ast.Constant(op)), node)
    first, again = held
    test = ast.BoolOp(
        op=ast.Or(),
        values=[ast.Compare(left=_type_of(first), ops=[ast.IsNot()], comparators=[_guard("int")]), _within(again)],
    )
    over = _at(_call("over", again, ast.Constant(op)), node)
    return _at(ast.IfExp(test=_at(test, node), body=again, orelse=over), node)


def _spec_allowed(text: str) -> bool:
    try:
        check_format_spec(text)
    except SizeLimitError:
        return False
    return True


def _check_name(identifier: str, *, store: bool) -> None:
    """A second look at what the static check refused: no ``__`` name but ``__result__`` (and reading ``__name__``)."""
    if refused_name(identifier, store=store):
        raise Forbidden(f"names starting with '__' are not allowed: {identifier!r}")


def _no_attribute_target(target: ast.expr) -> None:
    if isinstance(target, ast.Attribute):
        raise Forbidden(f"assigning or deleting attributes is not allowed ('.{target.attr}')")
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            _no_attribute_target(element.value if isinstance(element, ast.Starred) else element)
