"""What a run comes to: the worker's report, validated, as the `ExecutionResult` a face renders.

The worker is sandboxed, not trusted: its report is read like any other input. Every error the caller
reads leaves with a solution (the generic one for its code when nothing more precise said one).
"""

from __future__ import annotations

import base64
import difflib
import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from attp_server.errors import ErrorCode, ErrorInfo, short_repr
from attp_server.model.results import ExecutionResult, Picture, Status
from attp_server.run.request import ExecuteRequest
from attp_server.run.state import RunState
from attp_server.sandbox.engines import ENGINES
from attp_server.sandbox.process.protocol import capped
from attp_server.sessions.registry import Session
from attp_server.settings import Settings
from attp_server.store.handles import KIND_HANDLE
from attp_server.toolpack import ToolRegistry

logger = logging.getLogger(__name__)

NO_SESSION_HINT = (
    "This call had no session, so it started a new, empty one: if an earlier call defined that name, send this "
    "program again with session set to the session value that call's reply returned."
)
TYPO_RATIO = 0.8
"""A name this close to the one suggested for it (``reed_file``, ``read_file``) is taken for a typo of it."""

SOLUTIONS: dict[str, str] = {
    ErrorCode.TIMEOUT: "Do less per call: smaller inputs, fewer iterations, or split the work across several calls.",
    ErrorCode.MEMORY_LIMIT: "Work on smaller pieces of data; avoid building huge strings or lists.",
    ErrorCode.TOOL_CALL_LIMIT: "Make fewer tool calls per program, or split the work across several calls.",
    ErrorCode.RESULT_TOO_LARGE: "Return a summary, counts, or a slice of the data instead of all of it.",
    ErrorCode.RESULT_NOT_SERIALIZABLE: "Return plain data: dict, list, str, int, float, bool or None.",
    ErrorCode.RUNTIME_ERROR: "Fix the code at that line; wrap risky steps in try/except if a failure is expected.",
    ErrorCode.INTERNAL_ERROR: "Retry the call; if it keeps failing, simplify the program.",
}


def from_worker(
    done: Mapping[str, Any], run: RunState, target: str | None, max_output_bytes: int, max_result_bytes: int = 0
) -> ExecutionResult:
    """The worker's ``done`` message and the run's trace and notices as a result; stdout cut to `max_output_bytes`,
    pictures to `max_result_bytes` in all."""
    stdout = done.get("stdout")
    stdout = stdout if isinstance(stdout, str) else ""
    cut = stdout.encode("utf-8")[:max_output_bytes].decode("utf-8", "ignore")
    try:
        error = ErrorInfo.model_validate(capped(done["error"])) if done.get("error") is not None else None
    except ValidationError:
        logger.error("worker sent a malformed error: %s", short_repr(done.get("error"), 500))
        error = ErrorInfo(code=ErrorCode.INTERNAL_ERROR, message="the sandbox reported a malformed error")
    status: Status = "error" if error is not None or done.get("status") != "ok" else "ok"
    if status == "error" and error is None:
        error = ErrorInfo(code=ErrorCode.INTERNAL_ERROR, message="the sandbox reported an error without details")
    hint = done.get("hint") if isinstance(done.get("hint"), str) else None
    for notice in list(run.notices.values()):  # a tool thread left running may still add one
        hint = joined(hint, notice)
    return ExecutionResult(
        status=status,
        target=target,
        result=done.get("result") if status == "ok" else None,
        stdout=cut,
        truncated=bool(done.get("truncated")) or len(cut) < len(stdout),
        hint=hint,
        calls=run.calls,
        error=error,
        pictures=pictures(done.get("pictures"), max_result_bytes) if status == "ok" else [],
    )


MAX_PICTURES = 10
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def pictures(raw: object, max_bytes: int) -> list[Picture]:
    """The pictures a worker reported, checked: at most `MAX_PICTURES`, each base64 PNG bytes (only its signature is
    read: the server never decodes an image), `max_bytes` of them in all. What is not that is left out, and logged."""
    if not isinstance(raw, list):
        return []
    found: list[Picture] = []
    total = 0
    for item in raw[:MAX_PICTURES]:
        data = item.get("data") if isinstance(item, dict) else None
        if not isinstance(item, dict) or item.get("mime_type") != "image/png" or not isinstance(data, str):
            logger.warning("a worker reported a malformed picture; it was left out")
            continue
        if len(data) > (max_bytes - total) * 4 // 3 + 4:
            continue
        try:
            size = len(image := base64.b64decode(data, validate=True))
        except ValueError:
            logger.warning("a worker reported a picture that is not base64; it was left out")
            continue
        if not image.startswith(PNG_SIGNATURE) or total + size > max_bytes:
            continue
        total += size
        found.append(Picture(bytes=size, data=data))
    return found


def error_result(target: str | None, info: ErrorInfo) -> ExecutionResult:
    """A run that ended in `info` before (or instead of) anything ran."""
    return ExecutionResult(status="error", target=target, error=info)


def add_solution(result: ExecutionResult, engine: str) -> None:
    """Give an error that has no solution the generic one for its code (the `engine`'s own first)."""
    if result.error is None or result.error.solution is not None:
        return
    known = ENGINES.get(engine)
    solution = known.language.solutions.get(result.error.code) if known is not None else None
    result.error.solution = solution or SOLUTIONS.get(result.error.code)


def joined(first: str | None, second: str | None) -> str | None:
    """Two hints as one text, the first ended as a sentence."""
    if first and second:
        return f"{first if first.endswith(('.', '?', '!')) else first + '.'} {second}"
    return first or second


def point_to_renamed(error: ErrorInfo | None, renamed: dict[str, str], namespaces: dict[str, list[str]]) -> None:
    """A ``NAME_NOT_FOUND`` for ``memory.create_entities`` where the MCP server named ``memory`` is served as
    ``memory_mcp`` (a built-in pack has the name): say so, and suggest ``memory_mcp.create_entities``."""
    if error is None or error.code != ErrorCode.NAME_NOT_FOUND or not renamed:
        return
    ref = error.received or error.tool_name or ""
    space, dot, member = ref.partition(".")
    target = renamed.get(space)
    if not dot or target is None:
        return
    served = f"the MCP server {space!r} is the toolpack {target} ({space} is a built-in name here)"
    if member in namespaces.get(target, []):
        error.message = f"{space} has no member {member!r}: {served}; call {target}.{member}(...)"
        error.suggested_value = f"{target}.{member}"
    else:
        error.message += f" ({served})"


def hidden_by_filter(error: ErrorInfo | None, registry: ToolRegistry) -> None:
    """A ``NAME_NOT_FOUND`` for a tool an upstream server's filters hide says so, with no suggestion to call it (or
    anything spelled like it): the operator's configuration keeps it from programs."""
    if error is None or error.code != ErrorCode.NAME_NOT_FOUND or not error.received:
        return
    hidden = registry.filtered(error.received)
    if hidden is None:
        return
    pack = hidden.partition(".")[0]
    error.message = (
        f"{error.received} is a tool of the MCP server {pack!r} that the operator's configuration hides (its tool "
        "filters): programs cannot call it"
    )
    error.tool_name, error.suggested_value = hidden, None
    error.solution = (
        "Do the task with the tools of the description; if it cannot be done without this one, tell the user."
    )


def with_session(result: ExecutionResult, session: Session, request: ExecuteRequest, settings: Settings) -> None:
    """The session's part of a call's result: the handle to pass back, and what the model should know of it."""
    result.session = session.returned
    if session.notice is not None and not request.reset:
        result.hint = joined(session.notice, result.hint)
    if request.session is None and session.kind == KIND_HANDLE and kept_name_missing(result.error, request, settings):
        # The name may be one an earlier call kept, in the session whose handle was not passed back.
        result.hint = joined(result.hint, NO_SESSION_HINT)


def kept_name_missing(error: ErrorInfo | None, request: ExecuteRequest, settings: Settings) -> bool:
    """Whether `error` may be a name an earlier call kept: sessions keep names (`session_state`, an engine that
    keeps them), and it is a plain name that no tool, module or pack has, neither hidden by a filter (which names
    its tool) nor a typo of a name there is (``reed_file`` for ``read_file``)."""
    keeps = settings.session_state and ENGINES[request.engine or settings.engine].keeps == "names"
    if not keeps or error is None or error.code != ErrorCode.NAME_NOT_FOUND or error.tool_name is not None:
        return False
    name = error.received or ""
    if not name.isidentifier():
        return False  # pack.member: a tool's name, never a kept one
    suggested = error.suggested_value
    return suggested is None or difflib.SequenceMatcher(None, name.lower(), suggested.lower()).ratio() < TYPO_RATIO
