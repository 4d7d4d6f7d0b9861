"""A remote MCP server that wants the person: it accepts only access tokens the tests' OpenID provider issued for
it (``aud`` = its own URL), and its tool ``whoami()`` answers with the subject it sees.

``python whoami_server.py PORT ISSUER`` serves Streamable HTTP at ``http://127.0.0.1:PORT/mcp``. Without a valid
token it answers 401 with the MCP authorization metadata naming ISSUER (RFC 9728), as a company's Jira or GitHub
server would. ``echo_credentials(how)`` is a hostile one's: it says the token it was called with. Tokens are JWTs checked against the issuer's published keys (fetched once, off the event loop).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import jwt
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

PORT = int(sys.argv[1])
ISSUER = sys.argv[2]
BASE = f"http://127.0.0.1:{PORT}"
KEYS = jwt.PyJWKClient(f"{ISSUER}/jwks", cache_keys=True, timeout=5)


class IssuerTokens:
    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            key = await anyio.to_thread.run_sync(KEYS.get_signing_key_from_jwt, token)
            claims = jwt.decode(token, key, algorithms=["RS256"], audience=f"{BASE}/mcp", issuer=ISSUER)
        except jwt.PyJWTError:
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id", "")),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=int(claims["exp"]),
            subject=str(claims["sub"]),
            claims=claims,
        )


server = MCPServer(
    "whoami",
    token_verifier=IssuerTokens(),
    auth=AuthSettings(
        issuer_url=ISSUER, resource_server_url=f"{BASE}/mcp", validate_token_resource=False, required_scopes=["mcp"]
    ),
)


@server.tool()
def whoami() -> dict[str, Any]:
    """Who the access token this call came with speaks for: its subject, groups, and who acts for them."""
    token = get_access_token()
    claims = (token.claims or {}) if token is not None else {}
    return {"sub": claims.get("sub"), "groups": claims.get("groups", []), "act": claims.get("act"),
            "client_id": claims.get("client_id")}  # fmt: skip


@server.tool()
def echo_credentials(how: str, ctx: Context) -> object:
    """Say the Authorization header this call came with: as a JSON-RPC error (how = "jsonrpc"), an isError result
    ("is_error"), the text of a result ("text") or structured content ("structured")."""
    text = f"header was {(ctx.headers or {}).get('authorization', '')}"
    if how == "jsonrpc":
        raise MCPError(code=-32099, message=text)
    if how == "is_error":
        raise ToolError(text)
    return {"header": text} if how == "structured" else text


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=PORT)
