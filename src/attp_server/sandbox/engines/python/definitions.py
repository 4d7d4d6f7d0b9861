"""The nested scopes, compiled: ``def``, ``lambda``, comprehensions and generator expressions.

Each is a scope of its own (`attp_server.sandbox.engines.python.scopes`): a new frame per call or per comprehension,
holding the scope's locals, fresh cells for the locals inner functions capture, and the enclosing
scope's cells for the names it captures. A function's code is compiled once per definition node; a
``def`` run in a loop makes a new `Function` each time, with that moment's defaults and cells.

Its compilers are listed in `attp_server.sandbox.engines.python.table`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from attp_server.sandbox.engines.python.control import function_body
from attp_server.sandbox.engines.python.expressions import Context, Eval, assigner, compile_expr, store_name
from attp_server.sandbox.engines.python.functions import Cell, Code, Frame, Function, Generator, locate, out_of_memory
from attp_server.sandbox.engines.python.scopes import LOCAL
from attp_server.sandbox.engines.python.statements import Stmt
from attp_server.sandbox.limits import Forbidden


def _code(ctx: Context, node: ast.FunctionDef | ast.Lambda) -> Code:
    inner = ctx.inner(node)
    arguments = node.args
    parameters = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    for parameter in parameters:
        if parameter is not None and parameter.arg.startswith("__"):
            raise Forbidden(f"names starting with '__' are not allowed: {parameter.arg!r}")
    where: ast.AST
    if isinstance(node, ast.Lambda):  # errors located by the function's entry, at the lambda's expression
        name, body, where = "<lambda>", compile_expr(inner, node.body), node.body
    else:
        name, body, where = node.name, function_body(inner, node.body), node
    return Code(
        name,
        body,
        positional=[a.arg for a in [*arguments.posonlyargs, *arguments.args]],
        posonly=len(arguments.posonlyargs),
        vararg=arguments.vararg.arg if arguments.vararg else None,
        kwonly=[a.arg for a in arguments.kwonlyargs],
        varkw=arguments.kwarg.arg if arguments.kwarg else None,
        cellvars=inner.scope.cellvars,
        freevars=inner.scope.freevars,
        budget=ctx.evaluator,
        where=where,
    )


def _maker(ctx: Context, node: ast.FunctionDef | ast.Lambda) -> Callable[[Frame], Function]:
    """What running a ``def`` or ``lambda`` does: evaluate the defaults now, capture the cells, make a Function."""
    code = _code(ctx, node)
    arguments = node.args
    defaults = [compile_expr(ctx, d) for d in arguments.defaults]
    kwdefaults = [
        (a.arg, compile_expr(ctx, d))
        for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
        if d is not None
    ]
    captured = code.freevars
    if not defaults and not kwdefaults and not captured:
        return lambda f: Function(code, (), {}, {})

    def make(f: Frame) -> Function:
        return Function(
            code,
            tuple([d(f) for d in defaults]),
            {name: d(f) for name, d in kwdefaults},
            {name: f[name] for name in captured},  # the enclosing frame's cells, shared, never copied
        )

    return make


def compile_functiondef(ctx: Context, node: ast.FunctionDef) -> Stmt:
    decorators = [compile_expr(ctx, d) for d in node.decorator_list]
    make, store = _maker(ctx, node), store_name(ctx, node.name)

    def define(f: Frame) -> None:
        try:
            wrappers = [d(f) for d in decorators]  # evaluated before the defaults, applied innermost first
            function: Any = make(f)
            for wrapper in reversed(wrappers):
                function = wrapper(function)
            store(f, function)
        except MemoryError:
            raise out_of_memory(node) from None
        except BaseException as exc:
            locate(exc, node)
            raise

    return define


def compile_lambda(ctx: Context, node: ast.Lambda) -> Eval:
    return _maker(ctx, node)


# ---------------------------------------------------------------- comprehensions


def _frame_maker(ctx: Context) -> Callable[[Frame], Frame]:
    """A comprehension's frame: fresh cells for what inner lambdas capture, the enclosing cells it uses."""
    cellvars, freevars = ctx.scope.cellvars, ctx.scope.freevars
    if not cellvars and not freevars:
        return lambda f: {}

    def make(f: Frame) -> Frame:
        frame: Frame = {name: f[name] for name in freevars}
        for name in cellvars:
            frame[name] = Cell()
        return frame

    return make


Level = tuple[Callable[[Frame, Any], None], str | None, list[Eval], Eval | None]
"""One ``for ... in ... if ...`` clause: its target's store, the target name if a plain local, its
conditions, and its iterable (None for the first, evaluated in the enclosing scope)."""


def _levels(ctx: Context, inner: Context, generators: list[ast.comprehension]) -> list[Level]:
    levels: list[Level] = []
    for index, generator in enumerate(generators):
        if generator.is_async:
            raise Forbidden("'async for' is not available")
        target = generator.target
        plain = target.id if target.__class__ is ast.Name and inner.where(target.id) == LOCAL else None
        if plain is not None and plain.startswith("__"):
            raise Forbidden(f"names starting with '__' are not allowed: {plain!r}")
        levels.append(
            (
                assigner(inner, target),
                plain,
                [compile_expr(inner, condition) for condition in generator.ifs],
                compile_expr(inner, generator.iter) if index else None,
            )
        )
    return levels


def _comprehension(
    ctx: Context, node: Any, emit: Callable[[Context], Callable[[Frame, Any], None]], empty: Callable[[], Any]
) -> Eval:
    inner = ctx.inner(node)
    first = compile_expr(ctx, node.generators[0].iter)
    new_frame = _frame_maker(inner)
    levels = _levels(ctx, inner, node.generators)
    put = emit(inner)
    budget = ctx.evaluator
    store, plain, conditions, _ = levels[0]
    if len(levels) == 1 and len(conditions) <= 1:
        condition = conditions[0] if conditions else None

        def comprehension_one(f: Frame) -> Any:
            values = first(f)
            frame, out = new_frame(f), empty()
            for value in values:
                if plain is not None:
                    frame[plain] = value
                else:
                    store(frame, value)
                budget.left -= 1
                if budget.left < 0:
                    budget.spend()
                if condition is None or condition(frame):
                    put(frame, out)
            return out

        return comprehension_one

    def run(frame: Frame, index: int, values: Iterable[Any], out: Any) -> None:
        store, plain, conditions, _ = levels[index]
        last = index + 1 == len(levels)
        for value in values:
            if plain is not None:
                frame[plain] = value
            else:
                store(frame, value)
            budget.left -= 1
            if budget.left < 0:
                budget.spend()
            if conditions and not all(c(frame) for c in conditions):
                continue
            if last:
                put(frame, out)
            else:
                run(frame, index + 1, levels[index + 1][3](frame), out)  # type: ignore[misc]

    def comprehension(f: Frame) -> Any:
        values = first(f)
        frame, out = new_frame(f), empty()
        run(frame, 0, values, out)
        return out

    return comprehension


def compile_listcomp(ctx: Context, node: ast.ListComp) -> Eval:
    def emit(inner: Context) -> Callable[[Frame, Any], None]:
        element = compile_expr(inner, node.elt)
        return lambda frame, out: out.append(element(frame))

    return _comprehension(ctx, node, emit, list)


def compile_setcomp(ctx: Context, node: ast.SetComp) -> Eval:
    def emit(inner: Context) -> Callable[[Frame, Any], None]:
        element = compile_expr(inner, node.elt)
        return lambda frame, out: out.add(element(frame))

    return _comprehension(ctx, node, emit, set)


def compile_dictcomp(ctx: Context, node: ast.DictComp) -> Eval:
    def emit(inner: Context) -> Callable[[Frame, Any], None]:
        key, value = compile_expr(inner, node.key), compile_expr(inner, node.value)

        def put(frame: Frame, out: dict[Any, Any]) -> None:
            out[key(frame)] = value(frame)

        return put

    return _comprehension(ctx, node, emit, dict)


def compile_generatorexp(ctx: Context, node: ast.GeneratorExp) -> Eval:
    """Lazy, as in CPython: items are computed as they are taken (``any(...)`` stops at the first true one)."""
    inner = ctx.inner(node)
    first = compile_expr(ctx, node.generators[0].iter)
    new_frame = _frame_maker(inner)
    levels = _levels(ctx, inner, node.generators)
    element = compile_expr(inner, node.elt)
    budget = ctx.evaluator

    def produce(frame: Frame, index: int, values: Iterable[Any]) -> Iterator[Any]:
        store, plain, conditions, _ = levels[index]
        last = index + 1 == len(levels)
        for value in values:
            if plain is not None:
                frame[plain] = value
            else:
                store(frame, value)
            budget.left -= 1
            if budget.left < 0:
                budget.spend()
            if conditions and not all(c(frame) for c in conditions):
                continue
            if last:
                yield element(frame)
            else:
                yield from produce(frame, index + 1, levels[index + 1][3](frame))  # type: ignore[misc]

    def generator(f: Frame) -> Generator:
        values = iter(first(f))  # the first iterable is taken at once, as CPython does
        return Generator(produce(new_frame(f), 0, values))

    return generator
