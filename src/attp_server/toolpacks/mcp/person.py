"""The calls of an upstream server that sees the person (``identity = "per_user"`` or ``"token_exchange"``): each
on a connection of the caller's own, opened for the call and closed after it (`Person.connected`).

per_user: the principal's own tokens (`attp_server.toolpacks.mcp.personal`), refreshed by the SDK at the token
endpoint the connect flow found; none yet, and the call gets the link to connect them (URL-mode elicitation, the
run's clock stopped while the person does it, where the client can show links; the error text otherwise); tokens
that no longer work are removed and the next call gets a new link. token_exchange: the caller's access token,
exchanged. The tokens a call used are handed back to be blanked out of its result.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult, OAuthMetadata
from mcp.shared.auth_utils import resource_url_from_server_url
from mcp_types import Implementation
from pydantic import ValidationError

from attp_server import __version__
from attp_server.mcp_config import McpServer
from attp_server.sandbox.process.pool import run_clock
from attp_server.settings import Settings
from attp_server.toolpack import ToolCall, ToolError
from attp_server.toolpacks.mcp.oauth import LoginNeeded, Provider, StoredTokens, Vault, metadata
from attp_server.toolpacks.mcp.personal import (
    CALLBACK_PATH,
    CONNECT_POLL_S,
    Exchanges,
    PersonalError,
    connect_link,
    personal_key,
    streamable,
)


class PersonalProvider(Provider):
    """The SDK's OAuth provider over one principal's stored tokens, with the authorization server's metadata the
    connect flow found: the SDK refreshes at its token endpoint (it would guess one from the server's URL)."""

    async def _initialize(self) -> None:
        await super()._initialize()
        found = self.stored.kept("metadata")
        if found and self.context.oauth_metadata is None:
            with contextlib.suppress(ValidationError):
                self.context.oauth_metadata = OAuthMetadata.model_validate(found)


def _leaf(exc: BaseException) -> BaseException:
    """The first exception that is not a group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _tokens_of(auth: Provider) -> list[str]:
    """The tokens a provider holds (blanked out of results like any credential)."""
    tokens = auth.context.current_tokens
    return [t for t in (tokens.access_token, tokens.refresh_token) if t] if tokens is not None else []


def _refused(reason: str, pack: str) -> ToolError:
    return ToolError(
        "UPSTREAM_UNAVAILABLE",
        f"the MCP server {pack!r} is unavailable for this call: {reason}",
        solution=f"Do the task without {pack}'s tools, or tell the user what the message says; the other tools work.",
    )


class Person:
    """The calls of an upstream server with ``identity = "per_user"`` or ``"token_exchange"``: each on a connection
    of the caller's own (see the module)."""

    def __init__(self, pack: str, name: str, config: McpServer, settings: Settings, vault: Vault) -> None:
        assert config.url is not None
        self.pack = pack
        self.name = name
        self.url = str(config.url)
        self.identity = config.identity
        self.audience = config.audience or self.url
        self.settings = settings
        self.vault = vault
        self.exchanges = Exchanges(settings) if config.identity == "token_exchange" else None

    async def own_token(self) -> str | None:
        """The gateway's own token to list a token-exchange server's tools (client credentials); None for per_user
        (the gateway lists those with its `attp login`)."""
        if self.exchanges is None:
            return None
        try:
            return await self.exchanges.own(self.audience, self.url)
        except PersonalError as exc:
            raise ConnectionError(f"{exc}; it lists this server's tools with a token of its own") from None

    @asynccontextmanager
    async def connected(self, call: ToolCall, headers: dict[str, str]) -> AsyncIterator[tuple[Client, list[str]]]:
        """A connection as the caller, and the tokens it uses (to be blanked out of results). Raises `ToolError`."""
        if call.principal is None:
            raise _refused("it acts as each signed-in person, and this call comes from no one in particular", self.pack)
        auth: PersonalProvider | None = None
        used: list[str] = []
        if self.exchanges is not None:
            if call.credential is None:
                raise _refused(
                    "it acts as the caller through token exchange, and this call carries no sign-in", self.pack
                )
            try:
                token = await self.exchanges.exchanged(
                    call.credential, self.audience, resource_url_from_server_url(self.url)
                )
            except PersonalError as exc:
                raise _refused(str(exc), self.pack) from None
            headers, used = {**headers, "Authorization": f"Bearer {token}"}, [token]
        else:
            auth = await self._account(call, call.principal)
        client = Client(
            streamable(self.url, headers, auth), client_info=Implementation(name="attp-server", version=__version__)
        )
        try:
            async with client:
                yield client, [*used, *(_tokens_of(auth) if auth is not None else [])]
        except Exception as exc:  # the transport's task groups wrap what was raised in them
            cause = _leaf(exc)
            if isinstance(cause, ToolError):
                raise cause from None
            if auth is not None and isinstance(cause, LoginNeeded | OAuthFlowError):  # revoked, or past refreshing
                await self.vault.delete(personal_key(self.name, self.url, call.principal))
                raise _refused(
                    "the user's connection to it has ended; the next call gives the link to connect it anew", self.pack
                ) from None
            if isinstance(cause, httpx2.HTTPError | OSError | anyio.BrokenResourceError | anyio.ClosedResourceError):
                raise _refused(f"it could not be reached as the user ({type(cause).__name__})", self.pack) from None
            raise

    async def _account(self, call: ToolCall, principal: str) -> PersonalProvider:
        """The provider over `principal`'s own tokens; without any, the link to connect them (see the module)."""
        key = personal_key(self.name, self.url, principal)
        stored = StoredTokens(self.vault, key)
        if not (await stored.record()).get("tokens"):
            await self._connect_first(call, principal)
            stored = StoredTokens(self.vault, key)
        assert self.settings.public_url is not None

        async def no_person(_url: str) -> None:
            raise LoginNeeded("the stored tokens no longer work")

        async def no_callback() -> AuthorizationCodeResult:  # pragma: no cover - no_person raises first
            raise LoginNeeded("the stored tokens no longer work")

        redirect = self.settings.public_url.rstrip("/") + CALLBACK_PATH
        return PersonalProvider(
            self.url, metadata(redirect), stored=stored, redirect_handler=no_person, callback_handler=no_callback
        )

    async def _connect_first(self, call: ToolCall, principal: str) -> None:
        """Returns once `principal`'s account is connected (the person opened the link while the call waited, where
        the client can show it: URL-mode elicitation); else raises the `ToolError` that carries the link."""
        try:
            link = await connect_link(self.settings, self.vault, self.name, self.url, principal)
        except PersonalError as exc:
            raise _refused(f"connecting your own account failed: {exc}", self.pack) from None
        message = f"{self.name} works with each person's own account. Open this link to connect yours: {link}"
        if call.open_url is not None and await call.open_url(message, link):
            clock = run_clock()
            with anyio.move_on_after(self.settings.approval_timeout_s):
                async with clock.paused() if clock is not None else contextlib.nullcontext():
                    while not (await self.vault.load(personal_key(self.name, self.url, principal)) or {}).get("tokens"):
                        await anyio.sleep(CONNECT_POLL_S)
                    return
        raise ToolError(
            "UPSTREAM_UNAVAILABLE",
            f"the MCP server {self.pack!r} works with each person's own account, and the user's is not connected yet. "
            f"They connect it once by opening this link: {link}",
            solution="Give the user the link (it works for 15 minutes), and run the program again once they say it is "
            "done; do not call this server's tools until then. The other tools work.",
        )
