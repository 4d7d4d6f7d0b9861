"""Attributes, items, displays and f-strings, compiled.

``obj.name`` asks the attribute policy (`attp_server.sandbox.policy.get_attribute`); when its answer
for a class is a plain ``getattr`` (no wrapper), the call site remembers the class and asks only for a
new one. Items read their container and key inline when they are names or constants. F-strings check
their format specs and their total size, as ``str.format`` does.

Its compilers are listed in `attp_server.sandbox.engines.python.table`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from attp_server.sandbox.engines.python.expressions import Context, Eval, compile_expr, operand, reader
from attp_server.sandbox.engines.python.functions import Frame
from attp_server.sandbox.limits import MAX_SEQUENCE_LEN, Forbidden, SizeLimitError
from attp_server.sandbox.policy import get_attribute, plain_attribute
from attp_server.sandbox.stdlib.namespaces import check_format_spec
from attp_server.sandbox.stdlib.reprs import safe_ascii, safe_format, safe_repr, safe_str

# ---------------------------------------------------------------- attributes and items


def compile_attribute(ctx: Context, node: ast.Attribute) -> Eval:
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


def compile_subscript(ctx: Context, node: ast.Subscript) -> Eval:
    (kind, value), (key_kind, key) = operand(ctx, node.value), operand(ctx, node.slice)
    if kind == "const":
        value = compile_expr(ctx, node.value)
    container = value if kind == "frame" else None
    absent = ctx.absent
    if key_kind == "frame":
        key = reader(key, absent)
    constant_key = key_kind == "const"

    def item(f: Frame) -> Any:
        if container is None:
            obj = value(f)
        else:
            try:
                obj = f[container]
            except KeyError:
                raise absent(container) from None
        return obj[key] if constant_key else obj[key(f)]

    return item


def compile_slice(ctx: Context, node: ast.Slice) -> Eval:
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
    if True not in {star for star, _ in parts}:
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


def compile_list(ctx: Context, node: ast.List) -> Eval:
    if node.ctx.__class__ is not ast.Load:
        raise Forbidden("list targets are only available in assignments")
    return elements(ctx, node.elts)


def compile_tuple(ctx: Context, node: ast.Tuple) -> Eval:
    if node.ctx.__class__ is not ast.Load:
        raise Forbidden("tuple targets are only available in assignments")
    if len(node.elts) == 2 and ast.Starred not in {e.__class__ for e in node.elts}:
        first, second = (compile_expr(ctx, e) for e in node.elts)
        return lambda f: (first(f), second(f))
    values = elements(ctx, node.elts)
    return lambda f: tuple(values(f))


def compile_set(ctx: Context, node: ast.Set) -> Eval:
    values = elements(ctx, node.elts)
    return lambda f: set(values(f))


def compile_dict(ctx: Context, node: ast.Dict) -> Eval:
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


def compile_starred(ctx: Context, node: ast.Starred) -> Eval:
    raise Forbidden("'*' unpacking is only available in calls, displays and assignment targets")


def compile_formatted(ctx: Context, node: ast.FormattedValue) -> Eval:
    value = compile_expr(ctx, node.value)
    conversions: dict[int, Callable[[Any], str]] = {115: safe_str, 114: safe_repr, 97: safe_ascii}
    convert = conversions.get(node.conversion)
    spec = compile_expr(ctx, node.format_spec) if node.format_spec is not None else None

    def formatted(f: Frame) -> str:
        v = value(f)
        if convert is not None:
            v = convert(v)
        if spec is None:
            return v if v.__class__ is str else safe_format(v, "")
        text = spec(f)
        check_format_spec(text)
        return safe_format(v, text)

    return formatted


def compile_joinedstr(ctx: Context, node: ast.JoinedStr) -> Eval:
    parts = [compile_expr(ctx, part) for part in node.values]

    def joined(f: Frame) -> str:
        texts = [part(f) for part in parts]
        size = sum(map(len, texts))
        if size > MAX_SEQUENCE_LEN:
            raise SizeLimitError(f"f-string would build {size:,} items; the limit is {MAX_SEQUENCE_LEN:,}")
        return "".join(texts)

    return joined
