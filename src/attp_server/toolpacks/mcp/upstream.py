"""One upstream MCP server, kept connected while attp-server runs: its tools, its calls, its faults.

`Upstream` is the pack's `LiveTools`. `serve` owns the connection (an `mcp.Client` over stdio,
Streamable HTTP or SSE) in a task of its own:

* connect and list the tools within the startup timeout; a server that fails is reported (the
  reason and the fix) and attp-server goes on without it;
* keep the connection until it breaks, or until shutdown (the SDK closes a stdio server's stdin,
  then ends its whole process tree);
* on ``notifications/tools/list_changed``, list the tools again and tell the runtime;
* after a failure, connect again only when a call asks for the server, and not sooner than the
  backoff allows (1 s, doubling to 60 s), so a broken server is not restarted in a loop.

Calls run on the caller's task: each is bounded by the run's deadline (`current_call`), so a
timeout or a cancelled run cancels the upstream request (the SDK sends ``notifications/cancelled``),
and upstream progress is forwarded as the run's progress.
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import math
import re
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from anyio.abc import TaskStatus
from mcp import Client
from mcp.client.auth import OAuthFlowError
from mcp.client.sse import sse_client
from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from attp_server import __version__
from attp_server.mcp_config import ExpansionError, McpServer, expand
from attp_server.toolpack import Tool, ToolError, ToolMarks, current_call, make_tool
from attp_server.toolpacks.mcp.content import media_saver, result_data, scrub
from attp_server.toolpacks.mcp.failure import not_started, withheld
from attp_server.toolpacks.mcp.oauth import LoginNeeded, Provider, Vault, has_tokens
from attp_server.toolpacks.mcp.oauth import provider as oauth_provider
from attp_server.toolpacks.mcp.person import Person
from attp_server.toolpacks.mcp.personal import streamable
from attp_server.toolpacks.mcp.schema import ToolShape, identifier, shape_of
from attp_server.toolpacks.mcp.stderr import StderrTail
from attp_server.toolpacks.mcp.stdio import REFUSED_UNREAD, bounded_stdio

logger = logging.getLogger(__name__)

FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
MAX_PAGES = 100
"""Pages of tools/list read from one server (a paginator that never ends must not hang startup)."""
MAX_MESSAGE_FACTOR = 2
"""A stdio server's message may be this many times its ``max_result_bytes`` (plus 1 MiB) before it is refused
unread (`bounded_stdio`): what the server reads and parses is bounded by the limit, not by what was sent."""
MIN_SECRET_CHARS = 6
"""Shorter values of env and headers are not blanked out (they would match ordinary text)."""
MIN_PASSWORD_CHARS = 4
"""Shorter passwords in a URL are not blanked out."""
MAX_HELD_TOKENS = 32
"""OAuth secrets remembered after they were replaced (a refresh rotates both tokens): an upstream that quotes an old
one has it blanked out too."""
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s:]*:([^/?#@\s]+)@")

Changed = Callable[[], Awaitable[None]]


class Unavailable(Exception):
    """The server cannot be used now; the message names the server, the reason and the fix."""


class Upstream:
    """The live tools of one configured MCP server (the pack named `pack`)."""

    def __init__(
        self,
        pack: str,
        config: McpServer,
        *,
        workspace: Path,
        startup_timeout_s: float,
        environ: Mapping[str, str],
        config_name: str | None = None,
        passthrough: tuple[str, ...] = (),
        vault: Vault | None = None,
        person: Person | None = None,
    ) -> None:
        self.pack = pack
        self.vault = vault
        self.person = person
        """Calls as the caller (``identity`` per_user or token_exchange); None: one connection for everyone."""
        self._own_token: str | None = None
        """Where the OAuth tokens of a remote server are kept (`attp login NAME`); None: no OAuth."""
        self._auth: Provider | None = None
        self._challenge: str | None = None
        """The WWW-Authenticate of the last 401 the server answered (a remote server); None: no 401."""
        self.passthrough = passthrough
        """Names (or globs) of `environ`'s variables a stdio server gets besides the SDK's short default list."""
        self.config = config
        self.config_name = config_name or pack
        self.workspace = workspace
        self.startup_timeout_s = startup_timeout_s
        self.environ = environ
        self.problem: str | None = "not connected yet"
        self.told: str | None = self.problem
        """`problem` as a program reads it: without the host's details (its PATH, the variables not passed on)."""
        self._client: Client | None = None
        self._tools: list[Tool] = []
        self._secrets: list[str] = []
        """The configured credentials, as expanded when the server was started (see `_secret_values`)."""
        self._held: dict[str, None] = {}
        """The OAuth tokens and client secret this server was called with, newest last (see `secrets`)."""
        self._stderr: StderrTail | None = None
        self._changed: Changed | None = None
        self._wanted = anyio.Event()
        self._lost = anyio.Event()
        self._relist = anyio.Event()
        self._request: anyio.Event | None = None
        """Set when the connection attempt a call asked for has ended (either way); None when none is pending."""
        self._backoff = FIRST_BACKOFF_S
        self._retry_at = 0.0
        self._started = False
        self.connects = 0
        self.failures = 0
        self.hidden = 0
        """Tools the server lists that the filters (tools, exclude_tools, read_only) hide."""
        self._hidden_names: frozenset[str] = frozenset()
        """Their names, as the server lists them and as the sandbox would call them (for `hides`)."""

    # ------------------------------------------------------------ LiveTools

    def tools(self) -> Sequence[Tool]:
        return list(self._tools)

    def health(self) -> dict[str, Any]:
        return {
            "name": self.config_name,
            "server": self.config.describe(),
            "status": "ok" if self.problem is None else "unavailable",
            "problem": self.problem,
            "tools": len(self._tools),
            "hidden": self.hidden,
            "ignored": list(self.config.ignored),
            "stderr": self._stderr.lines() if self.problem is not None and self._stderr is not None else [],
            "connects": self.connects,
            "failures": self.failures,
        }

    def hides(self, name: str) -> bool:
        return name in self._hidden_names

    def secrets(self) -> list[str]:
        """Every secret the server holds for this upstream, longest first: its configured credentials as expanded
        (`_secret_values`), and its OAuth access and refresh tokens and client secret, those in use and the last
        ones replaced. What it says reaches a program, a log line or the audit log only with all of them blanked."""
        self._note_oauth()
        return sorted({*self._secrets, *self._held}, key=len, reverse=True)

    def wake(self) -> None:
        if self._client is not None or self._request is not None or time.monotonic() < self._retry_at:
            return
        self._request = anyio.Event()
        self._wanted.set()

    async def serve(self, changed: Changed, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep the server connected until cancelled (see the module docstring)."""
        self._changed = changed
        first = True
        while True:
            if not first:
                while self._request is None:  # connect again only when a call asks for the server
                    self._wanted = anyio.Event()
                    await self._wanted.wait()
            self._lost = anyio.Event()
            was_connected = self.connects
            try:
                await self._session(task_status)
            except Exception as exc:
                broke = self.connects > was_connected
                if self._stderr is not None:  # what the process said before it ended is the reason
                    await self._stderr.ended()
                self._fail(exc, broke=broke)
                if not broke:
                    self._settle()  # the calls waiting for this attempt learn that it failed
            finally:
                self._client = None
            if first and not self._started:
                task_status.started()
            first = False
            await changed()

    async def _session(self, task_status: TaskStatus[None]) -> None:
        """One connection: connect and list the tools within the startup timeout, then hold it until it breaks."""
        with anyio.CancelScope() as connecting:
            connecting.deadline = anyio.current_time() + self.startup_timeout_s
            async with self._connect() as client, anyio.create_task_group() as watchers:
                try:
                    self._tools = await self._list_tools(client)
                    connecting.deadline = math.inf  # connected: from here on the connection lives until it breaks
                    self._client = client
                    self.problem = self.told = None
                    self._backoff = FIRST_BACKOFF_S
                    self.connects += 1
                    logger.info(
                        "mcp server %r: connected (%s), %d tools", self.pack, self.config.describe(), len(self._tools)
                    )
                    if not self._started:
                        self._started = True
                        task_status.started()
                    self._settle()
                    assert self._changed is not None
                    await self._changed()
                    watchers.start_soon(self._relist_on_change, client)
                    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:  # 2026: changes come on a listen stream
                        watchers.start_soon(self._listen_for_changes, client)
                    await self._lost.wait()
                    watchers.cancel_scope.cancel()
                finally:  # at once, before the connection closes (which takes a while): no call may take it
                    if self._client is client:
                        self._client = None
        if connecting.cancelled_caught:
            raise TimeoutError(
                f"it did not finish connecting and listing its tools within {self.startup_timeout_s:g} s"
            )
        raise ConnectionError("the connection to it broke (the server exited or closed it)")

    def _settle(self) -> None:
        request, self._request = self._request, None
        if request is not None:
            request.set()

    async def _listen_for_changes(self, client: Client) -> None:
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._relist.set()
        except Exception as exc:  # a server that does not serve subscriptions/listen: no change events, no harm
            logger.debug("mcp server %r: no tool-change subscription: %s", self.pack, self._reason(exc))

    async def _relist_on_change(self, client: Client) -> None:
        while True:
            await self._relist.wait()
            self._relist = anyio.Event()
            try:
                self._tools = await self._list_tools(client)
            except Exception as exc:
                logger.warning("mcp server %r: listing its tools again failed: %s", self.pack, self._reason(exc))
                continue
            logger.info("mcp server %r: its tool list changed (%d tools)", self.pack, len(self._tools))
            assert self._changed is not None
            await self._changed()

    def _fail(self, exc: BaseException, *, broke: bool) -> None:
        """Record why the server is down. A connection that broke after working is retried at once; a
        server that failed to connect waits out a backoff that doubles with each failure in a row."""
        self.failures += 1
        if broke:
            self._retry_at = 0.0
        else:
            self._retry_at = time.monotonic() + self._backoff
            self._backoff = min(self._backoff * 2, MAX_BACKOFF_S)
        self.problem = self._scrub(self._explain(exc, broke=broke))
        self.told = self._scrub(self._explain(exc, broke=broke, host=False))
        logger.warning("mcp server %r is unavailable: %s", self.pack, self.problem)

    def _explain(self, exc: BaseException, *, broke: bool, host: bool = True) -> str:
        """Why it is down, and the fix; with `host`, the host's details too (the PATH it searched, the variables it
        did not pass on): the operator's, in the log, ``/healthz`` and ``attp tools``, not the program's."""
        cause = _leaf(exc)
        where = f"mcp_servers.{self.config_name}"
        said = self._stderr.meaningful(errors_only=broke) if self._stderr is not None else None
        stderr = f"; its stderr said: {said}" if said else ""
        if broke:
            ended = "the connection ended (the server exited or closed it)"
            return f"{self.config.describe()}: {ended}{stderr}; it is started again on the next call"
        if isinstance(cause, ExpansionError):
            return f"{cause}. Fix: set the variable, then restart attp-server."
        if self._needs_login(cause):
            return (
                f"{self.config.describe()}: it needs an OAuth login (it answered 401 with OAuth metadata). Fix: run "
                f"`attp login {self.config_name}` once (with the same --config / --mcp-config); the tokens are kept in "
                "the server's store and refreshed; it is retried on the next call."
                + (
                    " (identity = per_user: that login only lists its tools; each person's calls use their own account)"
                    if self.config.identity == "per_user"
                    else ""
                )
            )
        reason = _reason(cause)
        if self.config.command is not None:
            if isinstance(cause, FileNotFoundError | PermissionError):
                path = self.environ.get("PATH", "") if host else ""
                reason, fix = not_started(str(self.config.command), cause, where, path)
            else:
                if said:
                    reason = f"it exited at start; its stderr said: {said}"
                    fix = f"correct the server or {where} (its stderr: `attp tools` prints it, attp serve logs it)"
                else:
                    fix = f"run the command of {where} by hand to see its error, and correct it"
                lines = self._stderr.lines() if self._stderr is not None else []
                fix += self._withheld("\n".join([reason, *lines])) if host else ""
            return f"{self.config.describe()}: {reason}. Fix: {fix}; it is retried on the next call."
        if self._challenge is not None or (
            isinstance(cause, httpx2.HTTPStatusError) and cause.response.status_code in (401, 403)
        ):
            reason = f"it refused the credentials (HTTP 401: {self._challenge or 'unauthorized'})"[:300]
            fix = f"check the credentials in {where}.headers"
        else:
            fix = f"check that the server is running and that {where}.url is right"
        return f"{self.config.describe()}: {reason}. Fix: {fix}; it is retried on the next call."

    def _withheld(self, said: str) -> str:
        """The variables of attp-server's environment the server did not get, as a sentence, when its failure (`said`:
        the reason and its stderr) looks like one they cause (`failure.withheld`); else nothing."""
        found = withheld(said, self.environ, {*DEFAULT_INHERITED_ENV_VARS, *self.config.env}, self.passthrough)
        if found is None:
            return ""
        kind, names = found
        return (
            f". It looks like {kind} problem, and it did not get these variables of attp-server's environment: "
            f"{', '.join(names)} (add the ones it needs to env_passthrough, or to its env)"
        )

    def _needs_login(self, cause: BaseException) -> bool:
        """Whether the server wants an OAuth login: the provider found it needs a person, or the server answered
        401 with a Bearer challenge and we have no tokens and no Authorization header to send."""
        if isinstance(cause, LoginNeeded):
            return True
        if isinstance(cause, OAuthFlowError) and isinstance(cause.__context__, LoginNeeded):
            return True
        if self.vault is None or self._challenge is None or self._auth is not None:
            return False
        configured = any(name.lower() == "authorization" for name in self.config.headers)
        return not configured and self._challenge.lower().startswith("bearer")

    async def _note_challenge(self, response: httpx2.Response) -> None:
        """An httpx response hook: remember a 401's challenge (the SDK's transport keeps only 'an error')."""
        if response.status_code == 401:
            self._challenge = response.headers.get("www-authenticate", "")

    async def _oauth(self) -> Provider | None:
        """The OAuth provider for a remote Streamable HTTP server given no Authorization header, once it has
        tokens (`attp login`); None otherwise (a 401 then says to log in)."""
        config = self.config
        if self.vault is None or config.url is None or config.transport != "streamable-http":
            return None
        if any(name.lower() == "authorization" for name in config.headers):
            return None
        if not await has_tokens(self.config_name, str(config.url), self.vault):
            return None
        return oauth_provider(self.config_name, str(config.url), self.vault)

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[Client]:
        self._auth = await self._oauth()
        self._own_token = await self.person.own_token() if self.person is not None else None
        self._challenge = None
        transport, self._stderr = self._transport()
        client = Client(
            transport,
            message_handler=self._on_message,
            client_info=types.Implementation(name="attp-server", version=__version__),
        )
        try:
            async with client:
                if self._stderr is not None:
                    self._stderr.started()  # the process is started: only it holds the pipe's write end now
                yield client
        finally:
            if self._stderr is not None:
                self._stderr.started()

    def _transport(self) -> tuple[Any, StderrTail | None]:
        """The SDK transport for this server, with ``${VAR}`` expanded now (the secrets live only here), and
        for a stdio server the tail of its stderr."""
        config = self.config
        where = f"mcp_servers.{self.config_name}"
        if config.command is not None:
            env = {k: expand(v.get_secret_value(), self.environ, f"{where}.env.{k}") for k, v in config.env.items()}
            self._secrets = _secret_values(env)
            passed = {
                name: value
                for name, value in self.environ.items()
                if any(fnmatch.fnmatchcase(name, pattern) for pattern in self.passthrough)
            }
            # Its stderr may print any of its env (a URL with a password in it): every value is blanked there.
            tail = StderrTail(self.pack, _secret_values(env))
            env = {**passed, **env}
            parameters = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env=env or None,
                cwd=str(config.cwd) if config.cwd is not None else None,
            )
            # A message may be the result's JSON with every character escaped, plus its envelope.
            limit = MAX_MESSAGE_FACTOR * config.max_result_bytes + 1024 * 1024
            return bounded_stdio(parameters, max_line=limit, errlog=tail.file), tail
        headers = self._headers()
        url = str(config.url)
        self._secrets = _secret_values(headers, url=url)
        if config.transport == "sse":
            return sse_client(url, headers=headers or None), None
        if self._own_token is not None:  # token exchange: the gateway lists the tools with a token of its own
            headers = {**headers, "Authorization": f"Bearer {self._own_token}"}
        return streamable(url, headers, self._auth, self._note_challenge), None

    def _headers(self) -> dict[str, str]:
        """A remote server's `headers`, with ``${VAR}`` expanded now (the secrets live only here)."""
        where = f"mcp_servers.{self.config_name}"
        return {
            k: expand(v.get_secret_value(), self.environ, f"{where}.headers.{k}")
            for k, v in self.config.headers.items()
        }

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._relist.set()
        elif isinstance(message, Exception):
            logger.debug("mcp server %r: transport error: %s", self.pack, self._reason(message))

    async def _list_tools(self, client: Client) -> list[Tool]:
        listed: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        taken: set[str] = set()
        tools = []
        hidden: set[str] = set()
        for definition in listed:
            read_only = definition.annotations is not None and definition.annotations.read_only_hint is True
            names = (definition.name, identifier(definition.name))
            if not self.config.admits(names, read_only=read_only):
                hidden.update(names)  # never made into a tool: not listed, not described, not callable by any name
                continue
            name = identifier(definition.name, taken)
            taken.add(name)
            try:
                tools.append(self._tool(name, definition))
            except Exception as exc:  # one odd tool must not take the others down
                logger.warning("mcp server %r: leaving out tool %r: %s", self.pack, definition.name, self._reason(exc))
        if self.config.filtered():
            count = sum(1 for d in listed if d.name in hidden)
            self.hidden, self._hidden_names = count, frozenset(hidden)
            logger.info("mcp server %r: %d of %d tools hidden by its filters", self.pack, count, len(listed))
            if self.config.tools is not None and count == len(listed):
                logger.warning(
                    "mcp server %r: its tools filter %s matches none of its tools (%s)",
                    self.pack,
                    self.config.tools,
                    ", ".join(d.name for d in listed[:20]) or "none",
                )
        return tools

    def _tool(self, name: str, definition: types.Tool) -> Tool:
        where = f"mcp server {self.pack!r}, tool {definition.name!r}"
        description = self._scrub(definition.description or "")  # the catalog is read by the model
        shape = shape_of(description, definition.input_schema, definition.output_schema, where)
        upstream_name = definition.name

        async def call(**arguments: Any) -> Any:
            return await self.call(upstream_name, f"{self.pack}.{name}", shape, arguments)

        call.__name__ = call.__qualname__ = name
        call.__doc__ = shape.doc
        call.__signature__ = shape.signature  # type: ignore[attr-defined]
        call.__module__ = __name__
        return make_tool(call, self.pack, name=name, marks=_marks(definition.annotations), check=shape.check)

    # ------------------------------------------------------------ calls

    async def call(self, upstream_name: str, ref: str, shape: ToolShape, arguments: Mapping[str, Any]) -> Any:
        """Send one ``tools/call``, bounded by the run's deadline; the result as data (or a `ToolError`).

        Whatever the upstream said (a JSON-RPC error's message, an ``isError`` text, an SDK exception quoting
        its result) reaches the program only with the server's credentials blanked out (`_secret_values`).
        """
        try:
            return await self._call(upstream_name, ref, shape, arguments)
        except ToolError as exc:
            raise self._scrubbed(exc) from None
        except Exception as exc:  # nothing the upstream caused may reach the log or the program unscrubbed
            reason = self._reason(exc)
            logger.warning("mcp server %r: the call to %s failed: %s", self.pack, ref, reason)
            raise ToolError("TOOL_ERROR", f"{ref} failed: {reason}") from None

    def _scrub(self, text: str, also: Sequence[str] = ()) -> str:
        secrets = self.secrets()
        return scrub(text, sorted({*secrets, *also}, key=len, reverse=True) if also else secrets)

    def _reason(self, exc: BaseException) -> str:
        return self._scrub(_reason(exc))

    def _scrubbed(self, exc: ToolError, also: Sequence[str] = ()) -> ToolError:
        """`exc` with every secret of this upstream blanked out, and `also` (a caller's own tokens)."""

        def clean(text: str | None) -> str | None:
            return None if text is None else self._scrub(text, also)

        return ToolError(
            exc.code,
            self._scrub(exc.message, also),
            parameter_name=exc.parameter_name,
            received=clean(exc.received),
            expected=clean(exc.expected),
            suggested_value=clean(exc.suggested_value),
            solution=clean(exc.solution),
        )

    async def _call(self, upstream_name: str, ref: str, shape: ToolShape, arguments: Mapping[str, Any]) -> Any:
        context = current_call()
        if self.person is not None:  # a connection of the caller's own (identity per_user or token_exchange)
            async with self.person.connected(context, self._headers()) as (client, tokens):
                try:
                    result = await self._send(client, upstream_name, ref, shape, arguments)
                except ToolError as exc:  # a JSON-RPC error quoting the caller's own tokens
                    raise self._scrubbed(exc, tokens) from None
        else:
            client = await self._ready(context.remaining())
            if _closed(client):  # it died while idle: this request would never leave, so restart it first
                self._client = None
                self._lost.set()
                client = await self._ready(context.remaining())
            result = await self._send(client, upstream_name, ref, shape, arguments)
            tokens = []
        # Into the caller's own folder under isolation (the server is shared, what it saves is the caller's).
        workspace = context.workspace or self.workspace
        save = media_saver(workspace, f"mcp-media/{self.pack}") if self.config.save_media else None
        convert = functools.partial(
            result_data,
            result,
            unwrap=shape.unwrap_result,
            max_bytes=self.config.max_result_bytes,
            secrets=[*self.secrets(), *tokens],
            save=save,
        )
        # Up to max_result_bytes of JSON to parse, walk and measure: off the event loop every session shares.
        return await anyio.to_thread.run_sync(convert)

    async def _send(
        self, client: Client, upstream_name: str, ref: str, shape: ToolShape, arguments: Mapping[str, Any]
    ) -> types.CallToolResult:
        """One ``tools/call`` on `client`, bounded by the run's deadline, with upstream progress forwarded."""
        context = current_call()
        remaining = context.remaining()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if context.progress is not None:
                fraction = progress / total if total else None
                shown = message or (f"{progress:g}/{total:g}" if total else f"{progress:g}")
                await context.progress(fraction, shown)

        with anyio.move_on_after(math.inf if remaining is None else remaining) as bounded:
            try:
                return await client.call_tool(
                    upstream_name, shape.wire_arguments(arguments), progress_callback=on_progress
                )
            except MCPError as exc:
                raise self._protocol_error(ref, exc, client) from None
            except RuntimeError as exc:  # the SDK's output-schema check of the result
                raise ToolError("TOOL_ERROR", f"{ref} returned a malformed result: {exc}") from None
            except ValidationError as exc:
                raise ToolError(
                    "TOOL_ERROR", f"{ref} returned a result that is not MCP: {exc.errors()[0]['msg']}"
                ) from None
            except (httpx2.HTTPError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                if self._client is client:  # no call may take it while the connection is being closed
                    self._client = None
                    self._lost.set()
                raise self._unavailable(f"the connection broke during the call ({self._reason(exc)})") from None
        assert bounded.cancelled_caught
        raise ToolError(
            "TIMEOUT",
            f"{ref} did not answer within the run's remaining {remaining or 0:.1f} s; the request was cancelled",
            solution="Call it with less work, or fewer calls per program (timeout_s bounds the whole run).",
        )

    def _note_oauth(self) -> None:
        """Remember the OAuth secrets in use now: the provider's tokens (and every set of tokens it stored since it
        was made), the client registration's secret, and the token of its own a token-exchanging gateway lists the
        tools with."""
        found: list[str | None] = [self._own_token]
        if self._auth is not None:
            context = self._auth.context
            found += self._auth.stored.seen
            if context.current_tokens is not None:
                found += [context.current_tokens.access_token, context.current_tokens.refresh_token]
            if context.client_info is not None:
                found.append(context.client_info.client_secret)
        for secret in found:
            if secret and len(secret) >= MIN_SECRET_CHARS and secret not in self._held:
                self._held[secret] = None
                if len(self._held) > MAX_HELD_TOKENS:
                    del self._held[next(iter(self._held))]

    async def _ready(self, remaining: float | None) -> Client:
        """The connected client, connecting again first when the server is down and the backoff allows."""
        if self._client is not None:
            return self._client
        wait = self._retry_at - time.monotonic()
        if wait > 0:
            raise self._unavailable(f"{self.told} (next attempt in {math.ceil(wait)} s)")
        if self._request is None:
            self._request = anyio.Event()
            self._wanted.set()
        request = self._request
        limit = self.startup_timeout_s if remaining is None else min(self.startup_timeout_s, remaining)
        with anyio.move_on_after(limit + 0.5):
            await request.wait()
        return self._connected()

    def _connected(self) -> Client:
        if self._client is None:
            raise self._unavailable(self.told or "it is still connecting")
        return self._client

    def _unavailable(self, reason: str) -> ToolError:
        return ToolError(
            "UPSTREAM_UNAVAILABLE",
            f"the MCP server {self.pack!r} is unavailable: {reason}",
            solution=f"Do the task without {self.pack}'s tools, or ask the user to fix that server; the other "
            "tools work.",
        )

    def _protocol_error(self, ref: str, exc: MCPError, client: Client) -> ToolError:
        code = exc.error.code
        message = str(exc.error.message)
        # The SDK reports a closed connection as error -32000, the code JSON-RPC leaves to servers for their own
        # errors: only a connection that did close is one (else every failing call restarted the server).
        if code == types.CONNECTION_CLOSED and _closed(client, default=True):
            if self._client is client:  # no call may take it while the connection is being closed
                self._client = None
                self._lost.set()
            return self._unavailable(
                f"it closed the connection during the call to {ref}; it is restarted on the next call"
            )
        refused = exc.error.data.get(REFUSED_UNREAD) if isinstance(exc.error.data, dict) else None
        if isinstance(refused, int):  # `bounded_stdio` refused the answer unread
            return ToolError(
                "RESULT_TOO_LARGE",
                f"the tool returned a message of {refused:,} bytes, refused unread; this server's limit is "
                f"{self.config.max_result_bytes:,} (mcp_servers.NAME.max_result_bytes)",
                solution="Ask for less: a narrower query, fewer items, or a page of the data.",
            )
        if code == types.INVALID_PARAMS:
            return ToolError("INVALID_ARGUMENT", f"{ref} refused the arguments: {message}")
        if code == types.METHOD_NOT_FOUND or "not found" in message.lower():
            self._relist.set()
            return ToolError("NAME_NOT_FOUND", f"{ref} is not offered by the server any more: {message}")
        if code == types.REQUEST_TIMEOUT:
            return ToolError("TIMEOUT", f"{ref} did not answer in time: {message}")
        return ToolError("TOOL_ERROR", f"{ref} failed (MCP error {code}): {message}")


def _marks(annotations: types.ToolAnnotations | None) -> ToolMarks:
    """MCP's hints as marks; where the server says nothing, the spec's defaults (not read-only, destructive,
    open-world), so approvals ask before an unknown tool."""
    if annotations is None:
        return ToolMarks(destructive=True, open_world=True)
    if annotations.read_only_hint:
        return ToolMarks(read_only=True, idempotent=True, open_world=annotations.open_world_hint is not False)
    return ToolMarks(
        read_only=False,
        destructive=annotations.destructive_hint is not False,
        idempotent=bool(annotations.idempotent_hint),
        open_world=annotations.open_world_hint is not False,
    )


def _secret_values(values: Mapping[str, str], *, url: str = "") -> list[str]:
    """What is blanked out of everything the server says about this upstream, longest first.

    Every configured value of ``env`` and ``headers`` (whatever its name: ``DATABASE_URL`` is as secret
    as ``API_KEY``) of at least `MIN_SECRET_CHARS`, a bearer's token alone, the password of every URL
    among them (and of the server's own ``url``), as written and URL-decoded, and the values of that
    URL's query (``?api_key=...``).
    """
    found = []
    for value in values.values():
        found.append(value)
        scheme, _, token = value.partition(" ")
        if token and scheme.lower() in ("bearer", "basic", "token"):
            found.append(token)
    secrets = [v for v in found if len(v) >= MIN_SECRET_CHARS]
    for value in [*values.values(), url]:
        for password in _URL_PASSWORD.findall(value):
            secrets += [p for p in (password, urllib.parse.unquote(password)) if len(p) >= MIN_PASSWORD_CHARS]
        if "?" in value and "://" in value:
            query = urllib.parse.parse_qsl(urllib.parse.urlsplit(value.strip()).query)
            secrets += [v for _, v in query if len(v) >= MIN_SECRET_CHARS]
    return sorted(set(secrets), key=len, reverse=True)


def _closed(client: Client, *, default: bool = False) -> bool:
    """Whether the connection has already ended (a stdio server that exited while idle). The SDK keeps this
    on its dispatcher without a public accessor; if that changes, `default` (a call finds out by failing)."""
    dispatcher = getattr(client.session, "_dispatcher", None)
    return bool(getattr(dispatcher, "_closed", default))


def _leaf(exc: BaseException) -> BaseException:
    """The first exception that is not a group (task groups wrap what their tasks raised)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    cause = _leaf(exc)
    if isinstance(cause, MCPError):
        return f"MCP error {cause.error.code}: {cause.error.message}"
    text = str(cause).strip()
    return f"{type(cause).__name__}: {text}" if text else type(cause).__name__
