"""What a finished call leaves for its operator: attributes on the MCP SDK's call span, and one log line.

Never the code, the result or tool arguments (they may hold secrets): the status, the error code, how many tool
calls, how long.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace

from attp_server.ops.metrics import bounded_code
from attp_server.ops.tracing import annotate

logger = logging.getLogger(__name__)


def report_call(
    call_id: str | None,
    session: str,
    *,
    status: str,
    error_code: str | None,
    tool_calls: int,
    elapsed_ms: float,
    principal: str | None = None,
) -> None:
    """Annotate the current span (the SDK's ``tools/call attp_execute``, when there is one) and log one line.
    `principal`: whose call it was, as a name the configuration gives or a keyed digest (``enduser.id``)."""
    outcome: dict[str, Any] = {"attp.status": status, "attp.tool_calls": tool_calls, "attp.elapsed_ms": elapsed_ms}
    if principal is not None:
        outcome["enduser.id"] = principal
    if error_code is not None:
        outcome["attp.error_code"] = bounded_code(error_code)
    annotate(trace.get_current_span(), outcome)
    fields = {
        "call": call_id,
        "session": session,
        "status": status,
        "error": error_code,
        "tool_calls": tool_calls,
        "ms": elapsed_ms,
        **({"principal": principal} if principal is not None else {}),
    }
    logger.info("attp_execute", extra={"fields": fields})
