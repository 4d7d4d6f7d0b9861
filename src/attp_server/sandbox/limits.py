"""Size limits and the run-ending signals of the sandbox.

Every signal here derives from `BaseException`, not `Exception`: a program's ``try/except``
(even a bare ``except:``) can never catch one, so a timeout or a size violation always ends the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

MAX_SEQUENCE_LEN = 10_000_000
"""Most items (characters, bytes, list elements) one operation may build."""

MAX_INT_BITS = 1_000_000
"""Largest integer an operator may build (about 300,000 decimal digits)."""
INT_BOUND = 1 << MAX_INT_BITS
"""Integers strictly between -INT_BOUND and INT_BOUND fit the limit: one comparison, no bit count (``x + y`` in
a loop)."""


MAX_FORMAT_WIDTH = 10_000
"""Largest width or precision in a format spec."""


class Abort(BaseException):
    """Ends the run with `code`. Uncatchable by the program."""

    code: ClassVar[str] = "INTERNAL_ERROR"


class Timeout(Abort):
    code = "TIMEOUT"


class SizeLimitError(Abort):
    code = "MEMORY_LIMIT"


class Forbidden(Abort):
    code = "FORBIDDEN"


class ToolCallLimit(Abort):
    code = "TOOL_CALL_LIMIT"


class ImportForbidden(Abort):
    code = "IMPORT_FORBIDDEN"


class Pauses:
    """Tells a run's clocks that the server waited for a person (an approval) during a tool call.

    The wait does not count against ``timeout_s``: each listener moves its own deadline by the
    seconds the server reports with the tool's reply.
    """

    def __init__(self) -> None:
        self._listeners: list[Callable[[float], None]] = []

    def listen(self, listener: Callable[[float], None]) -> None:
        self._listeners.append(listener)

    def paused(self, seconds: float) -> None:
        for listener in self._listeners:
            listener(seconds)


def check_size(what: str, size: int) -> None:
    """Refuse an operation that would build more than `MAX_SEQUENCE_LEN` items."""
    if size > MAX_SEQUENCE_LEN:
        raise SizeLimitError(f"{what} would build {size:,} items; the limit is {MAX_SEQUENCE_LEN:,}")
