"""Upstream servers that see the person, through the real server, the real OpenID provider and a real remote MCP
server that accepts only that provider's tokens for itself and answers with the subject it sees
(tests/support/whoami_server.py).

* ``identity = "token_exchange"``: each person's call reaches the upstream with a token the provider issued for the
  upstream in exchange for the person's own (RFC 8693): the upstream sees alice as alice, bob as bob, and the
  gateway as the actor.
* ``identity = "per_user"``: the gateway lists the tools with its operator's ``attp login``; each person connects
  their own account once: the first call gets the link (in the error text on a client that cannot show links; by
  URL-mode elicitation, the call waiting meanwhile, on one that can), the person signs in at the provider, the
  browser comes back to ``/oauth/callback``; from then on the upstream sees each person as themselves.
  ``attp logout NAME --principal P`` removes one person's tokens.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from harness import execute, free_port, server_env, serving_http, stop_process
from idp import ATTP_CLIENT, ATTP_SECRET, Idp, identity_provider

pytestmark = pytest.mark.anyio

SUPPORT = Path(__file__).parent / "support"
LIFETIME_S = 6
"""The provider's access tokens live this long: a person's upstream tokens expire during the module, and are
refreshed (attp-server's own check of sign-in tokens allows 60 s of clock skew, so those outlive it)."""


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Idp]:
    users = {"alice": ["eng"], "bob": ["sales"], "operator": ["admins"]}
    with identity_provider(tmp_path_factory.mktemp("idp"), users, ttl_s=LIFETIME_S) as provider:
        yield provider


@pytest.fixture(scope="module")
def whoami(idp: Idp) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SUPPORT / "whoami_server.py"), str(port), idp.issuer],
        env=server_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        with httpx.Client() as http:
            while time.monotonic() < deadline:
                try:
                    if http.get(url + "/.well-known/oauth-protected-resource/mcp").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.05)
        yield url + "/mcp"
    finally:
        stop_process(process)


def browse_link(idp: Idp, link: str, login: str) -> str:
    """A person opens a connect link: the gateway's page, then the provider's sign-in, then back to the gateway."""
    landing = httpx.get(link)
    assert landing.status_code == 200 and login in landing.text, landing.text
    authorize = re.search(r'id="continue" href="([^"]+)"', landing.text)
    assert authorize is not None
    back = idp.sign_in(authorize.group(1).replace("&amp;", "&"), login)
    finished = httpx.get(back)
    assert finished.status_code == 200, finished.text
    return finished.text


@pytest.fixture(scope="module")
def served(idp: Idp, whoami: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("people")
    port = free_port()
    config = tmp / "attp.toml"
    config.write_text(
        f'oauth_issuer = "{idp.issuer}"\npublic_url = "http://127.0.0.1:{port}"\n'
        f'oauth_client_id = "{ATTP_CLIENT}"\noauth_client_secret = "{ATTP_SECRET}"\n'
        f'db_path = "{tmp / ".attp" / "memory.sqlite3"}"\n'
        f'[mcp_servers.mine]\nurl = "{whoami}"\nidentity = "per_user"\n'
        f'[mcp_servers.exchanged]\nurl = "{whoami}"\nidentity = "token_exchange"\n'
    )
    login = subprocess.Popen(
        [sys.executable, "-m", "attp_server", "login", "mine", "--config", str(config), "--wait-s", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=server_env(), cwd=tmp,
    )  # fmt: skip
    assert login.stdout is not None
    for line in login.stdout:
        found = re.search(r"(http://127\.0\.0\.1:\d+/auth\?\S+)", line)
        if found:  # the operator signs in, once: the gateway lists the tools with this login
            assert httpx.get(idp.sign_in(found.group(1), "operator")).status_code == 200
            break
    out, err = login.communicate(timeout=60)
    assert login.returncode == 0, out + err
    with serving_http(tmp / "ws", "--config", str(config), port=port, env={}) as server:
        server.extra["config"] = config
        server.extra["cwd"] = tmp
        yield server


def person(served: Any, idp: Idp, login: str, **options: Any) -> Any:
    token = idp.access_token(login, served.url + "/mcp")
    return served.client(headers={"Authorization": f"Bearer {token}"}, **options)


async def test_token_exchange_shows_each_person_to_the_upstream_as_themselves(idp: Idp, served: Any) -> None:
    for login in ("alice", "bob"):
        async with person(served, idp, login) as client:
            data = await execute(client, "__result__ = exchanged.whoami()")
        assert data["status"] == "ok", data
        assert data["result"]["sub"] == login
        assert data["result"]["act"] == {"sub": ATTP_CLIENT}  # the gateway acts for the person, and says so
        assert data["result"]["client_id"] == ATTP_CLIENT


async def test_per_user_gives_the_link_then_the_upstream_sees_the_person(idp: Idp, served: Any) -> None:
    async with person(served, idp, "alice") as client:
        first = await execute(client, "__result__ = mine.whoami()")
        assert first["error"]["code"] == "UPSTREAM_UNAVAILABLE"
        link = re.search(r"(http://127\.0\.0\.1:\d+/oauth/connect\?state=\S+)", first["error"]["message"])
        assert link is not None, first["error"]
        assert "Connected" in browse_link(idp, link.group(1).rstrip(".,)"), "alice")
        again = await execute(client, "__result__ = mine.whoami()")
    assert again["status"] == "ok", again
    assert again["result"]["sub"] == "alice" and again["result"]["act"] is None
    # the link was used: it does not work twice
    assert httpx.get(link.group(1).rstrip(".,)")).status_code == 404


async def test_per_user_by_url_elicitation_waits_for_the_person(idp: Idp, served: Any) -> None:
    shown: list[str] = []

    async def elicitation(_context: Any, params: Any) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        shown.append(params.url)
        await anyio.to_thread.run_sync(browse_link, idp, params.url, "bob")
        return types.ElicitResult(action="accept")

    async with person(served, idp, "bob", mode="legacy", elicitation_callback=elicitation) as client:
        data = await execute(client, "__result__ = mine.whoami()")
    assert data["status"] == "ok", data
    assert data["result"]["sub"] == "bob"
    assert len(shown) == 1 and "/oauth/connect?state=" in shown[0]


ECHO = """
said = []
for how in ("jsonrpc", "is_error", "text", "structured"):
    try:
        said.append(str(UPSTREAM.echo_credentials(how=how)))
    except ToolError as e:
        said.append(e.message)
__result__ = said
"""


async def test_an_upstream_that_says_a_persons_token_is_scrubbed(idp: Idp, served: Any) -> None:
    """Issue 33, item 5, for the tokens of a person (token exchange's, per_user's): whatever way the upstream says
    the token it was called with, the program reads "[redacted]"."""
    async with person(served, idp, "alice") as client:
        first = await execute(client, "__result__ = mine.whoami()")
        if first["status"] != "ok":  # alice connects her account first (when this test runs alone)
            link = re.search(r"(http://127\.0\.0\.1:\d+/oauth/connect\?state=\S+)", first["error"]["message"])
            assert link is not None, first["error"]
            browse_link(idp, link.group(1).rstrip(".,)"), "alice")
        for upstream in ("exchanged", "mine"):
            data = await execute(client, ECHO.replace("UPSTREAM", upstream))
            assert data["status"] == "ok", data
            assert len(data["result"]) == 4
            for text in data["result"]:
                assert "header was Bearer [redacted]" in text, (upstream, text)
                assert "eyJ" not in text, (upstream, text)  # no JWT, nor any part of one


async def test_a_persons_upstream_tokens_are_refreshed_when_they_expire(idp: Idp, served: Any) -> None:
    async with person(served, idp, "alice") as client:
        data = await execute(client, "__result__ = mine.whoami()")
        if data["status"] != "ok":
            link = re.search(r"(http://127\.0\.0\.1:\d+/oauth/connect\?state=\S+)", data["error"]["message"])
            assert link is not None
            browse_link(idp, link.group(1).rstrip(".,)"), "alice")
        assert (await execute(client, "__result__ = mine.whoami()"))["result"]["sub"] == "alice"
    await anyio.sleep(LIFETIME_S + 1)  # the access token the upstream saw has expired (the upstream checks exp)
    async with person(served, idp, "alice") as client:
        later = await execute(client, "__result__ = mine.whoami()")
    assert later["status"] == "ok", (later["error"], idp.stderr())  # refreshed with the refresh token: no new link
    assert later["result"]["sub"] == "alice"


async def test_logout_of_one_person_leaves_the_others(idp: Idp, served: Any) -> None:
    for login in ("alice", "bob"):  # both connected (by the tests above, or now)
        async with person(served, idp, login) as client:
            data = await execute(client, "__result__ = mine.whoami()")
            if data["status"] != "ok":
                link = re.search(r"(http://127\.0\.0\.1:\d+/oauth/connect\?state=\S+)", data["error"]["message"])
                assert link is not None
                browse_link(idp, link.group(1).rstrip(".,)"), login)
    done = subprocess.run(
        [sys.executable, "-m", "attp_server", "logout", "mine", "--principal", "alice",
         "--config", str(served.extra["config"])],
        check=False, capture_output=True, text=True, env=server_env(), cwd=served.extra["cwd"], timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "removed alice's tokens (1 kept record)" in done.stdout
    async with person(served, idp, "alice") as client:
        alice = await execute(client, "__result__ = mine.whoami()")
    async with person(served, idp, "bob") as client:
        bob = await execute(client, "__result__ = mine.whoami()")
    assert alice["error"]["code"] == "UPSTREAM_UNAVAILABLE" and "/oauth/connect?state=" in alice["error"]["message"]
    assert bob["result"]["sub"] == "bob"


async def test_an_anonymous_caller_gets_no_one_elses_account(served: Any) -> None:
    """A static-token-less, sign-in-less call cannot happen here (sign-in is on); a token holder's is its own."""
    answer = httpx.post(served.url + "/mcp", json={})
    assert answer.status_code == 401
    assert json.loads(answer.text)["error"] == "unauthorized"
