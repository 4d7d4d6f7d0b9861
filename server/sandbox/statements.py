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
    Context,
    assigner,
    compile_expr,
    delete_name,
    store_name,
)
from attp_server.sandbox.functions import Frame
from attp_server.sandbox.limits import MAX_SEQUENCE_LEN, Forbidden, SizeLimitError
from attp_server.sandbox.scopes import LOCAL

Stmt = Callable[[Frame], Any]

BREAK = object()
CONTINUE = object()


def locate(exc: BaseException, node: ast.AST) -> None:
    """Stamp `exc` with where it happened, unless a statement nearer to it already did."""
    if not hasattr(exc, "attp_line"):
        with contextlib.suppress(AttributeError):
            exc.attp_line = (node.lineno, node.col_offset)  # type: ignore[attr-defined]


def out_of_memory(node: ast.AST) -> SizeLimitError:
    return SizeLimitError(f"the program ran out of memory at line {getattr(node, 'lineno', '?')}")


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


def _with_prefix(ctx: Context, prefix: list[ast.stmt], ending: Callable[[Frame], Any]) -> Callable[[Frame], Any]:
    if not prefix:
        return ending
    before = block(ctx, prefix)

    def tail(f: Frame) -> Any:
        signal = before(f)
        if signal is not None:
            return signal[0]
        return ending(f)

    return tail


def _returned(ctx: Context, node: ast.Return) -> Callable[[Frame], Any]:
    if node.value is None:
        return lambda f: None
    value = compile_expr(ctx, node.value)

    def returned(f: Frame) -> Any:
        try:
            return value(f)
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise

    return returned


def _tail_if(ctx: Context, node: ast.If, orelse_statements: list[ast.stmt]) -> Callable[[Frame], Any]:
    test, body, orelse = compile_expr(ctx, node.test), _tail(ctx, node.body), _tail(ctx, orelse_statements)

    def tail_if(f: Frame) -> Any:
        try:
            chosen = test(f)
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise
        return body(f) if chosen else orelse(f)

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
    value = compile_expr(ctx, node.value)
    targets = [assigner(ctx, t) for t in node.targets]
    if len(targets) == 1 and node.targets[0].__class__ is ast.Name and _is_local(ctx, node.targets[0].id):
        name = node.targets[0].id

        def assign_local(f: Frame) -> None:
            try:
                f[name] = value(f)
            except MemoryError:
                raise out_of_memory(node) from None
            except BaseException as exc:
                locate(exc, node)
                raise

        return assign_local

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
    operation = _augmented(ctx.operators[node.op.__class__], node.op.__class__)
    value, target = compile_expr(ctx, node.value), node.target
    if target.__class__ is ast.Name:
        name = target.id
        load = compile_expr(ctx, ast.Name(id=name, ctx=ast.Load()))
        if _is_local(ctx, name) and node.op.__class__ is ast.Add:

            def add_local(f: Frame) -> None:
                try:
                    a, b = f[name], value(f)
                    f[name] = a + b if a.__class__ is int and b.__class__ is int else operation(a, b)
                except KeyError:
                    exc = _unbound(ctx, name)
                    locate(exc, node)
                    raise exc from None
                except MemoryError:
                    raise out_of_memory(node) from None
                except BaseException as exc:
                    locate(exc, node)
                    raise

            return add_local
        store = store_name(ctx, name)

        def update_name(f: Frame) -> None:
            try:
                store(f, operation(load(f), value(f)))
            except MemoryError:
                raise out_of_memory(node) from None
            except BaseException as exc:
                locate(exc, node)
                raise

        return update_name
    if target.__class__ is ast.Subscript:
        container, key = compile_expr(ctx, target.value), compile_expr(ctx, target.slice)

        def update_item(f: Frame) -> None:
            where, index = container(f), key(f)
            where[index] = operation(where[index], value(f))

        return located(node, update_item)
    raise Forbidden("only names and items can be updated with augmented assignment")


def _unbound(ctx: Context, name: str) -> NameError:
    if ctx.scope.kind == "module":
        return NameError(f"name {name!r} is not defined", name=name)
    return UnboundLocalError(
        f"cannot access local variable {name!r} where it is not associated with a value", name=name
    )


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
    test, body = compile_expr(ctx, node.test), block(ctx, node.body)
    orelse = block(ctx, node.orelse) if node.orelse else None

    def if_(f: Frame) -> Any:
        try:
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

    def for_(f: Frame) -> Any:
        try:
            for value in iterable(f):
                if name is not None:
                    f[name] = value
                else:
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
    test, body = compile_expr(ctx, node.test), block(ctx, node.body)
    orelse = block(ctx, node.orelse) if node.orelse else None

    def while_(f: Frame) -> Any:
        try:
            while test(f):
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
