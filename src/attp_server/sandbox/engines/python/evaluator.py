"""The evaluator that runs a program: lexical scopes, allowlisted attributes, size checks, limits.

It began as a subclass of asteval's ``Interpreter`` and replaced that tree walk piece by piece; no part of
asteval's evaluation is left (asteval's published list of unsafe attribute names checks the allowlist:
`attp_server.sandbox.policy`). What it does differently from stock asteval, each for a reason:

* Scopes are CPython's (`attp_server.sandbox.engines.python.scopes`): closures capture their defining scope in cells,
  ``nonlocal``/``global`` work, comprehensions have their own scope. Stock asteval copies the whole
  symbol table into every call (dynamic scope: ``make_adder(5)(1)`` fails), at a cost per symbol.
* Each node is compiled once into a Python closure specialised for its shape (`expressions`,
  `arithmetic`, `calls`, `displays`, `statements`, `control`, `definitions`, `imports`) instead of being
  dispatched on its class every time it runs: call-heavy programs run some ten times faster. Nothing
  is compiled to CPython bytecode; every operation still goes through the policy below.
* Errors are real Python exceptions, so ``try/except`` matches by class, including ``except ToolError``.
* The deadline is a timer signal (`alarm`) and loops spend a step budget; both end the run with a
  `BaseException` subclass (`attp_server.sandbox.limits.Abort`) that no ``except`` can catch.
* ``obj.name`` goes through `policy.get_attribute`; attribute assignment and deletion are refused.
* Operators that build big values (``*``, ``**``, ``<<``, ``+``, ``%``) and format specs are size-checked.
* ``print`` writes to a capped in-memory buffer, never to a file descriptor.
* ``import m`` binds the run's curated namespace ``m``; imports of anything else end the run.
"""

from __future__ import annotations

import ast
import operator
import time
from collections.abc import Callable, Mapping
from typing import Any

from attp_server.sandbox.engines.python.expressions import Context, compile_expr
from attp_server.sandbox.engines.python.functions import locate
from attp_server.sandbox.engines.python.scopes import Scope, analyze
from attp_server.sandbox.engines.python.statements import compile_stmt
from attp_server.sandbox.engines.python.table import COMPILERS
from attp_server.sandbox.limits import (
    MAX_FORMAT_WIDTH,
    MAX_INT_BITS,
    MAX_SEQUENCE_LEN,
    Forbidden,
    SizeLimitError,
    Timeout,
)
from attp_server.sandbox.process import alarm
from attp_server.sandbox.process.tools import OutputBuffer
from attp_server.sandbox.stdlib.namespaces import check_power
from attp_server.sandbox.stdlib.reprs import plain, safe_str, shown

CHECK_EVERY = 64
"""Steps (loop iterations and calls) between two deadline checks: some tens of microseconds of evaluation."""


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


def _check_int(value: Any, what: str) -> Any:
    """`value`, unless it is an integer over `MAX_INT_BITS` (``x + x`` of the largest ones, a loop of them)."""
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise SizeLimitError(f"{what} would build an integer over {MAX_INT_BITS:,} bits")
    return value


def _add(a: Any, b: Any) -> Any:
    kinds: tuple[type, type] = (a.__class__, b.__class__)
    if kinds[0] in _NUMBERS and kinds[1] in _NUMBERS:  # the common case first
        return _check_int(a + b, "'+'")
    if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES):
        _check_len(len(a) + len(b), "'+'")
    return _check_int(a + b, "'+'")


def _sub(a: Any, b: Any) -> Any:
    return _check_int(a - b, "'-'")


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
    if isinstance(a, str):  # `%s` / `%r` of an object: its safe text, never an address
        if b.__class__ is tuple:
            if not plain(b):
                b = tuple(shown(item) for item in b)
        elif b.__class__ is dict:
            b = {key: shown(value) for key, value in b.items()}
        else:
            b = shown(b)
    return a % b


BINARY_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: _add,
    ast.Sub: _sub,
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


class Evaluator:
    """One run of one program. Build a new one per run: symbols do not survive between runs.

    Each node is compiled once into a closure (`attp_server.sandbox.engines.python.expressions`, `statements`,
    `definitions`) after the program's scopes are resolved (`attp_server.sandbox.engines.python.scopes`); `execute`
    runs the module's statements one by one.
    """

    binary_operators = BINARY_OPERATORS
    """The size-checked operators every compiled ``+``, ``*``, ``%``, ... falls back to."""

    def __init__(
        self,
        symbols: dict[str, Any],
        *,
        deadline: float,
        max_steps: int,
        output: OutputBuffer,
        modules: Mapping[str, Any] | None = None,
        allow_imports: bool = True,
    ) -> None:
        self.output = output
        self.deadline = deadline
        self.max_steps = max_steps
        self.steps = 0
        self.left = CHECK_EVERY
        self.tick_calls = not alarm.available()
        """Whether calls spend steps too: only when the deadline cannot be a timer signal (`alarm`)."""
        self.handling: list[BaseException] = []
        self.symtable = symbols
        self.modules: dict[str, Any] = dict(modules or {})
        """The modules ``import`` may name: the curated namespaces this run has, by name."""
        self.allow_imports = allow_imports
        self.imported: list[str] = []
        """Modules the program imported (the result's hint says imports are unnecessary)."""
        symbols["print"] = _Print(self._printer)
        symbols["__name__"] = "__main__"  # `if __name__ == "__main__":` runs its block, as in a script

    # ------------------------------------------------------------ running

    def execute(self, tree: ast.Module, scopes: dict[ast.AST, Scope] | None = None) -> tuple[Any, int] | None:
        """Run the program; return the value of its last top-level expression that is not None, and its line.

        `scopes` is ``analyze(tree)`` when the caller has it already (a program checked before: `checked`).
        """
        if scopes is None:
            scopes = analyze(tree)
        context = Context(COMPILERS, self, scopes[tree], scopes)
        symbols = self.symtable
        last: tuple[Any, int] | None = None
        with alarm.armed(self):
            for statement in tree.body:
                if statement.__class__ is ast.Expr:
                    value = _compiled(context, statement.value, compile_expr)(symbols)
                    if value is not None:
                        last = (value, statement.lineno)
                else:
                    _compiled(context, statement, compile_stmt)(symbols)
        return last

    def spend(self) -> None:
        """Called when the step budget's countdown runs out: count the steps, check the deadline and the limit."""
        self.steps += CHECK_EVERY + 1
        self.left = CHECK_EVERY
        if time.monotonic() > self.deadline:
            raise Timeout("the program ran past its time limit")
        if self.steps > self.max_steps:
            raise Timeout(f"the program ran more than {self.max_steps:,} steps (loop iterations and calls)")

    def _printer(self, *values: Any, sep: str | None = " ", end: str | None = "\n", **options: Any) -> None:
        if options.get("file") is not None:
            raise Forbidden("print(file=...) is not available; print output is captured and returned as stdout")
        sep = " " if sep is None else sep
        end = "\n" if end is None else end
        if not isinstance(sep, str) or not isinstance(end, str):
            raise TypeError("print() sep and end must be strings")
        self.output.write(sep.join([safe_str(v) for v in values]) + end)


def _compiled(
    context: Context, node: Any, compiler: Callable[[Context, Any], Callable[[Any], Any]]
) -> Callable[[Any], Any]:
    """Compile one top-level node, its compile-time refusals stamped with its line like run-time errors."""
    try:
        return compiler(context, node)
    except BaseException as exc:
        locate(exc, node)
        raise


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
