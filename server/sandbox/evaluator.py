"""The asteval subclass that runs a program: allowlisted attributes, size checks, a deadline, a step budget.

Differences from stock asteval, each for a reason:

* Errors are real Python exceptions (asteval keeps a list and prints it), so ``try/except`` matches
  by class, including ``except ToolError as e`` and tuples of classes.
* ``run`` counts every node against a step budget and checks the deadline; both end the run with a
  `BaseException` subclass (`attp_server.sandbox.limits.Abort`) that no ``except`` can catch.
* ``obj.name`` goes through `policy.get_attribute`; attribute assignment and deletion are refused.
* Operators that build big values (``*``, ``**``, ``<<``, ``+``, ``%``) and format specs are size-checked.
* ``print`` writes to a capped in-memory buffer, never to a file descriptor.
* Generator expressions, ``*args``/``**kwargs`` in calls, ``[*a, *b]``, ``{**a}``, walrus and annotated
  assignments work (stock asteval refuses them), and symbol names are not re-tokenized on every
  assignment (stock asteval runs ``tokenize`` each time).
"""

from __future__ import annotations

import ast
import contextlib
import operator
import time
from collections.abc import Callable, Iterable
from typing import Any

from asteval import Interpreter
from asteval.asteval import ALL_NODES
from asteval.astutils import Procedure
from attp_server.sandbox.limits import (
    MAX_FORMAT_WIDTH,
    MAX_INT_BITS,
    MAX_SEQUENCE_LEN,
    Forbidden,
    SizeLimitError,
    Timeout,
)
from attp_server.sandbox.namespaces import check_format_spec, check_power
from attp_server.sandbox.policy import RESULT_NAME, get_attribute, register_exception

CHECK_EVERY = 200
"""Steps between two deadline checks: about a tenth of a millisecond of evaluation."""


class ToolError(Exception):
    """A tool call failed. Catch it with ``except ToolError as e`` and read ``e.code`` / ``e.message``."""

    from_server = False
    """True only for errors built from a server reply; a program may raise its own, which are not tool errors."""

    def __init__(self, info: object = None) -> None:
        details: dict[str, Any] = dict(info) if isinstance(info, dict) else {"message": "" if info is None else info}
        super().__init__(details.get("message", ""))
        self.info = details
        self.code = str(details.get("code", "TOOL_ERROR"))
        self.message = str(details.get("message", ""))
        self.tool_name = details.get("tool_name")
        self.parameter_name = details.get("parameter_name")
        self.suggested_value = details.get("suggested_value")
        self.solution = details.get("solution")

    @classmethod
    def from_reply(cls, info: dict[str, Any]) -> ToolError:
        error = cls(info)
        error.from_server = True
        return error


register_exception(ToolError, ("code", "message", "tool_name", "parameter_name", "suggested_value", "solution"))


class OutputBuffer:
    """Captured ``print`` output, cut at `limit` bytes and marked truncated rather than silently cut."""

    def __init__(self, limit: int, enabled: bool = True) -> None:
        self.limit = limit
        self.enabled = enabled
        self.parts: list[str] = []
        self.size = 0
        self.truncated = False

    def write(self, text: str) -> None:
        if not self.enabled or self.truncated:
            return
        data = text.encode("utf-8", "replace")
        room = self.limit - self.size
        if len(data) > room:
            self.parts.append(data[:room].decode("utf-8", "ignore"))
            self.size = self.limit
            self.truncated = True
            return
        self.parts.append(data.decode("utf-8"))  # re-decoded: lone surrogates become '?', never a broken report
        self.size += len(data)

    def text(self) -> str:
        return "".join(self.parts)


def _check_percent_format(template: str | bytes | bytearray) -> None:
    """Refuse %-format widths that would build a huge string, parsing specs the way Python does."""
    text = template if isinstance(template, str) else bytes(template).decode("latin-1")
    size, i = len(text), 0
    while (i := text.find("%", i)) >= 0:
        i += 1
        if i < size and text[i] == "(":  # a mapping key: balanced parentheses, as Python parses it
            depth, i = 1, i + 1
            while i < size and depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
        while i < size and text[i] in "#0- +":
            i += 1
        for part in ("width", "precision"):
            if part == "precision":
                if i >= size or text[i] != ".":
                    break
                i += 1
            if i < size and text[i] == "*":
                raise Forbidden("'*' widths in %-formatting are not available; write the width as a number")
            j = i
            while j < size and text[j].isdigit():
                j += 1
            if j - i > 6 or (j > i and int(text[i:j]) > MAX_FORMAT_WIDTH):
                raise SizeLimitError(f"%-format {part} {text[i:j]} exceeds {MAX_FORMAT_WIDTH:,}")
            i = j
        i += 1  # the conversion character (or the second % of %%)


def _check_len(size: int, what: str) -> None:
    if size > MAX_SEQUENCE_LEN:
        raise SizeLimitError(f"{what} would build {size:,} items; the limit is {MAX_SEQUENCE_LEN:,}")


_SEQUENCES = (str, bytes, bytearray, list, tuple)
_NUMBERS = frozenset({int, float})


def _add(a: Any, b: Any) -> Any:
    kinds: tuple[type, type] = (a.__class__, b.__class__)
    if kinds[0] in _NUMBERS and kinds[1] in _NUMBERS:  # the common case first: nothing to check
        return a + b
    if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES):
        _check_len(len(a) + len(b), "'+'")
    return a + b


def _mul(a: Any, b: Any) -> Any:
    if a.__class__ is int and b.__class__ is int:  # the common case first
        if a.bit_length() + b.bit_length() > MAX_INT_BITS:
            raise SizeLimitError(f"'*' would build an integer over {MAX_INT_BITS:,} bits")
        return a * b
    if a.__class__ is float or b.__class__ is float:  # a float product is a float (or an error), never big
        return a * b
    if isinstance(b, _SEQUENCES) and isinstance(a, int):
        a, b = b, a
    if isinstance(a, _SEQUENCES) and isinstance(b, int):
        _check_len(len(a) * b, "'*'")
    elif isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > MAX_INT_BITS:
        raise SizeLimitError(f"'*' would build an integer over {MAX_INT_BITS:,} bits")
    return a * b


def _pow(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        check_power(a, b)
    return a**b


def _lshift(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int) and a and a.bit_length() + b > MAX_INT_BITS:
        raise SizeLimitError(f"'<<' would build an integer over {MAX_INT_BITS:,} bits")
    return a << b


def _mod(a: Any, b: Any) -> Any:
    if isinstance(a, str | bytes | bytearray):
        _check_percent_format(a)
    return a % b


BINARY_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: _add,
    ast.Sub: operator.sub,
    ast.Mult: _mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: _mod,
    ast.Pow: _pow,
    ast.LShift: _lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
    ast.MatMult: operator.matmul,
}


class Evaluator(Interpreter):  # type: ignore[misc]
    """One run of one program. Build a new one per run: symbols do not survive between runs."""

    # asteval's own state, set in its __init__: a pending break/continue/return, and a return value.
    _interrupt: Any
    retval: Any

    def __init__(self, symbols: dict[str, Any], *, deadline: float, max_steps: int, output: OutputBuffer) -> None:
        # Interpreter.__init__ is not called: per run it rebuilds a handler table with ~50 getattr calls and
        # calls repr() on every symbol; the table here is built once per class (`_HANDLERS`). These are the
        # attributes asteval's inherited handlers and `Procedure` read.
        self.output = output
        self.deadline = deadline
        self.max_steps = max_steps
        self.steps = 0
        self._next_check = CHECK_EVERY
        self._handling: list[BaseException] = []
        self.symtable = symbols
        self.config = _ASTEVAL_CONFIG
        self.readonly_symbols: frozenset[str] = frozenset()
        self.no_deepcopy: list[str] = []
        self.error: list[Any] = []
        self.error_msg = None
        self.expr = None
        self.lineno = 0
        self.code_text: list[str] = []
        self.use_numpy = False
        self.allow_unsafe_modules = False
        self._interrupt = None
        self.retval = None
        self._calldepth = 0
        symbols["print"] = _Print(self._printer)

    # ------------------------------------------------------------ the core loop

    def run(self, node: Any, expr: Any = None, lineno: Any = None, with_raise: bool = True) -> Any:
        if node is None:
            return None
        if self.retval is not None:
            return self.retval
        interrupt = self._interrupt
        if interrupt is not None and interrupt.__class__ in _LOOP_INTERRUPTS:
            return interrupt
        self.steps = steps = self.steps + 1
        if steps >= self._next_check:
            self._check_limits()
        handler = _HANDLERS.get(node.__class__)
        if handler is None:
            raise Forbidden(f"{node.__class__.__name__} is not available in the sandbox")
        try:
            return handler(self, node)
        except MemoryError:
            raise SizeLimitError(f"the program ran out of memory at line {getattr(node, 'lineno', '?')}") from None
        except BaseException as exc:
            if not hasattr(exc, "attp_line") and hasattr(node, "lineno"):
                with contextlib.suppress(AttributeError):
                    exc.attp_line = (node.lineno, node.col_offset)  # type: ignore[attr-defined]
            raise

    def _check_limits(self) -> None:
        if time.monotonic() > self.deadline:
            raise Timeout("the program ran past its time limit")
        if self.steps > self.max_steps:
            raise Timeout(f"the program ran more than {self.max_steps:,} evaluation steps")
        self._next_check = self.steps + CHECK_EVERY

    def raise_exception(self, node: Any, exc: Any = None, msg: str = "", expr: Any = None, lineno: Any = None) -> None:
        raise (exc or RuntimeError)(msg)

    def _block(self, statements: Iterable[ast.stmt]) -> None:
        for statement in statements:
            self.run(statement)
            if self._interrupt is not None or self.retval is not None:
                break

    def _loop_control(self) -> str | None:
        """After a loop body: 'break' or 'continue' (consumed here), 'return' (left pending), or None."""
        interrupt = self._interrupt
        if interrupt is None:
            return "return" if self.retval is not None else None
        if interrupt.__class__ is ast.Break:
            self._interrupt = None
            return "break"
        if interrupt.__class__ is ast.Continue:
            self._interrupt = None
            return "continue"
        return "return"

    def on_while(self, node: ast.While) -> None:
        while self.run(node.test):
            self._block(node.body)
            if self._loop_control() in ("break", "return"):
                return
        self._block(node.orelse)

    def on_for(self, node: ast.For) -> None:
        # _block and _loop_control inlined: this loop runs once per iteration of every program loop.
        target, body, run = node.target, node.body, self.run
        assign = self._name_assigner(target) or self.node_assign
        for value in run(node.iter):
            assign(target, value)
            for statement in body:
                run(statement)
                if self._interrupt is not None or self.retval is not None:
                    break
            if (self._interrupt is not None or self.retval is not None) and self._loop_control() != "continue":
                return
        self._block(node.orelse)

    def _finally(self, statements: list[ast.stmt]) -> None:
        """Run a finally block even while a return, break or continue is pending, then restore it."""
        pending = (self._interrupt, self.retval)
        self._interrupt, self.retval = None, None
        self._block(statements)
        if self._interrupt is None and self.retval is None:
            self._interrupt, self.retval = pending

    # ------------------------------------------------------------ names and assignment

    def on_name(self, node: ast.Name) -> Any:
        try:
            return self.symtable[node.id]
        except KeyError:
            raise NameError(f"name {node.id!r} is not defined", name=node.id) from None

    def _name_assigner(self, node: Any) -> Callable[[Any, Any], None] | None:
        """For a plain, allowed name: a faster `node_assign` (the name's check done once, not per value)."""
        if node.__class__ is not ast.Name or (node.id.startswith("_") and node.id != RESULT_NAME):
            return None
        name = node.id

        def assign(_: Any, value: Any) -> None:
            self.symtable[name] = value  # self.symtable, read each time: a function call swaps the table

        return assign

    def node_assign(self, node: Any, val: Any) -> None:
        cls = node.__class__
        if cls is ast.Name:
            if node.id.startswith("_") and node.id != RESULT_NAME:
                raise Forbidden(f"names starting with '_' are not allowed: {node.id!r}")
            self.symtable[node.id] = val
        elif cls is ast.Subscript:
            self.run(node.value)[self.run(node.slice)] = val
        elif cls is ast.Tuple or cls is ast.List:
            values = list(val)
            if len(values) != len(node.elts):
                raise ValueError(f"cannot unpack {len(values)} values into {len(node.elts)} names")
            for target, value in zip(node.elts, values, strict=True):
                self.node_assign(target, value)
        else:
            raise Forbidden(f"cannot assign to {cls.__name__.lower()}; only names and items can be assigned")

    def on_attribute(self, node: ast.Attribute) -> Any:
        if node.ctx.__class__ is not ast.Load:
            raise Forbidden(f"assigning or deleting attributes is not allowed ('.{node.attr}')")
        return get_attribute(self.run(node.value), node.attr)

    def on_augassign(self, node: ast.AugAssign) -> None:
        target = node.target
        operation = BINARY_OPERATORS[node.op.__class__]
        if target.__class__ is ast.Name:
            value = operation(self.on_name(target), self.run(node.value))
            self.node_assign(target, value)
        elif isinstance(target, ast.Subscript):
            container, key = self.run(target.value), self.run(target.slice)
            container[key] = operation(container[key], self.run(node.value))
        else:
            raise Forbidden("only names and items can be updated with augmented assignment")

    def on_annassign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.node_assign(node.target, self.run(node.value))

    def on_namedexpr(self, node: ast.NamedExpr) -> Any:
        value = self.run(node.value)
        self.node_assign(node.target, value)
        return value

    def on_delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            if isinstance(target, ast.Name):
                if self.symtable.pop(target.id, _MISSING) is _MISSING:
                    raise NameError(f"name {target.id!r} is not defined", name=target.id)
            elif isinstance(target, ast.Subscript):
                del self.run(target.value)[self.run(target.slice)]
            else:
                raise Forbidden("only names and items can be deleted")

    # ------------------------------------------------------------ operators and formatting

    def on_binop(self, node: ast.BinOp) -> Any:
        return BINARY_OPERATORS[node.op.__class__](self.run(node.left), self.run(node.right))

    def on_formattedvalue(self, node: ast.FormattedValue) -> str:
        value = self.run(node.value)
        if node.conversion == 115:
            value = str(value)
        elif node.conversion == 114:
            value = repr(value)
        elif node.conversion == 97:
            value = ascii(value)
        spec = self.run(node.format_spec) if node.format_spec is not None else ""
        check_format_spec(spec)
        return format(value, spec)

    def on_joinedstr(self, node: ast.JoinedStr) -> str:
        parts = [self.run(part) for part in node.values]
        _check_len(sum(len(part) for part in parts), "f-string")
        return "".join(parts)

    def on_assert(self, node: ast.Assert) -> None:
        if not self.run(node.test):
            raise AssertionError(self.run(node.msg)) if node.msg is not None else AssertionError()

    # ------------------------------------------------------------ displays and comprehensions

    def _elements(self, elements: list[ast.expr]) -> list[Any]:
        out: list[Any] = []
        for element in elements:
            if element.__class__ is ast.Starred:
                out.extend(self.run(element.value))
            else:
                out.append(self.run(element))
        return out

    def on_list(self, node: ast.List) -> list[Any]:
        return self._elements(node.elts)

    def on_tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self._elements(node.elts))

    def on_set(self, node: ast.Set) -> set[Any]:
        return set(self._elements(node.elts))

    def on_starred(self, node: ast.Starred) -> Any:
        raise Forbidden("'*' unpacking is only available in calls and list/tuple/set displays")

    def on_dict(self, node: ast.Dict) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                out.update(self.run(value))
            else:
                out[self.run(key)] = self.run(value)
        return out

    def _comprehension(self, generators: list[ast.comprehension], emit: Callable[[], None]) -> None:
        names = _target_names(generators)
        symtable = self.symtable
        saved = {name: symtable[name] for name in names if name in symtable}
        try:
            self._generate(generators, 0, emit)
        finally:
            symtable = self.symtable  # a function called inside may have swapped the table
            for name in names:
                if name in saved:
                    symtable[name] = saved[name]
                else:
                    symtable.pop(name, None)

    def _generate(self, generators: list[ast.comprehension], index: int, emit: Callable[[], None]) -> None:
        generator = generators[index]
        last = index + 1 == len(generators)
        target, conditions = generator.target, generator.ifs
        for value in self.run(generator.iter):
            self.node_assign(target, value)
            if conditions and not self._all(conditions):
                continue
            if last:
                emit()
            else:
                self._generate(generators, index + 1, emit)

    def _all(self, conditions: list[ast.expr]) -> bool:
        for condition in conditions:  # noqa: SIM110  (a loop, not all(<genexpr>): no generator per item)
            if not self.run(condition):
                return False
        return True

    def on_listcomp(self, node: ast.ListComp) -> list[Any]:
        out: list[Any] = []
        self._comprehension(node.generators, lambda: out.append(self.run(node.elt)))
        return out

    def on_setcomp(self, node: ast.SetComp) -> set[Any]:
        out: set[Any] = set()
        self._comprehension(node.generators, lambda: out.add(self.run(node.elt)))
        return out

    def on_dictcomp(self, node: ast.DictComp) -> dict[Any, Any]:
        out: dict[Any, Any] = {}

        def emit() -> None:
            out[self.run(node.key)] = self.run(node.value)

        self._comprehension(node.generators, emit)
        return out

    def on_generatorexp(self, node: ast.GeneratorExp) -> Any:
        # Evaluated eagerly: the sandbox has no frames to suspend, and eager lists are bounded by the limits.
        return iter(self.on_listcomp(node))  # type: ignore[arg-type]

    # ------------------------------------------------------------ functions and calls

    def on_functiondef(self, node: ast.FunctionDef | ast.Lambda, is_lambda: bool = False) -> Any:
        """asteval's, minus ``ast.unparse`` of the whole function at every definition (text only asteval's
        error list shows) and minus re-tokenizing the name (the parser already made it an identifier)."""
        arguments = node.args
        offset = len(arguments.args) - len(arguments.defaults)
        defaults = [(arguments.args[i + offset].arg, self.run(d)) for i, d in enumerate(arguments.defaults)]
        positional = [a.arg for a in arguments.args[:offset]]
        body = [node.body] if isinstance(node, ast.Lambda) else node.body
        first = body[0]
        doc = first.value if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) else None
        procedure = Procedure(
            "lambda" if is_lambda else node.name,  # type: ignore[union-attr]
            self,
            doc=doc,
            lineno=self.lineno,
            body=body,
            text="",
            args=positional,
            kwargs=defaults,
            vararg=arguments.vararg.arg if arguments.vararg else None,
            varkws=arguments.kwarg.arg if arguments.kwarg else None,
            is_lambda=is_lambda,
        )
        if is_lambda:
            return procedure
        self.symtable[node.name] = procedure  # type: ignore[union-attr]
        return None

    def on_call(self, node: ast.Call) -> Any:
        function = self.run(node.func)
        if not callable(function):
            raise TypeError(f"a {type(function).__name__} value is not callable")
        args = self._elements(node.args)
        kwargs: dict[str, Any] = {}
        for keyword in node.keywords:
            if keyword.arg is None:
                extra = self.run(keyword.value)
                if not isinstance(extra, dict):
                    raise TypeError(f"argument after ** must be a dict, not {type(extra).__name__}")
                items = list(extra.items())
            else:
                items = [(keyword.arg, self.run(keyword.value))]
            for key, value in items:
                if not isinstance(key, str) or key.startswith("_"):
                    raise Forbidden(f"keyword argument name {key!r} is not allowed")
                if key in kwargs:
                    raise TypeError(f"got multiple values for keyword argument {key!r}")
                kwargs[key] = value
        return function(*args, **kwargs)

    def _printer(self, *values: Any, sep: str | None = " ", end: str | None = "\n", **options: Any) -> None:
        if options.get("file") is not None:
            raise Forbidden("print(file=...) is not available; print output is captured and returned as stdout")
        sep = " " if sep is None else sep
        end = "\n" if end is None else end
        if not isinstance(sep, str) or not isinstance(end, str):
            raise TypeError("print() sep and end must be strings")
        self.output.write(sep.join([str(v) for v in values]) + end)

    # ------------------------------------------------------------ exceptions

    def on_try(self, node: ast.Try) -> None:
        # Aborts (BaseException) pass straight through: no handler and no finally-block runs after them.
        try:
            try:
                self._block(node.body)
            except Exception as exc:
                handler = self._matching_handler(node.handlers, exc)
                if handler is None:
                    raise
                if handler.name:
                    self.symtable[handler.name] = exc
                self._handling.append(exc)
                try:
                    self._block(handler.body)
                finally:
                    self._handling.pop()
            else:
                self._block(node.orelse)
        except Exception:
            self._finally(node.finalbody)
            raise
        self._finally(node.finalbody)

    def _matching_handler(self, handlers: list[ast.ExceptHandler], exc: Exception) -> ast.ExceptHandler | None:
        for handler in handlers:
            if handler.type is None:
                return handler
            classes = self.run(handler.type)
            classes = classes if isinstance(classes, tuple) else (classes,)
            for cls in classes:
                if not (isinstance(cls, type) and issubclass(cls, Exception)):
                    raise TypeError("except clauses must name exception classes (e.g. ValueError, ToolError)")
            if isinstance(exc, classes):
                return handler
        return None

    def on_raise(self, node: ast.Raise) -> None:
        if node.exc is None:
            if not self._handling:
                raise RuntimeError("'raise' with no exception outside an except block")
            raise self._handling[-1]
        exc = self.run(node.exc)
        if isinstance(exc, type) and issubclass(exc, Exception):
            exc = exc()
        if not isinstance(exc, Exception):
            raise TypeError("exceptions must derive from Exception")
        raise exc

    # ------------------------------------------------------------ refused outright

    def on_with(self, node: ast.With) -> None:
        raise Forbidden("'with' blocks are not available; files are read and written with tools")

    def on_import(self, node: ast.Import) -> None:
        raise Forbidden("import statements are not allowed")

    def on_importfrom(self, node: ast.ImportFrom) -> None:
        raise Forbidden("import statements are not allowed")


_MISSING = object()


class _Print:
    """What ``print`` is inside the sandbox: the evaluator's capture, behind an opaque face."""

    __slots__ = ("_write",)

    def __init__(self, write: Callable[..., None]) -> None:
        self._write = write

    def __call__(self, /, *values: Any, **options: Any) -> None:
        self._write(*values, **options)

    def __repr__(self) -> str:
        return "<built-in function print>"


_LOOP_INTERRUPTS = (ast.Break, ast.Continue)

_ASTEVAL_CONFIG: dict[str, Any] = {"nested_symtable": False}
"""All of asteval's configuration that `Procedure` reads."""


def _target_names(generators: list[ast.comprehension]) -> list[str]:
    """The names a comprehension's targets bind (saved and restored around it, as Python scopes them)."""
    names: list[str] = []
    for generator in generators:
        target = generator.target
        if target.__class__ is ast.Name:
            names.append(target.id)
        else:
            names.extend(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


_HANDLERS: dict[type, Callable[[Evaluator, Any], Any]] = {}
"""AST class -> handler, built once: asteval names its handlers ``on_<lower-case node class name>``."""
for _name, _cls in vars(ast).items():
    if isinstance(_cls, type) and issubclass(_cls, ast.AST):
        _handler = getattr(Evaluator, f"on_{_name.lower()}", None)
        if _handler is not None and _name.lower() in (*ALL_NODES, "generatorexp", "namedexpr", "annassign", "starred"):
            _HANDLERS[_cls] = _handler
