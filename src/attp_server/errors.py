"""Error codes, the model-facing error record, the server's root exception, and name suggestions.

Two kinds of failure live here and must not be confused:

* An *outcome* the model should read and fix (bad envelope, forbidden name, a tool that failed) is
  data: an `ErrorInfo` inside an `ExecutionResult` with status ``"error"``.
* A failure of the server itself (bad configuration, a toolpack that cannot load) is an
  `AttpError` raised to whoever started the server.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from attp_server.sandbox.suggestions import closest


class ErrorCode(StrEnum):
    """Every error code `attp_execute` can return (SPEC §4). UPPER_SNAKE, as ATDF."""

    INVALID_ENVELOPE = "INVALID_ENVELOPE"
    SYNTAX_ERROR = "SYNTAX_ERROR"
    IMPORT_FORBIDDEN = "IMPORT_FORBIDDEN"
    NAME_NOT_FOUND = "NAME_NOT_FOUND"
    FORBIDDEN = "FORBIDDEN"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    TOOL_ERROR = "TOOL_ERROR"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    TIMEOUT = "TIMEOUT"
    MEMORY_LIMIT = "MEMORY_LIMIT"
    OUTPUT_LIMIT = "OUTPUT_LIMIT"
    RESULT_TOO_LARGE = "RESULT_TOO_LARGE"
    RESULT_NOT_SERIALIZABLE = "RESULT_NOT_SERIALIZABLE"
    TOOL_CALL_LIMIT = "TOOL_CALL_LIMIT"
    SERVER_BUSY = "SERVER_BUSY"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    UPSTREAM_UNAVAILABLE = "UPSTREAM_UNAVAILABLE"
    APPROVAL_DENIED = "APPROVAL_DENIED"
    APPROVAL_UNAVAILABLE = "APPROVAL_UNAVAILABLE"
    SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
    RATE_LIMITED = "RATE_LIMITED"


TOOL_CODES = frozenset(
    {
        # files
        "FILE_NOT_FOUND", "FILE_TOO_LARGE", "BINARY_FILE", "INVALID_PATH", "PATH_OUTSIDE_WORKSPACE", "IS_A_DIRECTORY",
        "NOT_A_DIRECTORY", "NOT_A_REGULAR_FILE", "PERMISSION_DENIED", "IO_ERROR", "INVALID_EDIT_MODE",
        "INVALID_PATTERN", "LINE_OUT_OF_RANGE", "OLD_STRING_NOT_FOUND", "OLD_STRING_NOT_UNIQUE", "TOO_MANY_FILES",
        # shell
        "COMMAND_DENIED", "INVALID_TIMEOUT",
        # memory
        "PAGE_NOT_FOUND", "PAGE_NOT_EMPTY", "SEGMENT_NOT_FOUND", "NOT_A_CONTENTS_PAGE", "NOT_A_DETAIL_PAGE",
        "INVALID_MOVE", "CANNOT_REMOVE_ROOT", "MEMORY_BUSY", "MEMORY_UNAVAILABLE",
        # skills
        "CATEGORY_NOT_FOUND", "SKILL_ERROR", "SKILL_NOT_FOUND", "SKILL_FILE_NOT_FOUND", "PATH_OUTSIDE_SKILL",
    }
)  # fmt: skip
"""The codes the built-in tools raise besides `ErrorCode` (``ToolError("FILE_NOT_FOUND", ...)``). With `ErrorCode`,
every code a result can carry from attp-server's own code: the label values of metrics and traces, where any other
code (a third-party pack's, a program's own ``ToolError``) is ``OTHER``. tests/test_metrics.py finds every code the
source raises and checks that it is here."""


class ErrorInfo(BaseModel):
    """What went wrong, written so that the model can fix its next call from this alone."""

    model_config = ConfigDict(extra="forbid")

    code: str
    message: str
    line: int | None = None
    column: int | None = None
    source_line: str | None = None
    tool_name: str | None = None
    parameter_name: str | None = None
    received: str | None = None
    expected: str | None = None
    suggested_value: str | None = None
    solution: str | None = None


class AttpError(Exception):
    """Root of the server's own failures (configuration, toolpack loading, startup).

    Never used for outcomes of a model's program: those are `ErrorInfo` data.
    """


class ConfigError(AttpError):
    """A setting has a bad value; the message names the field and where the value came from."""


def suggest(name: str, candidates: Iterable[str], cutoff: float = 0.6) -> str | None:
    """Return the candidate closest to `name` (typo-tolerant, case-insensitive), or None; bounded work."""
    return closest(name, candidates, cutoff)


def short_repr(value: Any, limit: int = 120) -> str:
    """A one-line, bounded repr of a value for `received` fields and messages."""
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 15] + f"... ({len(text)} chars)"
    return text
