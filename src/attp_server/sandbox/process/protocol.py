"""The JSON-line messages between the server and a worker.

One JSON object per line, UTF-8, in both directions; nothing is ever pickled. The server sends
``run`` and ``reply``; the worker sends ``ready``, ``call`` and ``done``.

    server -> worker  {"op": "run", "engine": "python"|"starlark", "code": ..., "tools": [...],
                       "namespaces": {...}, "limits": {...}}
    worker -> server  {"op": "call", "tool": "read_file", "args": [...], "kwargs": {...}}
    server -> worker  {"op": "reply", "ok": true, "value": ...}  |  {"op": "reply", "ok": false, "error": {...}}
    worker -> server  {"op": "done", "status": "ok"|"error", "result": ..., "stdout": ..., "truncated": ...,
                       "hint": ..., "error": {...}|null, "retire": bool}

Imported by both sides; imports nothing from the rest of ``server``.
"""

from __future__ import annotations

import json
from typing import Any

ENGINES = ("python", "starlark")
"""The languages a ``run`` may name in ``engine`` (absent means ``python``)."""

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""Longest line either side accepts (a tool argument may carry a whole file)."""


class ProtocolError(Exception):
    """A line that is not a JSON object with an ``op``."""


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


MAX_TEXT = 4000
"""Longest error text either side reports; the rest is cut with a note."""


def text_of(value: object, limit: int = MAX_TEXT) -> str:
    """``str(value)`` that cannot fail and cannot be huge: valid UTF-8, at most `limit` characters."""
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:
        text = f"<{type(value).__name__} that cannot be shown as text>"
    if len(text) > limit:
        text = text[:limit] + f"... ({len(text) - limit:,} more characters)"
    return text.encode("utf-8", "replace").decode("utf-8")


def capped(error: Any) -> Any:
    """An error report with every text field cut to `MAX_TEXT` characters (anything else is left as it is)."""
    if not isinstance(error, dict):
        return error
    return {k: text_of(v) if isinstance(v, str) else v for k, v in error.items()}


def decode(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from exc
    except RecursionError:
        raise ProtocolError("JSON nested too deeply") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError("a message must be a JSON object with an 'op'")
    return message
