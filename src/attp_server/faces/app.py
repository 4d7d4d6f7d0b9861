"""The MCP face: the `attp_execute` tool, the resources and the prompt on an `MCPServer`.

Transports live elsewhere: stdio here (`serve_stdio`), HTTP in `attp_server.faces.http`.
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import os
import weakref
from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio
from mcp.server.caching import CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.request_state import RequestStateSecurity
from mcp.server.subscriptions import InMemorySubscriptionBus, ToolsListChanged
from mcp_types import CallToolResult, ImageContent, InputRequiredResult, TextContent, ToolAnnotations
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field, WithJsonSchema

from attp_server import __version__
from attp_server.errors import ErrorCode, ErrorInfo, suggest
from attp_server.faces.elicitation import (
    Relay,
    Rounds,
    ask_over_connection,
    can_elicit,
    can_open_urls,
    open_url_over_connection,
)
from attp_server.faces.http import tenant_of
from attp_server.faces.published import PublishedNames
from attp_server.faces.signals import on_stop_signal
from attp_server.faces.signin import signed_in
from attp_server.model.atdf import atdf_descriptor
from attp_server.model.catalog import LANGUAGES, tool_text
from attp_server.model.results import ExecutionResult, render, structured
from attp_server.model.skills import SkillError, SkillLibrary, default_skills_dirs
from attp_server.run.reach import View
from attp_server.run.runtime import CallContext, ExecuteRequest, Runtime
from attp_server.sandbox.engines import ENGINE_NAMES, ENGINES
from attp_server.sessions.approvals import Ask
from attp_server.sessions.isolation import NoSession
from attp_server.sessions.registry import STDIO_SESSION, Caller
from attp_server.settings import Settings
from attp_server.toolpack import Tool

logger = logging.getLogger(__name__)

SERVER_NAME = "attp-server"
SESSION_INPUT = (
    "The session value an earlier reply returned: this call continues that session (its variables and functions). "
    "Omit it to start a new one."
)
FIXED_TOOLS_TTL_MS = 3_600_000
"""How long a client may keep our tools/list (``ttlMs``) when no upstream server can change it: an hour."""
LIVE_TOOLS_TTL_MS = 60_000
"""The same with upstream servers behind attp: a minute (a change is also announced, as tools/list_changed)."""


def instructions(engine: str) -> str:
    return (
        f"This server has one tool, attp_execute: write a short {LANGUAGES[engine]} program that calls the listed "
        "tools and assigns the answer to __result__. Prefer one program that does all the steps over many small calls."
    )


def engine_inputs(settings: Settings) -> dict[str, Any]:
    """The annotations of ``code`` and ``engine`` in attp_execute's input schema: the engines this server offers
    (`Settings.offered_engines`, the default first) and their languages. A name outside the list is refused by
    the runtime with an error naming the offered ones, never by schema validation."""
    offered = settings.offered_engines
    first = ENGINES[offered[0]].language.name
    others = [f"{ENGINES[n].language.name} with engine = {n}" for n in offered if ENGINES[n].language.name != first]
    code = f"The program to run ({', or '.join([first, *others])})."
    if len(offered) == 1:
        engine = f"The engine that runs the program: this server offers {offered[0]} only; omit it."
    else:
        engine = (
            f"The engine that runs the program: one of {', '.join(offered)} (the tool description says how they "
            f"differ); omit it for {offered[0]}, the default."
        )
    schema = {"type": "string", "enum": list(offered), "description": engine}
    return {
        "code": Annotated[str | None, Field(description=code)],
        "engine": Annotated[str | None, WithJsonSchema(schema)],
    }


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
    published = PublishedNames()
    bus = InMemorySubscriptionBus()
    # Upstream servers' tools can change while serving, and so can the servers themselves (the config is watched).
    live = runtime.watching or any(pack.live is not None for pack in runtime.registry.packs.values())
    server: MCPServer = MCPServer(
        SERVER_NAME,
        version=__version__,
        instructions=instructions(settings.engine),
        log_level=settings.log_level,
        subscriptions=bus,
        middleware=[
            clients,
            remember_request,
            published,
            functools.partial(own_description, runtime),
            functools.partial(check_arguments, settings),
        ],
        request_state_security=request_state_security(runtime),
        cache_hints={"tools/list": CacheHint(ttl_ms=LIVE_TOOLS_TTL_MS if live else FIXED_TOOLS_TTL_MS)},
    )
    published.watch(server)

    async def attp_execute(
        code: Annotated[str | None, Field(description="The program to run.")] = None,
        envelope: Annotated[
            str | None, Field(description="Instead of code: a whole ATTP TOML envelope ([tool_call] with code).")
        ] = None,
        target: Annotated[str | None, Field(description="What this call is for (echoed in the result).")] = None,
        thought: Annotated[str | None, Field(description="Your reasoning, for the log; not executed.")] = None,
        engine: Annotated[str | None, Field(description="The engine that runs the program.")] = None,
        *,
        reset: Annotated[
            bool,
            Field(description="true: forget the variables and functions kept from this session's earlier calls first."),
        ] = False,
        session: Annotated[
            str | None,
            WithJsonSchema({"type": "string", "x-mcp-header": "Session", "description": SESSION_INPUT}),
        ] = None,
        ctx: Context,
    ) -> Annotated[CallToolResult, ExecutionResult] | InputRequiredResult:
        async def progress(value: float, message: str) -> None:
            await ctx.report_progress(value, message=message)

        caller = caller_of(ctx)
        request = ExecuteRequest(
            code=code, envelope=envelope, target=target, thought=thought, engine=engine, reset=reset, session=session
        )
        text = text_format(settings, ctx)

        open_url = (
            open_url_over_connection(ctx)
            if ctx.session.can_send_request and can_open_urls(ctx.client_capabilities)
            else None
        )

        async def execute(ask: Ask | None) -> CallToolResult:
            context = CallContext(session=caller.label, progress=progress, caller=caller, ask=ask, open_url=open_url)
            return tool_result(await runtime.execute(request, context), text)

        owner = f"{caller.principal}|{session or caller.session or ''}"
        if ctx.request_state is not None and rounds is not None:
            return await rounds.resume(ctx.request_state, ctx.input_responses, owner)
        if runtime.reach.approval(caller) == "never" or not can_elicit(ctx.client_capabilities):
            return await execute(None)
        if ctx.session.can_send_request:
            return await execute(ask_over_connection(ctx))
        if rounds is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:  # 2026-07-28: across calls
            return await rounds.start(execute, owner)
        return await execute(None)

    attp_execute.__annotations__.update(engine_inputs(settings))  # what this server offers, in the input schema
    relay = (
        Relay(runtime.store.rounds, runtime.sessions.instance)
        if runtime.store is not None and runtime.sessions is not None
        else None
    )
    rounds = (
        Rounds(runtime.tasks, settings.approval_timeout_s, functools.partial(_approval_expired, settings), relay)
        if runtime.tasks is not None
        else None
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
    if live:

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


ARGUMENTS: dict[str, tuple[type, str]] = {
    "code": (str, "a string: the program"),
    "envelope": (str, "a string: a whole ATTP TOML envelope"),
    "target": (str, "a string"),
    "thought": (str, "a string"),
    "engine": (str, "one of " + ", ".join(f'"{name}"' for name in ENGINE_NAMES)),
    "session": (str, 'a string: the session value an earlier reply returned, exactly as it came ("PTLa2HZahS3a...")'),
    "reset": (bool, "true or false"),
}
"""attp_execute's arguments, and what each takes."""
JSON_TYPES = {
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    list: "a list",
    dict: "an object",
}


async def check_arguments(
    settings: Settings, ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Server middleware: an attp_execute argument of the wrong type (``"session": 5``) gets a result that says
    which argument, what it got and what it takes, as every other error does, instead of the SDK's validation
    error (a pydantic report, written for a Python programmer)."""
    params = ctx.params if ctx.method == "tools/call" else None
    arguments = params.get("arguments") if params is not None and params.get("name") == "attp_execute" else None
    error = wrong_argument(arguments) if isinstance(arguments, dict) else None
    if error is None:
        return await call_next(ctx)
    return tool_result(ExecutionResult(status="error", error=error), text_format(settings, ctx))


def wrong_argument(arguments: dict[str, Any]) -> ErrorInfo | None:
    """The first of attp_execute's `arguments` whose type (or, for ``engine``, value) is not what it takes."""
    for name, (kind, expected) in ARGUMENTS.items():
        value = arguments.get(name)
        if value is None or (type(value) is kind and (name != "engine" or value in LANGUAGES)):
            continue
        takes = expected.partition(":")[0]
        shown = json.dumps(value, ensure_ascii=False, default=str)  # as the model sent it: JSON, not a Python repr
        shown = shown if len(shown) <= 80 else shown[:65] + f"... ({len(shown)} chars)"
        got = JSON_TYPES.get(type(value), type(value).__name__) if type(value) is not kind else shown
        return ErrorInfo(
            code=ErrorCode.INVALID_ARGUMENT,
            message=f"attp_execute's {name} must be {takes}; it got {got}",
            parameter_name=name,
            received=shown,
            expected=expected,
            solution="Leave session out to start a new session, or pass the session value of a reply unchanged."
            if name == "session"
            else f"Send {name} as {takes}.",
        )
    return None


async def own_description(runtime: Runtime, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: under access rules, the tool list a caller gets describes only the tools it may call."""
    result = await call_next(ctx)  # the result as it goes on the wire
    if ctx.method != "tools/list" or not runtime.reach.active or not isinstance(result, dict):
        return result
    catalog = runtime.reach.view(caller_from(ctx), runtime.registry).catalog
    if catalog is None:
        return result
    tools = [
        {**tool, "description": catalog.description} if tool.get("name") == "attp_execute" else tool
        for tool in result.get("tools", [])
    ]
    return {**result, "tools": tools}


def request_state_security(runtime: Runtime) -> RequestStateSecurity:
    """The SDK seals the 2026-07-28 ``requestState`` of an approval round trip with a key derived from
    `secret_file`: every replica that shares it unseals what another sealed (without a store: this process's own)."""
    ttl = runtime.settings.approval_timeout_s + 60
    if runtime.store is None:
        return RequestStateSecurity.ephemeral(ttl=ttl)
    return RequestStateSecurity(keys=[runtime.store.secret.key("request-state")], ttl=ttl)


def tool_result(result: ExecutionResult, text: Literal["toml", "json"]) -> CallToolResult:
    """The MCP result of a run: its rendering as text, the object as structured content, isError on error."""
    pictures = [
        ImageContent(type="image", data=picture.data, mime_type=picture.mime_type) for picture in result.pictures
    ]
    return CallToolResult(
        content=[TextContent(type="text", text=render(result, text)), *pictures],
        structured_content=structured(result),
        is_error=result.is_error,
    )


def text_format(settings: Settings, ctx: Context | ServerRequestContext[Any, Any]) -> Literal["toml", "json"]:
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


def _approval_expired(settings: Settings) -> CallToolResult:
    error = ErrorInfo(
        code=ErrorCode.APPROVAL_DENIED,
        message="this call is no longer waiting for an approval: its program was stopped because no answer came "
        f"within approval_timeout_s = {settings.approval_timeout_s:g} s",
        solution="Send the program again if it is still wanted.",
    )
    return tool_result(ExecutionResult(status="error", error=error), settings.result_format)


def caller_of(ctx: Context) -> Caller:
    """Who is calling a tool (see `caller_from`)."""
    try:
        return caller_from(ctx.request_context)
    except ValueError:
        return Caller()


_REQUEST: contextvars.ContextVar[ServerRequestContext[Any, Any] | None] = contextvars.ContextVar(
    "attp_request", default=None
)


async def remember_request(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: the request being served, for handlers the SDK gives no context (static resources)."""
    token = _REQUEST.set(ctx)
    try:
        return await call_next(ctx)
    finally:
        _REQUEST.reset(token)


def caller_from(context: ServerRequestContext[Any, Any] | None) -> Caller:
    """Who is calling: the transport's session and the token's holder, from what the SDK validated.

    stdio is one session (one process per client) on the handshake-era protocols; on 2026-07-28 a
    connection is not a conversation, stdio included. Over HTTP the session is the ``Mcp-Session-Id``
    of Streamable HTTP or the ``session_id`` of SSE, both minted by the SDK, which answers 404 to an
    id it does not know or that another token's holder opened; on a 2026-07-28 request
    ``Mcp-Session-Id`` means nothing (state travels as the ``session`` input). The label (for the log
    line) is a prefix of the session id, or the peer's address.
    """
    if context is None:
        return Caller()
    request = context.request
    headers = getattr(request, "headers", None)
    modern = context.protocol_version in MODERN_PROTOCOL_VERSIONS
    if headers is None:
        return Caller(label="stdio") if modern else Caller(session=STDIO_SESSION, label="stdio")
    scope = getattr(request, "scope", {})
    person = signed_in(scope)
    who: dict[str, Any] = {"tenant": tenant_of(scope)}
    if person is not None:
        who = {"person": person.principal, "groups": person.groups, "credential": person.token}
    if modern:
        client = getattr(request, "client", None)
        return Caller(**who, label=f"{client.host}:{client.port}" if client is not None else "-")
    if session := headers.get("mcp-session-id"):
        return Caller(session=f"http:{session}", **who, label=str(session)[:8])
    if session := getattr(request, "query_params", {}).get("session_id"):
        return Caller(session=f"sse:{session}", **who, label=str(session)[:8])
    client = getattr(request, "client", None)
    return Caller(**who, label=f"{client.host}:{client.port}" if client is not None else "-")


def _add_tool_resources(server: MCPServer, runtime: Runtime) -> None:
    """The tool descriptions and the system prompt, as resources and a prompt (SPEC §5)."""
    registry = runtime.registry  # the same object while serving; its tools change with the upstream servers

    def view() -> View:
        """The tools of the caller reading (its own under access rules)."""
        return runtime.reach.view(caller_from(_REQUEST.get()), registry)

    def find(name: str) -> Tool:
        tools = view().tools
        tool = tools.resolve(name)
        if tool is None:
            hint = suggest(name, tools.callable_names())
            raise ResourceError(f"no tool named {name!r}" + (f"; did you mean {hint!r}?" if hint else ""))
        return tool

    @server.resource(
        "attp://tools",
        name="tools",
        mime_type="text/x-python",
        description="Every enabled tool: signature and docstring.",
    )
    def all_tools() -> str:
        return (view().catalog or runtime.catalog).attp_text()

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
        return (view().catalog or runtime.catalog).prompt()

    memory_view = registry.tools.get("view")
    if memory_view is not None and memory_view.pack == "memory":

        @server.resource(
            "memory://view",
            name="memory-view",
            mime_type="text/plain",
            description="The memory toolpack's page tree, rendered as the model sees it.",
        )
        async def memory_view_resource() -> str:
            caller = caller_from(_REQUEST.get())
            try:
                tools = await runtime.tools_for(caller, runtime.implicit_session(caller))
            except NoSession:
                raise ResourceError(
                    "this server keeps each session's memory apart (isolation = session), and this request names no "
                    "session (a resource read on protocol 2026-07-28 carries none): view the memory through "
                    "attp_execute with your session handle"
                ) from None
            return str(await anyio.to_thread.run_sync(tools.tools["view"].function))

    @server.prompt(
        name="attp_system_prompt", description="The ATTP system prompt (seed 000) with the enabled tools filled in."
    )
    def attp_system_prompt(language: str = "en") -> str:
        """Args: language: "en" (default) or "zh" for the seed's Chinese wording."""
        return (view().catalog or runtime.catalog).prompt(language)


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
        for pool in runtime.evaluation.pools:
            pool.kill_now()
        logging.shutdown()
        os._exit(0)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(on_stop_signal, stop)
        await server.run_stdio_async()
        tasks.cancel_scope.cancel()
