"""The sign-in tests' OpenID provider (tests/idp/provider.mjs, the certified oidc-provider) and a scripted person.

`identity_provider` starts it on a free loopback port with an RSA key made here, users with groups and
confidential clients; `Idp.sign_in` is the person's browser: it opens an authorization URL, signs in as a
user on the provider's page, and returns where the provider redirects back to (with the code). `Idp.access_token`
is a whole authorization-code flow with PKCE (dynamic registration, the person's sign-in, the token request)
for one resource, for tests that need a person's real token without an MCP client around it. `Idp.forge`
signs claims with the provider's own key (or another), for the tokens a provider would never issue.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import select
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from harness import free_port, stop_process

IDP_DIR = Path(__file__).resolve().parents[1] / "idp"
CALLBACK = "http://127.0.0.1:9/callback"
"""The redirect URI of `access_token`'s client: nothing listens there, the browser stops before it."""
ATTP_CLIENT = "attp-server"
ATTP_SECRET = "attp-server-test-client-secret-0123456789"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


def rsa_key(kid: str) -> tuple[rsa.RSAPrivateKey, dict[str, Any]]:
    """A new RSA signing key and its private JWK."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key))
    return key, {**jwk, "kid": kid, "use": "sig", "alg": "RS256"}


@dataclass
class Idp:
    issuer: str
    key: rsa.RSAPrivateKey
    kid: str
    process: subprocess.Popen[bytes]
    log: Path
    users: Mapping[str, Any] = field(default_factory=dict)

    def sign_in(self, authorization_url: str, login: str) -> str:
        """Open `authorization_url` as `login`'s browser: sign in on the provider's page; the URL it redirects
        back to (the client's redirect URI with ``code`` and ``state``, or an ``error``)."""
        with httpx.Client(timeout=20) as browser:
            response = browser.get(authorization_url)
            for _ in range(20):
                location = response.headers.get("location")
                if response.status_code == 200 and "/interaction/" in str(response.url):
                    response = browser.post(str(response.url), data={"login": login})
                    continue
                if location is None:
                    raise AssertionError(f"the provider answered {response.status_code}: {response.text[:300]}")
                target = urljoin(str(response.url), location)
                if not target.startswith(self.issuer):
                    return target
                response = browser.get(target)
        raise AssertionError("the provider redirected more than 20 times")

    def register(self, redirect_uri: str = CALLBACK) -> str:
        """A public client registered dynamically (as MCP clients do): its client_id."""
        answer = httpx.post(
            f"{self.issuer}/reg",
            json={
                "redirect_uris": [redirect_uri],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
            },
        )
        assert answer.status_code == 201, answer.text
        return str(answer.json()["client_id"])

    def access_token(self, login: str, resource: str, *, client_id: str | None = None) -> str:
        """`login`'s access token for `resource`, through the authorization code flow with PKCE."""
        client_id = client_id or self.register()
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        query = httpx.QueryParams(
            response_type="code", client_id=client_id, redirect_uri=CALLBACK, scope="mcp", state="s", resource=resource,
            code_challenge=challenge, code_challenge_method="S256",
        )  # fmt: skip
        back = self.sign_in(f"{self.issuer}/auth?{query}", login)
        code = parse_qs(urlsplit(back).query)["code"][0]
        answer = httpx.post(
            f"{self.issuer}/token",
            data={"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK, "client_id": client_id,
                  "code_verifier": verifier, "resource": resource},
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        return str(answer.json()["access_token"])

    def forge(
        self,
        claims: Mapping[str, Any],
        *,
        key: rsa.RSAPrivateKey | None = None,
        kid: str | None = None,
        algorithm: str = "RS256",
    ) -> str:
        """A JWT with `claims`, signed with the provider's key (or `key`), its ``kid`` in the header."""
        now = int(time.time())
        payload = {"iss": self.issuer, "iat": now, "exp": now + 300, **claims}
        return jwt.encode(payload, key or self.key, algorithm=algorithm, headers={"kid": kid or self.kid})

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@contextmanager
def identity_provider(
    tmp: Path,
    users: Mapping[str, list[str]],
    *,
    ttl_s: int = 300,
    opaque: bool = False,
    redirect_uris: tuple[str, ...] = (),
) -> Iterator[Idp]:
    """The provider, with `users` (name -> groups) and the confidential client attp-server is (`ATTP_CLIENT`: client
    credentials, token exchange, introspection; authorization code with `redirect_uris` when given)."""
    key, jwk = rsa_key("test-key-1")
    port = free_port()
    grants = ["client_credentials", TOKEN_EXCHANGE, *(["authorization_code", "refresh_token"] if redirect_uris else [])]
    config = {
        "port": port,
        "keys": {"keys": [jwk]},
        "users": {name: {"groups": list(groups)} for name, groups in users.items()},
        "clients": [
            {
                "client_id": ATTP_CLIENT,
                "client_secret": ATTP_SECRET,
                "grant_types": grants,
                "redirect_uris": list(redirect_uris),
                "response_types": ["code"] if redirect_uris else [],
            }
        ],
        "ttl_s": ttl_s,
        "opaque": opaque,
    }
    path = tmp / f"idp-{port}.json"
    path.write_text(json.dumps(config))
    log = tmp / f"idp-{port}.log"
    with log.open("wb") as errors:
        process = subprocess.Popen(
            ["node", str(IDP_DIR / "provider.mjs"), str(path)],
            stdout=subprocess.PIPE, stderr=errors, start_new_session=True,
        )  # fmt: skip
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 30)  # "ready ISSUER" once it listens (EOF: it failed)
        line = process.stdout.readline().decode() if ready else ""
        assert line.startswith("ready "), f"the provider did not start: {log.read_text()[-2000:]}"
        yield Idp(line.split()[1], key, "test-key-1", process, log, users)
    finally:
        stop_process(process)
        if process.stdout is not None:
            process.stdout.close()
