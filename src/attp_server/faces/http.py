"""The HTTP face: Streamable HTTP at ``/mcp``, legacy SSE at ``/sse`` + ``/messages/``, ``GET /healthz``,
``GET /metrics`` (Prometheus text; behind the token like ``/mcp``).

One Starlette app in one process, wrapped (outermost first) in: the bearer-token check when
``auth_token`` is set, and the SDK's own Host/Origin validation (DNS-rebinding protection) and
request-body limit inside each transport. ``/healthz`` needs no token; without one it says only
that the server is up. Below the app, before any request is read, `connections` bounds how many
connections are open and how long a request head may take.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import json
import logging
import os
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping

import anyio
import uvicorn
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from attp_server import __version__
from attp_server.errors import AttpError
from attp_server.faces.connect import PATHS as CONNECT_PATHS
from attp_server.faces.connect import connect_routes
from attp_server.faces.connections import ConnectionBound
from attp_server.faces.signals import on_stop_signal
from attp_server.faces.signin import SignIn, Verifier, metadata_routes
from attp_server.ops.metrics import CONTENT_TYPE
from attp_server.run.runtime import Runtime
from attp_server.settings import DEFAULT_TENANT, Settings, is_loopback

logger = logging.getLogger(__name__)

PUBLIC_PATHS = frozenset({"/healthz", *CONNECT_PATHS})
"""Paths every request may reach: the health check, and the pages a browser connecting a person's account visits."""
GUARDED_PATHS = ("/mcp", "/sse", "/messages/", "/metrics")
"""The paths a token guards when the server has tokens or sign-in, as the start-up log names them."""
TENANT_CLIENT_PREFIX = "attp-tenant:"


def max_request_bytes(settings: Settings) -> int:
    """The largest request body accepted: room for the longest program, JSON-escaped, and its envelope."""
    return max(1024 * 1024, 8 * settings.max_code_chars + 64 * 1024)


def check_exposure(settings: Settings) -> None:
    """Refuse to serve a non-loopback address without a token, unless the user insisted.

    Raises:
        AttpError: naming the bind address and the two ways out.
    """
    if settings.isolation == "tenant" and not settings.auth_tokens and settings.oauth_issuer is None:
        raise AttpError(
            "isolation = tenant tells its tenants apart by their tokens, and auth_tokens names none: set "
            'auth_tokens = {name = "token", ...} in the config file (or ATTP_AUTH_TOKENS as a JSON object)'
        )
    if is_loopback(settings.host) or server_tokens(settings) or settings.oauth_issuer is not None:
        return
    if settings.insecure_no_auth:
        logger.warning(
            "serving %s without authentication (--insecure-no-auth): anyone who reaches it can run code", settings.host
        )
        return
    raise AttpError(
        f"refusing to serve HTTP on {settings.host!r} without authentication: anyone who can reach that address "
        "could run programs with your tools. Set ATTP_AUTH_TOKEN (or auth_token in the config file), "
        "bind 127.0.0.1, or pass --insecure-no-auth if a proxy in front of it authenticates."
    )


def enforced(settings: Settings) -> str:
    """What the HTTP face demands of a request, for the start-up log: sign-in (through which issuer) and which
    tokens, by name (never a value), on which paths; or that it demands nothing, and why it may serve so."""
    if not server_tokens(settings) and settings.oauth_issuer is None:
        if is_loopback(settings.host):
            return "no authentication (loopback only: whoever can connect from this machine can run programs)"
        return "no authentication (--insecure-no-auth: the proxy in front of it must authenticate)"
    accepted = []
    if settings.oauth_issuer is not None:
        accepted.append(f"sign-in through {settings.oauth_issuer}")
    if settings.auth_tokens:
        accepted.append(f"{', '.join(settings.auth_tokens)} (auth_tokens)")
    if settings.auth_token is not None:
        accepted.append(f"{DEFAULT_TENANT} (auth_token)")
    opened = ["/healthz (its details only with a token)"]
    if any(server.identity == "per_user" for server in settings.upstream_servers.values()):
        opened.append(", ".join(sorted(CONNECT_PATHS)) + " (a person connecting an account)")
    return f"a token required on {', '.join(GUARDED_PATHS)}: {'; '.join(accepted)}; open: {', '.join(opened)}"


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """DNS-rebinding protection: loopback names, the bind address, and `allowed_hosts`."""
    named = ["127.0.0.1:*", "localhost:*", "[::1]:*", f"{settings.host}:*", *settings.allowed_hosts]
    hosts = list(dict.fromkeys(named))  # each once, in this order
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def server_tokens(settings: Settings) -> dict[str, bytes]:
    """Every accepted token by its holder's name: `auth_tokens`, and `auth_token` as "default"."""
    tokens = {name: secret.get_secret_value().encode("utf-8") for name, secret in settings.auth_tokens.items()}
    if settings.auth_token is not None:
        tokens[DEFAULT_TENANT] = settings.auth_token.get_secret_value().encode("utf-8")
    return tokens


def token_holder(scope: Scope, tokens: Mapping[str, bytes]) -> str | None:
    """The name of the token the request's ``Authorization: Bearer`` or ``X-API-Key`` header holds, if any."""
    presented: list[bytes] = []
    for name, value in scope.get("headers", []):
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            presented.append(value[7:].strip())
        elif name == b"x-api-key":
            presented.append(value.strip())
    # Compare every candidate with every token, so the time taken does not depend on which one matched.
    found = [
        holder for candidate in presented for holder, token in tokens.items() if hmac.compare_digest(candidate, token)
    ]
    return found[0] if found else None


def tenant_user(holder: str) -> AuthenticatedUser:
    """The SDK's user for a token's holder: its transports then bind each session to the holder who opened it.

    The SDK answers a request for another holder's session as if the session did not exist, and
    binds a multi-round-trip ``requestState`` to the holder too. The token itself is not in it.
    """
    return AuthenticatedUser(
        AccessToken(token=f"tenant:{holder}", client_id=f"{TENANT_CLIENT_PREFIX}{holder}", scopes=[])
    )


def tenant_of(scope: Scope) -> str | None:
    """The holder `TokenAuth` found for this request (None without tokens)."""
    user = scope.get("user")
    if isinstance(user, AuthenticatedUser) and user.access_token.client_id.startswith(TENANT_CLIENT_PREFIX):
        return user.access_token.client_id[len(TENANT_CLIENT_PREFIX) :]
    return None


class TokenAuth:
    """ASGI middleware: every request but `PUBLIC_PATHS` carries one of the tokens, or gets 401.

    Accepted as ``Authorization: Bearer <token>`` or ``X-API-Key: <token>`` (n8n's "Header Auth").
    The comparison is constant-time (`hmac.compare_digest`) on the UTF-8 bytes. The holder's name
    rides on the request as its ``user`` (`tenant_user`), so the tool call knows its tenant.
    """

    def __init__(self, app: ASGIApp, tokens: Mapping[str, bytes]) -> None:
        self.app = app
        self.tokens = dict(tokens)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        holder = token_holder(scope, self.tokens)
        if holder is not None:
            await self.app({**scope, "user": tenant_user(holder)}, receive, send)
            return
        body = json.dumps(
            {
                "error": "unauthorized",
                "message": "this server needs its token: send 'Authorization: Bearer <token>' or 'X-API-Key: <token>'",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="attp-server"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def http_app(server: MCPServer, runtime: Runtime, bound: ConnectionBound | None = None) -> ASGIApp:
    """Streamable HTTP, SSE and /healthz from one Starlette app, behind the token check if configured."""
    settings = runtime.settings
    security = transport_security(settings)
    limit = max_request_bytes(settings)
    app = server.streamable_http_app(
        transport_security=security,
        host=settings.host,
        max_request_body_size=limit,
        session_idle_timeout=settings.session_idle_s,
    )
    sse = server.sse_app(transport_security=security, host=settings.host, max_request_body_size=limit)
    app.router.routes.extend(sse.routes)
    app.router.routes.append(Route("/healthz", _healthz(runtime, bound), methods=["GET"]))
    app.router.routes.append(Route("/metrics", _metrics(runtime), methods=["GET"]))
    if any(server.identity == "per_user" for server in settings.upstream_servers.values()):
        app.router.routes.extend(connect_routes(settings))
    tokens = server_tokens(settings)
    hinted = SpansAfterReply(HostHint(app, security.allowed_hosts), runtime)
    if settings.oauth_issuer is not None:  # sign-in, the static tokens beside it
        app.router.routes.extend(metadata_routes(settings))

        async def static(scope: Scope) -> AuthenticatedUser | None:
            holder = token_holder(scope, tokens)
            return tenant_user(holder) if holder is not None else None

        verifier = Verifier(settings, frozenset(tokens))
        return SignIn(AuthContextMiddleware(hinted), settings, verifier, static, PUBLIC_PATHS)
    if not tokens:
        return hinted
    return TokenAuth(AuthContextMiddleware(hinted), tokens)


class SpansAfterReply:
    """ASGI middleware: once a response's last byte is sent, the runs' spans waiting for their replies are made a
    moment later (`AfterReply.reply_sent`): after the reply, so that no client waits for them, and before the next
    request, so that they do not slow it either (without this, they wait for a later timer)."""

    def __init__(self, app: ASGIApp, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.runtime.deferred.reply_sent()

        await self.app(scope, receive, sending)


class HostHint:
    """ASGI middleware: the SDK's bare ``421 Invalid Host header`` (DNS-rebinding protection) gets the way out:
    the Host names accepted, and ``ATTP_ALLOWED_HOSTS`` / ``allowed_hosts`` to add the one that was sent."""

    def __init__(self, app: ASGIApp, accepted: list[str]) -> None:
        self.app = app
        self.accepted = accepted

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        replaced = False

        async def hinting(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message.get("status") == 421:
                replaced = True
                body = self._text(scope).encode()
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-length"]
                headers.append((b"content-length", str(len(body)).encode()))
                await send({**message, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
            if replaced:
                return  # the SDK's own body, already answered
            await send(message)

        await self.app(scope, receive, hinting)

    def _text(self, scope: Scope) -> str:
        host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), "")
        name = host.rsplit(":", 1)[0] if host and not host.endswith("]") else host
        return (
            f"Invalid Host header {host[:100]!r}: this server answers only to {', '.join(self.accepted)} (protection "
            f"against DNS rebinding). To reach it by this name, start it with ATTP_ALLOWED_HOSTS='{name[:100]}:*' "
            "(or allowed_hosts in attp.toml).\n"
        )


def _healthz(runtime: Runtime, bound: ConnectionBound | None) -> Callable[[Request], Awaitable[JSONResponse]]:
    tokens = server_tokens(runtime.settings)
    guarded = bool(tokens) or runtime.settings.oauth_issuer is not None

    async def healthz(request: Request) -> JSONResponse:
        if guarded and token_holder(request.scope, tokens) is None:
            return JSONResponse({"status": "ok"})  # up, and nothing more, for anyone without the token
        return JSONResponse(
            {
                "status": "ok",
                "version": __version__,
                "transports": {"streamable_http": "/mcp", "sse": "/sse"},
                "workers": runtime.pool.stats(),
                "runs": runtime.admission.stats(),
                "tools": runtime.tools.stats(),
                "threads": threading.active_count(),
                "connections": bound.stats() if bound is not None else None,
                "sandbox": {**runtime.pool.lockdown, "containment": runtime.pool.containment_report()},
                "store": {"kind": runtime.store.kind, "at": runtime.store.backend.label}
                if runtime.store is not None
                else None,
                "upstream": {
                    name: pack.live.health() for name, pack in runtime.registry.packs.items() if pack.live is not None
                },
            }
        )

    return healthz


def _metrics(runtime: Runtime) -> Callable[[Request], Awaitable[Response]]:
    async def metrics(_request: Request) -> Response:
        return Response(runtime.metrics.exposition(), media_type=CONTENT_TYPE)

    return metrics


async def serve_http(server: MCPServer, runtime: Runtime) -> None:
    settings = runtime.settings
    bound = ConnectionBound(settings.max_connections, settings.header_timeout_s)
    config = uvicorn.Config(
        http_app(server, runtime, bound),
        host=settings.host,
        port=settings.port,
        http=bound.protocol(),
        log_config=None,
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=2,
    )
    web = _Server(config)
    logger.info(
        "attp-server %s: http://%s:%d/mcp (Streamable HTTP), /sse (SSE); %s; Host accepted: %s",
        __version__,
        settings.host,
        settings.port,
        enforced(settings),
        ", ".join(transport_security(settings).allowed_hosts),
    )

    def stop(received: signal.Signals) -> None:
        if web.should_exit and received == signal.SIGINT:
            web.force_exit = True  # a second Ctrl-C: do not wait for open connections
        web.should_exit = True

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(on_stop_signal, stop)
        try:
            await web.serve()
        except SystemExit as exc:  # uvicorn ends a failed startup (the port taken) with sys.exit, the cause as context
            raise AttpError(_listen_failure(settings, exc.__context__)) from None
        tasks.cancel_scope.cancel()


def _listen_failure(settings: Settings, cause: BaseException | None) -> str:
    where = f"cannot listen on {settings.host}:{settings.port}"
    if not isinstance(cause, OSError) or cause.errno is None:
        return f"{where}: {cause or 'the HTTP server did not start'}"
    if cause.errno == errno.EADDRINUSE:
        return f"{where}: the port is in use; stop what holds it or choose another port (--port or ATTP_PORT)"
    return f"{where}: {os.strerror(cause.errno)}"


class _Server(uvicorn.Server):
    """Uvicorn without its own signal handling: `serve_http` handles the signals through the event
    loop. Uvicorn's handlers re-raise the signal once it has shut down, which ends the process
    before the runtime can stop its workers and remove their directories."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
