"""asteval's list of errors, turned into the one exception the worker maps to an error code and a line.

asteval does not let an exception out of a statement: it records an `ExceptionHolder` per level the error
crossed (the innermost first, with the node's line) and raises a fresh copy of the exception's class with
asteval's own message. `failure` takes the first record that names an exception: its original exception
where asteval kept one (a tool's `ToolError` with every field, a `KeyError`, a `MemoryError`), otherwise the
class asteval chose with its message; the first line any record has is where it happened. What asteval
reports as unsupported (a node it has no handler for) becomes `Forbidden`, saying what to write instead, and
a name the sandbox withholds on purpose (``open``, ``eval``, ...) becomes `Forbidden` too, as the ``python``
engine's check reports it.

Runs in the worker; imports nothing above `attp_server.sandbox`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from attp_server.sandbox.advice import name_advice
from attp_server.sandbox.engines.asteval.lacks import UNSUPPORTED
from attp_server.sandbox.limits import Forbidden
from attp_server.sandbox.policy import FORBIDDEN_NAMES

ATTRIBUTE_ADVICE: dict[str, str] = {
    "format": "asteval refuses str.format: write an f-string, e.g. f'{total:.2f}', or format(total, '.2f')",
    "format_map": "asteval refuses str.format_map: write an f-string",
}
"""Attributes asteval refuses by name -> what to write instead."""

_NOT_DEFINED = re.compile(r"name '([^']+)' is not defined")
_NO_SAFE_ATTRIBUTE = re.compile(r"no safe attribute '([^']+)'")


def failure(errors: Sequence[Any], line: int | None) -> BaseException | None:
    """The exception asteval's `errors` stand for, placed at its line (else at `line`, the statement running);
    None when no record names an exception."""
    first = next((error for error in errors if error.exc is not None), None)
    if first is None:
        return None
    where = next((error.lineno for error in errors if isinstance(error.lineno, int)), line)
    column = first.col_offset if first.lineno == where and isinstance(first.col_offset, int) else None
    exc = _exception(first)
    if isinstance(exc, SyntaxError):
        if exc.lineno is None:
            exc.lineno, exc.offset = where, None if column is None else column + 1
        return exc
    if where is not None and not hasattr(exc, "attp_line"):
        exc.attp_line = (where, column)  # type: ignore[attr-defined]  # read by the worker (`_where`)
    return exc


def _exception(record: Any) -> BaseException:
    """The exception one of asteval's records stands for."""
    original = record.exc_info[1] if isinstance(record.exc_info, tuple) and len(record.exc_info) > 1 else None
    kind: type[BaseException] = record.exc
    message = str(record.msg)
    if kind is NotImplementedError and isinstance(original, KeyError) and original.args:
        node = str(original.args[0])  # asteval looked up a handler for this node and has none
        return Forbidden(UNSUPPORTED.get(node, f"{node} is not part of asteval's language"))
    if kind is NotImplementedError and message.endswith(" not supported"):
        node = message.removesuffix(" not supported").lower()
        return Forbidden(UNSUPPORTED.get(node, f"{message.removesuffix(' not supported')} is not part of asteval's "
                                         "language"))  # fmt: skip
    if isinstance(original, BaseException) and isinstance(original, kind):
        return original
    if issubclass(kind, NameError):
        found = _NOT_DEFINED.search(message)
        name = found.group(1) if found else ""
        if name in FORBIDDEN_NAMES:
            return Forbidden(name_advice(name))
        return NameError(f"name {name!r} is not defined", name=name)
    if issubclass(kind, AttributeError):
        found = _NO_SAFE_ATTRIBUTE.search(message)
        if found is not None:
            advice = ATTRIBUTE_ADVICE.get(found.group(1))
            return Forbidden(advice or f"asteval refuses the attribute {found.group(1)!r}")
    try:
        return kind(message)
    except Exception:  # a class that takes other arguments (UnicodeDecodeError): its message, as a RuntimeError
        return RuntimeError(f"{kind.__name__}: {message}")
