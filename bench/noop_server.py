"""The round-trip baseline: a tiny MCP server with one tool that does nothing, on the same SDK and transports.

``python -m bench.noop_server`` serves stdio; ``python -m bench.noop_server --port N`` serves Streamable
HTTP at ``/mcp``, the way ``attp serve`` does (same SDK app, uvicorn, loopback only). Nothing of it
lives in the product server.
"""

from __future__ import annotations

import argparse

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer

from bench.workloads import noop


def build() -> MCPServer:
    server: MCPServer = MCPServer("bench-noop", log_level="WARNING")
    server.add_tool(noop, name="noop")
    return server


async def serve(port: int | None) -> None:
    server = build()
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
    args = parser.parse_args(argv)
    anyio.run(serve, args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
