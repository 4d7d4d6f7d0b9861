"""Expressions compiled once into Python closures: ``compile_expr(ctx, node)(frame) -> value``.

The evaluator walks the program's AST once per node, not once per evaluation: each node becomes a
closure specialised for its shape (a local name, a constant operand, a call with two arguments, ...),
and evaluating it is a chain of plain Python calls with no dispatch on the node's class. Nothing is
compiled to CPython bytecode: these closures are the evaluator's own code, and every operation still
goes through the sandbox's policy (attribute allowlist, size-checked operators, format-spec checks).

The frame argument is the dict of the current call (the run's symbol table at module level); names
are resolved by `attp_server.sandbox.engines.python.scopes` before compiling.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from attp_server.sandbox.engines.python.functions import Frame
from attp_server.sandbox.engines.python.scopes import CELL, GLOBAL, LOCAL, Scope
from attp_server.sandbox.limits import Forbidden
from attp_server.sandbox.policy import RESULT_NAME

if TYPE_CHECKING:
    from attp_server.sandbox.engines.python.table import Compilers

Eval = Callable[[Frame], Any]
Store = Callable[[Frame, Any], None]


class Context:
    """What compiling the code of one scope needs: the compilers' table, the evaluator, the scope's names, the
    run's globals."""

    def __init__(self, compilers: Compilers, evaluator: Any, scope: Scope, scopes: dict[ast.AST, Scope]) -> None:
        self.compilers = compilers
        self.evaluator = evaluator
        self.scope = scope
        self.scopes = scopes
        self.globals: Frame = evaluator.symtable
        self.operators: dict[type, Callable[[Any, Any], Any]] = evaluator.binary_operators
        self.absent: Callable[[str], NameError] = undefined if scope.kind == "module" else unbound_local
        """The error for a name read from the frame dict that is not there: a function's unbound local, or
        a module-level name never defined."""

    def inner(self, node: ast.AST) -> Context:
        return Context(self.compilers, self.evaluator, self.scopes[node], self.scopes)

    def where(self, name: str) -> str:
        return self.scope.where.get(name, GLOBAL)


def compile_expr(ctx: Context, node: ast.expr) -> Eval:
    handler = ctx.compilers.expressions.get(node.__class__)
    if handler is None:
        raise Forbidden(f"{node.__class__.__name__} is not available in the sandbox")
    return handler(ctx, node)


def constant(node: ast.AST) -> tuple[bool, Any]:
    """(True, value) for a literal constant, else (False, None)."""
    if node.__class__ is ast.Constant:
        return True, node.value
    return False, None


# ---------------------------------------------------------------- names


def compile_name(ctx: Context, node: ast.Name) -> Eval:
    name, where = node.id, ctx.where(node.id)
    if where == LOCAL:

        def load_local(f: Frame) -> Any:
            try:
                return f[name]
            except KeyError:
                raise unbound_local(name) from None

        return load_local
    if where == CELL:

        def load_cell(f: Frame) -> Any:
            try:
                return f[name].value
            except AttributeError:
                raise unbound_free(name) from None

        return load_cell
    g = ctx.globals

    def load_global(f: Frame) -> Any:
        try:
            return g[name]
        except KeyError:
            raise NameError(f"name {name!r} is not defined", name=name) from None

    return load_global


def operand(ctx: Context, node: ast.expr, *, compiled: bool = True) -> tuple[str, Any]:
    """How a parent node reads `node`: ("const", value), ("frame", name) or ("expr", closure).

    With `compiled` False, an "expr" comes back uncompiled (its payload None).

    A "frame" name is one kept in the frame dict itself: a function's local, or any name at module level
    (where the frame is the run's symbol table).
    """
    if node.__class__ is ast.Constant:
        return "const", node.value
    if node.__class__ is ast.UnaryOp and node.op.__class__ is ast.USub and node.operand.__class__ is ast.Constant:
        value = node.operand.value
        if value.__class__ in (int, float):
            return "const", -value
    if (
        node.__class__ is ast.Name
        and (ctx.scope.kind == "module" or ctx.where(node.id) == LOCAL)
        and not node.id.startswith("__")
    ):
        return "frame", node.id
    return "expr", compile_expr(ctx, node) if compiled else None


CLOSURE, FRAME, CONST, FRAME_CONST, FRAME_FRAME, NESTED = range(6)
"""Kinds of `Inline`: how a parent closure computes a child's value without calling a closure for it."""

INLINE_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Sub: operator.sub,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
"""C operators that never build a big value: a parent may apply them to names it reads itself."""

GUARDED_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {ast.Add: operator.add, ast.Mod: operator.mod}
"""Applied inline only to an int name and an int constant (``i + 1``, ``n % 10``); else the checked operator."""

SMALL = 1 << 31
"""Integers below this (in magnitude) combine with any arithmetic operator into less than 64 bits."""

NESTED_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Mod: operator.mod,
    ast.FloorDiv: operator.floordiv,
}
"""Arithmetic inside a comparison (``d * d <= n``, ``n % d == 0``): inline for two small ints, else checked."""


class Inline:
    """A child expression in the form its parent evaluates inline, by `kind`:

    CLOSURE: ``closure(f)``; FRAME: ``f[name]``; CONST: ``value``; FRAME_CONST: ``op(f[name], value)``;
    FRAME_FRAME: ``op(f[name], f[other])``. With `checked` set (``+`` and ``%``), the inline `op` applies
    only when ``f[name]`` is an int; any other value goes through `checked`, the size-checked operator.
    NESTED: ``outer(x, f[outer_name] or outer_value)`` where ``x = op(f[name], f[other] or value)``,
    `op` applied to two small ints and `checked` to anything else.
    """

    __slots__ = ("checked", "closure", "kind", "name", "op", "other", "outer", "outer_name", "outer_value", "value")

    def __init__(self, kind: int, *, closure: Any = None, name: Any = None, value: Any = None, other: Any = None,
                 op: Any = None, checked: Any = None, outer: Any = None, outer_name: Any = None,
                 outer_value: Any = None) -> None:  # fmt: skip
        self.kind, self.closure, self.name, self.value, self.other = kind, closure, name, value, other
        self.op, self.checked = op, checked
        self.outer, self.outer_name, self.outer_value = outer, outer_name, outer_value


def inline(ctx: Context, node: ast.expr) -> Inline:
    """`node` as its parent can evaluate it without a call, when its shape allows."""
    kind, payload = operand(ctx, node, compiled=False)
    if kind == "const":
        return Inline(CONST, value=payload)
    if kind == "frame":
        return Inline(FRAME, name=payload)
    op_class: type
    if node.__class__ is ast.Compare and len(node.ops) == 1:
        op_class, left_node, right_node = node.ops[0].__class__, node.left, node.comparators[0]
    elif node.__class__ is ast.BinOp:
        op_class, left_node, right_node = node.op.__class__, node.left, node.right
    else:
        return Inline(CLOSURE, closure=compile_expr(ctx, node))
    (lk, left), (rk, right) = operand(ctx, left_node, compiled=False), operand(ctx, right_node, compiled=False)
    if lk == "frame" and op_class in INLINE_OPERATORS:
        if rk == "const":
            return Inline(FRAME_CONST, name=left, value=right, op=INLINE_OPERATORS[op_class])
        if rk == "frame" and op_class is not ast.Sub:  # `x - y` of two big integers is size-checked
            return Inline(FRAME_FRAME, name=left, other=right, op=INLINE_OPERATORS[op_class])
    if lk == "frame" and rk == "const" and op_class in GUARDED_OPERATORS and right.__class__ is int:
        checked = ctx.operators[op_class]
        return Inline(FRAME_CONST, name=left, value=right, op=GUARDED_OPERATORS[op_class], checked=checked)
    if node.__class__ is ast.Compare and op_class in INLINE_OPERATORS and rk != "expr":
        nested = _nested(ctx, left_node)
        if nested is not None:
            nested.outer = INLINE_OPERATORS[op_class]
            nested.outer_name, nested.outer_value = (right, None) if rk == "frame" else (None, right)
            return nested
    return Inline(CLOSURE, closure=compile_expr(ctx, node))


def _nested(ctx: Context, node: ast.expr) -> Inline | None:
    """``name <op> name`` or ``name <op> int`` as the left side of a comparison, or None."""
    if node.__class__ is not ast.BinOp or node.op.__class__ not in NESTED_OPERATORS:
        return None
    (lk, left), (rk, right) = operand(ctx, node.left, compiled=False), operand(ctx, node.right, compiled=False)
    if lk != "frame" or not (rk == "frame" or (rk == "const" and right.__class__ is int)):
        return None
    op_class = node.op.__class__
    other, value = (right, None) if rk == "frame" else (None, right)
    return Inline(
        NESTED, name=left, other=other, value=value, op=NESTED_OPERATORS[op_class], checked=ctx.operators[op_class]
    )


def inline_or_closure(ctx: Context, node: ast.expr) -> Inline:
    """`inline`, with `closure` set whatever the kind: parents inline the kinds they handle and call the rest."""
    spec = inline(ctx, node)
    if spec.kind != CLOSURE:
        spec.closure = compile_expr(ctx, node)
    return spec


def reader(name: str, absent: Callable[[str], NameError]) -> Eval:
    """A closure reading `name` from the frame dict (for the shapes no parent reads inline)."""

    def read(f: Frame) -> Any:
        try:
            return f[name]
        except KeyError:
            raise absent(name) from None

    return read


def unbound_local(name: str) -> UnboundLocalError:
    return UnboundLocalError(
        f"cannot access local variable {name!r} where it is not associated with a value", name=name
    )


def undefined(name: str) -> NameError:
    return NameError(f"name {name!r} is not defined", name=name)


def unbound_free(name: str) -> NameError:
    return NameError(
        f"cannot access free variable {name!r} where it is not associated with a value in enclosing scope", name=name
    )


def store_name(ctx: Context, name: str) -> Store:
    """Bind `name` in the scope where it lives."""
    if name.startswith("__") and name != RESULT_NAME:
        raise Forbidden(f"names starting with '__' are not allowed: {name!r}")
    where = ctx.where(name)
    if where == LOCAL or ctx.scope.kind == "module":

        def store_local(f: Frame, value: Any) -> None:
            f[name] = value

        return store_local
    if where == CELL:

        def store_cell(f: Frame, value: Any) -> None:
            f[name].value = value

        return store_cell
    g = ctx.globals

    def store_global(f: Frame, value: Any) -> None:
        g[name] = value

    return store_global


def delete_name(ctx: Context, name: str) -> Callable[[Frame], None]:
    where = ctx.where(name)
    frame_of: Callable[[Frame], Frame] = (lambda f: f) if where == LOCAL else (lambda f: ctx.globals)
    if where == CELL:

        def delete_cell(f: Frame) -> None:
            try:
                del f[name].value
            except AttributeError:
                raise unbound_free(name) from None

        return delete_cell

    def delete(f: Frame) -> None:
        try:
            del frame_of(f)[name]
        except KeyError:
            raise (
                unbound_local(name) if where == LOCAL else NameError(f"name {name!r} is not defined", name=name)
            ) from None

    return delete


def assigner(ctx: Context, target: ast.expr) -> Store:
    """What ``target = value`` does for any target: names, items, and (starred) unpacking."""
    cls = target.__class__
    if cls is ast.Name:
        return store_name(ctx, target.id)  # type: ignore[attr-defined]
    if cls is ast.Subscript:
        container, key = compile_expr(ctx, target.value), compile_expr(ctx, target.slice)  # type: ignore[attr-defined]

        def store_item(f: Frame, value: Any) -> None:
            container(f)[key(f)] = value

        return store_item
    if cls is ast.Tuple or cls is ast.List:
        return _unpacker(ctx, target.elts)  # type: ignore[attr-defined]
    if cls is ast.Attribute:
        raise Forbidden(f"assigning or deleting attributes is not allowed ('.{target.attr}')")  # type: ignore[attr-defined]
    if cls is ast.Starred:
        raise SyntaxError("starred assignment target must be in a list or tuple")
    raise Forbidden(f"cannot assign to {cls.__name__.lower()}; only names and items can be assigned")


def _unpacker(ctx: Context, targets: list[ast.expr]) -> Store:
    stars = [i for i, t in enumerate(targets) if t.__class__ is ast.Starred]
    if len(stars) > 1:
        raise SyntaxError("multiple starred expressions in assignment")
    stores = [assigner(ctx, t.value if t.__class__ is ast.Starred else t) for t in targets]
    count = len(stores)
    if not stars:
        if count == 2:
            first, second = stores

            def unpack_two(f: Frame, value: Any) -> None:
                a, b = value  # CPython's own unpacking: the same errors for too many or too few values
                first(f, a)
                second(f, b)

            return unpack_two

        def unpack(f: Frame, value: Any) -> None:
            values = tuple(value)
            if len(values) != count:
                raise ValueError(
                    f"too many values to unpack (expected {count})"
                    if len(values) > count
                    else f"not enough values to unpack (expected {count}, got {len(values)})"
                )
            for store, item in zip(stores, values, strict=True):
                store(f, item)

        return unpack
    star = stars[0]
    after = count - star - 1

    def unpack_starred(f: Frame, value: Any) -> None:
        values = list(value)
        if len(values) < count - 1:
            raise ValueError(f"not enough values to unpack (expected at least {count - 1}, got {len(values)})")
        for index in range(star):
            stores[index](f, values[index])
        stores[star](f, values[star : len(values) - after])
        for offset in range(after):
            stores[star + 1 + offset](f, values[len(values) - after + offset])

    return unpack_starred


# ---------------------------------------------------------------- constants, operators, comparisons


def compile_constant(ctx: Context, node: ast.Constant) -> Eval:
    value = node.value

    def const(f: Frame) -> Any:
        return value

    return const


_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.Not: operator.not_,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}


def compile_unaryop(ctx: Context, node: ast.UnaryOp) -> Eval:
    operand = compile_expr(ctx, node.operand)
    if node.op.__class__ is ast.Not:

        def not_(f: Frame) -> bool:
            return not operand(f)

        return not_
    if node.op.__class__ is ast.USub:

        def neg(f: Frame) -> Any:
            return -operand(f)

        return neg
    operation = _UNARY[node.op.__class__]

    def unary(f: Frame) -> Any:
        return operation(operand(f))

    return unary


def compile_boolop(ctx: Context, node: ast.BoolOp) -> Eval:
    values = [compile_expr(ctx, v) for v in node.values]
    is_and = node.op.__class__ is ast.And
    if len(values) == 2:
        kind, first = operand(ctx, node.values[0])
        second = values[1]
        if kind != "frame":
            first = values[0]
        name, absent = (first if kind == "frame" else None), ctx.absent

        def boolop2(f: Frame) -> Any:
            if name is None:
                a = first(f)
            else:
                try:
                    a = f[name]
                except KeyError:
                    raise absent(name) from None
            if is_and:
                return a and second(f)
            return a or second(f)

        return boolop2

    def boolop(f: Frame) -> Any:
        value = None
        for operand_ in values:
            value = operand_(f)
            if bool(value) is not is_and:
                return value
        return value

    return boolop


def compile_ifexp(ctx: Context, node: ast.IfExp) -> Eval:
    test, body, orelse = compile_expr(ctx, node.test), compile_expr(ctx, node.body), compile_expr(ctx, node.orelse)

    def ifexp(f: Frame) -> Any:
        return body(f) if test(f) else orelse(f)

    return ifexp


def compile_namedexpr(ctx: Context, node: ast.NamedExpr) -> Eval:
    value, store = compile_expr(ctx, node.value), store_name(ctx, node.target.id)

    def walrus(f: Frame) -> Any:
        result = value(f)
        store(f, result)
        return result

    return walrus
