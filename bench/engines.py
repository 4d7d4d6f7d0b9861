"""Every engine the benchmark compares, behind one face: ``await engine.run(workload)`` returns the result.

- ``exec``: plain CPython ``exec`` of the precompiled program, tools as plain functions (the floor).
- ``pipe``: ``exec`` in a child process whose tools are JSON lines over blocking pipes: the least that
  process isolation with five tool calls can cost, without any sandbox.
- ``evaluator``: our sandbox evaluator in this process (parse, static scan, evaluate), tools as plain
  functions: the cost of the sandbox language without the worker and its IPC.
- ``runtime``: `Runtime.execute`, the real path: worker process, tool calls back to the server.
- ``runtime_new_program``: the same, each run's text new to every worker (``runtime`` sends the same text).
- ``asteval``: the same real path with ``engine = "asteval"`` (asteval's own Interpreter; a worker per run).
- ``smolagents``: `LocalPythonExecutor` (in process, its default timeout on), tools as functions.
- ``monty``: `pydantic_monty.Monty` (a pool of sandbox processes), tools as ``external_lookup`` callbacks.
- ``starlark``: `starlark-pyo3` (in process), tools through ``Module.add_callable``.

An engine whose package is not installed is reported as missing, never as a failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from attp_server.run.runtime import ExecuteRequest, Runtime
from bench.workloads import TOOLS, Workload


class Engine(Protocol):
    name: str

    async def run(self, workload: Workload) -> Any: ...


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


class ExecEngine:
    name = "exec"

    def __init__(self) -> None:
        self._compiled: dict[str, Any] = {}

    async def run(self, workload: Workload) -> Any:
        code = self._compiled.get(workload.name)
        if code is None:
            code = self._compiled[workload.name] = compile(workload.code, f"<{workload.name}>", "exec")
        namespace: dict[str, Any] = {"json": json, **TOOLS}
        exec(code, namespace)
        return namespace["__result__"]


_PIPE_CHILD = r"""
import json, sys
reader, writer = sys.stdin.buffer, sys.stdout.buffer
def stub(name):
    def call(*args):
        writer.write(json.dumps({"op": "call", "tool": name, "args": list(args)}).encode() + b"\n")
        writer.flush()
        return json.loads(reader.readline())["value"]
    return call
for line in reader:
    job = json.loads(line)
    namespace = {"json": json, **{name: stub(name) for name in job["tools"]}}
    exec(job["code"], namespace)
    writer.write(json.dumps({"op": "done", "result": namespace["__result__"]}).encode() + b"\n")
    writer.flush()
"""


class PipeEngine:
    """``exec`` in a pre-started child; tool calls are JSON lines over pipes (blocking reads, no event loop)."""

    name = "pipe"

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", _PIPE_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    async def run(self, workload: Workload) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        job = {"code": workload.code, "tools": list(TOOLS)}
        self.process.stdin.write(json.dumps(job).encode() + b"\n")
        self.process.stdin.flush()
        while True:
            message = json.loads(self.process.stdout.readline())
            if message["op"] == "done":
                return message["result"]
            value = TOOLS[message["tool"]](*message["args"])
            self.process.stdin.write(json.dumps({"value": value}).encode() + b"\n")
            self.process.stdin.flush()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        self.process.wait(timeout=10)


class EvaluatorEngine:
    """What the worker does for a run (the static check, a fresh evaluator, evaluate), minus the process and IPC."""

    name = "evaluator"

    def __init__(self) -> None:
        from attp_server.sandbox.process.tools import ToolError
        from attp_server.sandbox.static_check import known_names
        from attp_server.sandbox.stdlib.namespaces import SAFE_BUILTIN_FUNCTIONS, SAFE_EXCEPTIONS, static_namespaces

        self.modules = static_namespaces()
        self.base = {**SAFE_BUILTIN_FUNCTIONS, **SAFE_EXCEPTIONS, "ToolError": ToolError, **self.modules}
        self.known = known_names(tuple(TOOLS), ())

    async def run(self, workload: Workload) -> Any:
        from attp_server.sandbox.engines.python.evaluator import Evaluator
        from attp_server.sandbox.process.tools import OutputBuffer
        from attp_server.sandbox.static_check import check

        tree, problem = check(workload.code, self.known)
        if tree is None or problem is not None:
            raise RuntimeError(f"{workload.name} does not pass the static check: {problem}")
        symbols = {**self.base, **TOOLS}
        evaluator = Evaluator(
            symbols,
            deadline=time.monotonic() + 60,
            max_steps=50_000_000,
            output=OutputBuffer(65536),
            modules=self.modules,
        )
        evaluator.execute(tree)
        return evaluator.symtable["__result__"]


class RuntimeEngine:
    name = "runtime"

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def run(self, workload: Workload) -> Any:
        result = await self.runtime.execute(ExecuteRequest(code=workload.code))
        if result.status != "ok":
            raise RuntimeError(f"{workload.name} failed in the runtime: {result.error}")
        return result.result


class AstevalEngine(RuntimeEngine):
    """`Runtime.execute` with ``engine = "asteval"`` (the runtime must offer it): asteval's Interpreter in the worker,
    a fresh worker for every run."""

    name = "asteval"

    async def run(self, workload: Workload) -> Any:
        result = await self.runtime.execute(ExecuteRequest(code=workload.code, engine="asteval"))
        if result.status != "ok":
            raise RuntimeError(f"{workload.name} failed on asteval: {result.error}")
        return result.result


class NewProgramEngine(RuntimeEngine):
    """`RuntimeEngine` sending a text no worker has seen: the program with a comment that differs every run.

    A worker keeps the programs it checked (`attp_server.sandbox.process.checked`), so ``runtime`` measures a
    program sent again (an agent's retry or poll); this measures one written afresh (parsed, checked and
    analysed in the run).
    """

    name = "runtime_new_program"

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        self.count = 0

    async def run(self, workload: Workload) -> Any:
        self.count += 1
        fresh = dataclasses.replace(workload, code=f"{workload.code}# run {self.count}\n")
        return await super().run(fresh)


class SmolagentsEngine:
    """One `LocalPythonExecutor` per workload, as an agent keeps one; its default timeout stays on."""

    name = "smolagents"

    def __init__(self) -> None:
        self.executors: dict[str, Any] = {}

    async def run(self, workload: Workload) -> Any:
        executor = self.executors.get(workload.name)
        if executor is None:
            from smolagents.local_python_executor import LocalPythonExecutor  # type: ignore[import-untyped]

            executor = LocalPythonExecutor(additional_authorized_imports=["json"], additional_functions=dict(TOOLS))
            executor.send_tools({})
            self.executors[workload.name] = executor
        return executor(workload.with_json_import()).output


class MontyEngine:
    """A `Monty` pool kept open; each run checks out a fresh session (its state does not leak between runs)."""

    name = "monty"

    def __init__(self) -> None:
        import pydantic_monty

        self.pool = pydantic_monty.Monty(min_processes=1, max_processes=1)
        self.pool.__enter__()

    async def run(self, workload: Workload) -> Any:
        with self.pool.checkout() as session:
            return session.feed_run(workload.with_json_import(), external_lookup=dict(TOOLS))

    def close(self) -> None:
        self.pool.__exit__(None, None, None)


class StarlarkEngine:
    """Parse and evaluate in a fresh module per run; ``json`` from the library's Json extension."""

    name = "starlark"

    def __init__(self) -> None:
        import starlark

        self.starlark = starlark
        self.dialect = starlark.Dialect.extended()
        self.dialect.enable_top_level_stmt = True
        self.globals = starlark.Globals.extended_by([starlark.LibraryExtension.Json])

    async def run(self, workload: Workload) -> Any:
        starlark = self.starlark
        tree = starlark.parse(f"{workload.name}.star", workload.starlark(), self.dialect)
        module = starlark.Module()
        for name, function in TOOLS.items():
            module.add_callable(name, function)
        return starlark.eval(module, tree, self.globals)


OPTIONAL: dict[str, tuple[str, Callable[[], Engine]]] = {
    "smolagents": ("smolagents", SmolagentsEngine),
    "monty": ("pydantic_monty", MontyEngine),
    "starlark": ("starlark", StarlarkEngine),
}


def optional_engines() -> tuple[list[Engine], list[str]]:
    """The comparison engines that are installed, and the names of those that are not."""
    engines: list[Engine] = []
    missing: list[str] = []
    for name, (module, factory) in OPTIONAL.items():
        if installed(module):
            engines.append(factory())
        else:
            missing.append(name)
    return engines, missing


async def checked(engine: Engine, workload: Workload) -> Callable[[], Awaitable[Any]]:
    """Run `workload` once on `engine`, insist on the expected result, and return the timed call."""
    got = _plain(await engine.run(workload))
    expected = workload.expected()
    if got != expected:
        raise RuntimeError(f"{engine.name} computed {got!r} for {workload.name}, expected {expected!r}")

    async def call() -> Any:
        return await engine.run(workload)

    return call


def close(engines: list[Engine]) -> None:
    for engine in engines:
        closer = getattr(engine, "close", None)
        if closer is not None:
            closer()
