"""The ``python`` engine's worker side: the static check, the session's kept names, the compiled program, one run.

`Python` is built once per worker (the curated modules, the checked-program cache); `Python.start` makes one
`PythonRun` per program: the program is checked and compiled (or found so in the cache), the session's kept values
and functions are restored, the evaluator runs it, and what it leaves is collected for the session (`keep`).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import os
import random
import time
from collections.abc import Mapping
from typing import Any

from attp_server.sandbox.engines import Answer, import_hint
from attp_server.sandbox.engines.python.evaluator import Evaluator, Program, TooDeep, compile_program
from attp_server.sandbox.policy import scan
from attp_server.sandbox.process import keep
from attp_server.sandbox.process.checked import Checked, CheckedPrograms, names_key
from attp_server.sandbox.process.tools import OutputBuffer, ToolBridge, ToolError, tool_symbols
from attp_server.sandbox.static_check import CHECK_BUDGET_S, TOO_DEEP, KnownNames, check, known_names
from attp_server.sandbox.stdlib.modules import build_namespaces, run_namespaces
from attp_server.sandbox.stdlib.namespaces import MODULE_NAMES, SAFE_BUILTIN_FUNCTIONS, SAFE_EXCEPTIONS, Namespace
from attp_server.sandbox.stdlib.reprs import name_modules


class CheckRefused(Exception):
    """The static check refused the program: `error` is the report the model reads."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message", ""))
        self.error = error


class Python:
    """The evaluator's side of a worker: built once, before the lockdown (some modules load pieces of the standard
    library)."""

    def __init__(self) -> None:
        self.namespaces = build_namespaces()
        name_modules(self.namespaces)  # `repr(json.loads)` is <function json.loads>
        self.base_symbols: dict[str, Any] = {**SAFE_BUILTIN_FUNCTIONS, **SAFE_EXCEPTIONS, "ToolError": ToolError}
        self._known: tuple[Any, KnownNames] | None = None
        self.checked = CheckedPrograms()
        """Programs that passed the check with the current `_known` names (cleared when those change)."""
        self._previous: PythonRun | None = None

    def known_names(self, job: Mapping[str, Any]) -> KnownNames:
        """The names the static check accepts: the same tools and packs in every run (built once), and the
        names the session kept from its earlier calls."""
        key = (
            tuple(job.get("tools", [])),
            tuple((p, tuple(n)) for p, n in job.get("namespaces", {}).items()),
            tuple((p, str(why)) for p, why in job.get("unavailable", {}).items()),
            tuple(job.get("modules", MODULE_NAMES)),
        )
        if self._known is None or self._known[0] != key:
            enabled = run_namespaces(self.namespaces, key[3], random.Random(0))
            modules = {name: frozenset(space.members) for name, space in enabled.items()}
            self._known = (key, known_names(*key[:3], modules=modules))
            self.checked.clear()
        state = job.get("state")
        if not isinstance(state, dict):
            return self._known[1]
        kept = [name for part in ("values", "functions") if isinstance(state.get(part), dict) for name in state[part]]
        return dataclasses.replace(self._known[1], kept=frozenset(map(str, kept)))

    def modules(self, job: Mapping[str, Any]) -> dict[str, Namespace]:
        """The curated modules this run may use: the job's list (every module when it names none)."""
        return run_namespaces(self.namespaces, job.get("modules", MODULE_NAMES), random.Random(os.urandom(16)))

    def start(self, job: Mapping[str, Any], tools: ToolBridge, output: OutputBuffer, deadline: float) -> PythonRun:
        if self._previous is not None and self._previous.evaluator is not None:
            # The last run is over: its functions and its symbol table refer to each other (a function's globals
            # are the table), so emptying the table frees what it held now rather than at the collector's next pass.
            self._previous.evaluator.symtable.clear()
        run = self._previous = PythonRun(self, job, tools, output, deadline)
        return run


class PythonRun:
    """One program on the evaluator."""

    def __init__(
        self, engine: Python, job: Mapping[str, Any], tools: ToolBridge, output: OutputBuffer, deadline: float
    ) -> None:
        self.engine = engine
        self.job = job
        self.tools = tools
        self.output = output
        self.deadline = deadline
        self.received = time.monotonic()
        self.check_s: float | None = None
        self.evaluator: Evaluator | None = None
        self.base: dict[str, Any] = {}
        self.tree = ast.Module(body=[], type_ignores=[])
        self.restored: keep.Restored | None = None

    def names(self) -> list[str]:
        return list(self.evaluator.symtable) if self.evaluator is not None else []

    def execute(self) -> Answer:
        engine, job, code = self.engine, self.job, str(self.job["code"])
        allow_imports = bool(job.get("allow_imports", True))
        modules = engine.modules(job)
        symbols = {**engine.base_symbols, **modules}
        symbols.update(tool_symbols(job, self.tools, reserved=symbols))
        state = job.get("state")
        restored = self.restored = keep.restore(state, symbols) if isinstance(state, dict) else None
        definitions = restored.definitions if restored is not None else []
        names = engine.known_names(job)
        inputs = (allow_imports, names_key(names.kept))
        checked = engine.checked.get(code, inputs)
        if checked is None:
            budget = min(CHECK_BUDGET_S, max(0.0, self.deadline - time.monotonic()))
            parsed, problem = check(code, names, budget_s=budget, allow_imports=allow_imports)
        else:
            parsed, problem = checked.tree, None
        self.check_s = time.monotonic() - self.received  # the trace's static-check span
        if problem is None and definitions:
            # Kept functions are defined again ahead of the program: checked like it.
            refused = scan(ast.Module(body=definitions, type_ignores=[]), modules=modules, allow_imports=allow_imports)
            if refused:
                problem = {"code": refused[0].code, "message": refused[0].message}
        if problem is not None:
            raise CheckRefused(dict(problem))
        assert parsed is not None  # a program that does not parse is a problem
        if checked is None:
            program = _compiled(ast.parse(code))  # a tree of its own: `parsed` stays as written, for `keep`
            engine.checked.put(code, inputs, Checked(parsed, program))
        else:
            program = checked.program
        before = _compiled(ast.Module(body=copy.deepcopy(definitions), type_ignores=[])) if definitions else None
        self.tree = ast.Module(body=[*definitions, *parsed.body], type_ignores=[]) if definitions else parsed
        evaluator = self.evaluator = Evaluator(
            symbols, deadline=self.deadline, output=self.output, modules=modules, allow_imports=allow_imports
        )
        self.tools.pauses.listen(functools.partial(_extend_deadline, evaluator))
        self.base = dict(evaluator.symtable)
        if restored is not None:
            evaluator.symtable.update(restored.values)
        last = evaluator.execute(program, before)
        hint = import_hint(evaluator.imported) if evaluator.imported else None
        return Answer(evaluator.symtable, last, hint)

    def kept(self) -> dict[str, Any] | None:
        """The session state the run leaves: None when it is exactly the state the run was given (the server then
        keeps what it has, with nothing to check or write)."""
        if self.evaluator is None:
            return None
        limits = self.job["limits"]
        try:
            collected = keep.collect(
                self.evaluator.symtable, self.base, self.tree, max_bytes=int(limits.get("max_state_bytes", 0))
            )
        except (MemoryError, RecursionError):
            return None
        if self.restored is not None:
            for name, reason in self.restored.dropped.items():
                collected.dropped.setdefault(name, reason)
        given = self.job.get("state")
        if keep.unchanged(collected, given):
            return None
        return collected.as_message()


def _compiled(tree: ast.Module) -> Program:
    try:
        return compile_program(tree)
    except TooDeep:
        raise CheckRefused(dict(TOO_DEEP)) from None


def _extend_deadline(evaluator: Evaluator, seconds: float) -> None:
    evaluator.deadline += seconds
