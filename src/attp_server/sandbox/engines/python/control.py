"""Control flow, compiled: ``if``, ``for``, ``while``, ``try``, ``return``, and function bodies in tail position.

A function body in tail position is compiled to return its value directly (`function_body`): its last
``return`` is an expression, and ``if test: ... return a`` followed by more statements becomes both
branches of one choice, so the common shape of a helper (``if n < 2: return n`` / ``return ...``)
allocates nothing and calls one closure per branch. Elsewhere statements answer with signals
(`BREAK`, `CONTINUE`, a 1-tuple holding a return value).

Loops spend one step of the evaluator's budget per iteration (`Evaluator.spend`); an ``if``/``while``
test of the shape ``name <op> constant`` or ``name <op> name`` is computed inline, without a call.

Its compilers are listed in `attp_server.sandbox.engines.python.table`.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Callable
from typing import Any

from attp_server.sandbox.engines.python.expressions import (
    FRAME_CONST,
    FRAME_FRAME,
    NESTED,
    SMALL,
    Context,
    assigner,
    compile_expr,
    delete_name,
    inline_or_closure,
    operand,
    store_name,
)
from attp_server.sandbox.engines.python.functions import Frame, locate, out_of_memory
from attp_server.sandbox.engines.python.statements import BREAK, CONTINUE, Stmt, block, is_local


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
        name, absent = value, ctx.absent

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


_CLOSURE_BRANCH, _CONSTANT_BRANCH, _NAME_BRANCH = 0, 1, 2


def _located(exc: NameError, node: ast.AST | None) -> NameError:
    if node is not None:
        locate(exc, node)
    return exc


def _branch(ctx: Context, statements: list[ast.stmt]) -> tuple[int, Any, ast.AST | None]:
    """A branch in tail position, as (kind, payload, where): a lone ``return <constant>`` is its value
    (`_CONSTANT_BRANCH`), a lone ``return <name held in the frame>`` the name (`_NAME_BRANCH`, read inline:
    the base case of a recursion, ``return n``, costs no call), anything else a closure (`_CLOSURE_BRANCH`).

    A lone ``return <expression>`` is its expression's closure, located by the caller (`where`).
    """
    if len(statements) == 1 and statements[0].__class__ is ast.Return:
        returned: ast.Return = statements[0]
        if returned.value is None:
            return _CONSTANT_BRANCH, None, None
        kind, value = operand(ctx, returned.value)
        if kind == "const":
            return _CONSTANT_BRANCH, value, None
        if kind == "frame":
            return _NAME_BRANCH, value, returned
        return _CLOSURE_BRANCH, value, returned
    return _CLOSURE_BRANCH, _tail(ctx, statements), None


def _tail_if(ctx: Context, node: ast.If, orelse_statements: list[ast.stmt]) -> Callable[[Frame], Any]:
    spec, absent = inline_or_closure(ctx, node.test), ctx.absent
    tk, tn, tv, to, top, tck, test = spec.kind, spec.name, spec.value, spec.other, spec.op, spec.checked, spec.closure
    tout, ton, tov = spec.outer, spec.outer_name, spec.outer_value
    body_kind, body, body_node = _branch(ctx, node.body)
    orelse_kind, orelse, orelse_node = _branch(ctx, orelse_statements)
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
            elif tk == NESTED:
                try:
                    a = f[tn]
                    b = tv if to is None else f[to]
                except KeyError as error:
                    raise absent(error.args[0]) from None
                if a.__class__ is int and b.__class__ is int and -SMALL < a < SMALL and -SMALL < b < SMALL:
                    x = top(a, b)
                else:
                    x = tck(a, b)
                if ton is None:
                    chosen = tout(x, tov)
                else:
                    try:
                        c = f[ton]
                    except KeyError:
                        raise absent(ton) from None
                    chosen = tout(x, c)
            else:
                chosen = test(f)
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise
        if chosen:
            if body_kind:
                if body_kind == _CONSTANT_BRANCH:
                    return body
                try:
                    return f[body]
                except KeyError:
                    raise _located(absent(body), body_at) from None
            try:
                return body(f)
            except MemoryError:
                raise out_of_memory(body_at) from None
            except BaseException as exc:
                locate(exc, body_at)
                raise
        if orelse_kind:
            if orelse_kind == _CONSTANT_BRANCH:
                return orelse
            try:
                return f[orelse]
            except KeyError:
                raise _located(absent(orelse), orelse_at) from None
        try:
            return orelse(f)
        except MemoryError:
            raise out_of_memory(orelse_at) from None
        except BaseException as exc:
            locate(exc, orelse_at)
            raise

    return tail_if


def compile_return(ctx: Context, node: ast.Return) -> Stmt:
    if ctx.scope.kind == "module":
        raise SyntaxError("'return' outside function")
    value = _returned(ctx, node)
    return lambda f: (value(f),)


# ---------------------------------------------------------------- control flow


def compile_if(ctx: Context, node: ast.If) -> Stmt:
    spec, absent = inline_or_closure(ctx, node.test), ctx.absent
    tk, tn, tv, to, top, tck, test = spec.kind, spec.name, spec.value, spec.other, spec.op, spec.checked, spec.closure
    tout, ton, tov = spec.outer, spec.outer_name, spec.outer_value
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
            elif tk == NESTED:
                try:
                    a = f[tn]
                    b = tv if to is None else f[to]
                except KeyError as error:
                    raise absent(error.args[0]) from None
                if a.__class__ is int and b.__class__ is int and -SMALL < a < SMALL and -SMALL < b < SMALL:
                    x = top(a, b)
                else:
                    x = tck(a, b)
                if ton is None:
                    chosen = tout(x, tov)
                else:
                    try:
                        c = f[ton]
                    except KeyError:
                        raise absent(ton) from None
                    chosen = tout(x, c)
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


def compile_for(ctx: Context, node: ast.For) -> Stmt:
    evaluator = ctx.evaluator
    iterable, body = compile_expr(ctx, node.iter), block(ctx, node.body)
    orelse = block(ctx, node.orelse) if node.orelse else None
    target = node.target
    name = target.id if target.__class__ is ast.Name and is_local(ctx, target.id) else None
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


def compile_while(ctx: Context, node: ast.While) -> Stmt:
    evaluator = ctx.evaluator
    spec, absent = inline_or_closure(ctx, node.test), ctx.absent
    tk, tn, tv, to, top, tck, test = spec.kind, spec.name, spec.value, spec.other, spec.op, spec.checked, spec.closure
    tout, ton, tov = spec.outer, spec.outer_name, spec.outer_value
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
                elif tk == NESTED:
                    try:
                        a = f[tn]
                        b = tv if to is None else f[to]
                    except KeyError as error:
                        raise absent(error.args[0]) from None
                    if a.__class__ is int and b.__class__ is int and -SMALL < a < SMALL and -SMALL < b < SMALL:
                        x = top(a, b)
                    else:
                        x = tck(a, b)
                    if ton is None:
                        chosen = tout(x, tov)
                    else:
                        try:
                            c = f[ton]
                        except KeyError:
                            raise absent(ton) from None
                        chosen = tout(x, c)
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


def compile_try(ctx: Context, node: ast.Try) -> Stmt:
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
