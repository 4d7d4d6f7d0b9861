"""Statements compiled once into Python closures: ``compile_stmt(ctx, node)(frame) -> signal``.

A statement's closure returns None to go on, `BREAK` or `CONTINUE` for a loop to act on, or a 1-tuple
holding a ``return`` value. A function body in tail position is compiled to return its value directly
(`function_body`), so the common ``if ...: return a`` / ``return b`` shape allocates nothing.

Every loop iteration and every call spends one step of the evaluator's budget (`Evaluator.spend`),
which checks the deadline and the step limit often enough that a runaway loop ends within
milliseconds of its deadline; between two steps there is only straight-line code of a bounded program.
Errors are stamped with the line of the innermost statement that raised them, and a `MemoryError`
becomes the uncatchable `SizeLimitError`.
"""

from __future__ import annotations

import ast
import contextlib
import operator
from collections.abc import Callable
from typing import Any

from attp_server.sandbox.expressions import (
    CLOSURE,
    CONST,
    FRAME_CONST,
    FRAME_FRAME,
    Context,
    assigner,
    compile_expr,
    delete_name,
    inline_or_closure,
    missing_name,
    operand,
    store_name,
    unbound_free,
)
from attp_server.sandbox.functions import Frame, locate, out_of_memory
from attp_server.sandbox.limits import MAX_SEQUENCE_LEN, Forbidden, SizeLimitError
from attp_server.sandbox.scopes import CELL, LOCAL

Stmt = Callable[[Frame], Any]

BREAK = object()
CONTINUE = object()


def compile_stmt(ctx: Context, node: ast.stmt) -> Stmt:
    handler = STATEMENTS.get(node.__class__)
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


def function_body(ctx: Context, statements: list[ast.stmt]) -> Callable[[Frame], Any]:
    """A function's body that returns the function's value (not a signal)."""
    return _tail(ctx, statements)


def _tail(ctx: Context, statements: list[ast.stmt]) -> Callable[[Frame], Any]:
    """Statements in tail position: the value of the ``return`` they end in (None if they fall off the end).

    ``if test: ... return a`` followed by more statements is the same as ``if test: ... return a`` /
    ``else: <the rest>``, so both branches stay in tail position and return values without a signal.
    """
    if not statements:
        return lambda f: None
    for index, statement in enumerate(statements):
        if statement.__class__ is ast.If:
            branch: ast.If = statement
            last = index + 1 == len(statements)
            if last or (not branch.orelse and branch.body[-1].__class__ in (ast.Return, ast.Raise)):
                orelse = branch.orelse if last else statements[index + 1 :]
                return _with_prefix(ctx, statements[:index], _tail_if(ctx, branch, orelse))
        if statement.__class__ is ast.Return:
            return _with_prefix(ctx, statements[:index], _returned(ctx, statement))
    return _with_prefix(ctx, statements, lambda f: None)


def _with_prefix(
    ctx: Context, prefix: list[ast.stmt], ending: Callable[[Frame], Any] | ast.Return | None
) -> Callable[[Frame], Any]:
    """`prefix`, then `ending`: a closure giving the value, a ``return`` statement, or None (falling off the end)."""
    constant, value = True, None
    if isinstance(ending, ast.Return):
        kind, value = operand(ctx, ending.value, compiled=False) if ending.value is not None else ("const", None)
        if kind != "const":
            constant, ending = False, _returned(ctx, ending)
    elif ending is not None:
        constant = False
    if not prefix:
        return (lambda f: value) if constant else ending  # type: ignore[return-value]
    before = block(ctx, prefix)
    if constant:

        def tail_constant(f: Frame) -> Any:
            signal = before(f)
            if signal is not None:
                return signal[0]
            return value

        return tail_constant

    def tail(f: Frame) -> Any:
        signal = before(f)
        if signal is not None:
            return signal[0]
        return ending(f)  # type: ignore[misc,operator]

    return tail


def _returned(ctx: Context, node: ast.Return) -> Callable[[Frame], Any]:
    if node.value is None:
        return lambda f: None
    kind, value = operand(ctx, node.value)
    if kind == "const":
        return lambda f: value
    if kind == "frame":
        name, absent = value, missing_name(ctx)

        def returned_name(f: Frame) -> Any:
            try:
                return f[name]
            except KeyError:
                exc = absent(name)
                locate(exc, node)
                raise exc from None

        return returned_name

    def returned(f: Frame) -> Any:
        try:
            return value(f)
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise

    return returned


def _branch(ctx: Context, statements: list[ast.stmt]) -> tuple[bool, Any, ast.AST | None]:
    """A branch in tail position: (True, value) for a lone ``return <constant>``; (False, closure, where) else.

    A lone ``return <expression>`` is its expression's closure, located by the caller (`where`).
    """
    if len(statements) == 1 and statements[0].__class__ is ast.Return:
        returned: ast.Return = statements[0]
        if returned.value is None:
            return True, None, None
        kind, value = operand(ctx, returned.value)
        if kind == "const":
            return True, value, None
        if kind == "expr":
            return False, value, returned
    return False, _tail(ctx, statements), None


def _tail_if(ctx: Context, node: ast.If, orelse_statements: list[ast.stmt]) -> Callable[[Frame], Any]:
    spec, absent = inline_or_closure(ctx, node.test), missing_name(ctx)
    tk, tn, tv, to, top, tck, test = spec.kind, spec.name, spec.value, spec.other, spec.op, spec.checked, spec.closure
    body_fixed, body, body_node = _branch(ctx, node.body)
    orelse_fixed, orelse, orelse_node = _branch(ctx, orelse_statements)
    body_at, orelse_at = body_node or node, orelse_node or node

    def tail_if(f: Frame) -> Any:
        try:
            if tk == FRAME_CONST:
                try:
                    a = f[tn]
                except KeyError:
                    raise absent(tn) from None
                chosen = top(a, tv) if tck is None or a.__class__ is int else tck(a, tv)
            elif tk == FRAME_FRAME:
                try:
                    a = f[tn]
                    b = f[to]
                except KeyError as error:
                    raise absent(error.args[0]) from None
                chosen = top(a, b)
            else:
                chosen = test(f)
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise
        if chosen:
            if body_fixed:
                return body
            try:
                return body(f)
            except MemoryError:
                raise out_of_memory(body_at) from None
            except BaseException as exc:
                locate(exc, body_at)
                raise
        if orelse_fixed:
            return orelse
        try:
            return orelse(f)
        except MemoryError:
            raise out_of_memory(orelse_at) from None
        except BaseException as exc:
            locate(exc, orelse_at)
            raise

    return tail_if


# ---------------------------------------------------------------- simple statements


def _expr(ctx: Context, node: ast.Expr) -> Stmt:
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


def _assign(ctx: Context, node: ast.Assign) -> Stmt:
    targets = [assigner(ctx, t) for t in node.targets]
    if len(targets) == 1 and node.targets[0].__class__ is ast.Name and _is_local(ctx, node.targets[0].id):
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
    spec, absent = inline_or_closure(ctx, node.value), missing_name(ctx)
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


def _is_local(ctx: Context, name: str) -> bool:
    """True when `name` lives in the frame dict itself (a function's local, or any name at module level)."""
    if name.startswith("__") and name != "__result__":
        raise Forbidden(f"names starting with '__' are not allowed: {name!r}")
    return ctx.scope.kind == "module" or ctx.where(name) == LOCAL


def _annassign(ctx: Context, node: ast.AnnAssign) -> Stmt:
    if node.value is None:  # a bare annotation binds nothing (and is never evaluated)
        return lambda f: None
    value, target = compile_expr(ctx, node.value), assigner(ctx, node.target)
    return located(node, lambda f: target(f, value(f)))


def _augassign(ctx: Context, node: ast.AugAssign) -> Stmt:
    op = node.op.__class__
    operation = _augmented(ctx.operators[op], op)
    target = node.target
    if target.__class__ is ast.Name:
        name = target.id
        if _is_local(ctx, name):
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
    absent = missing_name(ctx)

    def update(f: Frame) -> None:
        try:
            try:
                a = f[name]
            except KeyError:
                raise absent(name) from None
            b = const if constant else value(f)
            if adding:
                if a.__class__ is int and b.__class__ is int:
                    f[name] = a + b
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
    """``count += step`` for a captured name (``nonlocal count``): the cell read and written once."""
    value = compile_expr(ctx, node.value)

    def update_cell(f: Frame) -> None:
        try:
            cell = f[name]
            try:
                a = cell.value
            except AttributeError:
                raise unbound_free(name) from None
            cell.value = operation(a, value(f))
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


def _delete(ctx: Context, node: ast.Delete) -> Stmt:
    deleters: list[Callable[[Frame], None]] = []
    for target in node.targets:
        if target.__class__ is ast.Name:
            deleters.append(delete_name(ctx, target.id))
        elif target.__class__ is ast.Subscript:
            container, key = compile_expr(ctx, target.value), compile_expr(ctx, target.slice)
            deleters.append(lambda f, c=container, k=key: operator.delitem(c(f), k(f)))  # type: ignore[misc]
        elif target.__class__ in (ast.Tuple, ast.List):
            inner = _delete(ctx, ast.Delete(targets=target.elts, lineno=node.lineno, col_offset=node.col_offset))
            deleters.append(inner)
        else:
            raise Forbidden("only names and items can be deleted")

    def delete(f: Frame) -> None:
        for deleter in deleters:
            deleter(f)

    return located(node, delete)


def _assert(ctx: Context, node: ast.Assert) -> Stmt:
    test = compile_expr(ctx, node.test)
    message = compile_expr(ctx, node.msg) if node.msg is not None else None

    def assertion(f: Frame) -> None:
        if not test(f):
            raise AssertionError(message(f)) if message is not None else AssertionError()

    return located(node, assertion)


def _return(ctx: Context, node: ast.Return) -> Stmt:
    if ctx.scope.kind == "module":
        raise SyntaxError("'return' outside function")
    value = _returned(ctx, node)
    return lambda f: (value(f),)


def _pass(ctx: Context, node: ast.Pass) -> Stmt:
    return lambda f: None


def _break(ctx: Context, node: ast.Break) -> Stmt:
    return lambda f: BREAK


def _continue(ctx: Context, node: ast.Continue) -> Stmt:
    return lambda f: CONTINUE


def _declaration(ctx: Context, node: ast.Global | ast.Nonlocal) -> Stmt:
    return lambda f: None  # where the names live was decided before compiling (scopes.py)


# ---------------------------------------------------------------- control flow


def _if(ctx: Context, node: ast.If) -> Stmt:
    spec, absent = inline_or_closure(ctx, node.test), missing_name(ctx)
    tk, tn, tv, to, top, tck, test = spec.kind, spec.name, spec.value, spec.other, spec.op, spec.checked, spec.closure
    body = block(ctx, node.body)
    orelse = block(ctx, node.orelse) if node.orelse else None

    def if_(f: Frame) -> Any:
        try:
            if tk == FRAME_CONST:
                try:
                    a = f[tn]
                except KeyError:
                    raise absent(tn) from None
                chosen = top(a, tv) if tck is None or a.__class__ is int else tck(a, tv)
            elif tk == FRAME_FRAME:
                try:
                    a = f[tn]
                    b = f[to]
                except KeyError as error:
                    raise absent(error.args[0]) from None
                chosen = top(a, b)
            else:
                chosen = test(f)
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise
        if chosen:
            return body(f)
        if orelse is not None:
            return orelse(f)
        return None

    return if_


def _for(ctx: Context, node: ast.For) -> Stmt:
    evaluator = ctx.evaluator
    iterable, body = compile_expr(ctx, node.iter), block(ctx, node.body)
    orelse = block(ctx, node.orelse) if node.orelse else None
    target = node.target
    name = target.id if target.__class__ is ast.Name and _is_local(ctx, target.id) else None
    store = assigner(ctx, target)

    if name is not None:

        def for_name(f: Frame) -> Any:
            try:
                for value in iterable(f):
                    f[name] = value
                    evaluator.left -= 1
                    if evaluator.left < 0:
                        evaluator.spend()
                    signal = body(f)
                    if signal is not None:
                        if signal is BREAK:
                            return None
                        if signal is not CONTINUE:
                            return signal
            except MemoryError:
                raise out_of_memory(node) from None
            except BaseException as exc:
                locate(exc, node)
                raise
            if orelse is not None:
                return orelse(f)
            return None

        return for_name

    def for_(f: Frame) -> Any:
        try:
            for value in iterable(f):
                store(f, value)
                evaluator.left -= 1
                if evaluator.left < 0:
                    evaluator.spend()
                signal = body(f)
                if signal is not None:
                    if signal is BREAK:
                        return None
                    if signal is not CONTINUE:
                        return signal
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise
        if orelse is not None:
            return orelse(f)
        return None

    return for_


def _while(ctx: Context, node: ast.While) -> Stmt:
    evaluator = ctx.evaluator
    spec, absent = inline_or_closure(ctx, node.test), missing_name(ctx)
    tk, tn, tv, to, top, tck, test = spec.kind, spec.name, spec.value, spec.other, spec.op, spec.checked, spec.closure
    body = block(ctx, node.body)
    orelse = block(ctx, node.orelse) if node.orelse else None

    def while_(f: Frame) -> Any:
        try:
            while True:
                if tk == FRAME_CONST:
                    try:
                        a = f[tn]
                    except KeyError:
                        raise absent(tn) from None
                    chosen = top(a, tv) if tck is None or a.__class__ is int else tck(a, tv)
                elif tk == FRAME_FRAME:
                    try:
                        a = f[tn]
                        b = f[to]
                    except KeyError as error:
                        raise absent(error.args[0]) from None
                    chosen = top(a, b)
                else:
                    chosen = test(f)
                if not chosen:
                    break
                evaluator.left -= 1
                if evaluator.left < 0:
                    evaluator.spend()
                signal = body(f)
                if signal is not None:
                    if signal is BREAK:
                        return None
                    if signal is not CONTINUE:
                        return signal
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise
        if orelse is not None:
            return orelse(f)
        return None

    return while_


def _try(ctx: Context, node: ast.Try) -> Stmt:
    evaluator = ctx.evaluator
    body = block(ctx, node.body)
    orelse = block(ctx, node.orelse) if node.orelse else None
    final = block(ctx, node.finalbody) if node.finalbody else None
    handlers = [
        (
            compile_expr(ctx, h.type) if h.type is not None else None,
            store_name(ctx, h.name) if h.name else None,
            delete_name(ctx, h.name) if h.name else None,
            block(ctx, h.body),
            h,
        )
        for h in node.handlers
    ]

    def matching(f: Frame, exc: Exception) -> Any:
        for kind, store, forget, handler, where in handlers:
            if kind is None:
                return store, forget, handler
            try:
                classes = kind(f)
            except BaseException as error:
                locate(error, where)
                raise
            classes = classes if isinstance(classes, tuple) else (classes,)
            for cls in classes:
                if not (isinstance(cls, type) and issubclass(cls, Exception)):
                    wrong = TypeError("except clauses must name exception classes (e.g. ValueError, ToolError)")
                    locate(wrong, where)
                    raise wrong
            if isinstance(exc, classes):
                return store, forget, handler
        return None

    def try_(f: Frame) -> Any:
        # Aborts (BaseException) pass straight through: no handler and no finally block runs after them.
        try:
            try:
                signal = body(f)
            except Exception as exc:
                found = matching(f, exc)
                if found is None:
                    raise
                store, forget, handler = found
                if store is not None:
                    store(f, exc)
                evaluator.handling.append(exc)
                try:
                    signal = handler(f)
                finally:
                    evaluator.handling.pop()
                    if forget is not None:  # CPython unbinds the name when the handler ends
                        with contextlib.suppress(NameError):
                            forget(f)
            else:
                if signal is None and orelse is not None:
                    signal = orelse(f)
        except Exception:
            if final is not None:
                override = final(f)
                if override is not None:  # a return/break/continue in finally discards the error
                    return override
            raise
        if final is not None:
            override = final(f)
            if override is not None:
                return override
        return signal

    return try_


def _raise(ctx: Context, node: ast.Raise) -> Stmt:
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


def _refused(message: str) -> Callable[[Context, Any], Stmt]:
    def refuse(ctx: Context, node: ast.stmt) -> Stmt:
        raise Forbidden(message)

    return refuse


STATEMENTS: dict[type, Callable[[Context, Any], Stmt]] = {
    ast.Expr: _expr,
    ast.Assign: _assign,
    ast.AnnAssign: _annassign,
    ast.AugAssign: _augassign,
    ast.Delete: _delete,
    ast.Assert: _assert,
    ast.Return: _return,
    ast.Pass: _pass,
    ast.Break: _break,
    ast.Continue: _continue,
    ast.Global: _declaration,
    ast.Nonlocal: _declaration,
    ast.If: _if,
    ast.For: _for,
    ast.While: _while,
    ast.Try: _try,
    ast.Raise: _raise,
    ast.With: _refused("'with' blocks are not available; files are read and written with tools"),
}
"""Node class -> compiler. Definitions and imports are registered by the modules that compile them."""
