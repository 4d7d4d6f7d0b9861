"""What the server accepts from a worker: each message's kind, size, shape and fields, checked before any work.

A worker is hostile input (SECURITY.md, "What a worker sends"): a program may have taken it over, and under an
engine of real CPython it *is* the program. So nothing it says is taken on trust, and the checks are the server's,
here, never the worker's:

- **Kind before size.** Every line starts with its kind, ``{"op":"<kind>"``, and each kind the server is waiting
  for has its own longest line (`protocol`: a ``ready`` 64 KiB, a ``call`` 32 MiB, a ``done`` what the run's own
  limits allow, `protocol.done_bytes`): the pool stops reading a line once it is past its kind's limit, and a
  kind it is not waiting for ends the run there (`kind_of`).
- **Counts before decoding.** A ``call`` line holding more than `protocol.MAX_CALL_VALUES` values (counted from its
  bytes) is refused undecoded; what a line may cost decoded is bounded by its size either way.
- **Shape after decoding.** Nesting at most `protocol.MAX_DEPTH` deep, one ``op`` (a line naming two is refused),
  every field the server uses of the right type, no field it does not know; an error code is a code
  (`CODE`), never text with a newline that a log line would carry.

A message that breaks any of these is `Refused`: the pool kills the worker and the run ends with an error that
says so (what was wrong, never the worker's own text). Server side only: imports nothing above
`attp_server.sandbox`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, cast

from attp_server.sandbox.process.protocol import (
    ERROR_FIELDS,
    MAX_CALL_VALUES,
    MAX_DEPTH,
    DoneMessage,
    ErrorReport,
    ProtocolError,
    value_count,
)

KIND = re.compile(rb'\{"op":"([a-z]{1,16})"[,}]')
"""How every line from a worker starts: its kind first (the encoder of `protocol` writes ``op`` first)."""

KIND_BYTES = 32
"""Bytes enough to read a line's kind (`KIND`'s longest match)."""

CODE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,99}")
"""An error code: ``TIMEOUT``, ``FILE_NOT_FOUND``, a toolpack's own; one word, no space, no control character."""

MAX_TOOL_NAME = 1000
"""Longest tool name a ``call`` may carry (a program names tools only as the job's names, ``pack.tool``)."""

_TEXT_FIELDS = frozenset(ERROR_FIELDS) - {"code", "message", "line", "column"}
_DONE_FIELDS = frozenset(DoneMessage.__annotations__)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf


_DONE_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "status": (lambda value: value in ("ok", "error"), "'ok' or 'error'"),
    "hint": (lambda value: value is None or isinstance(value, str), "text or null"),
    "stdout": (lambda value: isinstance(value, str), "text"),
    "truncated": (lambda value: isinstance(value, bool), "true or false"),
    "retire": (lambda value: isinstance(value, bool), "true or false"),
    "check_s": (_number, "a number of seconds"),
    "state": (lambda value: value is None or isinstance(value, dict), "an object or null"),
    "pictures": (
        lambda value: isinstance(value, list) and all(isinstance(item, dict) for item in value),
        "a list of objects",
    ),
}
"""Each field of a ``done`` but its result (any JSON) and error (`_error`): what it must be."""


class Refused(ProtocolError):
    """A worker's message that breaks the protocol: the worker is killed, the run ends saying `why`."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def kind_of(head: bytes | bytearray, limits: Mapping[str, int]) -> str:
    """The kind of the line starting with `head` (at least `KIND_BYTES` of it, or the whole line); `Refused` when
    it is not one of `limits` (the kinds the server waits for now, each with its longest line)."""
    found = KIND.match(head)
    if found is None:
        raise Refused('a line that does not start with its kind ({"op":"...", first)')
    kind = found.group(1).decode("ascii")
    if kind not in limits:
        expected = " or ".join(repr(k) for k in limits)
        raise Refused(f"a {kind!r} message where only {expected} may come")
    return kind


def too_long(kind: str, limit: int) -> Refused:
    return Refused(f"a {kind!r} message larger than the protocol allows here ({limit:,} bytes)")


def decode(kind: str, line: bytes) -> dict[str, Any]:
    """The line of kind `kind` (within its size: the pool read no further) as a JSON object, or `Refused`."""
    if kind == "call" and (count := value_count(line)) > MAX_CALL_VALUES:
        raise Refused(f"a 'call' of up to {count:,} values, more than the {MAX_CALL_VALUES:,} a call may hold")
    try:
        message = json.loads(line)
    except RecursionError:
        raise Refused("a message nested too deeply") from None
    except (ValueError, UnicodeDecodeError):
        raise Refused("a line that is not JSON") from None
    if not isinstance(message, dict) or message.get("op") != kind:
        raise Refused(f"a {kind!r} line whose object names another op (an op given twice?)")
    if line.count(b"[") + line.count(b"{") > MAX_DEPTH and _deeper_than(message, MAX_DEPTH):
        raise Refused(f"a message nested more than {MAX_DEPTH} levels deep")
    return message


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests containers more than `limit` deep (iteratively: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def call(message: Mapping[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    """A ``call``'s tool name, positional and keyword arguments; `Refused` unless each is what it must be."""
    if set(message) != {"op", "tool", "args", "kwargs"}:
        raise Refused("a 'call' whose fields are not op, tool, args and kwargs")
    tool, args, kwargs = message["tool"], message["args"], message["kwargs"]
    if not isinstance(tool, str) or not 0 < len(tool) <= MAX_TOOL_NAME:
        raise Refused(f"a 'call' whose tool is not a name of 1 to {MAX_TOOL_NAME} characters")
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise Refused("a 'call' whose args is not a list or kwargs not an object")
    return tool, args, kwargs


def done(message: Mapping[str, Any], *, keep: bool) -> DoneMessage:
    """A run's report with every field checked (`Refused` otherwise); `keep`: the run asked for its state."""
    unknown = set(message) - _DONE_FIELDS
    if unknown:
        raise Refused(f"a 'done' with fields the protocol does not have ({len(unknown)} of them)")
    for name, (accepts, expected) in _DONE_CHECKS.items():
        if name in message and not accepts(message[name]):
            raise Refused(f"a 'done' whose {name} is not {expected}")
    if message.get("status") not in ("ok", "error"):
        raise Refused("a 'done' whose status is not 'ok' or 'error'")
    if "state" in message and message["state"] is not None and not keep:
        raise Refused("a 'done' with kept state the run did not ask for")
    error = message.get("error")
    if error is not None:
        _error(error)
    return cast(DoneMessage, dict(message))


def _error(error: Any) -> ErrorReport:
    if not isinstance(error, dict) or not set(error) <= set(ERROR_FIELDS):
        raise Refused("a 'done' whose error is not an object of the error fields")
    code, text = error.get("code"), error.get("message")
    if not isinstance(code, str) or CODE.fullmatch(code) is None:
        raise Refused("a 'done' whose error code is not a code (a word of letters, digits, '_', '.' or '-')")
    if not isinstance(text, str):
        raise Refused("a 'done' whose error message is not text")
    for name in ("line", "column"):
        value = error.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise Refused(f"a 'done' whose error {name} is not a number")
    for name in _TEXT_FIELDS:
        if error.get(name) is not None and not isinstance(error[name], str):
            raise Refused(f"a 'done' whose error {name} is not text")
    return cast(ErrorReport, error)


def ready(message: Mapping[str, Any]) -> dict[str, Any]:
    """A ``ready``'s lockdown report (what the worker says its walls are: reported, never relied on for a run)."""
    report, pid = message.get("lockdown"), message.get("pid")
    if not isinstance(report, dict) or not isinstance(pid, int) or isinstance(pid, bool):
        raise Refused("a 'ready' without a pid and a lockdown report")
    missing = report.get("missing", {})
    if not isinstance(missing, dict) or not all(isinstance(v, str) for v in missing.values()):
        raise Refused("a 'ready' whose lockdown report names missing layers without reasons")
    return dict(report)
