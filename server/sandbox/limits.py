"""Size limits and the run-ending signals of the sandbox.

Every signal here derives from `BaseException`, not `Exception`: a program's ``try/except``
(even a bare ``except:``) can never catch one, so a timeout or a size violation always ends the run.
"""

from __future__ import annotations

from typing import ClassVar

MAX_SEQUENCE_LEN = 10_000_000
"""Most items (characters, bytes, list elements) one operation may build."""

MAX_INT_BITS = 1_000_000
"""Largest integer an operator may build (about 300,000 decimal digits)."""

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


def check_size(what: str, size: int) -> None:
    """Refuse an operation that would build more than `MAX_SEQUENCE_LEN` items."""
    if size > MAX_SEQUENCE_LEN:
        raise SizeLimitError(f"{what} would build {size:,} items; the limit is {MAX_SEQUENCE_LEN:,}")
