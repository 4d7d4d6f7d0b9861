"""Expressions compiled once into Python closures: ``compile_expr(ctx, node)(frame) -> value``.

The evaluator walks the program's AST once per node, not once per evaluation: each node becomes a
closure specialised for its shape (a local name, a constant operand, a call with two arguments, ...),
and evaluating it is a chain of plain Python calls with no dispatch on the node's class. Nothing is
compiled to CPython bytecode: these closures are the evaluator's own code, and every operation still
goes through the sandbox's policy (attribute allowlist, size-checked operators, format-spec checks).

The frame argument is the dict of the current call (the run's symbol table at module level); names
are resolved by `attp_server.sandbox.scopes` before compiling.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterable
from types import MethodDescriptorType
from typing import Any

from attp_server.sandbox.functions import Frame, Function
from attp_server.sandbox.limits import MAX_SEQUENCE_LEN, Forbidden, SizeLimitError
from attp_server.sandbox.namespaces import check_format_spec
from attp_server.sandbox.policy import RESULT_NAME, get_attribute, plain_attribute
from attp_server.sandbox.scopes import CELL, GLOBAL, LOCAL, Scope

Eval = Callable[[Frame], Any]
Store = Callable[[Frame, Any], None]

SMALL = 1 << 31
"""Integers below this (in magnitude) multiply without a size check: the product is under 64 bits."""


class Context:
    """What compiling the code of one scope needs: the evaluator, the scope's names, the run's globals."""

    def __init__(self, evaluator: Any, scope: Scope, scopes: dict[ast.AST, Scope]) -> None:
        self.evaluator = evaluator
        self.scope = scope
        self.scopes = scopes
        self.globals: Frame = evaluator.symtable
        self.operators: dict[type, Callable[[Any, Any], Any]] = evaluator.binary_operators

    def inner(self, node: ast.AST) -> Context:
        return Context(self.evaluator, self.scopes[node], self.scopes)

    def where(self, name: str) -> str:
        return self.scope.lookup(name)


def compile_expr(ctx: Context, node: ast.expr) -> Eval:
    handler = EXPRESSIONS.get(node.__class__)
    if handler is None:
        raise Forbidden(f"{node.__class__.__name__} is not available in the sandbox")
    return handler(ctx, node)


def constant(node: ast.AST) -> tuple[bool, Any]:
    """(True, value) for a literal constant, else (False, None)."""
    if node.__class__ is ast.Constant:
        return True, node.value
    return False, None


# ---------------------------------------------------------------- names


def _name(ctx: Context, node: ast.Name) -> Eval:
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


def unbound_local(name: str) -> UnboundLocalError:
    return UnboundLocalError(
        f"cannot access local variable {name!r} where it is not associated with a value", name=name
    )


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


def _constant(ctx: Context, node: ast.Constant) -> Eval:
    value = node.value

    def const(f: Frame) -> Any:
        return value

    return const


def _binop(ctx: Context, node: ast.BinOp) -> Eval:
    op = node.op.__class__
    left, checked = compile_expr(ctx, node.left), ctx.operators[op]
    is_const, c = constant(node.right)
    right = c if is_const else compile_expr(ctx, node.right)
    factory = _BINARY_FAST.get(op)
    if factory is not None:
        return factory(left, right, is_const, checked)
    if is_const:
        return lambda f: checked(left(f), c)
    return lambda f: checked(left(f), right(f))


# Each factory: (left, right, right_is_constant, the size-checked operator) -> closure. The fast paths
# handle only values that cannot grow big (small ints); everything else goes through `checked`.


def _add(left: Eval, right: Any, const: bool, checked: Callable[[Any, Any], Any]) -> Eval:
    if const:
        c = right

        def add_const(f: Frame) -> Any:
            a = left(f)
            if a.__class__ is int and c.__class__ is int:
                return a + c
            return checked(a, c)

        return add_const

    def add(f: Frame) -> Any:
        a, b = left(f), right(f)
        if a.__class__ is int and b.__class__ is int:
            return a + b
        return checked(a, b)

    return add


def _mul(left: Eval, right: Any, const: bool, checked: Callable[[Any, Any], Any]) -> Eval:
    if const:
        c = right
        if c.__class__ is not int or not -SMALL < c < SMALL:
            return lambda f: checked(left(f), c)

        def mul_small(f: Frame) -> Any:
            a = left(f)
            if a.__class__ is int and -SMALL < a < SMALL:
                return a * c
            return checked(a, c)

        return mul_small

    def mul(f: Frame) -> Any:
        a, b = left(f), right(f)
        if a.__class__ is int and b.__class__ is int and -SMALL < a < SMALL and -SMALL < b < SMALL:
            return a * b
        return checked(a, b)

    return mul


def _mod(left: Eval, right: Any, const: bool, checked: Callable[[Any, Any], Any]) -> Eval:
    # int % anything is never big and never a %-format; text goes through the checked operator.
    if const:
        c = right

        def mod_const(f: Frame) -> Any:
            a = left(f)
            if a.__class__ is int:
                return a % c
            return checked(a, c)

        return mod_const

    def mod(f: Frame) -> Any:
        a = left(f)
        if a.__class__ is int:
            return a % right(f)
        return checked(a, right(f))

    return mod


def _sub(left: Eval, right: Any, const: bool, checked: Callable[[Any, Any], Any]) -> Eval:
    if const:
        c = right
        return lambda f: left(f) - c
    return lambda f: left(f) - right(f)


def _plain(symbol: Callable[[Any, Any], Any]) -> Callable[[Eval, Any, bool, Any], Eval]:
    """Operators that never build a big value (``/``, ``//``, ``&``, ``>>``, ...): no size check."""

    def factory(left: Eval, right: Any, const: bool, checked: Any) -> Eval:
        if const:
            c = right
            return lambda f: symbol(left(f), c)
        return lambda f: symbol(left(f), right(f))

    return factory


_BINARY_FAST: dict[type, Callable[[Eval, Any, bool, Callable[[Any, Any], Any]], Eval]] = {
    ast.Add: _add,
    ast.Sub: _sub,
    ast.Mult: _mul,
    ast.Mod: _mod,
    ast.Div: _plain(operator.truediv),
    ast.FloorDiv: _plain(operator.floordiv),
    ast.BitAnd: _plain(operator.and_),
    ast.BitOr: _plain(operator.or_),
    ast.BitXor: _plain(operator.xor),
    ast.RShift: _plain(operator.rshift),
}

_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.Not: operator.not_,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}


def _unaryop(ctx: Context, node: ast.UnaryOp) -> Eval:
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


def _boolop(ctx: Context, node: ast.BoolOp) -> Eval:
    values = [compile_expr(ctx, v) for v in node.values]
    is_and = node.op.__class__ is ast.And
    if len(values) == 2:
        first, second = values
        if is_and:

            def and2(f: Frame) -> Any:
                return first(f) and second(f)

            return and2

        def or2(f: Frame) -> Any:
            return first(f) or second(f)

        return or2

    def boolop(f: Frame) -> Any:
        value = None
        for operand in values:
            value = operand(f)
            if bool(value) is not is_and:
                return value
        return value

    return boolop


_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


def _compare(ctx: Context, node: ast.Compare) -> Eval:
    left = compile_expr(ctx, node.left)
    if len(node.ops) == 1:
        op = node.ops[0].__class__
        is_const, c = constant(node.comparators[0])
        factory = _COMPARE_FAST.get(op)
        if factory is not None:
            return factory(left, c, True) if is_const else factory(left, compile_expr(ctx, node.comparators[0]), False)
    operations = [_COMPARE[op.__class__] for op in node.ops]
    comparators = [compile_expr(ctx, c) for c in node.comparators]
    pairs = list(zip(operations, comparators, strict=True))

    def compare(f: Frame) -> Any:
        a = left(f)
        result: Any = True
        for operation, comparator in pairs:
            b = comparator(f)
            result = operation(a, b)
            if not result:
                return result
            a = b
        return result

    return compare


def _cmp_lt(left: Eval, right: Any, const: bool) -> Eval:
    if const:
        c = right
        return lambda f: left(f) < c
    return lambda f: left(f) < right(f)


def _cmp_le(left: Eval, right: Any, const: bool) -> Eval:
    if const:
        c = right
        return lambda f: left(f) <= c
    return lambda f: left(f) <= right(f)


def _cmp_gt(left: Eval, right: Any, const: bool) -> Eval:
    if const:
        c = right
        return lambda f: left(f) > c
    return lambda f: left(f) > right(f)


def _cmp_ge(left: Eval, right: Any, const: bool) -> Eval:
    if const:
        c = right
        return lambda f: left(f) >= c
    return lambda f: left(f) >= right(f)


def _cmp_eq(left: Eval, right: Any, const: bool) -> Eval:
    if const:
        c = right
        return lambda f: left(f) == c
    return lambda f: left(f) == right(f)


def _cmp_ne(left: Eval, right: Any, const: bool) -> Eval:
    if const:
        c = right
        return lambda f: left(f) != c
    return lambda f: left(f) != right(f)


def _cmp_in(left: Eval, right: Any, const: bool) -> Eval:
    if const:
        c = right
        return lambda f: left(f) in c
    return lambda f: left(f) in right(f)


def _cmp_not_in(left: Eval, right: Any, const: bool) -> Eval:
    if const:
        c = right
        return lambda f: left(f) not in c
    return lambda f: left(f) not in right(f)


def _cmp_is(left: Eval, right: Any, const: bool) -> Eval:
    if const:
        c = right
        return lambda f: left(f) is c
    return lambda f: left(f) is right(f)


def _cmp_is_not(left: Eval, right: Any, const: bool) -> Eval:
    if const:
        c = right
        return lambda f: left(f) is not c
    return lambda f: left(f) is not right(f)


_COMPARE_FAST: dict[type, Callable[[Eval, Any, bool], Eval]] = {
    ast.Lt: _cmp_lt,
    ast.LtE: _cmp_le,
    ast.Gt: _cmp_gt,
    ast.GtE: _cmp_ge,
    ast.Eq: _cmp_eq,
    ast.NotEq: _cmp_ne,
    ast.In: _cmp_in,
    ast.NotIn: _cmp_not_in,
    ast.Is: _cmp_is,
    ast.IsNot: _cmp_is_not,
}


def _ifexp(ctx: Context, node: ast.IfExp) -> Eval:
    test, body, orelse = compile_expr(ctx, node.test), compile_expr(ctx, node.body), compile_expr(ctx, node.orelse)

    def ifexp(f: Frame) -> Any:
        return body(f) if test(f) else orelse(f)

    return ifexp


def _namedexpr(ctx: Context, node: ast.NamedExpr) -> Eval:
    value, store = compile_expr(ctx, node.value), store_name(ctx, node.target.id)

    def walrus(f: Frame) -> Any:
        result = value(f)
        store(f, result)
        return result

    return walrus


# ---------------------------------------------------------------- attributes and items


def _attribute(ctx: Context, node: ast.Attribute) -> Eval:
    if node.ctx.__class__ is not ast.Load:
        raise Forbidden(f"assigning or deleting attributes is not allowed ('.{node.attr}')")
    value, name = compile_expr(ctx, node.value), node.attr
    known: type | None = None  # the last class whose attribute `name` is plainly getattr (no wrapper)

    def attribute(f: Frame) -> Any:
        nonlocal known
        obj = value(f)
        if obj.__class__ is known:
            return getattr(obj, name)
        found = get_attribute(obj, name)
        if plain_attribute(obj.__class__, name):
            known = obj.__class__
        return found

    return attribute


def _subscript(ctx: Context, node: ast.Subscript) -> Eval:
    value = compile_expr(ctx, node.value)
    is_const, c = constant(node.slice)
    if is_const:

        def item_const(f: Frame) -> Any:
            return value(f)[c]

        return item_const
    key = compile_expr(ctx, node.slice)

    def item(f: Frame) -> Any:
        return value(f)[key(f)]

    return item


def _slice(ctx: Context, node: ast.Slice) -> Eval:
    none: Eval = lambda f: None  # noqa: E731
    lower = compile_expr(ctx, node.lower) if node.lower is not None else none
    upper = compile_expr(ctx, node.upper) if node.upper is not None else none
    step = compile_expr(ctx, node.step) if node.step is not None else none

    def make_slice(f: Frame) -> slice:
        return slice(lower(f), upper(f), step(f))

    return make_slice


# ---------------------------------------------------------------- displays and f-strings


def elements(ctx: Context, nodes: list[ast.expr]) -> Callable[[Frame], list[Any]]:
    """The values of a display's or a call's elements, ``*iterable`` spread in place."""
    parts = [
        (node.__class__ is ast.Starred, compile_expr(ctx, node.value if node.__class__ is ast.Starred else node))
        for node in nodes
    ]
    if not any(star for star, _ in parts):
        closures = [c for _, c in parts]
        return lambda f: [c(f) for c in closures]

    def spread(f: Frame) -> list[Any]:
        out: list[Any] = []
        for star, part in parts:
            if star:
                out.extend(part(f))
            else:
                out.append(part(f))
        return out

    return spread


def _list(ctx: Context, node: ast.List) -> Eval:
    if node.ctx.__class__ is not ast.Load:
        raise Forbidden("list targets are only available in assignments")
    return elements(ctx, node.elts)


def _tuple(ctx: Context, node: ast.Tuple) -> Eval:
    if node.ctx.__class__ is not ast.Load:
        raise Forbidden("tuple targets are only available in assignments")
    if len(node.elts) == 2 and not any(e.__class__ is ast.Starred for e in node.elts):
        first, second = (compile_expr(ctx, e) for e in node.elts)
        return lambda f: (first(f), second(f))
    values = elements(ctx, node.elts)
    return lambda f: tuple(values(f))


def _set(ctx: Context, node: ast.Set) -> Eval:
    values = elements(ctx, node.elts)
    return lambda f: set(values(f))


def _dict(ctx: Context, node: ast.Dict) -> Eval:
    pairs = [
        (None if key is None else compile_expr(ctx, key), compile_expr(ctx, value))
        for key, value in zip(node.keys, node.values, strict=True)
    ]

    def display(f: Frame) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key, value in pairs:
            if key is None:
                out.update(value(f))
            else:
                out[key(f)] = value(f)
        return out

    return display


def _starred(ctx: Context, node: ast.Starred) -> Eval:
    raise Forbidden("'*' unpacking is only available in calls, displays and assignment targets")


def _formatted(ctx: Context, node: ast.FormattedValue) -> Eval:
    value = compile_expr(ctx, node.value)
    conversions: dict[int, Callable[[Any], str]] = {115: str, 114: repr, 97: ascii}
    convert = conversions.get(node.conversion)
    spec = compile_expr(ctx, node.format_spec) if node.format_spec is not None else None

    def formatted(f: Frame) -> str:
        v = value(f)
        if convert is not None:
            v = convert(v)
        if spec is None:
            return v if v.__class__ is str else format(v, "")
        text = spec(f)
        check_format_spec(text)
        return format(v, text)

    return formatted


def _joinedstr(ctx: Context, node: ast.JoinedStr) -> Eval:
    parts = [compile_expr(ctx, part) for part in node.values]

    def joined(f: Frame) -> str:
        texts = [part(f) for part in parts]
        size = sum(map(len, texts))
        if size > MAX_SEQUENCE_LEN:
            raise SizeLimitError(f"f-string would build {size:,} items; the limit is {MAX_SEQUENCE_LEN:,}")
        return "".join(texts)

    return joined


# ---------------------------------------------------------------- calls


def _call(ctx: Context, node: ast.Call) -> Eval:
    simple = not node.keywords and not any(a.__class__ is ast.Starred for a in node.args)
    if not simple:
        return _general_call(ctx, node)
    args = [compile_expr(ctx, a) for a in node.args]
    func = node.func
    if func.__class__ is ast.Attribute and func.ctx.__class__ is ast.Load:
        return _method_call(compile_expr(ctx, func.value), func.attr, args)
    function = compile_expr(ctx, func)
    if func.__class__ is ast.Name and ctx.where(func.id) == GLOBAL:
        return _global_call(ctx.globals, func.id, args)
    if not args:

        def call0(f: Frame) -> Any:
            fn = function(f)
            if fn.__class__ is Function and fn.arity == 0:
                return fn.enter()
            return fn()

        return call0
    if len(args) == 1:
        (a0,) = args

        def call1(f: Frame) -> Any:
            fn = function(f)
            if fn.__class__ is Function and fn.arity == 1:
                return fn.enter(a0(f))
            return fn(a0(f))

        return call1
    if len(args) == 2:
        a0, a1 = args

        def call2(f: Frame) -> Any:
            fn = function(f)
            if fn.__class__ is Function and fn.arity == 2:
                return fn.enter(a0(f), a1(f))
            return fn(a0(f), a1(f))

        return call2

    def call(f: Frame) -> Any:
        return function(f)(*[a(f) for a in args])

    return call


def _global_call(g: Frame, name: str, args: list[Eval]) -> Eval:
    """A call of a global name (a builtin, a tool, a module-level function): the name read inline."""

    def missing() -> NameError:
        return NameError(f"name {name!r} is not defined", name=name)

    if not args:

        def call0(f: Frame) -> Any:
            try:
                fn = g[name]
            except KeyError:
                raise missing() from None
            if fn.__class__ is Function and fn.arity == 0:
                return fn.enter()
            return fn()

        return call0
    if len(args) == 1:
        (a0,) = args

        def call1(f: Frame) -> Any:
            try:
                fn = g[name]
            except KeyError:
                raise missing() from None
            if fn.__class__ is Function and fn.arity == 1:
                return fn.enter(a0(f))
            return fn(a0(f))

        return call1
    if len(args) == 2:
        a0, a1 = args

        def call2(f: Frame) -> Any:
            try:
                fn = g[name]
            except KeyError:
                raise missing() from None
            if fn.__class__ is Function and fn.arity == 2:
                return fn.enter(a0(f), a1(f))
            return fn(a0(f), a1(f))

        return call2

    def call(f: Frame) -> Any:
        try:
            fn = g[name]
        except KeyError:
            raise missing() from None
        return fn(*[a(f) for a in args])

    return call


def _method_call(obj: Eval, name: str, args: list[Eval]) -> Eval:
    """``obj.name(args)``: the policy decides once per class; a plain method is then called unbound, directly."""
    known: type | None = None  # the last class whose `name` is a plain method, and that method, unbound
    unbound: Any = None

    def lookup(target: Any) -> Callable[..., Any]:
        nonlocal known, unbound
        cls = target.__class__
        found: Callable[..., Any] = get_attribute(target, name)
        if plain_attribute(cls, name):
            method = getattr(cls, name, None)
            if method.__class__ is MethodDescriptorType:
                known, unbound = cls, method
        return found

    if not args:

        def method0(f: Frame) -> Any:
            target = obj(f)
            if target.__class__ is known:
                return unbound(target)
            return lookup(target)()

        return method0
    if len(args) == 1:
        (a0,) = args

        def method1(f: Frame) -> Any:
            target = obj(f)
            if target.__class__ is known:
                return unbound(target, a0(f))
            return lookup(target)(a0(f))

        return method1

    def method(f: Frame) -> Any:
        target = obj(f)
        if target.__class__ is known:
            return unbound(target, *[a(f) for a in args])
        found = lookup(target)
        return found(*[a(f) for a in args])

    return method


def _general_call(ctx: Context, node: ast.Call) -> Eval:
    """Calls with keywords or ``*``/``**`` unpacking."""
    function = compile_expr(ctx, node.func)
    args = elements(ctx, node.args)
    keywords = [(k.arg, compile_expr(ctx, k.value)) for k in node.keywords]

    def call(f: Frame) -> Any:
        fn = function(f)
        values = args(f)
        kwargs: dict[str, Any] = {}
        mine = fn.__class__ is Function
        for name, value in keywords:
            if name is None:
                extra = value(f)
                if not isinstance(extra, dict):
                    raise TypeError(f"argument after ** must be a dict, not {type(extra).__name__}")
                items: Iterable[tuple[Any, Any]] = extra.items()
            else:
                items = ((name, value(f)),)
            for key, item in items:
                if not isinstance(key, str) or (key.startswith("_") and not (mine and not key.startswith("__"))):
                    raise Forbidden(f"keyword argument name {key!r} is not allowed")
                if key in kwargs:
                    raise TypeError(f"got multiple values for keyword argument {key!r}")
                kwargs[key] = item
        if mine:
            return fn.code.call(fn, tuple(values), kwargs)
        return fn(*values, **kwargs)

    return call


EXPRESSIONS: dict[type, Callable[[Context, Any], Eval]] = {
    ast.Name: _name,
    ast.Constant: _constant,
    ast.BinOp: _binop,
    ast.UnaryOp: _unaryop,
    ast.BoolOp: _boolop,
    ast.Compare: _compare,
    ast.IfExp: _ifexp,
    ast.NamedExpr: _namedexpr,
    ast.Attribute: _attribute,
    ast.Subscript: _subscript,
    ast.Slice: _slice,
    ast.List: _list,
    ast.Tuple: _tuple,
    ast.Set: _set,
    ast.Dict: _dict,
    ast.Starred: _starred,
    ast.FormattedValue: _formatted,
    ast.JoinedStr: _joinedstr,
    ast.Call: _call,
}
"""Node class -> compiler. Lambdas and comprehensions are registered by the modules that compile them."""
