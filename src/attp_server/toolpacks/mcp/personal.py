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
shown to a program or put in an error. `attp_server.toolpacks.mcp.person` makes the calls as the person.
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
from urllib.parse import urlencode

import anyio
import httpx2
from mcp.client.auth.oauth2 import PKCEParameters
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
)
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.auth_utils import resource_url_from_server_url
from pydantic import ValidationError

from attp_server.fetch import FetchError, bounded_fetch
from attp_server.settings import Settings
from attp_server.toolpacks.mcp.oauth import Vault, server_key

logger = logging.getLogger(__name__)

CONNECT_PATH = "/oauth/connect"
CALLBACK_PATH = "/oauth/callback"
PENDING_S = 900.0
"""How long a connect link works (from the first call that needed it to the browser's return)."""
REUSE_MARGIN_S = 120.0
"""A call that needs the link again gets the same one while it has at least this long left (else a new one: the
store holds one open flow per principal and server)."""
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


def _open_flow_key(name: str, url: str, principal: str) -> str:
    """The flow a principal has open for a server (one at a time: a call that needs a link again gets the same)."""
    return f"{personal_key(name, url, principal)}\nflow"


async def _fetch(
    http: httpx2.AsyncClient,
    method: str,
    url: str,
    *,
    data: dict[str, str] | None = None,
    json_body: dict[str, Any] | None = None,
    auth: tuple[str, str] | None = None,
) -> tuple[int, bytes]:
    """One request bounded by `TIMEOUT_S` and `MAX_ANSWER_BYTES`. Raises `PersonalError`."""
    try:
        return await bounded_fetch(
            http,
            method,
            url,
            data=data,
            json_body=json_body,
            auth=auth,
            timeout_s=TIMEOUT_S,
            max_bytes=MAX_ANSWER_BYTES,
        )
    except FetchError as exc:
        raise PersonalError(str(exc)) from None


@dataclass(frozen=True)
class _Server:
    """What discovery found about an upstream's authorization server."""

    resource: str
    metadata: OAuthMetadata
    scopes: list[str]

    def wanted(self) -> list[str]:
        """The scopes to ask for: the resource's, and ``offline_access`` where the server offers it (a refresh
        token, so the person need not connect again when the access token expires)."""
        extra = ["offline_access"] if "offline_access" in (self.metadata.scopes_supported or []) else []
        return list(dict.fromkeys([*self.scopes, *extra]))


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
        **({"scope": " ".join(server.wanted())} if server.wanted() else {}),
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
    opened = await vault.load(_open_flow_key(name, url, principal))
    if opened is not None:
        if time.time() - float(opened.get("created", 0)) < PENDING_S - REUSE_MARGIN_S:
            return f"{base}{CONNECT_PATH}?{urlencode({'state': opened['state']})}"
        await vault.delete(_pending_key(str(opened.get("state"))))
    async with httpx2.AsyncClient(follow_redirects=False) as http:
        server = await _discover(http, url)
        client = await _registered(http, vault, name, url, server=server, redirect=base + CALLBACK_PATH)
    pkce = PKCEParameters.generate()
    state = secrets.token_urlsafe(32)
    scopes = server.wanted()
    query = {
        "response_type": "code",
        "client_id": str(client.client_id),
        "redirect_uri": base + CALLBACK_PATH,
        "state": state,
        "code_challenge": pkce.code_challenge,
        "code_challenge_method": "S256",
        "resource": server.resource,
        **({"scope": " ".join(scopes)} if scopes else {}),
        **({"prompt": "consent"} if "offline_access" in scopes else {}),  # OpenID Connect wants it with offline_access
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
            "metadata": server.metadata.model_dump(mode="json", exclude_none=True),
            "issuer": str(server.metadata.issuer),
            "resource": server.resource,
            "client": client.model_dump(mode="json", exclude_none=True),
            "redirect_uri": base + CALLBACK_PATH,
            "created": time.time(),
        },
    )
    await vault.save(_open_flow_key(name, url, principal), {"state": state, "created": time.time()})
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
    await vault.delete(_open_flow_key(record["name"], record["url"], record["principal"]))
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
            "metadata": record.get("metadata"),
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
