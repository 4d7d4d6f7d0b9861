"""Upstream servers that see the person (SPEC §17): ``identity = "per_user"`` and ``identity = "token_exchange"``.

**per_user.** Each signed-in principal connects its own account at the upstream's authorization server once: the
first call that needs it gets a link (`connect_link`) to ``public_url/oauth/connect``, a page that says whose
account is being connected to which server and leads on to the authorization server (authorization code with
PKCE, the client registered dynamically once per server with ``public_url/oauth/callback`` as its redirect). The
browser comes back to ``/oauth/callback`` on any replica (`finish_connect`): the code is exchanged there and the
tokens are sealed in the store under the server and the principal (`Vault`), refreshed before they expire like
``attp login``'s, removed by ``attp logout NAME`` (`forget`). What a flow needs between the link and the callback
(the PKCE verifier, whose flow it is) is sealed in the store too, under a keyed digest of its ``state``, for
`PENDING_S`; the state is 256 random bits, and the callback takes each one once.

**token_exchange.** The caller's own access token (its sign-in at `oauth_issuer`) is exchanged there (RFC 8693,
as `oauth_client_id`) for one whose audience is the upstream (`audience`, default its ``url``); exchanged tokens
are kept in this process until shortly before they expire (`Exchanges`). The gateway lists such a server's tools
with a token of its own (client credentials for the same audience).

Every request here is bounded in time (`TIMEOUT_S`) and answer size (`MAX_ANSWER_BYTES`); no token is logged,
shown to a program or put in an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import OAuthFlowError
from mcp.client.auth.oauth2 import PKCEParameters
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
)
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.auth_utils import resource_url_from_server_url
from mcp_types import Implementation
from pydantic import ValidationError

from attp_server import __version__
from attp_server.mcp_config import McpServer
from attp_server.sandbox.process.pool import run_clock
from attp_server.settings import Settings
from attp_server.toolpack import ToolCall, ToolError
from attp_server.toolpacks.mcp.oauth import LoginNeeded, Provider, StoredTokens, Vault, metadata, server_key

logger = logging.getLogger(__name__)

CONNECT_PATH = "/oauth/connect"
CALLBACK_PATH = "/oauth/callback"
PENDING_S = 900.0
"""How long a connect link works (from the first call that needed it to the browser's return)."""
TIMEOUT_S = 10.0
MAX_ANSWER_BYTES = 256 * 1024
MAX_EXCHANGES = 1024
EXCHANGE_AHEAD_S = 30.0
"""An exchanged token is exchanged again this long before it expires."""
CONNECT_POLL_S = 0.5
"""While a call waits for the person to connect their account, how often the store is looked at."""
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"  # noqa: S105 - a grant type's name
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"  # noqa: S105 - a token type's name


@asynccontextmanager
async def streamable(
    url: str,
    headers: Mapping[str, str],
    auth: httpx2.Auth | None = None,
    on_response: Callable[[httpx2.Response], Awaitable[None]] | None = None,
) -> AsyncIterator[Any]:
    """The Streamable HTTP transport to `url` with `headers` and `auth` (and a hook on every response)."""
    http = create_mcp_http_client(headers=dict(headers) or None, auth=auth)
    if on_response is not None:
        http.event_hooks = {"request": [], "response": [on_response]}
    async with http, streamable_http_client(url, http_client=http) as streams:
        yield streams


class PersonalError(Exception):
    """A step of connecting or exchanging failed; the message says which and why (never a token)."""


def personal_key(name: str, url: str, principal: str) -> str:
    """Where one principal's tokens for the server `name` at `url` are kept."""
    return f"{server_key(name, url)}\nprincipal\n{principal}"


def _index_key(name: str, url: str) -> str:
    """The server's own record for personal use: its dynamic registration and who has connected."""
    return f"{server_key(name, url)}\npersonal"


def _pending_key(state: str) -> str:
    return f"pending\n{state}"


async def _fetch(
    http: httpx2.AsyncClient,
    method: str,
    url: str,
    *,
    data: dict[str, str] | None = None,
    json_body: dict[str, Any] | None = None,
    auth: tuple[str, str] | None = None,
) -> tuple[int, bytes]:
    """One request whose whole answer arrives within `TIMEOUT_S` and `MAX_ANSWER_BYTES`. Raises `PersonalError`."""
    where = f"{urlsplit(url).netloc}{urlsplit(url).path}"[:200]
    body = b""
    with anyio.move_on_after(TIMEOUT_S) as bounded:
        try:
            async with http.stream(method, url, data=data, json=json_body, auth=auth) as response:
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        raise PersonalError(f"{where} answered more than {MAX_ANSWER_BYTES:,} bytes")
                status = response.status_code
        except httpx2.HTTPError as exc:
            raise PersonalError(f"{where} could not be reached ({type(exc).__name__})") from None
    if bounded.cancelled_caught:
        raise PersonalError(f"{where} did not answer within {TIMEOUT_S:g} s")
    return status, body


@dataclass(frozen=True)
class _Server:
    """What discovery found about an upstream's authorization server."""

    resource: str
    metadata: OAuthMetadata
    scopes: list[str]


async def _discover(http: httpx2.AsyncClient, url: str) -> _Server:
    """The upstream's protected-resource metadata (RFC 9728), then its authorization server's (RFC 8414 / OIDC)."""
    resource: ProtectedResourceMetadata | None = None
    for candidate in build_protected_resource_metadata_discovery_urls(None, url):
        status, body = await _fetch(http, "GET", candidate)
        if status == 200:
            try:
                resource = ProtectedResourceMetadata.model_validate_json(body)
                break
            except ValidationError:
                continue
    issuer = str(resource.authorization_servers[0]) if resource is not None else None
    for candidate in build_oauth_authorization_server_metadata_discovery_urls(issuer, url):
        status, body = await _fetch(http, "GET", candidate)
        if status == 200:
            try:
                metadata = OAuthMetadata.model_validate_json(body)
            except ValidationError:
                continue
            scopes = list(resource.scopes_supported or []) if resource is not None else []
            return _Server(resource_url_from_server_url(url), metadata, scopes)
    raise PersonalError(f"{url} names no authorization server this gateway can find (RFC 9728 / RFC 8414 metadata)")


async def _registered(
    http: httpx2.AsyncClient, vault: Vault, name: str, url: str, *, server: _Server, redirect: str
) -> OAuthClientInformationFull:
    """The gateway's client at the upstream's authorization server, registered once (RFC 7591) and kept."""
    record = await vault.load(_index_key(name, url)) or {}
    known = record.get("client")
    if known and redirect in known.get("redirect_uris", []):
        return OAuthClientInformationFull.model_validate(known)
    endpoint = server.metadata.registration_endpoint
    if endpoint is None:
        raise PersonalError(f"the authorization server of {name} offers no dynamic client registration")
    asked = {
        "client_name": "attp-server",
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **({"scope": " ".join(server.scopes)} if server.scopes else {}),
    }
    status, body = await _fetch(http, "POST", str(endpoint), json_body=asked)
    if status not in (200, 201):
        raise PersonalError(f"the authorization server of {name} refused to register the gateway (HTTP {status})")
    try:
        client = OAuthClientInformationFull.model_validate_json(body)
    except ValidationError:
        raise PersonalError(f"the authorization server of {name} answered the registration with no client") from None
    record["client"] = client.model_dump(mode="json", exclude_none=True)
    await vault.save(_index_key(name, url), record)
    return client


async def connect_link(settings: Settings, vault: Vault, name: str, url: str, principal: str) -> str:
    """A link that connects `principal`'s own account at the server `name` (see the module). Raises
    `PersonalError`."""
    assert settings.public_url is not None
    base = settings.public_url.rstrip("/")
    async with httpx2.AsyncClient(follow_redirects=False) as http:
        server = await _discover(http, url)
        client = await _registered(http, vault, name, url, server=server, redirect=base + CALLBACK_PATH)
    pkce = PKCEParameters.generate()
    state = secrets.token_urlsafe(32)
    query = {
        "response_type": "code",
        "client_id": str(client.client_id),
        "redirect_uri": base + CALLBACK_PATH,
        "state": state,
        "code_challenge": pkce.code_challenge,
        "code_challenge_method": "S256",
        "resource": server.resource,
        **({"scope": " ".join(server.scopes)} if server.scopes else {}),
    }
    authorize = f"{server.metadata.authorization_endpoint}?{urlencode(query)}"
    await vault.save(
        _pending_key(state),
        {
            "name": name,
            "url": url,
            "principal": principal,
            "verifier": pkce.code_verifier,
            "authorize": authorize,
            "token_endpoint": str(server.metadata.token_endpoint),
            "issuer": str(server.metadata.issuer),
            "resource": server.resource,
            "client": client.model_dump(mode="json", exclude_none=True),
            "redirect_uri": base + CALLBACK_PATH,
            "created": time.time(),
        },
    )
    return f"{base}{CONNECT_PATH}?{urlencode({'state': state})}"


async def pending(settings: Settings, state: str) -> dict[str, Any] | None:
    """The flow `state` names, while it is not too old (for the connect page)."""
    if not state or len(state) > 100:
        return None
    record = await Vault(settings).load(_pending_key(state))
    if record is None or time.time() - float(record.get("created", 0)) > PENDING_S:
        return None
    return record


async def finish_connect(settings: Settings, state: str, code: str, issuer: str | None) -> tuple[str, str]:
    """The browser came back with `code` for the flow `state`: exchange it, keep the tokens under the flow's
    principal. Returns (server name, principal). Raises `PersonalError`."""
    vault = Vault(settings)
    record = await pending(settings, state)
    if record is None:
        raise PersonalError("this link is unknown, used already or too old; call the tool again for a new one")
    await vault.delete(_pending_key(state))  # each state once
    if issuer is not None and issuer != record["issuer"]:
        raise PersonalError("the authorization server that answered is not the one the link went to")
    client = OAuthClientInformationFull.model_validate(record["client"])
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": record["redirect_uri"],
        "client_id": str(client.client_id),
        "code_verifier": record["verifier"],
        "resource": record["resource"],
    }
    async with httpx2.AsyncClient(follow_redirects=False) as http:
        status, body = await _fetch(http, "POST", record["token_endpoint"], data=form)
    if status != 200:
        raise PersonalError(f"the authorization server refused the code (HTTP {status})")
    try:
        tokens = OAuthToken.model_validate_json(body)
    except ValidationError:
        raise PersonalError("the authorization server answered the code with no token") from None
    name, url, principal = record["name"], record["url"], record["principal"]
    await vault.save(
        personal_key(name, url, principal),
        {
            "tokens": tokens.model_dump(mode="json", exclude_none=True),
            "expires_at": time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None,
            "client": record["client"],
            "token_endpoint": record["token_endpoint"],
        },
    )
    index = await vault.load(_index_key(name, url)) or {}
    index["principals"] = sorted({*index.get("principals", []), principal})
    await vault.save(_index_key(name, url), index)
    logger.info("mcp server %r: a principal connected its own account", name)
    return name, principal


async def forget(settings: Settings, name: str, url: str, principal: str | None = None) -> int:
    """``attp logout``: remove the tokens of `principal` (None: of everyone, and the gateway's own login) for the
    server `name` at `url`. Returns how many records were removed."""
    vault = Vault(settings)
    index = await vault.load(_index_key(name, url)) or {}
    everyone = list(index.get("principals", []))
    chosen = everyone if principal is None else [principal]
    removed = 0
    for who in chosen:
        removed += await vault.delete(personal_key(name, url, who))
    if principal is None:
        removed += await vault.delete(server_key(name, url))
    index["principals"] = [who for who in everyone if who not in chosen]
    if index.get("principals") or index.get("client"):
        await vault.save(_index_key(name, url), index)
    return removed


class Exchanges:
    """Token exchange (RFC 8693) at `oauth_issuer`, and client-credentials tokens, kept until shortly before they
    expire (this process only: at most `MAX_EXCHANGES`, keyed by a digest of the subject token and the audience)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._endpoint: str | None = None
        self._kept: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._lock = anyio.Lock()

    async def _token_endpoint(self, http: httpx2.AsyncClient) -> str:
        if self._endpoint is None:
            issuer = str(self.settings.oauth_issuer).rstrip("/")
            for candidate in build_oauth_authorization_server_metadata_discovery_urls(issuer, issuer):
                status, body = await _fetch(http, "GET", candidate)
                if status == 200:
                    try:
                        self._endpoint = str(OAuthMetadata.model_validate_json(body).token_endpoint)
                        break
                    except ValidationError:
                        continue
            else:
                raise PersonalError(f"the issuer {issuer} publishes no token endpoint")
        return self._endpoint

    async def exchanged(self, subject_token: str, audience: str, resource: str) -> str:
        """An access token for `audience` acting for whoever `subject_token` speaks for."""
        form = {
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": subject_token,
            "subject_token_type": ACCESS_TOKEN,
            "requested_token_type": ACCESS_TOKEN,
            "audience": audience,
            "resource": resource,
        }
        return await self._token(f"exchange\n{subject_token}\n{audience}", form, "exchange the caller's token")

    async def own(self, audience: str, url: str) -> str:
        """The gateway's own token for `audience` (client credentials, with the scopes the server's metadata names):
        to list the tools of the server at `url`."""
        resource = resource_url_from_server_url(url)
        form = {"grant_type": "client_credentials", "audience": audience, "resource": resource}
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            with contextlib.suppress(PersonalError):
                scopes = (await _discover(http, url)).scopes
                if scopes:
                    form["scope"] = " ".join(scopes)
        return await self._token(f"own\n{audience}", form, "get the gateway's own token")

    async def _token(self, what: str, form: dict[str, str], doing: str) -> str:
        key = hashlib.sha256(what.encode()).hexdigest()
        found = self._kept.get(key)
        if found is not None and found[1] > time.time() + EXCHANGE_AHEAD_S:
            self._kept.move_to_end(key)
            return found[0]
        settings = self.settings
        assert settings.oauth_client_id is not None and settings.oauth_client_secret is not None
        credentials = (settings.oauth_client_id, settings.oauth_client_secret.get_secret_value())
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            async with self._lock:
                endpoint = await self._token_endpoint(http)
            status, body = await _fetch(http, "POST", endpoint, data=form, auth=credentials)
        if status != 200:
            reason = _oauth_error(body)
            raise PersonalError(f"the issuer would not {doing} (HTTP {status}{': ' + reason if reason else ''})")
        try:
            answer = json.loads(body)
            token, lifetime = str(answer["access_token"]), float(answer.get("expires_in") or 60)
        except (ValueError, KeyError, TypeError):
            raise PersonalError(f"the issuer answered with no token when asked to {doing}") from None
        self._kept[key] = (token, time.time() + lifetime)
        if len(self._kept) > MAX_EXCHANGES:
            self._kept.popitem(last=False)
        return token


def _oauth_error(body: bytes) -> str:
    """The OAuth error code of an answer (never its whole text, which may echo what was sent)."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return ""
    return str(error)[:60] if isinstance(error, str) else ""


class PersonalProvider(Provider):
    """The SDK's OAuth provider over one principal's stored tokens: refreshed at the token endpoint the connect
    flow found (the SDK would guess one from the server's URL after a restart)."""

    def _get_token_endpoint(self) -> str:
        endpoint = self.stored.kept("token_endpoint")
        return str(endpoint) if endpoint else super()._get_token_endpoint()


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
                if auth is not None and auth.context.current_tokens is not None:
                    used += [
                        t
                        for t in (auth.context.current_tokens.access_token, auth.context.current_tokens.refresh_token)
                        if t
                    ]
                yield client, used
        except (LoginNeeded, OAuthFlowError, httpx2.HTTPError, OSError) as exc:
            if auth is not None and isinstance(exc, LoginNeeded | OAuthFlowError):  # revoked or expired for good
                await self.vault.delete(personal_key(self.name, self.url, call.principal))
                raise _refused(
                    "your connection to it has ended; call it again to connect your account anew", self.pack
                ) from None
            raise _refused(f"it could not be reached as you ({type(exc).__name__})", self.pack) from None

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
