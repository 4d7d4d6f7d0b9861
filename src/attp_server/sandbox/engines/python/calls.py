"""Calls, compiled: ``f(x)``, ``obj.method(x)``, and the general form with keywords and unpacking.

A call of a program's own function skips ``Function.__call__`` when the argument count matches:
the call site calls the function's entry closure directly (`Function.enter`), which builds the frame
with no binding loop. The function and its arguments are read inline when they are names (a global,
or a name held in the frame), so ``is_prime(n)`` costs one closure call, not three.

A method call asks the attribute policy once per class: when the answer is a plain method of a plain
value type (``list.append``, ``str.split``), later calls on that class call the unbound method
directly, with the same result as the bound one.

Its compilers are listed in `attp_server.sandbox.engines.python.table`.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterable
from types import MethodDescriptorType
from typing import Any

from attp_server.sandbox.engines.python.displays import elements
from attp_server.sandbox.engines.python.expressions import (
    FRAME,
    FRAME_CONST,
    FRAME_FRAME,
    Context,
    Eval,
    Inline,
    compile_expr,
    inline_or_closure,
    operand,
)
from attp_server.sandbox.engines.python.functions import Frame, Function, locate, out_of_memory
from attp_server.sandbox.engines.python.scopes import GLOBAL
from attp_server.sandbox.limits import Forbidden
from attp_server.sandbox.policy import get_attribute, plain_attribute
from attp_server.sandbox.stdlib.reprs import safe_str


def compile_call(ctx: Context, node: ast.Call) -> Eval:
    if node.keywords or ast.Starred in {a.__class__ for a in node.args}:
        return _general_call(ctx, node)
    func = node.func
    if func.__class__ is ast.Attribute:
        return _method_call(ctx, func, node.args)
    if len(node.args) == 1:
        return _call_one(ctx, func, node.args[0])
    args = [compile_expr(ctx, a) for a in node.args]
    function = _function(ctx, func)
    if not args:

        def call0(f: Frame) -> Any:
            fn = function(f)
            if fn.__class__ is Function and fn.arity == 0:
                return fn.enter()
            return fn()

        return call0
    if len(args) == 2:
        a0, a1 = args

        def call2(f: Frame) -> Any:
            fn = function(f)
            if fn.__class__ is Function and fn.arity == 2:
                return fn.enter(a0(f), a1(f))
            return fn(a0(f), a1(f))

        return call2

    def call(f: Frame) -> Any:
        fn = function(f)
        values = [a(f) for a in args]
        if fn.__class__ is Function and fn.arity == len(values):
            return fn.enter(*values)
        return fn(*values)

    return call


def _function(ctx: Context, func: ast.expr) -> Eval:
    """The callee, a global name read inline."""
    if func.__class__ is ast.Name and ctx.where(func.id) == GLOBAL:
        g, name = ctx.globals, func.id

        def global_function(f: Frame) -> Any:
            try:
                return g[name]
            except KeyError:
                raise NameError(f"name {name!r} is not defined", name=name) from None

        return global_function
    return compile_expr(ctx, func)


def _call_one(ctx: Context, func: ast.expr, arg_node: ast.expr) -> Eval:
    """``f(x)``, the most common call, in one closure: the callee read inline when it is a name, the argument
    computed inline when it is a name, a constant or ``name <op> constant``, and a plain function of the
    program entered directly (its frame built here, no entry closure)."""
    absent, budget, g = ctx.absent, ctx.evaluator, ctx.globals
    tick = budget.tick_calls
    spec = inline_or_closure(ctx, arg_node)
    ak, an, av, ao, aop, ack, arg = spec.kind, spec.name, spec.value, spec.other, spec.op, spec.checked, spec.closure
    global_name = func.id if func.__class__ is ast.Name and ctx.where(func.id) == GLOBAL else None
    fkind, function = ("global", None) if global_name is not None else operand(ctx, func)
    local = function if fkind == "frame" else None
    if fkind == "const":
        constant_function = function
        function = lambda f: constant_function  # noqa: E731

    if global_name is not None and not tick:
        return _call_global_one(ctx, global_name, spec)

    def call_one(f: Frame) -> Any:
        if global_name is not None:
            try:
                fn = g[global_name]
            except KeyError:
                raise NameError(f"name {global_name!r} is not defined", name=global_name) from None
        elif local is not None:
            try:
                fn = f[local]
            except KeyError:
                raise absent(local) from None
        else:
            fn = function(f)  # type: ignore[misc]
        if ak == FRAME:
            try:
                a = f[an]
            except KeyError:
                raise absent(an) from None
        elif ak == FRAME_CONST:
            try:
                a = f[an]
            except KeyError:
                raise absent(an) from None
            a = aop(a, av) if ack is None or a.__class__ is int else ack(a, av)
        elif ak == FRAME_FRAME:
            try:
                a = f[an]
                b = f[ao]
            except KeyError as error:
                raise absent(error.args[0]) from None
            a = aop(a, b)
        else:
            a = arg(f)
        if fn.__class__ is Function and fn.arity == 1:
            body = fn.body
            if body is None:
                return fn.enter(a)
            if tick:
                budget.left -= 1
                if budget.left < 0:
                    budget.spend()
            closure = fn.closure
            if closure:
                frame = closure.copy()
                frame[fn.first] = a  # type: ignore[index]
            else:
                frame = {fn.first: a}  # type: ignore[dict-item]
            try:
                return body(frame)
            except MemoryError:
                raise out_of_memory(fn.code.where) from None
            except BaseException as exc:
                locate(exc, fn.code.where)
                raise
        if fn is str:  # str(obj): its safe text, never an address
            return safe_str(a)
        return fn(a)

    return call_one


def _call_global_one(ctx: Context, name: str, spec: Inline) -> Eval:
    """`_call_one` for the commonest callee, a global name (a function the program defined at the top level,
    calling itself or another), when calls spend no steps: its frame built here from `Function.first`, set
    only for a plain function of one parameter."""
    absent, g = ctx.absent, ctx.globals
    ak, an, av, ao, aop, ack, arg = spec.kind, spec.name, spec.value, spec.other, spec.op, spec.checked, spec.closure
    minus = aop is operator.sub  # `n - 1`, the argument of most recursions: the operator inline

    def call_global_one(f: Frame) -> Any:
        try:
            fn = g[name]
        except KeyError:
            raise NameError(f"name {name!r} is not defined", name=name) from None
        if ak == FRAME_CONST:
            try:
                a = f[an]
            except KeyError:
                raise absent(an) from None
            a = a - av if minus else (aop(a, av) if ack is None or a.__class__ is int else ack(a, av))
        elif ak == FRAME:
            try:
                a = f[an]
            except KeyError:
                raise absent(an) from None
        elif ak == FRAME_FRAME:
            try:
                a = f[an]
                b = f[ao]
            except KeyError as error:
                raise absent(error.args[0]) from None
            a = aop(a, b)
        else:
            a = arg(f)
        if fn.__class__ is Function:
            first = fn.first
            if first is not None:
                closure = fn.closure
                if closure:
                    frame = closure.copy()
                    frame[first] = a
                else:
                    frame = {first: a}
                try:
                    return fn.body(frame)  # type: ignore[misc]  # set whenever `first` is
                except MemoryError:
                    raise out_of_memory(fn.code.where) from None
                except BaseException as exc:
                    locate(exc, fn.code.where)
                    raise
        if fn is str:  # str(obj): its safe text, never an address
            return safe_str(a)
        return fn(a)

    return call_global_one


def _method_call(ctx: Context, func: ast.Attribute, arg_nodes: list[ast.expr]) -> Eval:
    """``obj.name(args)``: the policy decides once per class; a plain method is then called unbound, directly."""
    name, absent = func.attr, ctx.absent
    kind, receiver = operand(ctx, func.value)
    if kind == "const":
        value = receiver
        kind, receiver = "expr", lambda f: value
    frame_receiver = receiver if kind == "frame" else None
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

    def target_of(f: Frame) -> Any:
        if frame_receiver is None:
            return receiver(f)
        try:
            return f[frame_receiver]
        except KeyError:
            raise absent(frame_receiver) from None

    if not arg_nodes:

        def method0(f: Frame) -> Any:
            if frame_receiver is None:
                target = receiver(f)
            else:
                try:
                    target = f[frame_receiver]
                except KeyError:
                    raise absent(frame_receiver) from None
            if target.__class__ is known:
                return unbound(target)
            return lookup(target)()

        return method0
    if len(arg_nodes) == 1:
        akind, arg = operand(ctx, arg_nodes[0])
        if akind == "const":
            constant_arg = arg
            akind, arg = "expr", lambda f: constant_arg
        frame_arg = arg if akind == "frame" else None

        def method1(f: Frame) -> Any:
            if frame_receiver is None:
                target = receiver(f)
            else:
                try:
                    target = f[frame_receiver]
                except KeyError:
                    raise absent(frame_receiver) from None
            method = unbound if target.__class__ is known else None
            bound = lookup(target) if method is None else None
            if frame_arg is None:
                a = arg(f)
            else:
                try:
                    a = f[frame_arg]
                except KeyError:
                    raise absent(frame_arg) from None
            if method is not None:
                return method(target, a)
            return bound(a)  # type: ignore[misc]

        return method1
    args = [compile_expr(ctx, a) for a in arg_nodes]

    def method(f: Frame) -> Any:
        target = target_of(f)
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
