"""OAuth upstreams: a remote server that answers 401 with MCP authorization metadata, connected once by `login`.

The flow is the MCP authorization spec's, done by the SDK's client auth (`mcp.client.auth`): protected
resource metadata, authorization server metadata, dynamic client registration, OAuth 2.1 authorization
code with PKCE, refresh. What this module adds:

* `Vault`: the tokens and the client registration of each server, kept in the server's store (table
  ``attp_oauth``) sealed with AES-GCM under a key derived from the server's secret (`secret_file`), the
  row named by a keyed digest of the server's name and URL. Nothing of it is ever logged, returned to a
  program or shown in a result; `attp login` prints only the URL to open.
* `login`: ``attp login NAME`` prints the authorization URL, waits for the redirect on a loopback port
  (``http://127.0.0.1:PORT/callback``), exchanges the code and lists the server's tools to prove it.
* `provider`: while serving, the stored tokens go on every request and are refreshed before they expire
  (a fifth of their lifetime, at most a minute, ahead). When there are none, or they can no longer be
  refreshed, the server is unavailable with "run `attp login NAME`" (`LoginNeeded`): serving never opens
  a browser or waits for a person.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from anyio.abc import SocketAttribute, SocketStream
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from attp_server.settings import Settings
from attp_server.store import STATE_FILE_NAME, Store, data_folder, open_store

logger = logging.getLogger(__name__)

TOKENS = [
    [
        "CREATE TABLE IF NOT EXISTS attp_oauth (server TEXT PRIMARY KEY, sealed TEXT NOT NULL, "
        "updated_at DOUBLE PRECISION NOT NULL)"
    ]
]
"""The store's table of OAuth upstreams: one sealed record (tokens, expiry, client registration) per server."""

REFRESH_AHEAD_S = 60.0
"""A token is refreshed this long before it expires (or a fifth of its lifetime, if that is shorter)."""
MAX_REQUEST_BYTES = 16 * 1024
"""Largest request the loopback listener reads (the browser's redirect carries a code and a state)."""
CALLBACK_PATH = "/callback"
SEEN = 16
"""Tokens a `StoredTokens` remembers (the last eight refreshes)."""


class LoginNeeded(Exception):
    """The server needs an OAuth login by a person: ``attp login NAME``."""


class Vault:
    """The OAuth records of upstream servers, sealed in the store (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @asynccontextmanager
    async def _store(self) -> AsyncIterator[Store]:
        async with open_store(self.settings) as store:
            await store.migrate("oauth", TOKENS)
            yield store

    async def load(self, server: str) -> dict[str, Any] | None:
        """The record of `server` (its name and URL), or None. A record that does not unseal (another secret)
        is treated as none, with a warning. Without a store yet (no SQLite file), None: nothing is created."""
        if self.settings.database_url is None and not (data_folder(self.settings) / STATE_FILE_NAME).exists():
            return None
        async with self._store() as store:
            key = store.secret.digest("oauth-server", server)
            rows = await store.backend.execute("SELECT sealed FROM attp_oauth WHERE server = ?", key)
            if not rows:
                return None
            try:
                return dict(json.loads(_unseal(store, key, str(rows[0][0]))))
            except (InvalidTag, ValueError):
                logger.warning("the stored OAuth tokens of an upstream server do not unseal (secret_file changed?)")
                return None

    async def delete(self, server: str) -> int:
        """Remove the record of `server`; 1 if there was one, else 0."""
        if self.settings.database_url is None and not (data_folder(self.settings) / STATE_FILE_NAME).exists():
            return 0
        async with self._store() as store:
            key = store.secret.digest("oauth-server", server)
            rows = await store.backend.execute("SELECT server FROM attp_oauth WHERE server = ?", key)
            await store.backend.execute("DELETE FROM attp_oauth WHERE server = ?", key)
            return len(rows)

    async def save(self, server: str, record: dict[str, Any]) -> None:
        async with self._store() as store:
            key = store.secret.digest("oauth-server", server)
            sealed = _seal(store, key, json.dumps(record))
            await store.backend.execute(
                "INSERT INTO attp_oauth (server, sealed, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (server) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
                key,
                sealed,
                time.time(),
            )


def _seal(store: Store, key: str, text: str) -> str:
    nonce = os.urandom(12)
    box = AESGCM(store.secret.key("oauth-tokens")).encrypt(nonce, text.encode("utf-8"), key.encode("ascii"))
    return base64.b64encode(nonce + box).decode("ascii")


def _unseal(store: Store, key: str, sealed: str) -> str:
    raw = base64.b64decode(sealed)
    opened = AESGCM(store.secret.key("oauth-tokens")).decrypt(raw[:12], raw[12:], key.encode("ascii"))
    return opened.decode("utf-8")


class StoredTokens:
    """The SDK's `TokenStorage` for one server, backed by the `Vault` (read once, written on every change)."""

    def __init__(self, vault: Vault, server: str, *, fresh: bool = False) -> None:
        self.vault = vault
        self.server = server
        self._record: dict[str, Any] | None = {} if fresh else None
        self.seen: list[str] = []
        """Every token read or stored here (a refresh replaces both): what the gateway blanks out of what the
        upstream says."""

    def _see(self, *secrets: str | None) -> None:
        self.seen = [*self.seen, *(secret for secret in secrets if secret and secret not in self.seen)][-SEEN:]

    async def record(self) -> dict[str, Any]:
        if self._record is None:
            self._record = await self.vault.load(self.server) or {}
        return self._record

    async def get_tokens(self) -> OAuthToken | None:
        tokens = (await self.record()).get("tokens")
        found = OAuthToken.model_validate(tokens) if tokens else None
        if found is not None:
            self._see(found.access_token, found.refresh_token)
        return found

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._see(tokens.access_token, tokens.refresh_token)
        record = await self.record()
        record["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        record["expires_at"] = time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None
        await self.vault.save(self.server, record)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        info = (await self.record()).get("client")
        found = OAuthClientInformationFull.model_validate(info) if info else None
        if found is not None:
            self._see(found.client_secret)
        return found

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._see(client_info.client_secret)
        record = await self.record()
        record["client"] = client_info.model_dump(mode="json", exclude_none=True)
        await self.vault.save(self.server, record)

    def kept(self, name: str) -> Any:
        """Another value of the record, once it has been read (None before, or if it has none)."""
        return (self._record or {}).get(name)

    async def expires_at(self) -> float | None:
        value = (await self.record()).get("expires_at")
        return float(value) if value is not None else None


class Provider(OAuthClientProvider):
    """The SDK's OAuth provider, with stored tokens' expiry restored and refreshes made before expiry."""

    def __init__(
        self,
        server_url: str,
        client_metadata: OAuthClientMetadata,
        *,
        stored: StoredTokens,
        redirect_handler: Callable[[str], Awaitable[None]],
        callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]],
    ) -> None:
        super().__init__(
            server_url, client_metadata, stored, redirect_handler=redirect_handler, callback_handler=callback_handler
        )
        self.stored = stored

    async def _initialize(self) -> None:
        await super()._initialize()
        self.context.token_expiry_time = await self.stored.expires_at()

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        context = self.context
        tokens = context.current_tokens
        if context.token_expiry_time is not None and tokens is not None:
            lifetime = float(tokens.expires_in or REFRESH_AHEAD_S * 5)
            if time.time() >= context.token_expiry_time - min(REFRESH_AHEAD_S, lifetime / 5):
                context.token_expiry_time = time.time() - 1  # due: the SDK refreshes an expired token first
        flow = super()._auth_flow(request)
        try:
            sent = await flow.__anext__()
            while True:
                response = yield sent
                sent = await flow.asend(response)
        except StopAsyncIteration:
            return


def server_key(name: str, url: str) -> str:
    """What a server's record is stored under: its configured name and URL (a new URL means a new login)."""
    return f"{name}\n{url}"


def metadata(redirect_uri: str) -> OAuthClientMetadata:
    return OAuthClientMetadata.model_validate(
        {
            "client_name": "attp-server",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
    )


def provider(name: str, url: str, vault: Vault) -> Provider:
    """The provider a serving gateway uses: stored tokens only; a login it would need raises `LoginNeeded`."""

    async def no_person(authorization_url: str) -> None:
        raise LoginNeeded(f"it needs an OAuth login: run `attp login {name}`")

    async def no_callback() -> AuthorizationCodeResult:  # pragma: no cover - no_person raises first
        raise LoginNeeded(f"it needs an OAuth login: run `attp login {name}`")

    return Provider(
        url,
        metadata(f"http://127.0.0.1{CALLBACK_PATH}"),
        stored=StoredTokens(vault, server_key(name, url)),
        redirect_handler=no_person,
        callback_handler=no_callback,
    )


async def has_tokens(name: str, url: str, vault: Vault) -> bool:
    return bool((await vault.load(server_key(name, url)) or {}).get("tokens"))


# ---------------------------------------------------------------- attp login


async def login(
    name: str,
    url: str,
    vault: Vault,
    connect: Callable[[httpx2.Auth], Awaitable[int]],
    *,
    port: int = 0,
    timeout_s: float = 300.0,
    say: Callable[[str], None] = print,
) -> int:
    """Log in to the server `name` at `url`: print the authorization URL, wait for the redirect on a loopback
    port, keep the tokens; then `connect` with them (returns the number of tools). Raises `OAuthFlowError`,
    `TimeoutError` or `OSError` with a message naming what failed."""
    async with await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port) as listener:
        bound = listener.extra(SocketAttribute.local_port)  # noqa: S610 - anyio's typed attributes, not SQL
        redirect_uri = f"http://127.0.0.1:{bound}{CALLBACK_PATH}"
        codes: anyio.abc.ObjectSendStream[AuthorizationCodeResult | str]
        codes, received = anyio.create_memory_object_stream[AuthorizationCodeResult | str](1)

        async def redirect(authorization_url: str) -> None:
            say(f"Open this URL in a browser and allow attp-server to use {name!r}:\n\n  {authorization_url}\n")
            say(f"Waiting up to {timeout_s:g} s for the browser to come back to {redirect_uri} ...")

        async def callback() -> AuthorizationCodeResult:
            with anyio.fail_after(timeout_s):
                answer = await received.receive()
            if isinstance(answer, str):
                raise OAuthFlowError(answer)
            return answer

        auth = Provider(
            url,
            metadata(redirect_uri),
            stored=StoredTokens(vault, server_key(name, url), fresh=True),
            redirect_handler=redirect,
            callback_handler=callback,
        )
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(listener.serve, lambda stream: _answer(stream, name, codes))
            try:
                tools = await connect(auth)
            finally:
                tasks.cancel_scope.cancel()
        return tools


async def _answer(stream: SocketStream, name: str, codes: Any) -> None:
    """One request to the loopback listener: the redirect from the authorization server, or anything else."""
    async with stream:
        with anyio.move_on_after(10):
            head = b""
            while b"\r\n\r\n" not in head and len(head) < MAX_REQUEST_BYTES:
                try:
                    head += await stream.receive(4096)
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    break
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            method, _, rest = line.partition(" ")
            target = rest.rpartition(" ")[0] or rest
            parts = urlsplit(target)
            if method != "GET" or parts.path != CALLBACK_PATH:
                await _reply(stream, 404, "Not the attp-server login callback.")
                return
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            if "error" in query:
                text = f"the authorization server refused: {query['error']}"
                if query.get("error_description"):
                    text += f" ({query['error_description'][:300]})"
                await _reply(stream, 400, f"attp-server was not allowed to use {name}: {text}.")
                await codes.send(text)
            elif "code" in query:
                await _reply(stream, 200, f"attp-server is connected to {name}. You can close this tab.")
                await codes.send(
                    AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))
                )
            else:
                await _reply(stream, 400, "The redirect carries neither a code nor an error.")


async def _reply(stream: SocketStream, status: int, text: str) -> None:
    body = f"<!doctype html><title>attp-server</title><p>{_escape(text)}</p>\n".encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.send(head.encode() + b"Connection: close\r\n\r\n" + body)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
