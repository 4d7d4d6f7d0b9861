"""Logging to stderr: readable text by default, one JSON object per line with ``log_format = "json"``.

Structured records carry their data in ``extra={"fields": {...}}``; both formats show every field.
Nothing here ever writes to stdout, which belongs to the MCP protocol in stdio mode.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, dict) else {}


class TextFormatter(logging.Formatter):
    """``... INFO attp_server.ops.call_log: attp_execute call=3f2a status=ok error=- tool_calls=2 ms=14.2``."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = _fields(record)
        if fields:
            line += " " + " ".join(f"{key}={'-' if value is None else value}" for key, value in fields.items())
        return line


class JsonFormatter(logging.Formatter):
    """``{"time": ..., "level": "INFO", "logger": ..., "message": ..., <fields>}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(level: str, log_format: str = "text") -> None:
    """Send every log record to stderr in the chosen format, replacing any earlier configuration."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
