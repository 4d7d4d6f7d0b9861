"""OAuth upstreams through the real command and transports: a local MCP server protected by the SDK's server auth
(tests/support/oauth_server.py, scripted consent), ``attp serve`` in front of it, SDK clients on both eras.

Before ``attp login`` the server is UPSTREAM_UNAVAILABLE saying to run it; ``attp login`` prints the URL, the
test's "browser" opens it and follows the redirect to the loopback port; from then on the gateway calls the
server with the stored tokens and refreshes them before they expire. No token ever appears in what attp
prints, logs or returns, nor in the store's file in clear."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from harness import execute, free_port, server_env, serving_http, stop_process

pytestmark = pytest.mark.anyio

SUPPORT = Path(__file__).parent / "support"
LIFETIME_S = 3


@contextmanager
def oauth_server(issued: Path) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SUPPORT / "oauth_server.py"), str(port), str(LIFETIME_S)],
        env={**server_env(), "OAUTH_ISSUED_FILE": str(issued)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        with httpx.Client() as http:  # one client for every poll (httpx.get builds one each time)
            while time.monotonic() < deadline:
                try:
                    if http.get(f"http://127.0.0.1:{port}/.well-known/oauth-authorization-server").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)


def login(tmp_path: Path, flags: list[str]) -> subprocess.CompletedProcess[str]:
    """`attp login secure`, with a scripted person: open the printed URL, follow the redirects (the consent is
    automatic) to the loopback callback."""
    process = subprocess.Popen(
        [sys.executable, "-m", "attp_server", "login", "secure", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=server_env(), cwd=tmp_path,
    )  # fmt: skip
    assert process.stdout is not None
    printed = []
    for line in process.stdout:
        printed.append(line)
        found = re.search(r"(http://127\.0\.0\.1:\d+/authorize\S+)", line)
        if found:
            page = httpx.get(found.group(1), follow_redirects=True, timeout=20)
            assert page.status_code == 200 and "connected to secure" in page.text
            break
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, "".join(printed) + out, err)


async def until_ok(client: Any, code: str, timeout: float = 30.0) -> dict[str, Any]:
    """The server is retried on a call, after its backoff: call until the answer is not UPSTREAM_UNAVAILABLE."""
    with anyio.fail_after(timeout):
        while True:
            data = await execute(client, code)
            if data["status"] == "ok" or data["error"]["code"] != "UPSTREAM_UNAVAILABLE":
                return data
            await anyio.sleep(0.5)


async def test_login_then_serve_with_refreshed_tokens(tmp_path: Path) -> None:
    issued = tmp_path / "issued.txt"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    log = tmp_path / "serve.log"
    with oauth_server(issued) as url:
        upstream = tmp_path / "upstream.json"
        upstream.write_text(json.dumps({"mcpServers": {"secure": {"url": url}}}))
        flags = ["--mcp-config", str(upstream), "--db-path", str(tmp_path / "data" / "memory.sqlite3")]
        with serving_http(workspace, "--toolpack", "files", *flags, stderr=log) as served:
            assert served.url is not None
            health = httpx.get(served.url + "/healthz").json()["upstream"]["secure"]
            assert health["status"] == "unavailable" and "run `attp login secure`" in health["problem"]
            for mode in ("2026-07-28", "legacy"):
                async with served.client(mode=mode) as client:
                    [tool] = (await client.list_tools()).tools
                    # One line in the description (issue 34); the call's error says what to run.
                    assert "\n  secure: unavailable, the operator has been told\n" in (tool.description or "")
                    down = await execute(client, "__result__ = secure.whoami()")
                    assert down["error"]["code"] == "UPSTREAM_UNAVAILABLE"
                    assert "run `attp login secure`" in down["error"]["message"]

            done = login(tmp_path, flags)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "Logged in to 'secure': 3 tools" in done.stdout

            for mode in ("2026-07-28", "legacy"):
                async with served.client(mode=mode) as client:
                    data = await until_ok(client, "__result__ = secure.whoami()")
                    assert data["result"] == "an authorized caller", data
            async with served.client(mode="legacy") as client:
                before = await until_ok(client, "__result__ = secure.grants()")
                await anyio.sleep(LIFETIME_S + 1)  # the access token has expired by now: it was refreshed first
                after = await until_ok(client, "__result__ = [secure.whoami(), secure.grants()]")
                assert after["status"] == "ok", after
                assert after["result"][1]["refresh_token"] > before["result"].get("refresh_token", 0)
                assert after["result"][1]["authorization_code"] == 1  # never a second login
                outputs = [json.dumps(before), json.dumps(after), done.stdout, done.stderr]
        outputs.append(log.read_text())
    tokens = [t for t in issued.read_text().split() if t]
    assert len(tokens) >= 4
    stored = b"".join(p.read_bytes() for p in (tmp_path / "data").iterdir() if p.is_file())
    for token in tokens:
        assert not any(token in text for text in outputs), "a token was shown"
        assert token.encode() not in stored, "a token is stored in clear"


async def test_login_errors_are_one_line(tmp_path: Path) -> None:
    upstream = tmp_path / "upstream.json"
    upstream.write_text(json.dumps({"mcpServers": {"local": {"command": "true"}}}))
    unknown = subprocess.run(
        [sys.executable, "-m", "attp_server", "login", "nope", "--mcp-config", str(upstream)],
        capture_output=True, text=True, env=server_env(), cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert unknown.returncode == 2 and "no upstream server named 'nope'; configured: local" in unknown.stderr
    local = subprocess.run(
        [sys.executable, "-m", "attp_server", "login", "local", "--mcp-config", str(upstream)],
        capture_output=True, text=True, env=server_env(), cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert local.returncode == 2 and "OAuth login is for a remote Streamable HTTP server" in local.stderr
    with oauth_server(tmp_path / "issued.txt") as url:
        upstream.write_text(json.dumps({"mcpServers": {"secure": {"url": url}}}))
        waited = subprocess.run(
            [sys.executable, "-m", "attp_server", "login", "secure", "--mcp-config", str(upstream), "--wait-s", "1"],
            capture_output=True, text=True, env=server_env(), cwd=tmp_path, timeout=60, check=False,
        )  # fmt: skip
    assert waited.returncode == 1, waited.stderr
    assert "attp: login to 'secure' failed: no redirect came back within 1 s (--wait-s)" in waited.stderr
    assert "Traceback" not in waited.stderr


PROGRAM = """
said = []
for how in ["jsonrpc", "is_error", "text", "structured"]:
    try:
        said.append(secure.echo_credentials(how=how))
    except ToolError as e:
        said.append([e.code, e.message])
write_file("said.txt", str(said))
__result__ = said
"""


async def test_no_secret_of_an_oauth_upstream_reaches_a_program_by_any_path(tmp_path: Path) -> None:
    """Issue 33, item 5: an upstream that quotes its caller's credentials (the Authorization header with the access
    token, the refresh tokens, before and after a refresh) in a JSON-RPC error's message, an isError text or a
    result: the program, the audit log (arguments written), the log and /healthz get none of them."""
    issued = tmp_path / "issued.txt"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    log, audit = tmp_path / "serve.log", tmp_path / "audit.jsonl"
    env = {"ATTP_AUDIT_LOG": str(audit), "ATTP_AUDIT_ARGUMENTS": "true"}
    with oauth_server(issued) as url:
        upstream = tmp_path / "upstream.json"
        upstream.write_text(json.dumps({"mcpServers": {"secure": {"url": url}}}))
        flags = ["--mcp-config", str(upstream), "--db-path", str(tmp_path / "data" / "memory.sqlite3")]
        with serving_http(workspace, "--toolpack", "files", *flags, env=env, stderr=log) as served:
            assert served.url is not None
            done = login(tmp_path, flags)
            assert done.returncode == 0, done.stdout + done.stderr
            said = []
            for mode in ("2026-07-28", "legacy"):
                async with served.client(mode=mode) as client:
                    said.append(await until_ok(client, PROGRAM))
            await anyio.sleep(LIFETIME_S + 1)  # the tokens rotate: the old ones are still the server's secrets
            async with served.client(mode="legacy") as client:
                said.append(await until_ok(client, PROGRAM))
            health = httpx.get(served.url + "/healthz").text
    for data in said:
        assert data["status"] == "ok", data
        jsonrpc, is_error, text, _ = data["result"]
        assert jsonrpc[0] == "TOOL_ERROR" and "header was Bearer [redacted]" in jsonrpc[1], jsonrpc
        assert is_error[0] == "TOOL_ERROR" and "header was Bearer [redacted]" in is_error[1], is_error
        assert text.startswith("header was Bearer [redacted]"), text
    tokens = [t for t in issued.read_text().split() if t]
    assert len(tokens) >= 4  # the login's pair and the refreshed pair
    outputs = {
        "results": json.dumps(said), "audit log": audit.read_text(), "log": log.read_text(), "healthz": health,
        "workspace": (workspace / "said.txt").read_text(),
    }  # fmt: skip
    leaked = {where: token[:6] for where, text in outputs.items() for token in tokens if token in text}
    assert leaked == {}, leaked
