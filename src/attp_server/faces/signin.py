"""Sign-in: attp-server as an OAuth 2.1 resource server of the team's authorization server (SPEC §17).

With `oauth_issuer` set, a request to an MCP endpoint carries ``Authorization: Bearer <access token>`` issued by
that server for this one (RFC 8707: ``aud`` is `oauth_audience`, by default `public_url` + ``/mcp``), or one of
the static tokens (`auth_token`, `auth_tokens`), which keep working beside it. What a token is checked for:

* a JWT: signed by a key of the issuer's JWKS (`oauth_jwks_url`, else ``jwks_uri`` of the issuer's metadata)
  with an asymmetric algorithm the key is for (``alg: none`` and shared-secret algorithms are refused), ``iss`` =
  the issuer, ``aud`` naming the audience, ``exp`` (and ``nbf``, ``iat``) within `LEEWAY_S`;
* an opaque token: introspected (RFC 7662) at `oauth_introspection_url` as `oauth_client_id`, active, and for
  this audience when the answer names one; the answer is cached up to `INTROSPECTION_CACHE_S`.

The principal is the `oauth_principal_claim` claim (``sub`` by default), its groups the `oauth_groups_claim`
claim. A principal named like a static token's holder is refused: a handle, a folder or a rate limit of one must
never be reachable as the other.

Every fetch (metadata, JWKS, introspection) is bounded in time (`FETCH_TIMEOUT_S`, the whole answer, however
slowly it drips) and in bytes (`MAX_FETCH_BYTES`, refused past that unread), and runs on the event loop as I/O;
keys are cached and fetched again on an unknown ``kid``, at most once per `REFETCH_S`, one fetch at a time (a key
set that cannot be fetched is not asked again for `REFETCH_S`: a flood of forged ``kid`` values costs nothing).
A token that fails any check, or that cannot be checked now, gets 401 with the challenge of RFC 9728 / RFC 6750:
``WWW-Authenticate: Bearer resource_metadata="…", error="invalid_token", error_description="…"``, never a 500.

Clients find the authorization server from ``GET /.well-known/oauth-protected-resource`` (and with the MCP path
appended: RFC 9728 §3.1), which names this resource and `oauth_issuer`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import jwt
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from attp_server.fetch import FetchError, where
from attp_server.fetch import bounded_fetch as fetch
from attp_server.settings import DEFAULT_TENANT, Settings

logger = logging.getLogger(__name__)

LEEWAY_S = 60
"""Clock skew allowed on ``exp``, ``nbf`` and ``iat``."""
FETCH_TIMEOUT_S = 5.0
"""Longest one fetch of metadata, keys or an introspection answer may take, from connect to last byte."""
MAX_FETCH_BYTES = 256 * 1024
"""Largest metadata document, key set or introspection answer read (a real JWKS is a few KiB)."""
MAX_KEYS = 100
REFETCH_S = 30.0
"""A key set is fetched again (an unknown ``kid``: keys rotated) at most this often; a failed fetch is not tried
again sooner either."""
MAX_TOKEN_CHARS = 16 * 1024
"""Longer bearer values are refused unread."""
PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
"""A JWK's private members (RFC 7518 §6): a key set that holds them (a misconfigured issuer) is read without them
(with them the key is a private key, and a signature check with it fails inside the library)."""
INTROSPECTION_CACHE_S = 30.0
"""How long an introspected token's answer is trusted (never past the token's ``exp``)."""
CHECKED_CACHE = 4096
"""Tokens whose check is remembered (until they expire): a client sends the same token with every request."""
MAX_GROUPS = 200
MAX_NAME_CHARS = 200
ASYMMETRIC = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"})
"""The signature algorithms accepted: the issuer's private key signs, its published public key checks."""
PROTECTED_RESOURCE = "/.well-known/oauth-protected-resource"
PERSON_CLIENT_PREFIX = "attp-person:"
"""Marks the SDK user of a signed-in request (`person_user`); its session binding uses the token's client,
issuer and subject."""
SCOPE_KEY = "attp.signed_in"
"""Where the request's `SignedIn` rides in the ASGI scope."""


class Refused(Exception):
    """A token that is not accepted; the message says why (it goes in the challenge's error_description)."""


@dataclass(frozen=True)
class SignedIn:
    """Who a checked access token speaks for."""

    principal: str
    groups: frozenset[str]
    client_id: str
    issuer: str
    subject: str
    expires_at: int | None
    scopes: tuple[str, ...] = ()
    token: str = field(default="", repr=False)
    """The access token itself: exchanged for an upstream's (RFC 8693) when an upstream wants the person."""


def _json_object(body: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        raise FetchError(f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise FetchError(f"{what} is not a JSON object")
    return value


class IssuerKeys:
    """The issuer's signing keys, by ``kid``: fetched when first needed, again on an unknown ``kid`` (bounded)."""

    def __init__(self, settings: Settings, client: httpx2.AsyncClient, clock: Callable[[], float]) -> None:
        assert settings.oauth_issuer is not None
        self.issuer = settings.oauth_issuer
        self.jwks_url = settings.oauth_jwks_url
        self.client = client
        self.clock = clock
        self.keys: dict[str, jwt.PyJWK] = {}
        self.unnamed: list[jwt.PyJWK] = []
        """Keys without a ``kid`` (an issuer with one key may leave it out)."""
        self._fetched_at = -REFETCH_S
        self._lock = anyio.Lock()
        self.problem: str | None = None

    async def key(self, kid: str | None) -> jwt.PyJWK:
        """The key named `kid` (or the only key, for a token without one). Raises `Refused`."""
        found = self._find(kid)
        if found is not None:
            return found
        async with self._lock:  # one fetch at a time; those waiting find its keys
            found = self._find(kid)
            if found is None and self.clock() - self._fetched_at >= REFETCH_S:
                self._fetched_at = self.clock()
                try:
                    await self._fetch()
                    self.problem = None
                except FetchError as exc:
                    self.problem = str(exc)
                    logger.warning("sign-in: the issuer's keys could not be fetched: %s", exc)
                found = self._find(kid)
        if found is not None:
            return found
        if self.problem is not None:
            raise Refused(f"the issuer's signing keys cannot be fetched right now ({self.problem})")
        raise Refused("the token is signed with a key the issuer does not publish")

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is not None:
            return self.keys.get(kid)
        every = [*self.keys.values(), *self.unnamed]
        return every[0] if len(every) == 1 else None

    async def _fetch(self) -> None:
        url = self.jwks_url or await self._jwks_uri()
        status, body = await fetch(self.client, "GET", url, timeout_s=FETCH_TIMEOUT_S, max_bytes=MAX_FETCH_BYTES)
        if status != 200:
            raise FetchError(f"{where(url)} answered HTTP {status}")
        document = _json_object(body, "the key set")
        entries = document.get("keys")
        if not isinstance(entries, list):
            raise FetchError("the key set has no keys list")
        keys: dict[str, jwt.PyJWK] = {}
        unnamed: list[jwt.PyJWK] = []
        for entry in entries[:MAX_KEYS]:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            private = PRIVATE_MEMBERS.intersection(entry)
            if private:  # a key set must publish public keys only: a token is checked with the public half
                logger.warning("sign-in: the issuer's key set holds private key material (%s)", ", ".join(private))
            published = {name: value for name, value in entry.items() if name not in PRIVATE_MEMBERS}
            try:
                key = jwt.PyJWK(published)
            except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
                continue  # a key of a type this server does not check with: not one a token may use
            if key.algorithm_name not in ASYMMETRIC:
                continue
            kid = entry.get("kid")
            if isinstance(kid, str):
                keys[kid] = key
            else:
                unnamed.append(key)
        self.keys, self.unnamed = keys, unnamed

    async def _jwks_uri(self) -> str:
        """``jwks_uri`` of the issuer's metadata (OpenID Connect discovery, else RFC 8414)."""
        issuer = self.issuer.rstrip("/")
        parts = urlsplit(issuer)
        candidates = [
            f"{issuer}/.well-known/openid-configuration",
            f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{parts.path}",
        ]
        problems = []
        for url in candidates:
            status, body = await fetch(self.client, "GET", url, timeout_s=FETCH_TIMEOUT_S, max_bytes=MAX_FETCH_BYTES)
            if status != 200:
                problems.append(f"{where(url)} answered HTTP {status}")
                continue
            metadata = _json_object(body, "the issuer's metadata")
            jwks_uri = metadata.get("jwks_uri")
            if isinstance(jwks_uri, str) and jwks_uri.startswith(("https://", "http://")):
                return jwks_uri
            problems.append(f"{where(url)} names no jwks_uri")
        raise FetchError("; ".join(problems) + " (set oauth_jwks_url)")


class Verifier:
    """Checks bearer tokens (see the module docstring). One per server; its caches are this process's."""

    def __init__(
        self,
        settings: Settings,
        taken: frozenset[str] = frozenset(),
        *,
        client: httpx2.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`taken`: the static tokens' holders' names, which no signed-in principal may have."""
        assert settings.oauth_issuer is not None and settings.resource_url is not None
        self.settings = settings
        self.issuer = settings.oauth_issuer
        self.audience = settings.resource_url
        self.taken = taken | {DEFAULT_TENANT, "anonymous", "(anonymous)"}
        self.clock = clock
        self.client = client or httpx2.AsyncClient(follow_redirects=False, timeout=FETCH_TIMEOUT_S)
        self.keys = IssuerKeys(settings, self.client, clock)
        self._checked: OrderedDict[bytes, SignedIn] = OrderedDict()
        self._introspected: dict[bytes, float] = {}

    async def check(self, token: str) -> SignedIn:
        """Who `token` speaks for. Raises `Refused` saying why not."""
        if not token or len(token) > MAX_TOKEN_CHARS:
            raise Refused("the token is empty or too long")
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        now = self.clock()
        seen = self._checked.get(digest)
        if seen is not None:
            fresh = seen.expires_at is None or now <= seen.expires_at + LEEWAY_S
            introspected_until = self._introspected.get(digest)
            if fresh and (introspected_until is None or now < introspected_until):
                self._checked.move_to_end(digest)
                return seen
            del self._checked[digest]
            self._introspected.pop(digest, None)
        if token.count(".") == 2:
            signed = await self._check_jwt(token)
        elif self.settings.oauth_introspection_url is not None:
            signed = await self._introspect(token)
            self._introspected[digest] = now + INTROSPECTION_CACHE_S
        else:
            raise Refused("the token is not a JWT, and this server has no oauth_introspection_url to check others")
        self._checked[digest] = signed
        if len(self._checked) > CHECKED_CACHE:
            old, _ = self._checked.popitem(last=False)
            self._introspected.pop(old, None)
        return signed

    async def _check_jwt(self, token: str) -> SignedIn:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Refused("the token is not a well-formed JWT") from None
        algorithm = header.get("alg")
        if algorithm not in ASYMMETRIC:
            raise Refused(f"the token's algorithm {str(algorithm)[:20]!r} is not accepted (only signatures by the "
                          "issuer's published keys: RS256, ES256, PS256, EdDSA, ...)")  # fmt: skip
        kid = header.get("kid")
        key = await self.keys.key(kid if isinstance(kid, str) else None)
        if key.algorithm_name != algorithm and not (algorithm.startswith(("RS", "PS")) and key.key_type == "RSA"):
            raise Refused("the token's algorithm does not match its key")
        try:
            claims = jwt.decode(
                token,
                key=key,
                algorithms=[algorithm],
                audience=_variants(self.audience),
                issuer=_variants(self.issuer),
                leeway=LEEWAY_S,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise Refused("the token has expired") from None
        except jwt.InvalidAudienceError:
            raise Refused(f"the token was not issued for this server (its aud is not {self.audience})") from None
        except jwt.InvalidIssuerError:
            raise Refused(f"the token was not issued by {self.issuer}") from None
        except jwt.InvalidSignatureError:
            raise Refused("the token's signature does not verify") from None
        except jwt.ImmatureSignatureError:
            raise Refused("the token is not valid yet (nbf or iat in the future)") from None
        except jwt.MissingRequiredClaimError as exc:
            raise Refused(f"the token has no {exc.claim} claim") from None
        except jwt.PyJWTError as exc:
            raise Refused(f"the token is not valid: {type(exc).__name__}") from None
        except Exception as exc:  # the issuer's key or the token is of a shape the library cannot check: not a 500
            logger.warning("sign-in: a token could not be checked with the issuer's key %r: %r", kid, exc)
            raise Refused("the token cannot be checked with the issuer's key") from None
        return self._signed_in(claims, token)

    async def _introspect(self, token: str) -> SignedIn:
        settings = self.settings
        assert settings.oauth_introspection_url is not None
        assert settings.oauth_client_id is not None and settings.oauth_client_secret is not None
        credentials = (settings.oauth_client_id, settings.oauth_client_secret.get_secret_value())
        try:
            status, body = await fetch(
                self.client,
                "POST",
                settings.oauth_introspection_url,
                data={"token": token, "token_type_hint": "access_token"},
                auth=credentials,
                timeout_s=FETCH_TIMEOUT_S,
                max_bytes=MAX_FETCH_BYTES,
            )
            if status != 200:
                raise FetchError(f"the introspection endpoint answered HTTP {status}")
            answer = _json_object(body, "the introspection answer")
        except FetchError as exc:
            logger.warning("sign-in: a token could not be introspected: %s", exc)
            raise Refused(f"the token cannot be checked right now ({exc})") from None
        if answer.get("active") is not True:
            raise Refused("the token is not active (expired, revoked or unknown to the issuer)")
        audience = answer.get("aud")
        if audience is not None and not set(_variants(self.audience)) & set(_strings(audience)):
            raise Refused(f"the token was not issued for this server (its aud is not {self.audience})")
        issuer = answer.get("iss")
        if issuer is not None and issuer not in _variants(self.issuer):
            raise Refused(f"the token was not issued by {self.issuer}")
        expires = answer.get("exp")
        if isinstance(expires, int | float) and expires + LEEWAY_S < self.clock():
            raise Refused("the token has expired")
        return self._signed_in(answer, token)

    def _signed_in(self, claims: Mapping[str, Any], token: str) -> SignedIn:
        claim = self.settings.oauth_principal_claim
        value = claims.get(claim)
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_CHARS:
            raise Refused(f"the token has no usable {claim} claim (oauth_principal_claim)")
        if value in self.taken or not value.isprintable():
            logger.warning("sign-in: refused a token whose %s names a static token's holder", claim)
            raise Refused(f"the token's {claim} is the name of another kind of principal here")
        groups = _strings(claims.get(self.settings.oauth_groups_claim))
        client = claims.get("client_id", claims.get("azp", ""))
        scope = claims.get("scope", claims.get("scp", ""))
        expires = claims.get("exp")
        return SignedIn(
            principal=value,
            groups=frozenset(g for g in groups[:MAX_GROUPS] if 0 < len(g) <= MAX_NAME_CHARS),
            client_id=str(client)[:MAX_NAME_CHARS],
            issuer=str(claims.get("iss", self.issuer)),
            subject=str(claims.get("sub", value))[:MAX_NAME_CHARS],
            expires_at=int(expires) if isinstance(expires, int | float) else None,
            scopes=tuple(_strings(scope))[:100],
            token=token,
        )

    async def aclose(self) -> None:
        await self.client.aclose()


def _variants(url: str) -> list[str]:
    """A URL with and without its trailing slash (issuers and audiences are written both ways)."""
    bare = url.rstrip("/")
    return list(dict.fromkeys([url, bare, bare + "/"]))


def _strings(value: Any) -> list[str]:
    """A claim that holds names: a list of strings, or one space-separated string (``scope``)."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


def person_user(signed: SignedIn) -> AuthenticatedUser:
    """The SDK's user for a signed-in request: its transports bind each session to the token's client, issuer and
    subject (another person's session is answered as absent), and so does a 2026-07-28 ``requestState``."""
    return AuthenticatedUser(
        AccessToken(
            token=f"person:{signed.principal}",
            client_id=f"{PERSON_CLIENT_PREFIX}{signed.client_id}",
            scopes=list(signed.scopes),
            expires_at=signed.expires_at,
            subject=signed.subject,
            claims={"iss": signed.issuer},
        )
    )


def signed_in(scope: Scope) -> SignedIn | None:
    """The person `SignIn` found for this request (None: a static token, or no sign-in)."""
    found = scope.get(SCOPE_KEY)
    return found if isinstance(found, SignedIn) else None


def metadata_url(settings: Settings) -> str:
    """Where this server's protected-resource metadata is (RFC 9728 §3.1: the well-known path, then the MCP path)."""
    assert settings.public_url is not None
    parts = urlsplit(settings.public_url.rstrip("/") + "/mcp")
    return f"{parts.scheme}://{parts.netloc}{PROTECTED_RESOURCE}{parts.path}"


def metadata_routes(settings: Settings) -> list[Route]:
    """``GET /.well-known/oauth-protected-resource`` and the same with the MCP path appended."""
    assert settings.public_url is not None and settings.oauth_issuer is not None
    document = {
        "resource": settings.public_url.rstrip("/") + "/mcp",
        "authorization_servers": [settings.oauth_issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "attp-server",
        **({"scopes_supported": list(settings.oauth_scopes)} if settings.oauth_scopes else {}),
    }

    async def protected_resource(_request: Request) -> JSONResponse:
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=3600"})

    path = urlsplit(metadata_url(settings)).path
    return [Route(p, protected_resource, methods=["GET"]) for p in dict.fromkeys([PROTECTED_RESOURCE, path])]


def challenge(settings: Settings, error: str | None = None) -> str:
    """The ``WWW-Authenticate`` value of a 401: where the metadata is, and for a bad token, why."""
    parts = [f'resource_metadata="{metadata_url(settings)}"']
    if error is not None:
        described = error.replace("\\", "").replace('"', "'")[:300]
        parts += ['error="invalid_token"', f'error_description="{described}"']
    return "Bearer " + ", ".join(parts)


Static = Callable[[Scope], Awaitable[AuthenticatedUser | None]]


class SignIn:
    """ASGI middleware: every request but the public paths carries a static token or a valid access token, or is
    answered 401 with the challenge (see the module docstring)."""

    def __init__(
        self, app: ASGIApp, settings: Settings, verifier: Verifier, static: Static, public: frozenset[str]
    ) -> None:
        self.app = app
        self.settings = settings
        self.verifier = verifier
        self.static = static
        self.public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in self.public or path.startswith(PROTECTED_RESOURCE):
            await self.app(scope, receive, send)
            return
        user = await self.static(scope)
        if user is not None:
            await self.app({**scope, "user": user}, receive, send)
            return
        bearer = _bearer(scope)
        if bearer is None:
            await self._refuse(
                send, None, "this server needs an access token: sign in through its authorization server"
            )
            return
        try:
            signed = await self.verifier.check(bearer)
        except Refused as refused:
            await self._refuse(send, str(refused), str(refused))
            return
        await self.app({**scope, "user": person_user(signed), SCOPE_KEY: signed}, receive, send)

    async def _refuse(self, send: Send, error: str | None, message: str) -> None:
        body = json.dumps(
            {"error": "invalid_token" if error else "unauthorized", "error_description": message}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", challenge(self.settings, error).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            return bytes(value[7:]).strip().decode("latin-1")
    return None
