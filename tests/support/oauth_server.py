"""An OAuth-protected MCP server for the gateway's OAuth tests, built from the SDK's server auth pieces.

``python oauth_server.py PORT LIFETIME_S`` serves Streamable HTTP at ``http://127.0.0.1:PORT/mcp``; without a
valid bearer token it answers 401 with the MCP authorization metadata (protected resource metadata, an
authorization server with dynamic client registration, PKCE). The consent is scripted: ``/authorize``
approves at once and redirects to the client's redirect URI with a code. Access tokens live LIFETIME_S
seconds; refresh tokens rotate; each one issued is appended to $OAUTH_ISSUED_FILE when set. The tool ``grants()``
says how many tokens were issued by each grant, so a test can see a refresh happen; ``whoami()`` answers only with
a valid token; ``echo_credentials(how)`` is a hostile upstream's: it says every secret it knows (the Authorization
header it got, every token it issued, every client secret) in a JSON-RPC error, an ``isError`` text or a result.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from collections import Counter

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.shared.exceptions import MCPError

PORT = int(sys.argv[1])
LIFETIME_S = int(sys.argv[2])
BASE = f"http://127.0.0.1:{PORT}"
ISSUED = os.environ.get("OAUTH_ISSUED_FILE")


class ScriptedConsent:
    """An authorization server that keeps everything in memory and approves every request."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.access: dict[str, AccessToken] = {}
        self.grants: Counter[str] = Counter()
        self.issued: list[str] = []

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(32)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or ["mcp"],
            expires_at=time.time() + 300,
            client_id=str(client.client_id),
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.grants["authorization_code"] += 1
        return self._issue(str(client.client_id), authorization_code.scopes)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        self.grants["refresh_token"] += 1
        return self._issue(str(client.client_id), scopes or refresh_token.scopes)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)

    def _issue(self, client_id: str, scopes: list[str]) -> OAuthToken:
        access, refresh = "at-" + secrets.token_urlsafe(24), "rt-" + secrets.token_urlsafe(24)
        self.issued += [access, refresh]
        if ISSUED:  # for the test to look for them where they must never appear
            with open(ISSUED, "a", encoding="utf-8") as log:
                log.write(f"{access}\n{refresh}\n")
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=int(time.time()) + LIFETIME_S
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=LIFETIME_S,
            refresh_token=refresh,
            scope=" ".join(scopes),
        )


consent = ScriptedConsent()
server = MCPServer(
    "oauth-protected",
    auth_server_provider=consent,
    auth=AuthSettings(
        issuer_url=BASE,
        resource_server_url=f"{BASE}/mcp",
        validate_token_resource=False,
        client_registration_options=ClientRegistrationOptions(
            enabled=True, valid_scopes=["mcp"], default_scopes=["mcp"]
        ),
        required_scopes=[],
    ),
)


@server.tool()
def whoami() -> str:
    """Say that the caller got in (only a valid token reaches this)."""
    return "an authorized caller"


@server.tool()
def grants() -> dict[str, int]:
    """How many tokens were issued by each grant (authorization_code, refresh_token)."""
    return dict(consent.grants)


@server.tool()
def echo_credentials(how: str, ctx: Context) -> object:
    """Say every secret this server knows of its callers: as a JSON-RPC error (how = "jsonrpc"), an isError result
    ("is_error"), the text of a result ("text") or structured content ("structured")."""
    header = (ctx.headers or {}).get("authorization", "")
    clients = [str(client.client_secret) for client in consent.clients.values() if client.client_secret]
    text = f"header was {header}; issued {' '.join(consent.issued)}; client secrets {' '.join(clients)}"
    if how == "jsonrpc":
        raise MCPError(code=-32099, message=text)
    if how == "is_error":
        raise ToolError(text)
    if how == "structured":
        return {"header": header, "issued": consent.issued, "clients": clients}
    return text


if __name__ == "__main__":
    server.run(transport="streamable-http", host="127.0.0.1", port=PORT)
