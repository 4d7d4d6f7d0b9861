"""The ``cpython`` engine's worker side: one program, as real CPython, in a worker locked down after `preload`.

`CPythonRun.execute` compiles the program (a final expression statement is evaluated apart, for its value;
top-level ``await`` runs on the worker's own loop), runs it in a fresh ``__main__`` module that holds the tools
(``name(...)``, ``pack.tool(...)``, ``parallel``, ``help``, ``tools``), ``ToolError``, ``show`` and the curated
modules by name, with ``print`` (stdout and stderr) going into the run's capped buffer, files through the files
pack (`files`), imports limited to what was preloaded (`imports`), and the deadline's alarm armed. What the
program raised is placed at its line and re-raised for the worker, which maps it to the run's error as it does
for every engine; its answer is made plain data (`plain`), its pictures PNG (`pictures`), and under a handle what
it leaves is pickled for the next call (`state`).

Runs in the worker. Imports nothing above `attp_server.sandbox`.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import inspect
import io
import linecache
import sys
import traceback
import types
from collections.abc import Mapping
from typing import Any

from attp_server.sandbox.engines import Answer
from attp_server.sandbox.engines.cpython import loop
from attp_server.sandbox.engines.cpython.files import Files
from attp_server.sandbox.engines.cpython.imports import Preloaded
from attp_server.sandbox.engines.cpython.pictures import Pictures
from attp_server.sandbox.engines.cpython.plain import TooLarge, plain
from attp_server.sandbox.engines.cpython.preload import Loaded
from attp_server.sandbox.engines.cpython.state import collect, definitions, restore
from attp_server.sandbox.engines.starlark.source import EngineUnavailable
from attp_server.sandbox.policy import RESULT_NAME
from attp_server.sandbox.process import alarm
from attp_server.sandbox.process.tools import META_TOOLS, OutputBuffer, ToolBridge, ToolError, tool_symbols
from attp_server.sandbox.stdlib.namespaces import Namespace

PROGRAM_FILE = "<program>"
"""The file name the program is compiled under: its frames are found by it in a traceback."""

_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


class ProgramExit(Exception):
    """The program called ``sys.exit`` (or ``exit``) with a failure status."""


class _Clock:
    """The run's deadline, which a pause for an approval moves (the alarm reads it)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def extend(self, seconds: float) -> None:
        self.deadline += seconds


class _Output(io.TextIOBase):
    """``sys.stdout`` and ``sys.stderr`` while a program runs: everything into the run's capped buffer."""

    def __init__(self, buffer: OutputBuffer) -> None:
        self.buffer_ = buffer

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.buffer_.write(text if isinstance(text, str) else str(text))
        return len(text)


class _PlainArguments:
    """The run's `ToolBridge`, with numpy and pandas values in a call's arguments made plain data first."""

    def __init__(self, bridge: ToolBridge, max_bytes: int) -> None:
        self.bridge, self.max_bytes, self.pauses = bridge, max_bytes, bridge.pauses

    @property
    def count(self) -> int:
        return self.bridge.count

    @count.setter
    def count(self, value: int) -> None:
        self.bridge.count = value

    def __call__(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            args = tuple(plain(list(args), self.max_bytes))
            kwargs = {key: plain(value, self.max_bytes) for key, value in kwargs.items()}
        except TooLarge as exc:
            raise ToolError.from_reply({"code": "INVALID_ARGUMENT", "message": str(exc), "tool_name": name}) from None
        return self.bridge(name, args, kwargs)


class CPythonEngine:
    """Built once per worker (the packages were loaded by `preload`, in the fork server)."""

    def start(self, job: Mapping[str, Any], tools: ToolBridge, output: OutputBuffer, deadline: float) -> CPythonRun:
        return CPythonRun(job, tools, output, deadline)


class CPythonRun:
    """One program on real CPython."""

    check_s: float | None = None

    def __init__(self, job: Mapping[str, Any], tools: ToolBridge, output: OutputBuffer, deadline: float) -> None:
        self.job = job
        self.output = output
        self.limits = job["limits"]
        self.clock = _Clock(deadline)
        tools.pauses.listen(self.clock.extend)
        self.calls = _PlainArguments(tools, int(self.limits.get("max_result_bytes", 1 << 20)) * 64)
        self.namespace: dict[str, Any] | None = None
        self.given: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        self.hints: list[str] = []
        self.before: dict[str, Any] | None = None
        """What the handle kept before this run (None: nothing, or it could not be read)."""

    def names(self) -> list[str]:
        return [*(self.namespace or {}), *dir(builtins)]

    def execute(self) -> Answer:
        if not Loaded.done:
            raise EngineUnavailable("engine 'cpython' runs only in workers started for it; this one was not")
        code = str(self.job["code"])
        tree = ast.parse(code, PROGRAM_FILE)
        namespace = self._module()
        self._restore(namespace)
        self.sources.update(definitions(tree, code))
        linecache.cache[PROGRAM_FILE] = (len(code), None, code.splitlines(keepends=True), PROGRAM_FILE)
        body, last = _split(tree)
        files = Files(self.calls)
        pictures = Pictures(int(self.limits["max_result_bytes"]))
        namespace["show"] = self.given["show"] = pictures.show
        value: Any = None
        with _Installed(self.output, files, pictures):
            try:
                with alarm.armed(self.clock):
                    _run(compile(body, PROGRAM_FILE, "exec", _FLAGS), namespace)
                    if last is not None:
                        value = _run(compile(last, PROGRAM_FILE, "eval", _FLAGS), namespace)
                    images = pictures.finish()
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    raise _placed(ProgramExit(f"the program called exit({exc.code!r})"), exc) from None
                images = pictures.finish()
                last = None
            except BaseException as exc:
                raise _placed(exc, exc) from None
            finally:
                problems = files.close_all()
        if problems:
            self.hints.append("Not written: " + "; ".join(problems))
        if pictures.hint():
            self.hints.append(str(pictures.hint()))
        return self._answer(namespace, value, last, images)

    def _module(self) -> dict[str, Any]:
        """A fresh ``__main__`` holding what every program finds by name."""
        module = types.ModuleType("__main__")
        sys.modules["__main__"] = module
        namespace = module.__dict__
        namespace["__builtins__"] = builtins
        curated = {name: sys.modules[name] for name in self.job.get("modules", []) if name in sys.modules}
        reserved = {*dir(builtins), *curated, "ToolError", "show"} - set(META_TOOLS)  # help() is the catalog's
        tools = tool_symbols(self.job, self.calls, reserved=reserved)  # type: ignore[arg-type]
        for name, value in tools.items():
            if isinstance(value, Namespace):  # a pack's tools as attributes (the evaluator reads `members` instead)
                tools[name] = types.SimpleNamespace(**value.members)
        self.given = {**curated, **tools, "ToolError": ToolError}
        namespace.update(self.given)
        self.namespace = namespace
        return namespace

    def _restore(self, namespace: dict[str, Any]) -> None:
        state = self.job.get("state")
        blob = state.get("pickle") if isinstance(state, dict) else None
        if not isinstance(blob, str) or not blob:
            return
        restored = restore(blob, namespace)
        self.before = restored.kept
        self.sources.update(restored.sources)
        if restored.dropped:
            names = "; ".join(f"{name} ({why})" for name, why in list(restored.dropped.items())[:5])
            self.hints.append(f"Not restored from the earlier calls: {names}")

    def _answer(self, namespace: dict[str, Any], value: Any, last: ast.Expression | None, images: list[Any]) -> Answer:
        max_bytes = int(self.limits["max_result_bytes"])
        hint = "; ".join(self.hints) or None
        try:
            symbols = {RESULT_NAME: plain(namespace[RESULT_NAME], max_bytes)} if RESULT_NAME in namespace else {}
            final = (plain(value, max_bytes), last.body.lineno) if last is not None and value is not None else None
        except TooLarge as exc:
            return Answer({}, None, hint, pictures=images, error={"code": "RESULT_TOO_LARGE", "message": str(exc)})
        return Answer(symbols, final, hint, pictures=images)

    def kept(self) -> dict[str, Any] | None:
        """What the handle keeps of this run (the blob and the names), within ``max_state_bytes``."""
        if self.namespace is None:
            return None
        try:
            with alarm.armed(self.clock):
                max_bytes = int(self.limits.get("max_state_bytes", 0))
                return collect(self.namespace, self.given, self.sources, max_bytes, self.before)
        except BaseException:  # out of time or memory while pickling: the handle keeps what it had
            return None


class _Installed:
    """While a program runs: its output captured, its files through the tools, its imports checked, ``plt.show``
    showing; all put back afterwards."""

    def __init__(self, output: OutputBuffer, files: Files, pictures: Pictures) -> None:
        self.stream = _Output(output)
        self.files, self.pictures = files, pictures
        self.imports = Preloaded()
        self.saved: tuple[Any, Any, Any] | None = None

    def __enter__(self) -> None:
        pyplot = sys.modules.get("matplotlib.pyplot")
        self.saved = (sys.stdout, sys.stderr, getattr(pyplot, "show", None))
        sys.stdout = sys.stderr = self.stream
        if pyplot is not None:
            pyplot.__dict__["show"] = self.pictures.show
        self.files.install()
        self.imports.install()

    def __exit__(self, *exc_info: object) -> None:
        self.imports.uninstall()
        self.files.uninstall()
        assert self.saved is not None
        sys.stdout, sys.stderr, show = self.saved
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None and show is not None:
            pyplot.__dict__["show"] = show


def _split(tree: ast.Module) -> tuple[ast.Module, ast.Expression | None]:
    """The program without its final expression statement, and that expression (evaluated for its value)."""
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        expression = ast.Expression(tree.body[-1].value)
        return ast.Module(body=tree.body[:-1], type_ignores=[]), expression
    return tree, None


def _run(code: types.CodeType, namespace: dict[str, Any]) -> Any:
    """Run compiled program code in `namespace`; code with a top-level ``await`` runs on the worker's loop."""
    if code.co_flags & inspect.CO_COROUTINE:
        return loop.run(eval(code, namespace))  # noqa: S307  (the program, in its own locked-down process)
    return eval(code, namespace)  # noqa: S307


def _placed(error: BaseException, raised: BaseException) -> BaseException:
    """`error` marked with the program line where `raised` was raised (the innermost frame of the program), as
    the worker reads it: 1-based line, 0-based column."""
    frames = [frame for frame in traceback.extract_tb(raised.__traceback__) if frame.filename == PROGRAM_FILE]
    if frames and getattr(error, "attp_line", None) is None:
        with contextlib.suppress(AttributeError, TypeError):
            error.attp_line = (frames[-1].lineno, frames[-1].colno)  # type: ignore[attr-defined]
    return error
