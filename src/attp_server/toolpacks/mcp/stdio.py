"""A local upstream MCP server over stdio, read in linear time and bounded: the gateway's stdio transport.

The SDK's own stdio client (`mcp.client.stdio.stdio_client`) joins every 64 KiB chunk of a line to all
that came before it (``buffer + chunk``) and parses the line on the event loop: a 50 MB answer took
tens of seconds of the event loop every session shares, and a line of any length was read into memory
(issue 22 red team). This transport, otherwise the same (a child in its own process group with the
SDK's safe environment plus its ``env``, stderr passed through; on exit stdin closed, then the whole
tree terminated after a grace period), reads each line into one growing buffer (linear), parses a
long line on a worker thread, and refuses a line longer than `max_line` bytes without keeping it: the
request it answers gets a JSON-RPC error saying so, found by its ``id`` near the start of the line.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, TextIO

import anyio
import mcp_types as types
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

logger = logging.getLogger(__name__)

PARSE_INLINE_BYTES = 64 * 1024
"""Lines up to this size are parsed on the event loop (microseconds); longer ones on a worker thread."""
EXIT_GRACE_S = 2.0
"""After stdin is closed, how long the server has to exit before its process group is terminated."""
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
REFUSED_UNREAD = "attp_refused_unread"
"""Key of the refusal's ``data``: the size of the message that was refused."""
_HEAD = 4096
"""Bytes of a refused line kept to find the ``id`` of the request it answers."""


@asynccontextmanager
async def bounded_stdio(
    server: StdioServerParameters, max_line: int, errlog: TextIO = sys.stderr
) -> AsyncIterator[Any]:
    """Start `server` and yield the (read, write) streams of its messages, as the SDK's transports do; its
    stderr goes to `errlog`."""
    process = await anyio.open_process(
        [server.command, *server.args],
        env=get_default_environment() | (server.env or {}),
        cwd=server.cwd,
        stderr=errlog,
        start_new_session=True,
    )
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def read() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        refused: bytes | None = None  # the head of a line past max_line, while the rest is skipped
        skipped = 0
        async with read_writer:
            with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async for chunk in process.stdout:
                    start = 0
                    while (end := chunk.find(b"\n", start)) != -1:
                        piece = chunk[start:end]
                        start = end + 1
                        if refused is not None:
                            await read_writer.send(_refusal(refused, skipped + len(piece), max_line))
                            refused = None
                            continue
                        buffer += piece
                        line, buffer = bytes(buffer), bytearray()
                        if line.strip():
                            await read_writer.send(await _parse(line))
                    rest = chunk[start:]
                    if refused is None:
                        buffer += rest
                        if len(buffer) > max_line:
                            refused, skipped, buffer = bytes(buffer[:_HEAD]), len(buffer), bytearray()
                    else:
                        skipped += len(rest)

    async def write() -> None:
        assert process.stdin is not None
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode("utf-8"))
        await read_writer.aclose()  # the server may still run: the session must see the connection end

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
                for stream in (read_stream, write_stream):
                    await stream.aclose()
            tasks.cancel_scope.cancel()


async def _parse(line: bytes) -> SessionMessage | Exception:
    def parse() -> SessionMessage | Exception:
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as exc:
            logger.warning("an MCP server sent a line that is not a JSON-RPC message: %s", str(exc)[:200])
            return exc

    if len(line) <= PARSE_INLINE_BYTES:
        return parse()
    return await anyio.to_thread.run_sync(parse)


def _refusal(head: bytes, size: int, max_line: int) -> SessionMessage | Exception:
    """The error answering the request whose reply was too long (its id read from the line's start); its
    ``data`` says `REFUSED_UNREAD` and the size, which `Upstream` reports as ``RESULT_TOO_LARGE``."""
    found = _ID.search(head)
    message = f"a message of {size:,} bytes, longer than the {max_line:,} read from this server, was refused unread"
    if found is None:
        logger.warning("an MCP server sent a message of %d bytes; it was dropped unread", size)
        return ValueError(message)
    data = {REFUSED_UNREAD: size}
    error = {
        "jsonrpc": "2.0",
        "id": json.loads(found.group(1)),
        "error": {"code": -32603, "message": message, "data": data},
    }
    return SessionMessage(types.jsonrpc_message_adapter.validate_python(error))


async def _stop(process: Any) -> None:
    """Close the server's stdin, give it `EXIT_GRACE_S` to exit, then terminate its whole process group."""
    with suppress(Exception):
        await process.stdin.aclose()
    with anyio.move_on_after(EXIT_GRACE_S):
        await process.wait()
        return
    with suppress(Exception):
        await terminate_posix_process_tree(process)
    with suppress(Exception), anyio.move_on_after(EXIT_GRACE_S):
        await process.wait()
