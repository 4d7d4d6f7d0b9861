"""The MCP face: the `attp_execute` tool, the resources and the prompt on an `MCPServer`.

Transports live elsewhere: stdio here (`serve_stdio`), HTTP in `attp_server.http`.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import weakref
from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio
from attp_server import __version__
from attp_server.atdf import atdf_descriptor
from attp_server.catalog import tool_text
from attp_server.errors import suggest
from attp_server.results import ExecutionResult, render, structured
from attp_server.runtime import CallContext, ExecuteRequest, Runtime
from attp_server.settings import Settings
from attp_server.signals import on_stop_signal
from attp_server.skills import SkillError, SkillLibrary, default_skills_dirs
from attp_server.toolpack import Tool
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.subscriptions import InMemorySubscriptionBus, ToolsListChanged
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

logger = logging.getLogger(__name__)

SERVER_NAME = "attp-server"
LANGUAGES = {"python": "Python", "starlark": "Starlark"}


def instructions(engine: str) -> str:
    return (
        f"This server has one tool, attp_execute: write a short {LANGUAGES[engine]} program that calls the listed "
        "tools and assigns the answer to __result__. Prefer one program that does all the steps over many small calls."
    )


class _Clients:
    """MCP middleware that remembers every client connection seen, to tell them when the tool list changes.

    Connections are held weakly: a client that went away is forgotten with its connection. The SDK makes a
    `ServerSession` per request and does not expose the connection under it, hence the private attribute
    (without it, handshake-era clients are not told; 2026 clients still hear it on their listen stream).
    """

    def __init__(self) -> None:
        self.connections: weakref.WeakSet[Any] = weakref.WeakSet()

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        connection = getattr(ctx.session, "_connection", None)
        if connection is not None and hasattr(connection, "send_tool_list_changed"):
            self.connections.add(connection)
        return await call_next(ctx)

    async def tools_changed(self, bus: InMemorySubscriptionBus) -> None:
        """``notifications/tools/list_changed`` to every handshake-era connection, and on the listen bus (2026)."""
        for connection in list(self.connections):
            try:
                await connection.send_tool_list_changed()
            except Exception as exc:  # a client that went away must not stop the others from hearing
                logger.debug("could not tell a client that the tools changed: %s", exc)
        await bus.publish(ToolsListChanged())


def create_server(runtime: Runtime) -> MCPServer:
    """An `MCPServer` publishing exactly one tool, `attp_execute`."""
    settings = runtime.settings
    clients = _Clients()
    bus = InMemorySubscriptionBus()
    server: MCPServer = MCPServer(
        SERVER_NAME,
        version=__version__,
        instructions=instructions(settings.engine),
        log_level=settings.log_level,
        subscriptions=bus,
        middleware=[clients],
    )

    async def attp_execute(
        code: Annotated[
            str | None, Field(description="The program to run (Python, or Starlark with engine = starlark).")
        ] = None,
        envelope: Annotated[
            str | None, Field(description="Instead of code: a whole ATTP TOML envelope ([tool_call] with code).")
        ] = None,
        target: Annotated[str | None, Field(description="What this call is for (echoed in the result).")] = None,
        thought: Annotated[str | None, Field(description="Your reasoning, for the log; not executed.")] = None,
        engine: Annotated[
            Literal["python", "starlark"] | None,
            Field(description="Language of the program: python or starlark; omit it for the server's default."),
        ] = None,
        *,
        ctx: Context,
    ) -> Annotated[CallToolResult, ExecutionResult]:
        async def progress(value: float, message: str) -> None:
            await ctx.report_progress(value, message=message)

        context = CallContext(session=session_of(ctx), progress=progress)
        request = ExecuteRequest(code=code, envelope=envelope, target=target, thought=thought, engine=engine)
        result = await runtime.execute(request, context)
        return CallToolResult(
            content=[TextContent(type="text", text=render(result, text_format(settings, ctx)))],
            structured_content=structured(result),
            is_error=result.is_error,
        )

    _add_tool_resources(server, runtime)
    _add_skill_resources(server, SkillLibrary.load(settings.skills_dirs or default_skills_dirs()))

    def publish() -> None:
        """(Re)register attp_execute with the current description: upstream tools can change while serving."""
        marks = [tool.marks for tool in runtime.registry.tools.values()]
        server.add_tool(
            attp_execute,
            name="attp_execute",
            title=f"Run a {LANGUAGES[settings.engine]} program against the tools",
            description=runtime.catalog.description,
            annotations=ToolAnnotations(
                title=f"Run a {LANGUAGES[settings.engine]} program against the tools",
                read_only_hint=all(m.read_only for m in marks),
                destructive_hint=any(m.destructive for m in marks),
                idempotent_hint=False,
                open_world_hint=any(m.open_world for m in marks),
            ),
            structured_output=True,
        )

    publish()
    if any(pack.live is not None for pack in runtime.registry.packs.values()):

        async def tools_changed() -> None:
            server.remove_tool("attp_execute")
            publish()
            await clients.tools_changed(bus)

        runtime.listeners.append(tools_changed)
        # Say so in the handshake: clients listen for notifications/tools/list_changed only when it is declared.
        lowlevel = server._lowlevel_server
        lowlevel.create_initialization_options = functools.partial(  # type: ignore[method-assign]
            lowlevel.create_initialization_options, NotificationOptions(tools_changed=True)
        )
    return server


def text_format(settings: Settings, ctx: Context) -> Literal["toml", "json"]:
    """The text block's format for this caller: JSON for the clients `json_clients` names, else `result_format`.

    The name is the ``clientInfo.name`` the client sent. n8n's standalone MCP Client node (version 1)
    ignores ``structuredContent`` and hands the workflow the text, JSON-parsed when it parses: JSON
    gives the workflow an object whose ``status`` an IF node can test, TOML only a string. A client
    that claims another's name merely gets the same result in the other format.
    """
    try:
        params = ctx.session.client_params
    except ValueError:  # no request context: not a call from a client
        return settings.result_format
    name = params.client_info.name if params is not None else None
    return "json" if name in settings.json_clients else settings.result_format


def session_of(ctx: Context) -> str:
    """A short, non-secret label of the caller for the log line.

    ``stdio``; over HTTP a prefix of the MCP session id when the protocol has sessions, else the
    peer's address (the 2026 Streamable HTTP wire is sessionless).
    """
    try:
        request = ctx.request_context.request
    except ValueError:
        return "-"
    headers = getattr(request, "headers", None)
    if headers is None:
        return "stdio"
    session = headers.get("mcp-session-id") or getattr(request, "query_params", {}).get("session_id")
    if session:
        return str(session)[:8]
    client = getattr(request, "client", None)
    return f"{client.host}:{client.port}" if client is not None else "-"


def _add_tool_resources(server: MCPServer, runtime: Runtime) -> None:
    """The tool descriptions and the system prompt, as resources and a prompt (SPEC §5)."""
    catalog = runtime.catalog
    registry = runtime.registry

    def find(name: str) -> Tool:
        tool = registry.resolve(name)
        if tool is None:
            hint = suggest(name, registry.callable_names())
            raise ResourceError(f"no tool named {name!r}" + (f"; did you mean {hint!r}?" if hint else ""))
        return tool

    @server.resource(
        "attp://tools",
        name="tools",
        mime_type="text/x-python",
        description="Every enabled tool: signature and docstring.",
    )
    def all_tools() -> str:
        return catalog.attp_text()

    @server.resource(
        "attp://tools/{name}", name="tool", mime_type="text/x-python", description="One tool's signature and docstring."
    )
    def one_tool(name: str) -> str:
        return tool_text(find(name))

    @server.resource(
        "attp://tools/{name}/atdf",
        name="tool-atdf",
        mime_type="application/json",
        description="One tool's ATDF 2.x descriptor.",
    )
    def one_tool_atdf(name: str) -> str:
        return json.dumps(atdf_descriptor(find(name)), indent=2, ensure_ascii=False)

    @server.resource(
        "attp://prompt",
        name="prompt",
        mime_type="text/markdown",
        description="The ATTP system prompt with the tools filled in.",
    )
    def prompt_resource() -> str:
        return catalog.prompt()

    memory_view = registry.tools.get("view")
    if memory_view is not None and memory_view.pack == "memory":
        view = memory_view.function

        @server.resource(
            "memory://view",
            name="memory-view",
            mime_type="text/plain",
            description="The memory toolpack's page tree, rendered as the model sees it.",
        )
        async def memory_view_resource() -> str:
            return str(await anyio.to_thread.run_sync(view))

    @server.prompt(
        name="attp_system_prompt", description="The ATTP system prompt (seed 000) with the enabled tools filled in."
    )
    def attp_system_prompt(language: str = "en") -> str:
        """Args: language: "en" (default) or "zh" for the seed's Chinese wording."""
        return catalog.prompt(language)


def _add_skill_resources(server: MCPServer, library: SkillLibrary) -> None:
    """The skills library (SPEC §7) as resources, whether or not the `skills` toolpack is enabled."""

    def served(read: Callable[[], str]) -> str:
        try:
            return read()
        except SkillError as error:
            raise ResourceError(f"{error.code}: {error.message}") from None

    @server.resource(
        "skill://index",
        name="skills",
        mime_type="application/json",
        description="Every skill: name, title, description, category and attached files.",
    )
    def skill_index() -> str:
        return json.dumps(library.index(), indent=2, ensure_ascii=False)

    @server.resource("skill://{name}", name="skill", mime_type="text/markdown", description="One skill's SKILL.md.")
    def skill(name: str) -> str:
        return served(lambda: library.get(name).content())

    @server.resource(
        "skill://{name}/{+path}",
        name="skill-file",
        mime_type="text/plain",
        description="A file attached to a skill (a template or an example), by its path inside the skill.",
    )
    def skill_file(name: str, path: str) -> str:
        return served(lambda: library.read_file(name, path))


async def serve_stdio(server: MCPServer, runtime: Runtime) -> None:
    """Serve over stdin/stdout until the client closes stdin or a stop signal arrives."""

    def stop(_received: object) -> None:
        # The SDK reads stdin on a thread that cancellation cannot interrupt: an orderly unwind would
        # wait for the client's next line. Kill the workers, then end the process here.
        runtime.pool.kill_now()
        logging.shutdown()
        os._exit(0)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(on_stop_signal, stop)
        await server.run_stdio_async()
        tasks.cancel_scope.cancel()
