"""An MCP server written for an older SDK, as many are: it registers a handler with a decorator the
installed ``mcp`` no longer has, so it dies at start with an ``AttributeError`` on its stderr (what
``mcp-server-sqlite`` does under mcp 2). The gateway trial test checks that this line is the reason
the model and the operator are given."""

from mcp.server import Server

server = Server("broken-example")


@server.list_resources()  # gone from the low-level Server in mcp 2: AttributeError at import
async def list_resources() -> list[object]:
    return []
