"""Sign-in through a real OpenID provider (tests/idp: the certified oidc-provider), through the real entry points.

A real `attp serve --transport http` with ``oauth_issuer`` set; real OAuth clients (the Python SDK's
`OAuthClientProvider` on both protocol eras, the TypeScript SDK's OAuth client in tests/clients/ts_oauth.mjs)
discover the authorization server from the protected-resource metadata, register, send the person through the
provider's sign-in page (scripted: `Idp.sign_in`), take the code with PKCE, get a token for this server, and
call ``attp_execute``. Static tokens keep working beside it; ``/healthz`` and ``/metrics`` keep their rules.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import httpx2
import pytest
from harness import execute, free_port, mcp_http_client, serving_http
from idp import Idp, identity_provider
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

pytestmark = pytest.mark.anyio

CLIENTS = Path(__file__).parent / "clients"
STATIC = "static-token-of-the-ci-bot-0123456789"


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Idp]:
    with identity_provider(tmp_path_factory.mktemp("idp"), {"alice": ["eng"], "bob": ["sales"]}) as provider:
        yield provider


@pytest.fixture(scope="module")
def served(idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    port = free_port()
    workspace = tmp_path_factory.mktemp("signin") / "ws"
    env = {
        "ATTP_OAUTH_ISSUER": idp.issuer,
        "ATTP_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "ATTP_OAUTH_SCOPES": "mcp",
        "ATTP_AUTH_TOKENS": json.dumps({"ci-bot": STATIC}),
    }
    with serving_http(workspace, "--toolpack", "demo_pack:toolpack", port=port, env=env) as server:
        yield server


class Memory:
    """The SDK's token storage, in memory: one person's client."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def oauth_client(idp: Idp, url: str, login: str, *, mode: str = "auto") -> Client:
    """A Python SDK client that signs `login` in through the provider when the server asks (its 401)."""
    redirected: list[str] = []

    async def redirect(authorization_url: str) -> None:
        redirected.append(await anyio.to_thread.run_sync(idp.sign_in, authorization_url, login))

    async def callback() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(redirected.pop()).query)
        assert "code" in query, query
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0])

    metadata = OAuthClientMetadata.model_validate(
        {"client_name": f"test client of {login}", "redirect_uris": ["http://127.0.0.1:9/callback"],
         "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
         "token_endpoint_auth_method": "none"}
    )  # fmt: skip
    auth = OAuthClientProvider(url + "/mcp", metadata, Memory(), redirect_handler=redirect, callback_handler=callback)
    http = mcp_http_client(auth=auth)
    return Client(_closing(http, streamable_http_client(url + "/mcp", http_client=http)), mode=mode)  # type: ignore[arg-type]


class _closing:
    """The transport, and the HTTP client it was given closed after it."""

    def __init__(self, http: httpx2.AsyncClient, transport: Any) -> None:
        self.http, self.transport = http, transport

    async def __aenter__(self) -> Any:
        return await self.transport.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.transport.__aexit__(*exc)
        finally:
            await self.http.aclose()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_person_signs_in_with_the_sdk_client_and_runs_a_program(idp: Idp, served: Any, mode: str) -> None:
    async with oauth_client(idp, served.url, "alice", mode=mode) as client:
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == ["attp_execute"]
        data = await execute(client, "__result__ = add(2, 3)")
    assert data["status"] == "ok" and data["result"] == 5


def test_protected_resource_metadata_names_the_issuer(idp: Idp, served: Any) -> None:
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        document = httpx.get(served.url + path).json()
        assert document["resource"] == served.url + "/mcp"
        assert document["authorization_servers"] == [idp.issuer]
        assert document["scopes_supported"] == ["mcp"]


def test_no_token_gets_the_challenge_that_points_to_the_metadata(served: Any) -> None:
    answer = httpx.post(served.url + "/mcp", json={})
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{served.url}/.well-known/oauth-protected-resource/mcp"'
    )


async def test_static_tokens_keep_working_beside_sign_in(served: Any) -> None:
    async with served.client(headers={"Authorization": f"Bearer {STATIC}"}) as client:
        data = await execute(client, "__result__ = add(1, 1)")
    assert data["result"] == 2


def test_healthz_and_metrics_keep_their_rules(idp: Idp, served: Any) -> None:
    assert httpx.get(served.url + "/healthz").json() == {"status": "ok"}
    detailed = httpx.get(served.url + "/healthz", headers={"Authorization": f"Bearer {STATIC}"}).json()
    assert "workers" in detailed
    assert httpx.get(served.url + "/metrics").status_code == 401
    assert httpx.get(served.url + "/metrics", headers={"Authorization": f"Bearer {STATIC}"}).status_code == 200


def test_the_typescript_sdk_oauth_client_completes_the_flow(idp: Idp, served: Any) -> None:
    """A third-party client: the TypeScript SDK's OAuth client provider, discovery to tools/call (legacy era)."""
    done = subprocess.run(
        ["node", str(CLIENTS / "ts_oauth.mjs"), "--url", served.url + "/mcp", "--login", "bob",
         "--code", "__result__ = add(20, 22)"],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["discovered"]["authorization_servers"] == [idp.issuer]
    assert summary["result"]["structuredContent"]["result"] == 42
