"""A call naming a tool or a prompt this server does not publish is a protocol error, as the specification says.

The specification's tools page ("Error Handling") lists an unknown tool among the protocol errors, answered as a
JSON-RPC error -32602, and its prompts page answers an invalid prompt name with -32602 too. The SDK's `MCPServer`
answers the first with a tool result marked ``isError`` (which a client takes for a tool that ran and failed) and
the second with an internal error (-32603 on 2026-07-28, code 0 on the handshake-era protocols). This middleware
answers both before the SDK does, naming what this server publishes.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from attp_server.errors import suggest


class PublishedNames:
    """MCP middleware: ``tools/call`` and ``prompts/get`` are served only for a name that ``*/list`` shows.

    Give it the server once built (`watch`); until then it lets every request through.
    """

    def __init__(self) -> None:
        self.server: MCPServer | None = None

    def watch(self, server: MCPServer) -> None:
        self.server = server

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        name = (ctx.params or {}).get("name")
        if self.server is None or not isinstance(name, str):  # a name of another type: the SDK's validation says so
            return await call_next(ctx)
        if ctx.method == "tools/call":
            kind, published = "tool", [tool.name for tool in await self.server.list_tools()]
        elif ctx.method == "prompts/get":
            kind, published = "prompt", [prompt.name for prompt in await self.server.list_prompts()]
        else:
            return await call_next(ctx)
        if name in published:
            return await call_next(ctx)
        hint = suggest(name, published)
        raise MCPError(
            INVALID_PARAMS,
            f"Unknown {kind}: {name[:100]!r}"
            + (f" (did you mean {hint!r}?)" if hint else "")
            + f"; the {kind}s this server publishes ({kind}s/list): {', '.join(published) or 'none'}",
        )
