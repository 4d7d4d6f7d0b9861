"""The ``asteval`` engine's worker side: asteval's own `Interpreter` over the sandbox's symbols, one run.

A run's symbol table holds what the ``python`` engine offers and nothing of asteval's default table (which
has a read-only ``open``, and numpy when it is installed): the checked builtins and exception classes,
``ToolError``, the curated modules and each toolpack as read-only modules (`Module`), the tool stubs, ``help``,
``tools``, ``parallel`` and ``print`` into the run's capped buffer. Everything else is asteval's: its parser,
its node handlers, its attribute rules (no dunders, no ``str.format``), its size checks on ``**``, ``<<``
and string ``*``/``+``, its scoping (a function sees the module's names when it is called; its own
assignments are dropped when it returns) and its ``try`` (a handler's class is looked up among Python's
builtins: ``except ToolError`` catches every error).

What the engine adds to asteval, each because the contract needs it:

- ``import m`` and ``from m import x`` bind the curated modules (asteval's own import is off and would
  import real modules); any other module is `ImportForbidden`, as on the ``python`` engine.
- A tool's ``ToolError`` travels whole (asteval raises a fresh copy of an exception's class with its
  own message, which would lose ``e.code`` and the other fields).
- asteval has no time limit: the worker's deadline alarm (`alarm.armed`) stops the run, its CPU limit
  and the server's kill stop a C-level call, and the run's recursion limit is raised as on ``python``.
- Its errors (asteval records them in a list) become the exception the worker maps (`failures`).

asteval lets a program set any attribute that is not a dunder on what it reaches (a function, a class the
symbols hold), and reach a tool stub's bridge (`ToolStub._invoke`): a worker that ran an asteval program is
never given another (`Engine.reuse`), and what it sends is checked by the server like any worker's.
"""

from __future__ import annotations

import ast
import os
import random
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

from attp_server.sandbox.engines import Answer, import_hint
from attp_server.sandbox.engines.asteval import lacks
from attp_server.sandbox.engines.asteval.failures import failure
from attp_server.sandbox.limits import Abort, Forbidden, ImportForbidden
from attp_server.sandbox.policy import scan, without_numpy
from attp_server.sandbox.process import alarm, keep
from attp_server.sandbox.process.tools import OutputBuffer, Print, ToolBridge, ToolError, tool_symbols
from attp_server.sandbox.stdlib.modules import build_namespaces, run_namespaces
from attp_server.sandbox.stdlib.namespaces import MODULE_NAMES, SAFE_BUILTIN_FUNCTIONS, SAFE_EXCEPTIONS, Namespace
from attp_server.sandbox.stdlib.reprs import name_modules

RECURSION_LIMIT = 6000
"""Python frames a run may nest. asteval spends about seven frames on each level of a program's own recursion
(`tests/test_asteval_engine.py` measures it: some 800 levels); a recursion past it is a clean RecursionError."""


def _interpreter_class() -> type[Any]:
    """asteval's `Interpreter`, imported without numpy (`policy.without_numpy`): asteval loads numpy when it can,
    and never needs it here (its numpy table is not used), while numpy's BLAS would start a thread before the
    lockdown."""

    def load() -> type[Any]:
        from asteval import Interpreter

        return Interpreter  # type: ignore[no-any-return]

    return _subclass(without_numpy(load))


def _subclass(base: type[Any]) -> type[Any]:
    class Interpreter(base):  # type: ignore[misc]
        """asteval's `Interpreter`, with a tool's `ToolError` kept whole as it crosses asteval's levels."""

        def raise_exception(
            self, node: Any, exc: Any = None, msg: str = "", expr: Any = None, lineno: Any = None
        ) -> Any:
            handling = sys.exc_info()[1]
            try:
                return super().raise_exception(node, exc=exc, msg=msg, expr=expr, lineno=lineno)
            except ToolError as fresh:
                if isinstance(handling, ToolError) and handling.from_server:
                    raise handling from None  # the tool's own error, every field of it, not asteval's copy
                raise fresh from None

    return Interpreter


class Module(Namespace):
    """A curated module or a toolpack as asteval reaches it: its members as attributes (`Namespace.__getattr__`),
    its table read-only (a module is shared by every run of the worker's life)."""

    __slots__ = ()

    def __init__(self, space: Namespace) -> None:
        super().__init__(space.name, space.members)
        object.__setattr__(self, "members", MappingProxyType(self.members))


class _Writer:
    """asteval's own ``writer``, never the real stdout (its ``print`` is replaced; this catches anything else)."""

    def __init__(self, output: OutputBuffer) -> None:
        self.output = output

    def write(self, text: str) -> None:
        self.output.write(str(text))

    def flush(self) -> None:
        pass


class Asteval:
    """The engine's side of a worker: built once, before the lockdown (asteval and the curated modules load then)."""

    def __init__(self) -> None:
        self.interpreter = _interpreter_class()
        self.namespaces = build_namespaces()
        name_modules(self.namespaces)
        self.base_symbols: dict[str, Any] = {**SAFE_BUILTIN_FUNCTIONS, **SAFE_EXCEPTIONS, "ToolError": ToolError}

    def start(self, job: Mapping[str, Any], tools: ToolBridge, output: OutputBuffer, deadline: float) -> AstevalRun:
        return AstevalRun(self, job, tools, output, deadline)


class AstevalRun:
    """One program on asteval's `Interpreter`."""

    check_s: float | None = None

    def __init__(
        self, engine: Asteval, job: Mapping[str, Any], tools: ToolBridge, output: OutputBuffer, deadline: float
    ) -> None:
        self.engine = engine
        self.job = job
        self.tools = tools
        self.output = output
        self.deadline = deadline
        self.modules: dict[str, Module] = {}
        self.interpreter: Any = None
        self.base: dict[str, Any] = {}
        self.tree = ast.Module(body=[], type_ignores=[])
        self.restored: keep.Restored | None = None
        self.imported: list[str] = []
        self.line: int | None = None
        """The top-level statement running (where an abort without a line of its own is placed)."""
        self.ran = False

    @property
    def symbols(self) -> dict[str, Any]:
        """The run's names now: asteval puts a copy of its table in place each time a function returns."""
        return self.interpreter.symtable if self.interpreter is not None else {}

    def names(self) -> list[str]:
        return list(self.symbols)

    def execute(self) -> Answer:
        engine, job, code = self.engine, self.job, str(self.job["code"])
        spaces = run_namespaces(engine.namespaces, job.get("modules", MODULE_NAMES), random.Random(os.urandom(16)))
        self.modules = {name: Module(space) for name, space in spaces.items()}
        symbols: dict[str, Any] = {**engine.base_symbols, **self.modules}
        for name, value in tool_symbols(job, self.tools, reserved=symbols).items():
            symbols[name] = Module(value) if isinstance(value, Namespace) else value
        printer = symbols["print"] = Print(self.output)
        symbols["__name__"] = "__main__"
        interpreter = engine.interpreter(
            symtable=symbols,
            use_numpy=False,
            writer=_Writer(self.output),
            err_writer=_Writer(self.output),
            max_statement_length=max(len(code), 1),
        )
        interpreter.symtable["print"] = printer  # asteval put its own there (it ignores end=)
        interpreter.node_handlers["import"] = self._import
        interpreter.node_handlers["importfrom"] = self._import_from
        self.interpreter = interpreter
        interpreter.expr = code  # asteval records an error only while it has the text being run
        try:
            parsed = interpreter.parse(code)
        except Exception:  # recorded in asteval's list
            parsed = None
        self._raise_recorded(interpreter)
        assert isinstance(parsed, ast.Module)
        lacking = lacks.lacking(parsed)
        if lacking is not None:
            raise _placed(Forbidden(lacking[0]), lacking[1])
        state = job.get("state")
        if isinstance(state, dict):
            self.restored = keep.restore(state, self.symbols)
        definitions = self.restored.definitions if self.restored is not None else []
        self.tree = ast.Module(body=[*definitions, *parsed.body], type_ignores=[])
        self.base = dict(self.symbols)
        self.tools.pauses.listen(self._extend_deadline)
        last: tuple[Any, int | None] | None = None
        with alarm.armed(self), _recursion(RECURSION_LIMIT):
            if self.restored is not None:
                self.symbols.update(self.restored.values)
            self.ran = True
            for statement in self.tree.body:  # functions kept from earlier calls first, defined again
                value = self._statement(interpreter, statement)
                if isinstance(statement, ast.Expr) and value is not None:
                    last = (value, statement.lineno)
        hint = import_hint(self.imported) if self.imported else None
        return Answer(self.symbols, last, hint)

    def kept(self) -> dict[str, Any] | None:
        """The session state the run leaves (None: exactly the state it was given)."""
        if not self.ran:
            return None
        try:
            collected = keep.collect(
                self.symbols, self.base, self.tree, max_bytes=int(self.job["limits"].get("max_state_bytes", 0))
            )
        except (MemoryError, RecursionError):
            return None
        if self.restored is not None:
            for name, reason in self.restored.dropped.items():
                collected.dropped.setdefault(name, reason)
        if keep.unchanged(collected, self.job.get("state")):
            return None
        return collected.as_message()

    # ------------------------------------------------------------ the hooks

    def _statement(self, interpreter: Any, statement: ast.stmt) -> Any:
        """Run one top-level statement; raise what it failed with."""
        self.line = statement.lineno
        try:
            value = interpreter.run(statement, lineno=statement.lineno)
        except Abort as abort:
            if not hasattr(abort, "attp_line") and statement.lineno < keep.FIRST_LINE:
                abort.attp_line = (statement.lineno, None)  # type: ignore[attr-defined]
            raise
        except Exception:  # recorded in asteval's list, read below
            value = None
        except BaseException as exc:  # no route out of the run for SystemExit, KeyboardInterrupt and their kin
            raise RuntimeError(f"{type(exc).__name__} cannot be raised here") from None
        self._raise_recorded(interpreter)
        return value

    def _raise_recorded(self, interpreter: Any) -> None:
        if interpreter.error:
            raised = failure(interpreter.error, self.line)
            if raised is not None:
                raise raised

    def _import(self, node: ast.Import) -> None:
        self._check_import(node)
        for alias in node.names:
            if alias.name not in self.imported:  # ``import x`` of a module it has by name: the hint says so
                self.imported.append(alias.name)
            self.symbols[alias.asname or alias.name] = self.modules[alias.name]

    def _import_from(self, node: ast.ImportFrom) -> None:
        self._check_import(node)
        if node.module == "__future__":
            return  # a compiler directive, nothing to bind
        module = self.modules[node.module or ""]  # (``from x import y`` binds a name it lacks: no hint)
        for alias in node.names:
            if alias.name not in module.members:
                raise _placed(ImportForbidden(f"cannot import name {alias.name!r} from {module.name!r}"), node)
            self.symbols[alias.asname or alias.name] = module.members[alias.name]

    def _check_import(self, node: ast.Import | ast.ImportFrom) -> None:
        """Refuse the import as the ``python`` engine's check does: a module the run does not have, or any import
        when `allow_imports` is false."""
        allowed = bool(self.job.get("allow_imports", True))
        refused = scan(ast.Module(body=[node], type_ignores=[]), modules=self.modules, allow_imports=allowed)
        if refused:
            kind = Forbidden if refused[0].code == "FORBIDDEN" else ImportForbidden
            raise _placed(kind(refused[0].message), node)

    def _extend_deadline(self, seconds: float) -> None:
        self.deadline += seconds


def _placed(error: Abort, node: ast.AST) -> Abort:
    error.attp_line = (getattr(node, "lineno", None), getattr(node, "col_offset", None))  # type: ignore[attr-defined]  # read by the worker
    return error


@contextmanager
def _recursion(limit: int) -> Iterator[None]:
    default = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        sys.setrecursionlimit(default)
