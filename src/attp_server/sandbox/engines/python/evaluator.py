"""The evaluator: a checked program rewritten with guards (`transform`), compiled by CPython, run under the limits.

`compile_program` makes a `Program` once per program text (the worker keeps it: `process.checked`); an
`Evaluator` runs one or two of them (the session's kept ``def``s first, then the program) in one symbol table:

* the run's globals are the symbol table the engine built (builtins the program may name, tools, modules, kept
  values) and the guards (``__attp_...``: `guards.builtins`, names no program can write); its ``__builtins__`` are
  empty, so a name the program did not define is a NameError, never one of CPython's builtins;
* the deadline is a timer signal (`process.alarm`) that raises `Timeout`, which no ``except`` catches and no
  ``finally`` outlives (`guards.catch`); with no timer (another thread), only the pool's kill ends a runaway;
* a program recurses about as deep as CPython lets a script (`PROGRAM_LEVELS`), measured from where it starts;
* an error leaves stamped with the line and column of the innermost statement (or lambda expression) of the
  program where it happened (``attp_line``, read by the worker), and a `MemoryError` leaves as `SizeLimitError`;
* ``print`` writes to the run's capped buffer; ``import m`` binds the run's curated namespace ``m``.
"""

from __future__ import annotations

import ast
import itertools
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from types import CodeType, FrameType, TracebackType
from typing import Any

from attp_server.sandbox.engines.python.guards import Imports, builtins, name
from attp_server.sandbox.engines.python.table import REWRITES
from attp_server.sandbox.engines.python.transform import Span, Transformer
from attp_server.sandbox.limits import Forbidden, SizeLimitError
from attp_server.sandbox.process import alarm
from attp_server.sandbox.process.tools import OutputBuffer
from attp_server.sandbox.stdlib.reprs import PROGRAM_FILE, safe_str

PROGRAM_LEVELS = 1_000
"""Calls a program may nest, as CPython allows a script; guards and the sandbox's own frames get a little more."""

SPARE_FRAMES = 200
"""Frames above `PROGRAM_LEVELS` for what a program's deepest call may still run (a guard, a repr, a tool stub)."""

REWRITE_FRAMES = 20_000
"""The recursion limit while a tree is rewritten (Python frames only: the rewrite nests as deep as the program)."""


class TooDeep(Exception):
    """The program nests deeper than the rewrite or CPython's compiler can follow."""


@dataclass(frozen=True)
class Program:
    """A checked program compiled: its code, where its errors are reported, and the builtins its runs start from."""

    code: CodeType
    spans: tuple[Span, ...]
    builtins: Mapping[str, Any]


def compile_program(tree: ast.Module) -> Program:
    """Rewrite `tree` (changing it) and compile it; `TooDeep` for a tree deeper than the compiler follows."""
    transformer = Transformer(REWRITES)
    default = sys.getrecursionlimit()
    sys.setrecursionlimit(max(default, REWRITE_FRAMES))
    try:
        rewritten = transformer.module(tree)
    except RecursionError:
        raise TooDeep from None
    finally:
        sys.setrecursionlimit(default)
    try:  # at the default limit, as the static check compiled the program
        code = compile(rewritten, PROGRAM_FILE, "exec", dont_inherit=True, optimize=0)
    except (RecursionError, MemoryError):
        raise TooDeep from None
    table = {**builtins(transformer.attributes), **transformer.constants}
    return Program(_plain_names(code), tuple(transformer.spans), table)


def _plain_names(code: CodeType) -> CodeType:
    """`code` with every function's qualified name its plain name (``inner()`` missing an argument, not
    ``outer.<locals>.inner()``: what the model was always told)."""
    consts = tuple(_plain_names(c) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.replace(co_qualname=code.co_name, co_consts=consts)


class Evaluator:
    """One run: the symbol table `symbols` (the program's globals), the deadline, the output, the imports.

    Build a new one per run: symbols do not survive between runs.
    """

    def __init__(
        self,
        symbols: dict[str, Any],
        *,
        deadline: float,
        output: OutputBuffer,
        modules: Mapping[str, Any] | None = None,
        allow_imports: bool = True,
    ) -> None:
        self.output = output
        self.deadline = deadline
        """When the run ends (`time.monotonic()`); a tool call's pause for a person moves it later."""
        self.symtable = symbols
        self.imports = Imports(dict(modules or {}), allow_imports, symbols)
        self.last: tuple[Any, int] | None = None
        symbols["print"] = _Print(self._printer)
        symbols["__name__"] = "__main__"  # `if __name__ == "__main__":` runs its block, as in a script

    @property
    def imported(self) -> list[str]:
        """Modules the program imported (the result's hint says imports are unnecessary)."""
        return self.imports.imported

    def execute(self, program: ast.Module | Program, before: Program | None = None) -> tuple[Any, int] | None:
        """Run `before` (the session's kept definitions), then `program` (compiled now if it is a tree); return
        the value of the program's last top-level expression that is not None, and its line."""
        if isinstance(program, ast.Module):
            program = compile_program(program)
        programs = [p for p in (before, program) if p is not None]
        symbols = self.symtable
        for each in programs:  # in the globals, not the builtins: one look-up from the module's own code, not three
            symbols.update(each.builtins)
        imports = self.imports
        symbols[name("import")] = imports.module
        symbols[name("import_from")] = imports.member
        symbols[name("import_star")] = imports.everything
        symbols[name("last")] = self._last
        symbols["__builtins__"] = {}  # none of CPython's: a name the program did not define is a NameError
        with alarm.armed(self), _deep():
            try:
                for each in programs:
                    exec(each.code, symbols)  # noqa: S102 - the checked program, rewritten with its guards
            except BaseException as exc:
                where = _locate(exc, [span for each in programs for span in each.spans])
                if isinstance(exc, MemoryError):
                    line = where[0] if where else "?"
                    error = SizeLimitError(f"the program ran out of memory at line {line}")
                    _stamp(error, where)
                    raise error from None
                raise
        return self.last

    def _last(self, value: Any, line: int) -> Any:
        if value is not None:
            self.last = (value, line)
        return value

    def _printer(self, *values: Any, sep: str | None = " ", end: str | None = "\n", **options: Any) -> None:
        if options.get("file") is not None:
            raise Forbidden("print(file=...) is not available; print output is captured and returned as stdout")
        sep = " " if sep is None else sep
        end = "\n" if end is None else end
        if not isinstance(sep, str) or not isinstance(end, str):
            raise TypeError("print() sep and end must be strings")
        self.output.write(sep.join([safe_str(v) for v in values]) + end)


@contextmanager
def _deep() -> Iterator[None]:
    """Room for `PROGRAM_LEVELS` of the program's calls above the frames running it now."""
    default = sys.getrecursionlimit()
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    sys.setrecursionlimit(depth + PROGRAM_LEVELS + SPARE_FRAMES)
    try:
        yield
    finally:
        sys.setrecursionlimit(default)


def _locate(exc: BaseException, spans: list[Span]) -> tuple[int, int | None] | None:
    """Stamp `exc` with where it happened in the program (unless it carries a place already); return that place."""
    where: tuple[int, int | None] | None = getattr(exc, "attp_line", None)
    if where is None:
        where = _innermost(exc.__traceback__, spans)
        _stamp(exc, where)
    if isinstance(exc, NameError) and getattr(exc, "name", None) is None:  # CPython names only undefined globals
        text = str(exc)
        start = text.find("'")
        if start >= 0 and text.find("'", start + 1) > start:
            with suppress(AttributeError):
                exc.name = text[start + 1 : text.find("'", start + 1)]
    return where


def _stamp(exc: BaseException, where: tuple[int, int | None] | None) -> None:
    if where is not None:
        with suppress(AttributeError):
            exc.attp_line = where  # type: ignore[attr-defined]


def _innermost(tb: TracebackType | None, spans: list[Span]) -> tuple[int, int | None] | None:
    """The statement (or lambda expression) of the program's innermost frame in `tb` that was running."""
    found: TracebackType | None = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == PROGRAM_FILE:
            found = tb
        tb = tb.tb_next
    if found is None:
        return None
    line, column = found.tb_lineno, None
    position = next(itertools.islice(found.tb_frame.f_code.co_positions(), found.tb_lasti // 2, None), None)
    if position is not None and position[0] is not None and position[2] is not None:
        line, column = position[0], position[2]
    best: Span | None = None
    for span in spans:  # in the order they were met: a node's own spans come after its parent's
        if _inside(line, column, span) and (best is None or _inside(span[0], span[1], best)):
            best = span
    if best is None:
        return (found.tb_lineno, None)
    return (best[4], best[5])


def _inside(line: int, column: int | None, span: Span) -> bool:
    if column is None:
        return span[0] <= line <= span[2]
    return (span[0], span[1]) <= (line, column) <= (span[2], span[3])


class _Print:
    """What ``print`` is inside the sandbox: the evaluator's capture, behind an opaque face."""

    __slots__ = ("_write",)

    def __init__(self, write: Callable[..., None]) -> None:
        self._write = write

    def __call__(self, /, *values: Any, **options: Any) -> None:
        self._write(*values, **options)

    def __repr__(self) -> str:
        return "<built-in function print>"
