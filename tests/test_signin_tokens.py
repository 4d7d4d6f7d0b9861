"""Bad tokens through the real server: each one gets 401 with the RFC 6750 / RFC 9728 challenge, promptly, never a
500 or a hang; a key set that hangs or answers 10 MB costs a bounded wait and nothing else; opaque tokens are
introspected at the real provider.

The tokens are the provider's own where a provider would issue them (a real token for another resource), and signed
here with the provider's key where it never would (expired, another issuer: everything right but the one claim).
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import pytest
from harness import execute, free_port, serving_http
from idp import ATTP_CLIENT, ATTP_SECRET, Idp, identity_provider, rsa_key

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Idp]:
    with identity_provider(tmp_path_factory.mktemp("idp"), {"alice": ["eng"]}) as provider:
        yield provider


def signed_in_server(idp: Idp, tmp: Any, **settings: str) -> Any:
    port = free_port()
    env = {"ATTP_OAUTH_ISSUER": idp.issuer, "ATTP_PUBLIC_URL": f"http://127.0.0.1:{port}", **settings}
    return serving_http(tmp / "ws", "--toolpack", "demo_pack:toolpack", port=port, env=env)


@pytest.fixture(scope="module")
def served(idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with signed_in_server(idp, tmp_path_factory.mktemp("tokens")) as server:
        yield server


def post_with(url: str, token: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    answer = httpx.post(
        url + "/mcp", json=INITIALIZE, headers={**HEADERS, "Authorization": f"Bearer {token}"}, timeout=30
    )
    return answer, time.monotonic() - started


def assert_refused(answer: httpx.Response, url: str, why: str) -> None:
    assert answer.status_code == 401, answer.text
    challenge = answer.headers["www-authenticate"]
    assert challenge.startswith(f'Bearer resource_metadata="{url}/.well-known/oauth-protected-resource/mcp"')
    assert 'error="invalid_token"' in challenge
    assert why in challenge and why in answer.json()["error_description"], challenge


def unsigned(claims: dict[str, Any], header: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part(header)}.{part(claims)}."


def test_a_real_token_for_this_server_is_accepted(idp: Idp, served: Any) -> None:
    answer, _ = post_with(served.url, idp.access_token("alice", served.url + "/mcp"))
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("expired", "has expired"),
        ("wrong audience", "not issued for this server"),
        ("wrong issuer", "not issued by"),
        ("bad signature", "signature does not verify"),
        ("alg none", "algorithm 'none' is not accepted"),
        ("shared-secret algorithm", "algorithm 'HS256' is not accepted"),
        ("unknown key", "key the issuer does not publish"),
        ("not before", "not valid yet"),
        ("no principal", "no usable sub claim"),
        ("garbage", "not a well-formed JWT"),
        ("a static token's holder", "name of another kind of principal"),
    ],
)
def test_a_bad_token_gets_401_with_the_challenge(idp: Idp, served: Any, case: str, why: str) -> None:
    resource = served.url + "/mcp"
    person = {"sub": "alice", "aud": resource}
    other_key, _ = rsa_key("other")
    now = int(time.time())
    token = {
        "expired": lambda: idp.forge({**person, "iat": now - 7200, "exp": now - 3600}),
        "wrong audience": lambda: idp.access_token("alice", "http://127.0.0.1:1/another-server"),
        "wrong issuer": lambda: idp.forge({**person, "iss": "http://127.0.0.1:1"}),
        "bad signature": lambda: idp.forge(person, key=other_key),
        "alg none": lambda: unsigned({**person, "iss": idp.issuer, "exp": now + 300}, {"alg": "none", "kid": idp.kid}),
        "shared-secret algorithm": lambda: jwt.encode(
            {**person, "iss": idp.issuer, "exp": now + 300},
            "the public key text, used as a shared secret",
            "HS256",
            {"kid": idp.kid},
        ),
        "unknown key": lambda: idp.forge(person, key=other_key, kid="other"),
        "not before": lambda: idp.forge({**person, "nbf": now + 3600}),
        "no principal": lambda: idp.forge({"aud": resource}),
        "garbage": lambda: "a.b.c",
        "a static token's holder": lambda: idp.forge({**person, "sub": "default"}),
    }[case]()
    answer, took = post_with(served.url, token)
    assert_refused(answer, served.url, why)
    assert took < 3


class HostileKeys(BaseHTTPRequestHandler):
    """A key set that never answers (/hang) or answers 10 MB (/huge)."""

    def do_GET(self) -> None:
        if self.path == "/hang":
            time.sleep(12)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        with contextlib.suppress(OSError):  # the server under test hangs up past its limit
            self.wfile.write(b'{"keys": [' + b" " * (10 * 1024 * 1024) + b"]}")

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), HostileKeys)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("path", ["/hang", "/huge"])
def test_a_key_set_that_hangs_or_answers_10_mb_costs_a_bounded_wait(
    idp: Idp, hostile: str, path: str, tmp_path: Any
) -> None:
    with signed_in_server(idp, tmp_path, ATTP_OAUTH_JWKS_URL=hostile + path) as server:
        token = idp.forge({"sub": "alice", "aud": server.url + "/mcp"})
        results: list[tuple[httpx.Response, float]] = []
        waiting = threading.Thread(target=lambda: results.append(post_with(server.url, token)))
        waiting.start()
        time.sleep(0.3)
        started = time.monotonic()  # while the fetch is under way, the server answers everything else at once
        assert httpx.get(server.url + "/healthz", timeout=5).status_code == 200
        assert time.monotonic() - started < 1
        waiting.join(timeout=20)
        answer, took = results[0]
        assert_refused(answer, server.url, "signing keys cannot be fetched right now")
        assert took < 8
        again, took_again = post_with(server.url, token)  # not fetched again right away: refused at once
        assert_refused(again, server.url, "signing keys cannot be fetched right now")
        assert took_again < 1


@pytest.mark.parametrize(
    ("case", "accepted"),
    [("expired 30 s ago", True), ("valid in 30 s", True), ("expired 90 s ago", False), ("valid in 90 s", False)],
)
def test_the_clocks_may_differ_by_a_minute(idp: Idp, served: Any, case: str, accepted: bool) -> None:
    """A provider's clock and this server's may differ: ``exp`` and ``nbf`` are taken with 60 s of leeway."""
    now = int(time.time())
    claims = {
        "expired 30 s ago": {"iat": now - 600, "exp": now - 30},
        "valid in 30 s": {"nbf": now + 30},
        "expired 90 s ago": {"iat": now - 600, "exp": now - 90},
        "valid in 90 s": {"nbf": now + 90},
    }[case]
    answer, _ = post_with(served.url, idp.forge({"sub": "alice", "aud": served.url + "/mcp", **claims}))
    if accepted:
        assert answer.status_code == 200, answer.text
    else:
        assert_refused(answer, served.url, "has expired" if "expired" in case else "not valid yet")


class RotatingKeys(BaseHTTPRequestHandler):
    """The issuer's key set, as `published` says it is now."""

    published: dict[str, Any] = {"keys": []}

    def do_GET(self) -> None:
        body = json.dumps(self.published).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


@contextlib.contextmanager
def key_set(*jwks: dict[str, Any]) -> Iterator[str]:
    """A key set server publishing `jwks` (change `RotatingKeys.published` to rotate them); its URL."""
    RotatingKeys.published = {"keys": list(jwks)}
    keys = ThreadingHTTPServer(("127.0.0.1", 0), RotatingKeys)
    keys.daemon_threads = True
    threading.Thread(target=keys.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{keys.server_address[1]}/jwks"
    finally:
        keys.shutdown()
        keys.server_close()


def public(jwk: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in jwk.items() if name not in ("d", "p", "q", "dp", "dq", "qi")}


def test_a_key_set_that_holds_private_keys_is_read_without_them(idp: Idp, tmp_path: Any) -> None:
    """A misconfigured issuer publishes its private JWK: tokens are checked with its public half (it was a 500)."""
    key, jwk = rsa_key("leaky")
    with key_set(jwk) as url, signed_in_server(idp, tmp_path, ATTP_OAUTH_JWKS_URL=url) as server:
        person = {"sub": "alice", "aud": server.url + "/mcp"}
        answer, _ = post_with(server.url, idp.forge(person, key=key, kid="leaky"))
        assert answer.status_code == 200, answer.text
        forged, _ = post_with(server.url, idp.forge(person, key=rsa_key("x")[0], kid="leaky"))
        assert_refused(forged, server.url, "signature does not verify")


def test_rotated_keys_are_fetched_again_at_most_every_30_s(idp: Idp, tmp_path: Any) -> None:
    """The issuer rotates its signing key: a token signed with the new one is refused until the key set may be
    fetched again (30 s after the last fetch: a flood of made-up ``kid`` values fetches nothing), then accepted;
    the old key, gone from the set, no longer is."""
    old_key, old_jwk = rsa_key("old")
    new_key, new_jwk = rsa_key("new")
    with key_set(public(old_jwk)) as url, signed_in_server(idp, tmp_path, ATTP_OAUTH_JWKS_URL=url) as server:
        person = {"sub": "alice", "aud": server.url + "/mcp"}
        first, _ = post_with(server.url, idp.forge(person, key=old_key, kid="old"))
        fetched = time.monotonic()
        assert first.status_code == 200, first.text
        RotatingKeys.published = {"keys": [public(new_jwk)]}
        early, _ = post_with(server.url, idp.forge(person, key=new_key, kid="new"))
        assert_refused(early, server.url, "key the issuer does not publish")
        time.sleep(max(0.0, fetched + 30.5 - time.monotonic()))
        late, _ = post_with(server.url, idp.forge(person, key=new_key, kid="new"))
        assert late.status_code == 200, late.text
        gone, _ = post_with(server.url, idp.forge(person, key=old_key, kid="old"))
        assert_refused(gone, server.url, "key the issuer does not publish")


def test_an_opaque_token_is_introspected_at_the_provider(tmp_path: Any) -> None:
    with identity_provider(tmp_path, {"alice": ["eng"]}, opaque=True) as idp:
        settings = {
            "ATTP_OAUTH_INTROSPECTION_URL": f"{idp.issuer}/token/introspection",
            "ATTP_OAUTH_CLIENT_ID": ATTP_CLIENT,
            "ATTP_OAUTH_CLIENT_SECRET": ATTP_SECRET,
        }
        with signed_in_server(idp, tmp_path, **settings) as server:
            token = idp.access_token("alice", server.url + "/mcp")
            assert token.count(".") != 2  # opaque: only the provider can say what it is
            answer, _ = post_with(server.url, token)
            assert answer.status_code == 200, answer.text
            other = idp.access_token("alice", "http://127.0.0.1:1/another-server")
            refused, _ = post_with(server.url, other)
            assert_refused(refused, server.url, "not issued for this server")
            unknown, _ = post_with(server.url, "an-opaque-token-nobody-issued")
            assert_refused(unknown, server.url, "not active")


def test_an_introspection_answer_is_kept_briefly(tmp_path: Any) -> None:
    """An active token's introspection is cached (30 s): revoked at the provider, it still works on the server that
    asked, and is refused at once by a server that has to ask again."""
    with identity_provider(tmp_path, {"alice": ["eng"]}, opaque=True) as idp:
        port = free_port()
        env = {
            "ATTP_OAUTH_ISSUER": idp.issuer,
            "ATTP_PUBLIC_URL": f"http://127.0.0.1:{port}",
            "ATTP_OAUTH_INTROSPECTION_URL": f"{idp.issuer}/token/introspection",
            "ATTP_OAUTH_CLIENT_ID": ATTP_CLIENT,
            "ATTP_OAUTH_CLIENT_SECRET": ATTP_SECRET,
        }
        client_id = idp.register()
        token = idp.access_token("alice", f"http://127.0.0.1:{port}/mcp", client_id=client_id)
        with serving_http(tmp_path / "ws", "--toolpack", "demo_pack:toolpack", port=port, env=env) as server:
            assert post_with(server.url, token)[0].status_code == 200
            revoked = httpx.post(f"{idp.issuer}/token/revocation", data={"token": token, "client_id": client_id})
            assert revoked.status_code == 200, revoked.text
            cached, _ = post_with(server.url, token)
            assert cached.status_code == 200, cached.text  # the answer it had, within INTROSPECTION_CACHE_S
        with serving_http(tmp_path / "ws", "--toolpack", "demo_pack:toolpack", port=port, env=env) as again:
            asked, _ = post_with(again.url, token)
            assert_refused(asked, again.url, "not active")


@pytest.mark.anyio
async def test_an_introspected_person_runs_a_program(tmp_path: Any) -> None:
    """The whole path with an opaque token: introspection, then attp_execute as that person."""
    with identity_provider(tmp_path, {"alice": ["eng"]}, opaque=True) as idp:
        settings = {
            "ATTP_OAUTH_INTROSPECTION_URL": f"{idp.issuer}/token/introspection",
            "ATTP_OAUTH_CLIENT_ID": ATTP_CLIENT,
            "ATTP_OAUTH_CLIENT_SECRET": ATTP_SECRET,
        }
        with signed_in_server(idp, tmp_path, **settings) as server:
            token = idp.access_token("alice", server.url + "/mcp")
            async with server.client(headers={"Authorization": f"Bearer {token}"}) as client:
                data = await execute(client, "__result__ = add(4, 5)")
            assert data["result"] == 9


@pytest.mark.anyio
async def test_the_principal_and_groups_come_from_the_configured_claims(idp: Idp, tmp_path: Any) -> None:
    """``oauth_principal_claim`` and ``oauth_groups_claim`` name other claims than ``sub`` and ``groups`` (an
    issuer whose ``sub`` is a UUID, whose groups are ``roles``): the rules match what those claims say."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = tmp_path / "attp.toml"
    config.write_text(
        f'oauth_issuer = "{idp.issuer}"\npublic_url = "{url}"\n'
        'oauth_principal_claim = "preferred_username"\noauth_groups_claim = "roles"\n'
        '[access.her]\nprincipals = ["alice.smith"]\ntools = ["demo.add"]\n'
        '[access.admins]\ngroups = ["admins"]\ntools = ["demo.records"]\n'
    )
    with serving_http(
        tmp_path / "ws", "--config", str(config), "--toolpack", "demo_pack:toolpack", port=port
    ) as server:
        person = {"sub": "0b6e1c52-8f0e-4d0c-9d55-3f1d7c8a2e11", "aud": server.url + "/mcp"}
        named = idp.forge({**person, "preferred_username": "alice.smith", "roles": ["admins"], "groups": ["x"]})
        async with server.client(headers={"Authorization": f"Bearer {named}"}) as client:
            data = await execute(client, "__result__ = sorted(t['name'] for t in tools())")
        assert data["result"] == ["add", "records"], data
        unnamed, _ = post_with(server.url, idp.forge({**person, "sub": "alice.smith"}))
        assert_refused(unnamed, server.url, "no usable preferred_username claim")
