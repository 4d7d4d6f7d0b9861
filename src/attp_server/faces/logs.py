"""Logging to stderr: readable text by default, one JSON object per line with ``log_format = "json"``.

Structured records carry their data in ``extra={"fields": {...}}``; both formats show every field. A record is one
line in either format, whatever its values hold: many come from what a worker, a program or an upstream server
sent (an error code, a tool's message, a worker's stderr), and none may forge a line (`escaped`).
Nothing here ever writes to stdout, which belongs to the MCP protocol in stdio mode.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

MAX_MESSAGE_CHARS = 4000
"""Longest message one log line carries; the rest is cut, saying how much."""
MAX_FIELD_CHARS = 500
"""Longest value of one structured field."""
MAX_TRACEBACK_CHARS = 20_000

_CONTROLS = {
    code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    for code in [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029]
}
"""Every character that could end a line or move the cursor (C0, DEL, C1, the Unicode line and paragraph
separators), written as its escape instead."""
_CONTROLS.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


def escaped(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text` on one line and bounded: what a worker, a program or an upstream server put in a logged value can
    never forge a line of its own (nor clear the operator's terminal)."""
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit:,} more characters)"
    return text.translate(_CONTROLS)


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, dict) else {}


class TextFormatter(logging.Formatter):
    """``... INFO attp_server.ops.call_log: attp_execute call=3f2a status=ok error=- tool_calls=2 ms=14.2``.

    One record is one line: the message and every field are escaped (`escaped`) and bounded, whoever logged them;
    only a traceback takes more lines, each of them indented with ``  | `` so that none reads as a record."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = f"{self.formatTime(record)} {record.levelname} {escaped(record.name, 200)}: "
        line += escaped(record.getMessage())
        fields = _fields(record)
        if fields:
            line += " " + " ".join(
                f"{escaped(str(key), 100)}={'-' if value is None else escaped(str(value), MAX_FIELD_CHARS)}"
                for key, value in fields.items()
            )
        extra = []
        if record.exc_info:
            extra.append(self.formatException(record.exc_info))
        if record.stack_info:
            extra.append(self.formatStack(record.stack_info))
        for block in extra:
            parts = block[:MAX_TRACEBACK_CHARS].split("\n")
            line += "".join(f"\n  | {escaped(part, MAX_MESSAGE_CHARS)}" for part in parts)
        return line


class JsonFormatter(logging.Formatter):
    """``{"time": ..., "level": "INFO", "logger": ..., "message": ..., <fields>}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": _bounded(record.getMessage(), MAX_MESSAGE_CHARS),
            **{key: _bounded(value, MAX_FIELD_CHARS) for key, value in _fields(record).items()},
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)[:MAX_TRACEBACK_CHARS]
        return json.dumps(entry, ensure_ascii=False, default=str)


def _bounded(value: Any, limit: int) -> Any:
    """A field's value for a JSON line: text cut at `limit` (JSON escapes its control characters itself)."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]}... ({len(value) - limit:,} more characters)"
    return value


def configure_logging(level: str, log_format: str = "text") -> None:
    """Send every log record to stderr in the chosen format, replacing any earlier configuration."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
