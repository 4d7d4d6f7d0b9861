"""Statements compiled once into Python closures: ``compile_stmt(ctx, node)(frame) -> signal``.

A statement's closure returns None to go on, `BREAK` or `CONTINUE` for a loop to act on, or a 1-tuple
holding a ``return`` value (control flow and function bodies: `attp_server.sandbox.engines.python.control`).

Errors are stamped with the line of the innermost statement that raised them, and a `MemoryError`
becomes the uncatchable `SizeLimitError`. Assignments compute ``name <op> constant`` shapes inline; an
augmented assignment updates lists, sets and dicts in place (size-checked) and extends a string in
place as CPython does, so ``s += piece`` in a loop is not quadratic.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from attp_server.sandbox.engines.python.expressions import (
    CLOSURE,
    CONST,
    FRAME_CONST,
    FRAME_FRAME,
    Context,
    assigner,
    compile_expr,
    delete_name,
    inline_or_closure,
    operand,
    store_name,
    unbound_free,
)
from attp_server.sandbox.engines.python.functions import Frame, locate, out_of_memory
from attp_server.sandbox.engines.python.scopes import CELL, LOCAL
from attp_server.sandbox.limits import INT_BOUND, MAX_SEQUENCE_LEN, Forbidden, SizeLimitError

Stmt = Callable[[Frame], Any]

BREAK = object()
CONTINUE = object()


def compile_stmt(ctx: Context, node: ast.stmt) -> Stmt:
    handler = ctx.compilers.statements.get(node.__class__)
    if handler is None:
        raise Forbidden(f"{node.__class__.__name__} statements are not available in the sandbox")
    return handler(ctx, node)


def located(node: ast.stmt, run: Stmt) -> Stmt:
    """`run`, its errors stamped with `node`'s line (for statements too rare to inline the handler)."""

    def statement(f: Frame) -> Any:
        try:
            return run(f)
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise

    return statement


def block(ctx: Context, statements: list[ast.stmt]) -> Stmt:
    compiled = [compile_stmt(ctx, s) for s in statements if s.__class__ is not ast.Pass]
    if not compiled:
        return lambda f: None
    if len(compiled) == 1:
        return compiled[0]
    if len(compiled) == 2:
        first, second = compiled

        def block2(f: Frame) -> Any:
            signal = first(f)
            if signal is not None:
                return signal
            return second(f)

        return block2

    def block_n(f: Frame) -> Any:
        for statement in compiled:
            signal = statement(f)
            if signal is not None:
                return signal
        return None

    return block_n


# ---------------------------------------------------------------- simple statements


def compile_expression_statement(ctx: Context, node: ast.Expr) -> Stmt:
    value = compile_expr(ctx, node.value)

    def expression(f: Frame) -> None:
        try:
            value(f)
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise

    return expression


def compile_assign(ctx: Context, node: ast.Assign) -> Stmt:
    targets = [assigner(ctx, t) for t in node.targets]
    if len(targets) == 1 and node.targets[0].__class__ is ast.Name and is_local(ctx, node.targets[0].id):
        return _assign_frame_name(ctx, node, node.targets[0].id)
    value = compile_expr(ctx, node.value)

    def assign(f: Frame) -> None:
        try:
            result = value(f)
            for target in targets:
                target(f, result)
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise

    return assign


def _assign_frame_name(ctx: Context, node: ast.Assign, name: str) -> Stmt:
    """``x = <value>`` for a name in the frame dict, the value computed inline when its shape allows."""
    spec, absent = inline_or_closure(ctx, node.value), ctx.absent
    vk, vn, vv, vo, vop, vck, value = spec.kind, spec.name, spec.value, spec.other, spec.op, spec.checked, spec.closure

    def assign_local(f: Frame) -> None:
        try:
            if vk == CLOSURE:
                f[name] = value(f)
            elif vk == CONST:
                f[name] = vv
            elif vk == FRAME_CONST:
                try:
                    a = f[vn]
                except KeyError:
                    raise absent(vn) from None
                f[name] = vop(a, vv) if vck is None or a.__class__ is int else vck(a, vv)
            elif vk == FRAME_FRAME:
                try:
                    a = f[vn]
                    b = f[vo]
                except KeyError as error:
                    raise absent(error.args[0]) from None
                f[name] = vop(a, b)
            else:
                f[name] = value(f)
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise

    return assign_local


def is_local(ctx: Context, name: str) -> bool:
    """True when `name` lives in the frame dict itself (a function's local, or any name at module level)."""
    if name.startswith("__") and name != "__result__":
        raise Forbidden(f"names starting with '__' are not allowed: {name!r}")
    return ctx.scope.kind == "module" or ctx.where(name) == LOCAL


def compile_annassign(ctx: Context, node: ast.AnnAssign) -> Stmt:
    if node.value is None:  # a bare annotation binds nothing (and is never evaluated)
        return lambda f: None
    value, target = compile_expr(ctx, node.value), assigner(ctx, node.target)
    return located(node, lambda f: target(f, value(f)))


def compile_augassign(ctx: Context, node: ast.AugAssign) -> Stmt:
    op = node.op.__class__
    operation = _augmented(ctx.operators[op], op)
    target = node.target
    if target.__class__ is ast.Name:
        name = target.id
        if is_local(ctx, name):
            return _update_frame_name(ctx, node, name, operation)
        if ctx.where(name) == CELL:
            return _update_cell(ctx, node, name, operation)
        value = compile_expr(ctx, node.value)
        load, store = compile_expr(ctx, ast.Name(id=name, ctx=ast.Load())), store_name(ctx, name)
        return located(node, lambda f: store(f, operation(load(f), value(f))))
    if target.__class__ is ast.Subscript:
        value = compile_expr(ctx, node.value)
        container, key = compile_expr(ctx, target.value), compile_expr(ctx, target.slice)

        def update_item(f: Frame) -> None:
            where, index = container(f), key(f)
            where[index] = operation(where[index], value(f))

        return located(node, update_item)
    raise Forbidden("only names and items can be updated with augmented assignment")


def _update_frame_name(ctx: Context, node: ast.AugAssign, name: str, operation: Callable[[Any, Any], Any]) -> Stmt:
    """``x += v`` for a name in the frame dict: small ints added inline, text extended in place as CPython does."""
    kind, value = operand(ctx, node.value)
    if kind == "frame":
        value = compile_expr(ctx, node.value)
    constant, const = kind == "const", value
    adding = node.op.__class__ is ast.Add
    absent = ctx.absent

    def update(f: Frame) -> None:
        try:
            try:
                a = f[name]
            except KeyError:
                raise absent(name) from None
            b = const if constant else value(f)
            if adding:
                if a.__class__ is int and b.__class__ is int and -INT_BOUND < (r := a + b) < INT_BOUND:
                    f[name] = r
                    return
                if a.__class__ is str and b.__class__ is str:
                    if len(a) + len(b) > MAX_SEQUENCE_LEN:
                        raise SizeLimitError(
                            f"'+=' would build {len(a) + len(b):,} items; the limit is {MAX_SEQUENCE_LEN:,}"
                        )
                    del f[name]  # the frame's reference dropped, CPython extends the string in place (no copy)
                    a += b
                    f[name] = a
                    return
            f[name] = operation(a, b)
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise

    return update


def _update_cell(ctx: Context, node: ast.AugAssign, name: str, operation: Callable[[Any, Any], Any]) -> Stmt:
    """``count += step`` for a captured name (``nonlocal count``): the cell read and written once, small
    ints added inline."""
    kind, value = operand(ctx, node.value)
    if kind == "frame":
        value = compile_expr(ctx, node.value)
    constant, const = kind == "const", value
    adding = node.op.__class__ is ast.Add

    def update_cell(f: Frame) -> None:
        try:
            cell = f[name]
            try:
                a = cell.value
            except AttributeError:
                raise unbound_free(name) from None
            b = const if constant else value(f)
            if adding and a.__class__ is int and b.__class__ is int and -INT_BOUND < (r := a + b) < INT_BOUND:
                cell.value = r
            else:
                cell.value = operation(a, b)
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise

    return update_cell


_IN_PLACE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.iadd,
    ast.Mult: operator.imul,
    ast.BitOr: operator.ior,
    ast.BitAnd: operator.iand,
    ast.BitXor: operator.ixor,
    ast.Sub: operator.isub,
}
_MUTABLE = (list, bytearray, set, dict)


def _augmented(binary: Callable[[Any, Any], Any], op: type) -> Callable[[Any, Any], Any]:
    """``a op= b``: in place for lists, sets and dicts, as in CPython (aliases see the change), size-checked."""
    in_place = _IN_PLACE.get(op)
    if in_place is None:
        return binary

    def augmented(a: Any, b: Any) -> Any:
        if a.__class__ not in _MUTABLE:
            return binary(a, b)
        if op is ast.Mult and isinstance(b, int):
            _check_len(len(a) * b, "'*='")
        elif op is ast.Add and hasattr(b, "__len__"):
            _check_len(len(a) + len(b), "'+='")
        elif op is ast.BitOr and hasattr(b, "__len__"):
            _check_len(len(a) + len(b), "'|='")
        return in_place(a, b)

    return augmented


def _check_len(size: int, what: str) -> None:
    if size > MAX_SEQUENCE_LEN:
        raise SizeLimitError(f"{what} would build {size:,} items; the limit is {MAX_SEQUENCE_LEN:,}")


def compile_delete(ctx: Context, node: ast.Delete) -> Stmt:
    deleters: list[Callable[[Frame], None]] = []
    for target in node.targets:
        if target.__class__ is ast.Name:
            deleters.append(delete_name(ctx, target.id))
        elif target.__class__ is ast.Subscript:
            container, key = compile_expr(ctx, target.value), compile_expr(ctx, target.slice)
            deleters.append(lambda f, c=container, k=key: operator.delitem(c(f), k(f)))  # type: ignore[misc]
        elif target.__class__ in (ast.Tuple, ast.List):
            inner = compile_delete(ctx, ast.Delete(targets=target.elts, lineno=node.lineno, col_offset=node.col_offset))
            deleters.append(inner)
        else:
            raise Forbidden("only names and items can be deleted")

    def delete(f: Frame) -> None:
        for deleter in deleters:
            deleter(f)

    return located(node, delete)


def compile_assert(ctx: Context, node: ast.Assert) -> Stmt:
    test = compile_expr(ctx, node.test)
    message = compile_expr(ctx, node.msg) if node.msg is not None else None

    def assertion(f: Frame) -> None:
        if not test(f):
            raise AssertionError(message(f)) if message is not None else AssertionError()

    return located(node, assertion)


def compile_pass(ctx: Context, node: ast.Pass) -> Stmt:
    return lambda f: None


def compile_break(ctx: Context, node: ast.Break) -> Stmt:
    return lambda f: BREAK


def compile_continue(ctx: Context, node: ast.Continue) -> Stmt:
    return lambda f: CONTINUE


def compile_declaration(ctx: Context, node: ast.Global | ast.Nonlocal) -> Stmt:
    return lambda f: None  # where the names live was decided before compiling (scopes.py)


def compile_raise(ctx: Context, node: ast.Raise) -> Stmt:
    evaluator = ctx.evaluator
    exception = compile_expr(ctx, node.exc) if node.exc is not None else None
    cause = compile_expr(ctx, node.cause) if node.cause is not None else None

    def raise_(f: Frame) -> None:
        if exception is None:
            if not evaluator.handling:
                raise RuntimeError("No active exception to reraise")
            raise evaluator.handling[-1]
        exc = exception(f)
        if isinstance(exc, type) and issubclass(exc, Exception):
            exc = exc()
        if not isinstance(exc, Exception):
            raise TypeError("exceptions must derive from Exception")
        if cause is not None:
            reason = cause(f)
            if isinstance(reason, type) and issubclass(reason, Exception):
                reason = reason()
            if reason is not None and not isinstance(reason, Exception):
                raise TypeError("exception causes must derive from Exception")
            exc.__cause__ = reason
        raise exc

    return located(node, raise_)


def refused(message: str) -> Callable[[Context, Any], Stmt]:
    def refuse(ctx: Context, node: ast.stmt) -> Stmt:
        raise Forbidden(message)

    return refuse
