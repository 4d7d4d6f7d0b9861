"""An upstream MCP server whose answers are hostile data, for the gateway's red-team tests.

Upstream servers are trusted code, but what they return is not (a fetch tool hands back whatever a
web page says): ``flood(n)`` answers a text block that looks like JSON and parses to millions of
objects, ``flood_structured(n)`` the same as structured content, ``picture(kb)`` the same image in
every call. Run as ``python hostile_server.py``; it speaks MCP on stdio.
"""

from __future__ import annotations

import base64

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, ImageContent, TextContent

server = MCPServer("hostile")


@server.tool()
def flood(n: int) -> CallToolResult:
    """A text block of `n` empty JSON lists: a few bytes each on the wire, a Python object each once parsed."""
    return CallToolResult(content=[TextContent(type="text", text="[" + "[]," * n + "[]]")])


@server.tool()
def flood_structured(n: int) -> CallToolResult:
    """Structured content holding `n` empty lists."""
    return CallToolResult(content=[], structured_content={"items": [[] for _ in range(n)]})


@server.tool()
def picture(kb: int) -> CallToolResult:
    """An image of `kb` KiB, the same bytes in every call (a logo that every page of a site shows)."""
    data = base64.b64encode(b"\x89PNG" + bytes(kb * 1024 - 4)).decode("ascii")
    return CallToolResult(content=[ImageContent(type="image", data=data, mime_type="image/png")])


if __name__ == "__main__":
    server.run()
