"""The guards a checked program calls: the policy at the few places where CPython alone would not apply it.

`transform` rewrites a program so that CPython runs it at its own speed and calls these where the sandbox's
rules need a look at a value (the table of which node becomes what is `table`). Each guard is named in the run's
builtins as ``__attp_<name>`` (`builtins`), a name no program can write (the static check refuses ``__`` names),
so nothing but the rewritten code reaches them:

* ``obj.name`` goes through the attribute allowlist (`policy.get_attribute`), except for a value whose type
  the allowlist opens ``name`` on plainly: the rewritten code checks ``type(obj)`` against `plain_types` inline and
  reads the attribute natively (``text.lower()`` costs one type check more than in CPython).
* What shows a value as text (``str(x)``, f-strings, ``%`` on a template, ``print``) shows its safe text
  (`stdlib.reprs`): never an address, never an internal path.
* What builds a huge value from a small program text gets a size check with a message the model can act on:
  ``**`` and ``<<`` always, ``*`` with a literal sequence (``'-' * n``, ``[0] * n``), ``%`` on text, format
  specs. Any other growth (``s + s`` in a loop) is bounded by the worker's memory limit and the deadline.
* An `Abort` (the deadline, a size limit, a refusal) and a `MemoryError` pass every ``except`` clause and skip
  every ``finally`` block (`catch`, `aborting`): no program code runs once the run is ending.
* ``raise`` raises only exceptions (`raised`), ``f(**kw)`` passes only keyword names a program could write
  (`keywords`), and ``import m`` binds only the run's curated namespaces (`Imports`).
"""

from __future__ import annotations

import ast
import difflib
import operator
import sys
from collections.abc import Callable, Iterable, Mapping
from types import FunctionType
from typing import Any

from attp_server.sandbox.limits import (
    INT_BOUND,
    MAX_FORMAT_WIDTH,
    MAX_INT_BITS,
    MAX_SEQUENCE_LEN,
    Abort,
    Forbidden,
    ImportForbidden,
    SizeLimitError,
)
from attp_server.sandbox.policy import get_attribute, plain_types
from attp_server.sandbox.stdlib.namespaces import check_format_spec, check_power
from attp_server.sandbox.stdlib.reprs import PROGRAM_FILE, plain, safe_str, shown

PREFIX = "__attp_"
"""Every name the rewritten code adds starts with this (no program can write a name starting with ``__``)."""

SCALARS = frozenset({str, int, float, bool, type(None)})
"""Types whose own text, repr and format are always safe: the rewritten code lets CPython format them itself."""


# ---------------------------------------------------------------- size-checked operators


def _check_len(size: int, what: str) -> None:
    if size > MAX_SEQUENCE_LEN:
        raise SizeLimitError(f"{what} would build {size:,} items; the limit is {MAX_SEQUENCE_LEN:,}")


def _check_int(value: Any, what: str) -> Any:
    """`value`, unless it is an integer over `MAX_INT_BITS`."""
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise SizeLimitError(f"{what} would build an integer over {MAX_INT_BITS:,} bits")
    return value


_SEQUENCES = (str, bytes, bytearray, list, tuple)


def add(a: Any, b: Any) -> Any:
    """``a + b`` that refuses a sequence over `MAX_SEQUENCE_LEN` items or an integer over `MAX_INT_BITS`."""
    if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES):
        _check_len(len(a) + len(b), "'+'")
    return _check_int(a + b, "'+'")


def sub(a: Any, b: Any) -> Any:
    return _check_int(a - b, "'-'")


def mul(a: Any, b: Any) -> Any:
    """``a * b`` that refuses a repeated sequence over `MAX_SEQUENCE_LEN` items or an integer over `MAX_INT_BITS`."""
    if a.__class__ is float or b.__class__ is float:  # a float product is a float (or an error), never big
        return a * b
    if isinstance(b, _SEQUENCES) and isinstance(a, int):
        a, b = b, a
    if isinstance(a, _SEQUENCES) and isinstance(b, int):
        _check_len(len(a) * b, "'*'")
    elif isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > MAX_INT_BITS:
        raise SizeLimitError(f"'*' would build an integer over {MAX_INT_BITS:,} bits")
    return a * b


def power(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        check_power(a, b)
    return a**b


def lshift(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int) and a and a.bit_length() + b > MAX_INT_BITS:
        raise SizeLimitError(f"'<<' would build an integer over {MAX_INT_BITS:,} bits")
    return a << b


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


def mod(a: Any, b: Any) -> Any:
    """``a % b``: a %-format template's widths checked, and its arguments shown by their safe text."""
    if a.__class__ is int:  # the common case first: a remainder
        return a % b
    if isinstance(a, str | bytes | bytearray):  # a bytes template shows its arguments too (``b'%r' % f``)
        _check_percent_format(a)
        if b.__class__ is tuple:
            if not plain(b):
                b = tuple(shown(item) for item in b)
        elif b.__class__ is dict:
            b = {key: shown(value) for key, value in b.items()}
        else:
            b = shown(b)
    return a % b


BINARY_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: add,
    ast.Sub: sub,
    ast.Mult: mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: mod,
    ast.Pow: power,
    ast.LShift: lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
    ast.MatMult: operator.matmul,
}
"""The size-checked operators (``operator.add`` of the curated ``operator`` module is `add`, and so on)."""


def over(value: Any, op: str) -> Any:
    """The end of a run whose ``+``, ``-`` or ``*`` (`op`) built an integer past `MAX_INT_BITS`."""
    raise SizeLimitError(f"'{op}' would build an integer over {MAX_INT_BITS:,} bits")


def checked(value: Any, op: str) -> Any:
    """`value`, unless it is an integer past `MAX_INT_BITS` (where the rewritten code cannot check it inline)."""
    if value.__class__ is int and not _LOW < value < INT_BOUND:
        over(value, op)
    return value


_LOW = -INT_BOUND

COMPACT = (1 << 30) - 1
"""Integers strictly within this of 0 are small enough for CPython's fastest comparison, and far within the limit:
the rewritten code lets them through inline and hands anything else to `checked`."""


# ---------------------------------------------------------------- text


def text(function: Any, value: Any) -> Any:
    """``str(value)`` where ``str`` is the builtin: the value's safe text; any other function a program named
    ``str`` is called as it is."""
    if function is str:
        return safe_str(value)
    return function(value)


def text_call(function: Any, /, *args: Any, **kwargs: Any) -> Any:
    """``str(...)`` with any other arguments: ``str(*[x])`` and ``str(object=x)`` are safe text too."""
    if function is str and len(args) + len(kwargs) == 1 and (args or "object" in kwargs):
        return safe_str(args[0] if args else kwargs["object"])
    return function(*args, **kwargs)


def spec(format_spec: str) -> str:
    """A format spec computed at run time (``f'{x:>{width}}'``), refused past the width limit."""
    check_format_spec(format_spec)
    return format_spec


# ---------------------------------------------------------------- exceptions


def aborting() -> bool:
    """Whether the exception being handled ends the run: an `Abort`, a `MemoryError`, or an error raised while one
    was on its way (a handler's own clause at the recursion limit)."""
    exc = sys.exc_info()[1]
    for _ in range(100):
        if exc is None:
            return False
        if isinstance(exc, Abort | MemoryError):
            return True
        exc = exc.__context__
    return False


def catch(classes: Any) -> Any:
    """What an ``except`` clause matches (asked only when the run is not ending: `aborting`): its classes, all of
    them exceptions; a bare ``except:`` is ``except Exception:``."""
    if classes is None:
        return Exception
    for cls in classes if isinstance(classes, tuple) else (classes,):
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            raise TypeError("except clauses must name exception classes (e.g. ValueError, ToolError)")
    return classes


def raised(exc: Any) -> Any:
    """What ``raise exc`` may raise: an exception or an exception class, nothing else (no `BaseException`)."""
    if isinstance(exc, Exception) or (isinstance(exc, type) and issubclass(exc, Exception)):
        return exc
    raise TypeError("exceptions must derive from Exception")


def cause(reason: Any) -> Any:
    """What ``raise exc from reason`` may chain: an exception, an exception class, or None."""
    if reason is None or isinstance(reason, Exception) or (isinstance(reason, type) and issubclass(reason, Exception)):
        return reason
    raise TypeError("exception causes must derive from Exception")


# ---------------------------------------------------------------- calls


def _own(function: Any) -> bool:
    """Whether `function` is one the program defined (its parameters may start with one ``_``)."""
    return function.__class__ is FunctionType and function.__code__.co_filename == PROGRAM_FILE


def keywords(function: Any, mapping: Any) -> Any:
    """``f(**mapping)``: a dict whose keys are names a program could pass (no ``__``; no ``_`` to what the
    program did not define)."""
    if not isinstance(mapping, dict):
        raise TypeError(f"argument after ** must be a dict, not {type(mapping).__name__}")
    own = _own(function)
    for key in mapping:
        if not isinstance(key, str) or (key.startswith("_") and not (own and not key.startswith("__"))):
            raise Forbidden(f"keyword argument name {key!r} is not allowed")
    return mapping


def call(function: Any, /, *args: Any, **kwargs: Any) -> Any:
    """A call with a literal keyword starting with ``_``: allowed only into a function of the program's own."""
    for key in kwargs:
        if key.startswith("__") or not _own(function):
            raise Forbidden(f"keyword argument name {key!r} is not allowed")
    return function(*args, **kwargs)


# ---------------------------------------------------------------- imports


class Imports:
    """``import`` for one run: the curated namespaces it has (`modules`), recording what was imported."""

    def __init__(self, modules: Mapping[str, Any], allow: bool, symbols: dict[str, Any]) -> None:
        self.modules = modules
        self.allow = allow
        self.symbols = symbols
        self.imported: list[str] = []
        """Modules the program imported with ``import x`` though it has them by name (the result's hint says that
        import is unnecessary). ``from x import y`` binds a name the program lacks, so it is not one of them."""

    def module(self, name: str) -> Any:
        """``import name``: the namespace `name` names for this run, or `ImportForbidden`."""
        space = self._space(name)
        if name not in self.imported:
            self.imported.append(name)
        return space

    def _space(self, name: str) -> Any:
        modules = self.modules
        if not self.allow:
            raise ImportForbidden(
                f"import statements are not allowed on this server (found import of {name}). "
                f"Pre-injected modules: {', '.join(modules)}; delete the import line and use them by name."
            )
        space = modules.get(name)
        if space is None:
            raise ImportForbidden(unavailable(name, list(modules)))
        return space

    def member(self, module: str, name: str) -> Any:
        """``from module import name``."""
        space = self._space(module)
        try:
            return space.members[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(space.members), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ImportForbidden(f"cannot import name {name!r} from {module}{hint}") from None

    def everything(self, module: str) -> None:
        """``from module import *`` (at the top level only, as in Python)."""
        self.symbols.update(self._space(module).members)


def unavailable(name: str, modules: Iterable[str]) -> str:
    """The message for an import of a module the run does not have."""
    names = list(modules)
    close = difflib.get_close_matches(name.split(".", maxsplit=1)[0], names, n=1)
    hint = f" Did you mean {close[0]}?" if close else ""
    return (
        f"module {name!r} is not available in the sandbox.{hint} Available modules: {', '.join(names)} "
        "(already loaded: use them by name, no import needed); tools are called directly by name."
    )


# ---------------------------------------------------------------- the run's builtins


STATIC: dict[str, Any] = {
    "type": type,
    "attr": get_attribute,
    "scalars": SCALARS,
    "int": int,
    "str": text,
    "str_call": text_call,
    "shown": shown,
    "spec": spec,
    "pow": power,
    "lshift": lshift,
    "mul": mul,
    "mod": mod,
    "over": over,
    "checked": checked,
    "low": -COMPACT,
    "high": COMPACT,
    "catch": catch,
    "nothing": (),
    "aborting": aborting,
    "raise": raised,
    "cause": cause,
    "kwargs": keywords,
    "call": call,
}
"""Guards that hold no state of a run, by their name after `PREFIX`."""


def name(guard: str) -> str:
    """The builtin name the rewritten code calls `guard` by."""
    return PREFIX + guard


def plain_name(attribute: str, kind: str = "p") -> str:
    """The builtin name of the types `attribute` is plainly read on (`plain_types`), or with `kind` ``f``, of the
    commonest of them (`usual_type`)."""
    return f"{PREFIX}{kind}_{attribute}"


_USUAL = (str, list, dict, int, float, tuple, set, frozenset, bytes, bytearray)
"""The types a program's values most often have, commonest first."""


def usual_type(attribute: str) -> type | None:
    """The type the rewritten code compares a value's with first, before the set of `plain_types`."""
    types = plain_types(attribute)
    return next((kind for kind in _USUAL if kind in types), next(iter(types), None))


def builtins(attributes: Iterable[str]) -> dict[str, Any]:
    """The builtins of a program's runs: every static guard, and the plain types of each attribute it reads."""
    table = {name(guard): value for guard, value in STATIC.items()}
    for attribute in attributes:
        table[plain_name(attribute)] = plain_types(attribute)
        table[plain_name(attribute, "f")] = usual_type(attribute)
    return table
