"""The round-trip baseline: a tiny MCP server with one tool that does nothing, on the same SDK and transports.

``python -m bench.noop_server`` serves stdio; ``python -m bench.noop_server --port N`` serves Streamable
HTTP at ``/mcp``, the way ``attp serve`` does (same SDK app, uvicorn, loopback only). ``--shape`` adds
``attp_shape``: ``attp_execute``'s parameters and output schema, answering W1's result without running
anything (what the SDK costs for the shape of our tool; ``python -m bench.breakdown``). Nothing of it
lives in the product server.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import Annotated, Literal

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent
from pydantic import Field

from attp_server.model.results import CallRecord, ExecutionResult, render, structured
from attp_server.settings import Settings
from bench.workloads import WORKLOADS, noop


def build(shape: bool = False) -> MCPServer:
    server: MCPServer = MCPServer("bench-noop", log_level="WARNING")
    server.add_tool(noop, name="noop")
    if shape:
        server.add_tool(_shape_tool(), name="attp_shape", structured_output=True)
    return server


def _shape_tool() -> Callable[..., Awaitable[CallToolResult]]:
    """A tool with attp_execute's parameters and output schema whose answer is W1's, rendered once."""
    calls = [CallRecord(tool=tool, ok=True, ms=0.05) for tool in ("lookup", "lookup", "lookup", "score", "score")]
    result = ExecutionResult(status="ok", result=WORKLOADS[0].expected(), calls=calls, elapsed_ms=1.0)
    data = structured(result)
    text = render(result, Settings.model_fields["result_format"].default)

    async def attp_shape(
        code: Annotated[str | None, Field(description="The program to run.")] = None,
        envelope: Annotated[str | None, Field(description="Instead of code: a whole ATTP TOML envelope.")] = None,
        target: Annotated[str | None, Field(description="What this call is for (echoed in the result).")] = None,
        thought: Annotated[str | None, Field(description="Your reasoning, for the log; not executed.")] = None,
        engine: Annotated[Literal["python", "starlark"] | None, Field(description="Language of the program.")] = None,
    ) -> Annotated[CallToolResult, ExecutionResult]:
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data, is_error=False)

    return attp_shape


async def serve(port: int | None, shape: bool = False) -> None:
    server = build(shape)
    if port is None:
        await server.run_stdio_async()
        return
    config = uvicorn.Config(
        server.streamable_http_app(host="127.0.0.1"), host="127.0.0.1", port=port, log_config=None, log_level="warning"
    )
    await uvicorn.Server(config).serve()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.noop_server")
    parser.add_argument("--port", type=int, help="serve Streamable HTTP on this loopback port (default: stdio)")
    parser.add_argument("--shape", action="store_true", help="also serve attp_shape (attp_execute's shape, no work)")
    args = parser.parse_args(argv)
    anyio.run(serve, args.port, args.shape)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
