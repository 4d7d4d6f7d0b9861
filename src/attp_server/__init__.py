"""attp-server: one MCP tool, `attp_execute`, that runs a model's short Python program against your tools.

The public API is imported lazily so that sandbox worker processes, which import
``attp_server.sandbox``, start without loading pydantic and the MCP SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attp_server.errors import AttpError, ErrorCode, ErrorInfo
    from attp_server.toolpack import ToolError, ToolMarks, Toolpack, ToolpackContext

__all__ = [
    "AttpError",
    "ErrorCode",
    "ErrorInfo",
    "ToolError",
    "ToolMarks",
    "Toolpack",
    "ToolpackContext",
    "__version__",
]

__version__ = "0.1.0"

_LAZY = {
    "AttpError": "attp_server.errors",
    "ErrorCode": "attp_server.errors",
    "ErrorInfo": "attp_server.errors",
    "Toolpack": "attp_server.toolpack",
    "ToolpackContext": "attp_server.toolpack",
    "ToolError": "attp_server.toolpack",
    "ToolMarks": "attp_server.toolpack",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'attp_server' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
