"""An upstream MCP server whose answers are hostile data, for the gateway's red-team tests.

Upstream servers are trusted code, but what they return is not (a fetch tool hands back whatever a
web page says): ``flood(n)`` answers a text block that looks like JSON and parses to millions of
objects, ``flood_structured(n)`` the same as structured content. Run as ``python hostile_server.py``;
it speaks MCP on stdio.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent

server = MCPServer("hostile")


@server.tool()
def flood(n: int) -> CallToolResult:
    """A text block of `n` empty JSON lists: a few bytes each on the wire, a Python object each once parsed."""
    return CallToolResult(content=[TextContent(type="text", text="[" + "[]," * n + "[]]")])


@server.tool()
def flood_structured(n: int) -> CallToolResult:
    """Structured content holding `n` empty lists."""
    return CallToolResult(content=[], structured_content={"items": [[] for _ in range(n)]})


if __name__ == "__main__":
    server.run()
