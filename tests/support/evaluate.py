"""Run a program the way the worker does (scan, then the evaluator), in this process, and CPython's way.

For tables that check the evaluator against CPython itself: the expected value of every case is what
plain ``exec`` computes for the same program, so a case cannot encode a wrong expectation.
"""

from __future__ import annotations

import ast
import contextlib
import datetime
import io
import json
import math
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any

from attp_server.sandbox.engines.python.evaluator import Evaluator
from attp_server.sandbox.policy import scan
from attp_server.sandbox.process.tools import OutputBuffer, ToolError
from attp_server.sandbox.stdlib.namespaces import SAFE_BUILTIN_FUNCTIONS, SAFE_EXCEPTIONS, static_namespaces

MODULES = static_namespaces()


@dataclass(frozen=True)
class Outcome:
    """What a program did: its ``__result__`` (or the class name of the error it ended with) and its output."""

    result: Any
    error: str | None
    stdout: str


def sandboxed(code: str, *, timeout_s: float = 10.0) -> Outcome:
    tree = ast.parse(code)
    violations = scan(tree, modules=MODULES)
    if violations:
        return Outcome(None, violations[0].code, "")
    output = OutputBuffer(1 << 20)
    symbols = {**SAFE_BUILTIN_FUNCTIONS, **SAFE_EXCEPTIONS, "ToolError": ToolError, **MODULES}
    evaluator = Evaluator(
        symbols, deadline=time.monotonic() + timeout_s, max_steps=50_000_000, output=output, modules=MODULES
    )
    try:
        evaluator.execute(tree)
    except BaseException as exc:
        return Outcome(None, type(exc).__name__, output.text())
    return Outcome(symbols.get("__result__"), None, output.text())


def cpython(code: str) -> Outcome:
    """The same program under plain CPython, with the real modules under the same names."""
    namespace: dict[str, Any] = {"json": json, "math": math, "re": re, "statistics": statistics, "datetime": datetime}
    namespace["__name__"] = "__main__"
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<case>", "exec"), namespace)
    except Exception as exc:
        return Outcome(None, type(exc).__name__, out.getvalue())
    return Outcome(namespace.get("__result__"), None, out.getvalue())
