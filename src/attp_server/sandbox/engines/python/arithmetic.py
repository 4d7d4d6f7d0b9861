"""Binary operators and comparisons, compiled for the shapes programs use most.

A Python-level call costs far more than the operation it wraps, so each operator node becomes one
closure that reads its operands itself when they are constants (``n - 1``) or names held in the frame
(``d * d <= n``), instead of calling a closure per operand. The operations that can build big values
(``+``, ``*``, ``%``, ``**``, ``<<``) take a fast path only for small integers, where no size check is
needed, and otherwise call the evaluator's size-checked operator; the others are plain C operators.

Its compilers are listed in `attp_server.sandbox.engines.python.table`.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from attp_server.sandbox.engines.python.expressions import (
    INLINE_OPERATORS,
    SMALL,
    Context,
    Eval,
    compile_expr,
    operand,
    reader,
)
from attp_server.sandbox.engines.python.functions import Frame
from attp_server.sandbox.limits import INT_BOUND, MAX_SEQUENCE_LEN

Operation = Callable[[Any, Any], Any]


def pair(ctx: Context, left_node: ast.expr, right_node: ast.expr, op: Operation) -> Eval:
    """``op(left, right)`` for a C-level `op` that never builds a big value, operands read inline."""
    (lk, left), (rk, right) = operand(ctx, left_node), operand(ctx, right_node)
    absent = ctx.absent
    if lk == "frame":
        name = left
        if rk == "const":

            def frame_const(f: Frame) -> Any:
                try:
                    a = f[name]
                except KeyError:
                    raise absent(name) from None
                return op(a, right)

            return frame_const
        if rk == "frame":
            other = right

            def frame_frame(f: Frame) -> Any:
                try:
                    a = f[name]
                    b = f[other]
                except KeyError as exc:
                    raise absent(exc.args[0]) from None
                return op(a, b)

            return frame_frame
        left = reader(name, absent)
    elif lk == "const":
        value = left
        left = lambda f: value  # noqa: E731
    if rk == "const":
        c = right
        return lambda f: op(left(f), c)
    if rk == "frame":
        other = right

        def expr_frame(f: Frame) -> Any:
            a = left(f)
            try:
                b = f[other]
            except KeyError:
                raise absent(other) from None
            return op(a, b)

        return expr_frame
    return lambda f: op(left(f), right(f))


def compile_binop(ctx: Context, node: ast.BinOp) -> Eval:
    op = node.op.__class__
    checked = ctx.operators[op]
    if op in _PLAIN:
        return pair(ctx, node.left, node.right, _PLAIN[op])
    fast = _CHECKED_FAST.get(op)
    if fast is None:  # ** and <<: always checked
        return pair(ctx, node.left, node.right, checked)
    (lk, left), (rk, right) = operand(ctx, node.left), operand(ctx, node.right)
    absent = ctx.absent
    if lk == "const":
        value = left
        left, lk = (lambda f: value), "expr"
    if lk == "frame" and rk != "expr":
        return fast(left, right, rk == "const", checked, absent)
    if lk == "frame":
        left = reader(left, absent)
    if rk == "frame":
        right = reader(right, absent)
    if rk == "const":
        c = right
        right = lambda f: c  # noqa: E731
    return fast(left, right, None, checked, absent)


# Each fast factory: (left, right, how, checked, absent). `how` is None when both are closures,
# True when `left` is a frame name and `right` a constant, False when both are frame names.


def _add(left: Any, right: Any, how: bool | None, checked: Operation, absent: Any) -> Eval:
    if how is None:

        def add(f: Frame) -> Any:
            a, b = left(f), right(f)
            if a.__class__ is int and b.__class__ is int and -INT_BOUND < (r := a + b) < INT_BOUND:
                return r
            if a.__class__ is str and b.__class__ is str and len(a) + len(b) <= MAX_SEQUENCE_LEN:
                return a + b
            return checked(a, b)

        return add
    name = left
    if how:
        c = right

        def add_frame_const(f: Frame) -> Any:
            try:
                a = f[name]
            except KeyError:
                raise absent(name) from None
            if a.__class__ is int and c.__class__ is int and -INT_BOUND < (r := a + c) < INT_BOUND:
                return r
            if a.__class__ is str and c.__class__ is str and len(a) + len(c) <= MAX_SEQUENCE_LEN:
                return a + c
            return checked(a, c)

        return add_frame_const
    other = right

    def add_frames(f: Frame) -> Any:
        try:
            a = f[name]
            b = f[other]
        except KeyError as exc:
            raise absent(exc.args[0]) from None
        if a.__class__ is int and b.__class__ is int and -INT_BOUND < (r := a + b) < INT_BOUND:
            return r
        if a.__class__ is str and b.__class__ is str and len(a) + len(b) <= MAX_SEQUENCE_LEN:
            return a + b
        return checked(a, b)

    return add_frames


def _mul(left: Any, right: Any, how: bool | None, checked: Operation, absent: Any) -> Eval:
    if how is None:

        def mul(f: Frame) -> Any:
            a, b = left(f), right(f)
            if a.__class__ is int and b.__class__ is int and -SMALL < a < SMALL and -SMALL < b < SMALL:
                return a * b
            return checked(a, b)

        return mul
    name = left
    if how:
        c = right
        small = c.__class__ is int and -SMALL < c < SMALL

        def mul_frame_const(f: Frame) -> Any:
            try:
                a = f[name]
            except KeyError:
                raise absent(name) from None
            if small and a.__class__ is int and -SMALL < a < SMALL:
                return a * c
            return checked(a, c)

        return mul_frame_const
    other = right

    def mul_frames(f: Frame) -> Any:
        try:
            a = f[name]
            b = f[other]
        except KeyError as exc:
            raise absent(exc.args[0]) from None
        if a.__class__ is int and b.__class__ is int and -SMALL < a < SMALL and -SMALL < b < SMALL:
            return a * b
        return checked(a, b)

    return mul_frames


def _mod(left: Any, right: Any, how: bool | None, checked: Operation, absent: Any) -> Eval:
    # int % anything is never big and never a %-format; text goes through the checked operator.
    if how is None:

        def mod(f: Frame) -> Any:
            a, b = left(f), right(f)
            if a.__class__ is int:
                return a % b
            return checked(a, b)

        return mod
    name = left
    if how:
        c = right

        def mod_frame_const(f: Frame) -> Any:
            try:
                a = f[name]
            except KeyError:
                raise absent(name) from None
            if a.__class__ is int:
                return a % c
            return checked(a, c)

        return mod_frame_const
    other = right

    def mod_frames(f: Frame) -> Any:
        try:
            a = f[name]
            b = f[other]
        except KeyError as exc:
            raise absent(exc.args[0]) from None
        if a.__class__ is int:
            return a % b
        return checked(a, b)

    return mod_frames


_CHECKED_FAST: dict[type, Callable[..., Eval]] = {ast.Add: _add, ast.Mult: _mul, ast.Mod: _mod}

_PLAIN: dict[type, Operation] = {
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.RShift: operator.rshift,
    ast.MatMult: operator.matmul,
}
"""Operators that never build a big value. Not ``-``: ``a - b`` is one bit longer than its operands at most, but a
loop of ``x = x - y`` adds a bit a turn, so it is size-checked like ``+``."""

_COMPARE: dict[type, Operation] = {
    **{op: INLINE_OPERATORS[op] for op in (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot)},
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


def compile_compare(ctx: Context, node: ast.Compare) -> Eval:
    if len(node.ops) == 1:
        op = node.ops[0].__class__
        if op is ast.In or op is ast.NotIn:
            return _membership(ctx, node.left, node.comparators[0], negated=op is ast.NotIn)
        return pair(ctx, node.left, node.comparators[0], _COMPARE[op])
    left = compile_expr(ctx, node.left)
    steps = [(_COMPARE[op.__class__], compile_expr(ctx, c)) for op, c in zip(node.ops, node.comparators, strict=True)]

    def chained(f: Frame) -> Any:
        a = left(f)
        result: Any = True
        for compare, comparator in steps:
            b = comparator(f)
            result = compare(a, b)
            if not result:
                return result
            a = b
        return result

    return chained


def _membership(ctx: Context, left_node: ast.expr, right_node: ast.expr, *, negated: bool) -> Eval:
    """``a in b`` / ``a not in b``: `a` evaluated first, as in CPython."""
    left = compile_expr(ctx, left_node)
    kind, right = operand(ctx, right_node)
    if kind == "const":
        container = right
        if negated:
            return lambda f: left(f) not in container
        return lambda f: left(f) in container
    if kind == "frame":
        right = reader(right, ctx.absent)
    if negated:
        return lambda f: left(f) not in right(f)
    return lambda f: left(f) in right(f)
