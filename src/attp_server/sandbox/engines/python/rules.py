"""What each node of a checked program becomes (the rules `table.REWRITES` names, applied by `transform.Transformer`).

Most nodes stay as CPython runs them (`native`: names, loops, calls, arithmetic, subscripts, comprehensions); the
others put a guard (`guards`) where the policy needs a look at a value. The shapes, for a reader of the rewritten
code (``T`` is ``type``, ``F_name`` the commonest type ``name`` is plainly read on and ``P_name`` all of them,
``attr`` the allowlist, every guard's name starting with ``__attp_``):

* ``recv.name(args)`` -> ``recv.name(args) if T(recv) is F_name or T(recv) in P_name else attr(recv, 'name')(args)``
  (CPython's own method call, no bound method made), the receiver held in a ``:=`` temporary when it is not a
  name; ``', '.join`` on a constant -> its checked stand-in, made once per program;
* ``a + b`` -> ``t if T(t := a + b) is not int or low < t < high else over(t, '+')`` (integers past the size
  limit), unless a side is small or text (``n - 1``, ``'a' + s``);
* ``n % d`` -> ``n % d if T(n) is int else mod(n, d)``; ``x ** y`` -> ``pow(x, y)``; ``'-' * n`` -> ``mul('-', n)``;
* ``str(x)`` -> ``str(x) if T(x) in scalars else str_guard(str, x)``; ``f'{x}'`` -> ``f'{x if T(x) in scalars else
  shown(x)}'``, a format spec computed at run time checked;
* ``except E:`` -> ``except nothing if aborting() else catch(E):``; a ``finally:`` block starts with
  ``if aborting(): raise``; ``raise e`` -> ``raise raise_guard(e)``;
* ``f(**kw)`` -> ``f(**kwargs(f, kw))``; ``import m`` -> ``m = import('m')``; annotations are dropped;
* a top-level expression statement records its value (the answer when ``__result__`` is not set).
"""

from __future__ import annotations

import ast
from typing import Any

from attp_server.sandbox.engines.python.guards import name, plain_name
from attp_server.sandbox.engines.python.transform import (
    Transformer,
    at,
    call_guard,
    call_guard_with,
    check_name,
    guard,
    load,
    store,
    type_of,
)
from attp_server.sandbox.limits import Forbidden, SizeLimitError
from attp_server.sandbox.policy import _UNSUPPORTED, plain_attribute, plain_types
from attp_server.sandbox.stdlib.namespaces import check_format_spec


def native(t: Transformer, node: Any) -> Any:
    """The node as CPython runs it, its children rewritten."""
    t.children(node)
    return node if isinstance(node, ast.expr) else [node]


def refused(t: Transformer, node: Any) -> Any:
    """A node the sandbox does not offer (the static check refused it first, with the same message)."""
    raise Forbidden(_UNSUPPORTED.get(node.__class__, f"{node.__class__.__name__} is not available in the sandbox"))


def name_(t: Transformer, node: ast.Name) -> ast.expr:
    check_name(node.id, store=node.ctx.__class__ is not ast.Load)
    return node


def lambda_(t: Transformer, node: ast.Lambda) -> ast.expr:
    t.arguments(node.args)
    t.locate(node.body)
    with t.inside("function"):
        node.body = t.expr(node.body)
    return node


def comprehension(t: Transformer, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> ast.expr:
    """A comprehension: its first iterable read in the enclosing scope, the rest in a scope of its own."""
    first, *rest = node.generators
    first.iter = t.iterable_expr(first.iter)
    with t.inside("comprehension"):
        if first.is_async:
            raise Forbidden(_UNSUPPORTED[ast.AsyncFor])
        first.target = t.expr(first.target)
        first.ifs = t.exprs(first.ifs)
        for generator in rest:
            t.comprehension(generator)
        if isinstance(node, ast.DictComp):
            node.key, node.value = t.expr(node.key), t.expr(node.value)
        else:
            node.elt = t.expr(node.elt)
    return node


def attribute(t: Transformer, node: ast.Attribute) -> ast.expr:
    """``recv.name`` read: the allowlist, inline for a name whose type the allowlist opens `name` on plainly."""
    if node.ctx.__class__ is not ast.Load:
        raise Forbidden(f"assigning or deleting attributes is not allowed ('.{node.attr}')")
    if node.attr.startswith("_"):
        raise Forbidden(f"attributes starting with '_' are not allowed: '.{node.attr}'")
    receiver = node.value
    if isinstance(receiver, ast.Constant):
        if plain_attribute(type(receiver.value), node.attr):
            return node
        return t.constant_attribute(receiver, node)
    receiver = t.expr(receiver)
    held = t.hold(receiver) if plain_types(node.attr) else None
    if held is None:
        return at(call_guard("attr", receiver, ast.Constant(node.attr)), node)
    first, again = held
    t.attributes.add(node.attr)
    node.value = again
    guarded = at(call_guard("attr", again, ast.Constant(node.attr)), node)
    return at(ast.IfExp(test=_plainly(first, again, node.attr), body=node, orelse=guarded), node)


def call(t: Transformer, node: ast.Call) -> ast.expr:
    func = node.func
    if isinstance(func, ast.Attribute) and func.ctx.__class__ is ast.Load:
        return _method_call(t, node, func)
    if isinstance(func, ast.Name) and func.id == "str":
        return _text_call(t, node, func)
    node.func = t.expr(func)
    return t.call_arguments(node, node.func)


def _method_call(t: Transformer, node: ast.Call, func: ast.Attribute) -> ast.expr:
    """``recv.name(args)``: CPython's own method call when the receiver's type opens `name` plainly."""
    if func.attr.startswith("_"):
        raise Forbidden(f"attributes starting with '_' are not allowed: '.{func.attr}'")
    receiver = func.value
    if isinstance(receiver, ast.Constant):  # `", ".join(parts)`: the type is known now
        if plain_attribute(type(receiver.value), func.attr):
            return t.call_arguments(node, None)
        node.func = t.constant_attribute(receiver, func)
        return t.call_arguments(node, None)
    receiver = t.expr(receiver)
    held = t.hold(receiver) if plain_types(func.attr) else None
    before = t.doubled
    fast = t.call_arguments(node, None)
    if held is None or t.doubled != before or fast is not node:
        guarded_func = at(call_guard("attr", receiver, ast.Constant(func.attr)), func)
        if fast is node:
            node.func = guarded_func
            return node
        fast.args[0] = guarded_func  # routed through guards.call: the callee is its first argument
        return fast
    first, again = held
    t.attributes.add(func.attr)
    t.doubled += 1
    func.value = again
    guarded_func = at(call_guard("attr", again, ast.Constant(func.attr)), func)
    slow = at(ast.Call(func=guarded_func, args=node.args, keywords=node.keywords), node)
    return at(ast.IfExp(test=_plainly(first, again, func.attr), body=node, orelse=slow), node)


def _text_call(t: Transformer, node: ast.Call, func: ast.Name) -> ast.expr:
    """``str(x)``: the value's safe text when ``str`` is the builtin (a program may have bound it to its own)."""
    check_name(func.id, store=False)
    if len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred):
        value = t.expr(node.args[0])
        held = t.hold(value)
        if held is None:
            return at(call_guard("str", load("str"), value), node)
        first, again = held
        node.args = [again]
        guarded = at(call_guard("str", load("str"), again), node)
        test = at(ast.Compare(left=type_of(first), ops=[ast.In()], comparators=[guard("scalars")]), node)
        return at(ast.IfExp(test=test, body=node, orelse=guarded), node)
    routed = t.call_arguments(node, func)
    if routed is not node:
        return routed
    return at(call_guard_with("str_call", [func, *node.args], node.keywords), node)


def binop(t: Transformer, node: ast.BinOp) -> ast.expr:
    """``**`` and ``<<`` size-checked always; ``*`` with a literal sequence; ``%`` unless its left side is an int;
    an integer ``+`` or ``-`` checked for size unless one side is small (`_small`: ``n - 1`` grows a bit at most)."""
    op = node.op.__class__
    left = node.left
    if op is ast.Pow or op is ast.LShift:
        sized = "pow" if op is ast.Pow else "lshift"
        return at(call_guard(sized, t.expr(left), t.expr(node.right)), node)
    if op is ast.Mult and (_literal_sequence(left) or _literal_sequence(node.right)):
        return at(call_guard("mul", t.expr(left), t.expr(node.right)), node)
    if op is ast.Mod and not _number(left):
        left = t.expr(left)
        held = t.hold(left)
        before = t.doubled
        node.right = t.expr(node.right)
        if held is None or t.doubled != before:
            return at(call_guard("mod", left, node.right), node)
        first, again = held
        t.doubled += 1
        node.left = again
        guarded = at(call_guard("mod", again, node.right), node)
        test = at(ast.Compare(left=type_of(first), ops=[ast.Is()], comparators=[guard("int")]), node)
        return at(ast.IfExp(test=test, body=node, orelse=guarded), node)
    t.children(node)
    if op in _GROWING and not (_small(node.left) or _small(node.right)):
        return _int_checked(t, node, _GROWING[op])
    return node


def formatted(t: Transformer, node: ast.FormattedValue) -> ast.expr:
    """``{value!c:spec}`` in an f-string: a value that is not a plain scalar is shown by its safe text, and a spec
    computed at run time is checked like ``format``'s."""
    value = t.expr(node.value)
    held = t.hold(value)
    if held is None:
        node.value = at(call_guard("shown", value), value)
    else:
        first, again = held
        test = at(ast.Compare(left=type_of(first), ops=[ast.In()], comparators=[guard("scalars")]), value)
        node.value = at(ast.IfExp(test=test, body=again, orelse=at(call_guard("shown", again), value)), value)
    spec = node.format_spec
    if spec is not None:
        parts = spec.values if isinstance(spec, ast.JoinedStr) else [spec]
        fixed = "".join(p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str))
        if all(isinstance(p, ast.Constant) for p in parts) and _spec_allowed(fixed):
            return node
        checked = at(call_guard("spec", t.expr(spec)), spec)
        node.format_spec = at(ast.JoinedStr(values=[at(ast.FormattedValue(checked, -1, None), spec)]), spec)
    return node


# ---------------------------------------------------------------- statements


def function_def(t: Transformer, node: ast.FunctionDef) -> list[ast.stmt]:
    check_name(node.name, store=True)
    node.decorator_list = t.exprs(node.decorator_list)
    t.arguments(node.args)
    node.returns = None
    node.type_comment = None
    with t.inside("function"):
        node.body = t.block(node.body)
    return [node]


def assign(t: Transformer, node: ast.Assign | ast.Delete) -> list[ast.stmt]:
    for target in node.targets:
        _no_attribute_target(target)
    t.children(node)
    return [node]


def annotated(t: Transformer, node: ast.AnnAssign) -> list[ast.stmt]:
    """``x: T = v`` is ``x = v``; a bare ``x: T`` binds nothing (in a function it still makes ``x`` local, as in
    Python). Annotations are never evaluated."""
    _no_attribute_target(node.target)
    target = t.expr(node.target)
    if node.value is not None:
        return [at(ast.Assign(targets=[target], value=t.expr(node.value)), node)]
    if t.function and isinstance(target, ast.Name):
        local = at(ast.Assign(targets=[target], value=ast.Constant(None)), node)
        return [at(ast.If(test=ast.Constant(False), body=[local], orelse=[]), node)]
    return [at(ast.Pass(), node)]


def augmented(t: Transformer, node: ast.AugAssign) -> list[ast.stmt]:
    """``x **= y`` and ``x <<= y`` size-checked like ``**`` and ``<<``; an integer ``x += y`` (or ``-=``) checked
    after it is done, like ``+`` (in place, so a list ``+=`` still extends the list its aliases see). The target's
    container and key are read once, as in Python."""
    target = node.target
    _no_attribute_target(target)
    op = node.op.__class__
    sized = {ast.Pow: "pow", ast.LShift: "lshift"}.get(op)
    growing = op in _GROWING and not _small(node.value)
    if sized is None and not growing:
        t.children(node)
        return [node]
    value = t.expr(node.value)
    before: list[ast.stmt] = []
    if isinstance(target, ast.Name):
        check_name(target.id, store=True)
        read: ast.expr = at(load(target.id), target)
        written: ast.Name | ast.Subscript = target
    else:
        assert isinstance(target, ast.Subscript)  # the compiler allows nothing else here
        container, key = t.expr(target.value), t.expr(target.slice)
        if isinstance(key, ast.Slice):  # a slice: nothing to check but a size, read the target twice
            if sized is None:
                target.value, target.slice, node.value = container, key, value
                return [node]
            read = at(ast.Subscript(value=container, slice=key, ctx=ast.Load()), target)
            written = at(ast.Subscript(value=container, slice=key, ctx=ast.Store()), target)
        else:
            held, index = name("container"), name("key")
            before = [
                at(ast.Assign(targets=[store(held)], value=container), node),
                at(ast.Assign(targets=[store(index)], value=key), node),
            ]
            read = at(ast.Subscript(value=load(held), slice=load(index), ctx=ast.Load()), target)
            written = at(ast.Subscript(value=load(held), slice=load(index), ctx=ast.Store()), target)
    if sized is not None:
        return [*before, at(ast.Assign(targets=[written], value=at(call_guard(sized, read, value), node)), node)]
    node.target, node.value = written, value
    if t.scopes[-1] == "module":  # its names are dict look-ups there: one call costs less than the inline test
        return [*before, node, at(ast.Expr(value=call_guard("checked", read, ast.Constant(_GROWING[op] + "="))), node)]
    too_big = at(ast.UnaryOp(op=ast.Not(), operand=_compact(read)), node)
    check = call_guard("checked", read, ast.Constant(_GROWING[op] + "="))
    return [*before, node, at(ast.If(test=too_big, body=[at(ast.Expr(value=check), node)], orelse=[]), node)]


def try_(t: Transformer, node: ast.Try) -> list[ast.stmt]:
    """No ``except`` clause catches, and no ``finally`` block runs for, what ends the run (`guards.catch`)."""
    node.body = t.block(node.body)
    for handler in node.handlers:
        if handler.name:
            check_name(handler.name, store=True)
        classes = t.expr(handler.type) if handler.type is not None else ast.Constant(None)
        # `nothing if aborting() else catch(classes)`: the clause's own expression is not even evaluated then
        caught = ast.IfExp(test=call_guard("aborting"), body=guard("nothing"), orelse=call_guard("catch", classes))
        handler.type = at(caught, handler)
        handler.body = t.block(handler.body)
    node.orelse = t.block(node.orelse)
    if node.finalbody:
        first = node.finalbody[0]
        ending = at(ast.If(test=at(call_guard("aborting"), first), body=[at(ast.Raise(), first)], orelse=[]), first)
        node.finalbody = [ending, *t.block(node.finalbody)]
    return [node]


def raise_(t: Transformer, node: ast.Raise) -> list[ast.stmt]:
    if node.exc is not None:
        node.exc = at(call_guard("raise", t.expr(node.exc)), node.exc)
    if node.cause is not None and not (isinstance(node.cause, ast.Constant) and node.cause.value is None):
        node.cause = at(call_guard("cause", t.expr(node.cause)), node.cause)
    return [node]


def declaration(t: Transformer, node: ast.Global | ast.Nonlocal) -> list[ast.stmt]:
    for declared in node.names:
        check_name(declared, store=True)
    return [node]


def import_(t: Transformer, node: ast.Import) -> list[ast.stmt]:
    """``import a`` / ``import a as b`` / ``import a.b`` (which binds ``a``): the run's namespace of that name."""
    out: list[ast.stmt] = []
    for alias in node.names:
        bound = alias.asname or alias.name.split(".")[0]
        check_name(bound, store=True)
        found = at(call_guard("import", ast.Constant(alias.name)), node)
        out.append(at(ast.Assign(targets=[store(bound)], value=found), node))
    return out


def import_from(t: Transformer, node: ast.ImportFrom) -> list[ast.stmt]:
    """``from m import a, b as c`` binds members of the run's namespace ``m``; ``from __future__`` changes nothing."""
    module = "." * node.level + (node.module or "")
    if module == "__future__":
        return [at(ast.Pass(), node)]
    out: list[ast.stmt] = []
    for alias in node.names:
        if alias.name == "*":
            out.append(at(ast.Expr(value=at(call_guard("import_star", ast.Constant(module)), node)), node))
            continue
        bound = alias.asname or alias.name
        check_name(bound, store=True)
        found = at(call_guard("import_from", ast.Constant(module), ast.Constant(alias.name)), node)
        out.append(at(ast.Assign(targets=[store(bound)], value=found), node))
    return out


# ---------------------------------------------------------------- helpers


def _plainly(first: ast.expr, again: ast.expr, attribute_name: str) -> ast.expr:
    """``T(receiver) is F_name or T(receiver) in P_name``: the allowlist's answer is a plain read for this value (the
    commonest type looked at first: one comparison less for it)."""
    usual = ast.Compare(left=type_of(first), ops=[ast.Is()], comparators=[load(plain_name(attribute_name, "f"))])
    if len(plain_types(attribute_name)) == 1:
        return at(usual, first)
    rest = ast.Compare(left=type_of(again), ops=[ast.In()], comparators=[load(plain_name(attribute_name))])
    return at(ast.BoolOp(op=ast.Or(), values=[usual, rest]), first)


def _literal_sequence(node: ast.expr) -> bool:
    """A sequence written in the program (``'-' * n``, ``[0] * n``, ``f'...' * n``): its repeat is size-checked."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str | bytes | tuple)
    return isinstance(node, ast.List | ast.Tuple | ast.JoinedStr | ast.ListComp)


_GROWING: dict[type, str] = {ast.Add: "+", ast.Sub: "-"}
"""Operators whose integer result is checked against the size limit (`_int_checked`). Not ``*``: a product of two
integers can square a big one, but that is bounded by the deadline and the worker's memory like any other
computation, and a check on every ``d * d`` costs more than its message is worth."""

SMALL_BITS = 64
"""An integer constant of at most this many bits makes an operand small: ``x + 1`` grows an integer by a bit at most,
so only a loop of them grows it past the limit, bounded by the deadline (it runs unchecked)."""

_NOT_NUMBERS = (ast.JoinedStr, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp)
"""Displays: a ``+`` with one of them is never an integer sum."""


def _number(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _small(node: ast.expr) -> bool:
    """An operand written in the program that makes a ``+`` or ``-`` no big integer sum: a small number (`SMALL_BITS`),
    a float, or text (`_textual`)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    if isinstance(node, ast.Constant):
        return type(node.value) is not int or node.value.bit_length() <= SMALL_BITS
    return _textual(node)


def _textual(node: ast.expr) -> bool:
    """Text or a display by the look of it (``'a' + x``, ``f'...'``, ``'%s' % x``, ``[...]``): never an integer."""
    while isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Add) and _textual(node.right):
            return True
        if not isinstance(node.op, ast.Add | ast.Mod):
            return False
        node = node.left
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str | bytes)
    return isinstance(node, _NOT_NUMBERS)


def _compact(value: ast.expr) -> ast.expr:
    """``value.__class__ is not int or -S < value < S``: no integer past the size limit for certain, in the two
    comparisons CPython makes fastest (S is 2 ** 30 - 1; a bigger integer is measured by `guards.checked`)."""
    return ast.BoolOp(
        op=ast.Or(),
        values=[
            ast.Compare(left=_class_of(value), ops=[ast.IsNot()], comparators=[guard("int")]),
            ast.BoolOp(
                op=ast.And(),
                values=[
                    ast.Compare(left=guard("low"), ops=[ast.Lt()], comparators=[value]),
                    ast.Compare(left=value, ops=[ast.Lt()], comparators=[guard("high")]),
                ],
            ),
        ],
    )


def _class_of(value: ast.expr) -> ast.expr:
    """``value.__class__``: for an integer's size, as good as ``type(value)`` (no object passes for an ``int``'s
    class it is not, and none that is one can hide it) and cheaper."""
    return ast.Attribute(value=value, attr="__class__", ctx=ast.Load())


def _int_checked(t: Transformer, node: ast.expr, op: str) -> ast.expr:
    """`node`'s value, refused (`guards.checked`) when it is an integer past the size limit (tested inline in a
    function, by a call in the module's own code, where every name read is a dict look-up)."""
    held = t.hold(node) if t.scopes[-1] != "module" else None
    if held is None or isinstance(node, ast.Name):
        return at(call_guard("checked", node, ast.Constant(op)), node)
    first, again = held
    test = _compact(first)
    test.values[1].values[0].comparators = [again]  # type: ignore[attr-defined]  # `first` stores, the rest reads
    test.values[1].values[1].left = again  # type: ignore[attr-defined]
    return at(ast.IfExp(test=at(test, node), body=again, orelse=call_guard("checked", again, ast.Constant(op))), node)


def _spec_allowed(text: str) -> bool:
    try:
        check_format_spec(text)
    except SizeLimitError:
        return False
    return True


def _no_attribute_target(target: ast.expr) -> None:
    if isinstance(target, ast.Attribute):
        raise Forbidden(f"assigning or deleting attributes is not allowed ('.{target.attr}')")
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            _no_attribute_target(element.value if isinstance(element, ast.Starred) else element)
