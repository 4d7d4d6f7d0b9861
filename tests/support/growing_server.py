"""A small upstream MCP server whose tool list changes: ``grow(name)`` adds a tool and says so.

For the gateway's ``notifications/tools/list_changed`` test (none of the pinned third-party servers
changes its tools on request). Run as ``python growing_server.py``; it speaks MCP on stdio.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("growing")


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called `name` that returns its own name, and tell the client the tool list changed."""

    def added() -> str:
        return name

    server.add_tool(added, name=name, description=f"Return {name!r}.")
    await ctx.notify_tools_changed()  # 2026-07-28 clients: on their subscriptions/listen stream
    await ctx.session.send_tool_list_changed()  # handshake-era clients
    return f"added {name}"


if __name__ == "__main__":
    server.run()
