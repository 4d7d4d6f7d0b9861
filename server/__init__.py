"""attp-server: one MCP tool, `attp_execute`, that runs a model's short Python program against your tools.

The public API is imported lazily so that sandbox worker processes, which import
``server.sandbox``, start without loading pydantic and the MCP SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from server.errors import AttpError, ErrorCode, ErrorInfo
    from server.toolpacks import ToolError, Toolpack, ToolpackContext

__all__ = ["AttpError", "ErrorCode", "ErrorInfo", "ToolError", "Toolpack", "ToolpackContext", "__version__"]

__version__ = "0.1.0"

_LAZY = {
    "AttpError": "server.errors",
    "ErrorCode": "server.errors",
    "ErrorInfo": "server.errors",
    "Toolpack": "server.toolpacks",
    "ToolpackContext": "server.toolpacks",
    "ToolError": "server.toolpacks",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'server' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
