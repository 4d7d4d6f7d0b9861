"""Third-party clients against a real `attp serve`: MCP Inspector's CLI and a TypeScript-SDK script.

Both are Node programs, pinned in tests/clients/package.json (+ package-lock.json) and installed with
``npm ci --prefix tests/clients``. Without them these tests fail (they do not skip): CI installs them.

* MCP Inspector (``--cli``) over stdio, Streamable HTTP (``/mcp``) and SSE (``/sse``): tools/list,
  tools/call with a real program, resources/list, resources/read and prompts/get, checking the JSON it prints.
* tests/clients/ts_client.mjs on ``@modelcontextprotocol/sdk`` (what n8n's MCP Client node uses), over its
  SSEClientTransport and StreamableHTTPClientTransport, passing n8n's extra ``toolCallId`` argument; and
  against a server started with ``ATTP_AUTH_TOKEN``: accepted with ``Authorization: Bearer`` or
  ``X-API-Key``, refused with 401 otherwise.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from harness import SERVE_FLAGS, Served, free_port, server_env, serving_http

pytestmark = pytest.mark.process

CLIENTS = Path(__file__).parent / "clients"
NODE_MODULES = CLIENTS / "node_modules"
TS_CLIENT = CLIENTS / "ts_client.mjs"
ATDF_SCHEMA = json.loads((Path(__file__).parent / "data" / "atdf" / "enhanced_atdf_schema.json").read_text())
INSTALL = "npm ci --prefix tests/clients"
PROXY_VARIABLES = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
TOKEN = "attp-test-token-5b0e1c"
RUN_TIMEOUT_S = 60

TEMPS_CSV = "city,temp\nOslo,-3\nRome,14\nCairo,25\nLima,18\n"


def program(folder: str) -> str:
    """Write a CSV, read it back, aggregate it (the same program ts_client.mjs runs)."""
    return f"""folder = {json.dumps(folder)}
rows = [("Oslo", -3), ("Rome", 14), ("Cairo", 25), ("Lima", 18)]
csv = "city,temp\\n" + "".join(city + "," + str(temp) + "\\n" for city, temp in rows)
write_file(folder + "/temps.csv", csv)
parsed = [line.split(",") for line in read_file(folder + "/temps.csv").splitlines()[1:]]
temps = {{city: int(temp) for city, temp in parsed}}
print("rows", len(temps))
__result__ = {{
    "files": list_files(folder),
    "n": len(temps),
    "mean": statistics.mean(temps.values()),
    "warmest": max(temps, key=temps.get),
    "above_zero": sorted(c for c, t in temps.items() if t > 0),
}}"""


def expected_result(folder: str) -> dict[str, Any]:
    return {
        "files": [f"{folder}/temps.csv"],
        "n": 4,
        "mean": 13.5,
        "warmest": "Cairo",
        "above_zero": ["Cairo", "Lima", "Rome"],
    }


# ---------------------------------------------------------------- the Node side


@dataclass(frozen=True)
class NodeClients:
    node: str
    inspector: Path  # the inspector's launcher script, run with `node`
    env: dict[str, str]

    def run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.node, *map(str, args)],
            check=False,
            stdin=subprocess.DEVNULL,  # never interactive (the Inspector offers OAuth on a TTY)
            capture_output=True,
            text=True,
            env=self.env,
            timeout=RUN_TIMEOUT_S,
        )


def _installed_version(package: str) -> str | None:
    manifest = NODE_MODULES / package / "package.json"
    if not manifest.is_file():
        return None
    return str(json.loads(manifest.read_text())["version"])


@pytest.fixture(scope="session")
def node_clients(tmp_path_factory: pytest.TempPathFactory) -> NodeClients:
    """Node and the pinned packages, or a failure that says how to install them."""
    node = shutil.which("node")
    found = "none"
    if node is not None:
        found = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    if node is None or not found.startswith("v") or int(found[1:].split(".")[0]) < 20:
        pytest.fail(f"tests/test_clients.py needs Node.js 20+ on PATH (found {found}), then `{INSTALL}`", pytrace=False)
    pins: dict[str, str] = json.loads((CLIENTS / "package.json").read_text())["dependencies"]
    for package, pinned in pins.items():
        installed = _installed_version(package)
        if installed != pinned:
            state = "is not installed" if installed is None else f"is {installed}, not the pinned {pinned}"
            pytest.fail(
                f"{package} {state} in tests/clients/node_modules: run `{INSTALL}` (from the repository root)",
                pytrace=False,
            )
    manifest = json.loads((NODE_MODULES / "@modelcontextprotocol" / "inspector" / "package.json").read_text())
    inspector = NODE_MODULES / "@modelcontextprotocol" / "inspector" / manifest["bin"]["mcp-inspector"]
    # The servers are on 127.0.0.1: no proxy. (With a proxy variable set, the inspector loads undici 8, which
    # wants Node 22.) A scratch HOME keeps the inspector's state out of the user's; no OS keychain probing.
    env = {k: v for k, v in server_env().items() if k.lower() not in PROXY_VARIABLES and k != "NODE_OPTIONS"}
    env |= {"HOME": str(tmp_path_factory.mktemp("node-home")), "MCP_INSPECTOR_SECRET_STORE": "memory", "NO_COLOR": "1"}
    return NodeClients(node=node, inspector=inspector, env=env)


# ---------------------------------------------------------------- MCP Inspector, on three transports


@dataclass(frozen=True)
class InspectorTarget:
    transport: str
    args: list[str]  # what follows `--cli`: a URL and --transport, or --config/--server for stdio
    workspace: Path


@pytest.fixture(scope="module")
def stdio_config(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An Inspector config file that launches `attp serve` over stdio (one server per Inspector run)."""
    workspace = tmp_path_factory.mktemp("inspector-stdio-ws")
    env = server_env()
    server = {
        "command": sys.executable,
        "args": ["-m", "attp_server", "serve", "--workspace", str(workspace), *SERVE_FLAGS],
        "env": {k: v for k, v in env.items() if k == "PYTHONPATH" or k.startswith("ATTP_")},
        "cwd": str(workspace.parent),
    }
    config = workspace.parent / "inspector-stdio.json"
    config.write_text(json.dumps({"mcpServers": {"attp": server}}))
    return config, workspace


@pytest.fixture(params=["stdio", "streamable-http", "sse"])
def inspector_target(request: pytest.FixtureRequest) -> InspectorTarget:
    if request.param == "stdio":
        config, workspace = request.getfixturevalue("stdio_config")
        return InspectorTarget("stdio", ["--config", str(config), "--server", "attp"], workspace)
    http: Served = request.getfixturevalue("http_server")
    assert http.url is not None
    if request.param == "sse":
        return InspectorTarget("sse", [http.url + "/sse", "--transport", "sse"], http.workspace)
    return InspectorTarget("streamable-http", [http.url + "/mcp", "--transport", "http"], http.workspace)


def inspect(node_clients: NodeClients, target: InspectorTarget, *args: str) -> dict[str, Any]:
    """Run the Inspector CLI once; it must exit 0 and print one JSON document."""
    done = node_clients.run(node_clients.inspector, "--cli", *target.args, *args)
    assert done.returncode == 0, f"inspector {args} over {target.transport} exited {done.returncode}:\n{done.stderr}"
    try:
        return dict(json.loads(done.stdout))
    except json.JSONDecodeError:
        pytest.fail(f"inspector printed no JSON over {target.transport}:\n{done.stdout}\n{done.stderr}")


def test_inspector_lists_the_tool(node_clients: NodeClients, inspector_target: InspectorTarget) -> None:
    tools = inspect(node_clients, inspector_target, "--method", "tools/list")["tools"]
    assert [t["name"] for t in tools] == ["attp_execute"]
    tool = tools[0]
    assert set(tool["inputSchema"]["properties"]) == {
        "code",
        "envelope",
        "target",
        "thought",
        "engine",
        "reset",
        "session",
    }
    assert {"status", "result", "stdout", "calls", "error"} <= set(tool["outputSchema"]["properties"])
    assert "read_file(path, max_lines=1000, offset=0) -> str — Read a UTF-8 text file" in tool["description"]
    assert tool["annotations"]["destructiveHint"] is True


def test_inspector_runs_a_real_program(node_clients: NodeClients, inspector_target: InspectorTarget) -> None:
    folder = f"clients/inspector-{inspector_target.transport}"
    answer = inspect(
        node_clients,
        inspector_target,
        *("--method", "tools/call", "--tool-name", "attp_execute"),
        *("--tool-arg", f"code={program(folder)}", "--tool-arg", f"target=inspector {inspector_target.transport}"),
    )
    assert answer["isError"] is False
    data = answer["structuredContent"]
    assert data["status"] == "ok", data
    assert data["result"] == expected_result(folder)
    assert data["target"] == f"inspector {inspector_target.transport}"
    assert data["stdout"] == "rows 4\n"
    assert [c["tool"] for c in data["calls"]] == ["write_file", "read_file", "list_files"]
    assert all(c["ok"] for c in data["calls"])
    text = json.loads(answer["content"][0]["text"])
    assert (text["status"], text["result"]["warmest"], text["result"]["mean"]) == ("ok", "Cairo", 13.5)
    # It ran in that server's workspace, for real.
    assert (inspector_target.workspace / folder / "temps.csv").read_text() == TEMPS_CSV


def test_inspector_lists_resources(node_clients: NodeClients, inspector_target: InspectorTarget) -> None:
    resources = inspect(node_clients, inspector_target, "--method", "resources/list")["resources"]
    by_uri = {r["uri"]: r for r in resources}
    assert {"attp://tools", "attp://prompt", "skill://index"} <= set(by_uri)
    assert by_uri["attp://tools"]["mimeType"] == "text/x-python"
    assert by_uri["attp://prompt"]["mimeType"] == "text/markdown"


def test_inspector_reads_a_templated_resource(node_clients: NodeClients, inspector_target: InspectorTarget) -> None:
    read = inspect(node_clients, inspector_target, "--method", "resources/read", "--uri", "attp://tools/add/atdf")
    [content] = read["contents"]
    assert (content["uri"], content["mimeType"]) == ("attp://tools/add/atdf", "application/json")
    descriptor = json.loads(content["text"])
    jsonschema.validate(descriptor, ATDF_SCHEMA)
    assert descriptor["tool_id"] == "add"
    assert descriptor["metadata"]["signature"] == "add(a: int, b: int) -> int"


def test_inspector_gets_the_prompt(node_clients: NodeClients, inspector_target: InspectorTarget) -> None:
    prompt = inspect(
        node_clients,
        inspector_target,
        *("--method", "prompts/get", "--prompt-name", "attp_system_prompt", "--prompt-args", "language=zh"),
    )
    [message] = prompt["messages"]
    assert message["role"] == "user"
    text = message["content"]["text"]
    assert "ATTP 协议" in text  # the seed's Chinese wording, so the argument arrived
    assert "def add(a: int, b: int) -> int:" in text  # the enabled tools are filled in


# ---------------------------------------------------------------- the TypeScript SDK (n8n's client library)


TS_CHECKS = [
    "server is attp-server",
    "tools/list is exactly attp_execute",
    "input schema is code/engine/envelope/reset/session/target/thought",
    "output schema has status",
    "description lists the tools",
    "extra toolCallId argument is accepted",
    "program result",
    "target echoed",
    "stdout captured",
    "calls traced",
    "text content is the lean JSON view",
    "failing program is isError with FILE_NOT_FOUND",
    "resources/read attp://tools/read_file",
    "unknown tool resource is an error with a suggestion",
    "prompts/get attp_system_prompt",
]


def ts_client(
    node_clients: NodeClients, url: str, transport: str, folder: str, headers: tuple[str, ...] = ()
) -> tuple[int, dict[str, Any]]:
    """Run tests/clients/ts_client.mjs; return its exit code and JSON summary."""
    args = [TS_CLIENT, "--url", url, "--transport", transport, "--folder", folder]
    for header in headers:
        args += ["--header", header]
    done = node_clients.run(*args)
    try:
        summary = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"ts_client.mjs exited {done.returncode} without a JSON summary:\n{done.stdout}\n{done.stderr}")
    return done.returncode, dict(summary)


@dataclass(frozen=True)
class TsRun:
    """One run of ts_client.mjs: what its --url, --transport, --folder and --header say."""

    url: str
    transport: str
    folder: str
    headers: tuple[str, ...] = ()


def ts_client_runs(node_clients: NodeClients, runs: list[TsRun]) -> dict[TsRun, tuple[int, dict[str, Any]]]:
    """Run ts_client.mjs once with ``--runs`` (one Node start instead of one per run): each run's exit code (as
    its own invocation would have exited) and JSON summary. A test reads its own run, and fails on its own."""
    entries = [{"url": r.url, "transport": r.transport, "folder": r.folder, "header": list(r.headers)} for r in runs]
    done = node_clients.run(TS_CLIENT, "--runs", json.dumps(entries))
    try:
        summaries = json.loads(done.stdout)["runs"]
    except (json.JSONDecodeError, KeyError):
        pytest.fail(f"ts_client.mjs exited {done.returncode} without its JSON summaries:\n{done.stdout}\n{done.stderr}")
    assert len(summaries) == len(runs), done.stdout
    assert done.returncode == 0, f"ts_client.mjs crashed after its summaries ({done.returncode}):\n{done.stderr}"
    return {run: (summary.pop("exit_code"), dict(summary)) for run, summary in zip(runs, summaries, strict=True)}


def assert_all_checks_passed(code: int, summary: dict[str, Any], transport: str) -> dict[str, Any]:
    failed = [c for r in summary["results"] for c in r["checks"] if not c["ok"]]
    errors = [r.get("error") for r in summary["results"] if r.get("error")]
    assert (code, summary["ok"], failed, errors) == (0, True, [], []), json.dumps(summary, indent=2)
    [result] = summary["results"]
    assert result["transport"] == transport
    assert [c["name"] for c in result["checks"]] == TS_CHECKS  # every check ran (and passed, above)
    return dict(result)


TRANSPORTS = ["sse", "streamable-http"]


def plain_run(http_server: Served, transport: str) -> TsRun:
    assert http_server.url is not None
    return TsRun(http_server.url, transport, f"clients/ts-{transport}")


@pytest.fixture(scope="module")
def plain_runs(node_clients: NodeClients, http_server: Served) -> dict[TsRun, tuple[int, dict[str, Any]]]:
    """ts_client.mjs against the module's server, one run per transport, in one Node process."""
    return ts_client_runs(node_clients, [plain_run(http_server, transport) for transport in TRANSPORTS])


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_ts_sdk_client(
    plain_runs: dict[TsRun, tuple[int, dict[str, Any]]], http_server: Served, transport: str
) -> None:
    run = plain_run(http_server, transport)
    folder = run.folder
    code, summary = plain_runs[run]
    result = assert_all_checks_passed(code, summary, transport)
    assert result["server"]["name"] == "attp-server"
    assert result["call"]["result"] == expected_result(folder)
    assert (http_server.workspace / folder / "temps.csv").read_text() == TEMPS_CSV


def test_ts_sdk_client_fails_against_a_closed_port(node_clients: NodeClients) -> None:
    """The script's exit code means something: nothing listening is a failure, with the reason."""
    code, summary = ts_client(node_clients, f"http://127.0.0.1:{free_port()}", "both", "clients/nowhere")
    assert (code, summary["ok"]) == (1, False)
    assert [r["transport"] for r in summary["results"]] == ["sse", "streamable-http"]
    assert all(r["error"].startswith("connect:") for r in summary["results"])


# ---------------------------------------------------------------- with an auth token (ATTP_AUTH_TOKEN)


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A real HTTP server started with ATTP_AUTH_TOKEN in its environment."""
    workspace = tmp_path_factory.mktemp("auth-ws")
    with serving_http(workspace, *SERVE_FLAGS, env={"ATTP_AUTH_TOKEN": TOKEN}) as served:
        yield served


ACCEPTED = [
    pytest.param(f"Authorization: Bearer {TOKEN}", id="bearer"),
    pytest.param(f"X-API-Key: {TOKEN}", id="x-api-key"),
]
REFUSED = [
    pytest.param((), id="no-header"),
    pytest.param(("Authorization: Bearer wrong-token",), id="wrong-bearer"),
    pytest.param(("X-API-Key: wrong-token",), id="wrong-x-api-key"),
    pytest.param((f"Authorization: {TOKEN}",), id="token-without-bearer-scheme"),
]


def accepted_run(auth_server: Served, transport: str, header: str) -> TsRun:
    assert auth_server.url is not None
    return TsRun(
        auth_server.url, transport, f"clients/ts-auth-{transport}-{header.partition(':')[0].lower()}", (header,)
    )


def refused_run(auth_server: Served, transport: str, headers: tuple[str, ...]) -> TsRun:
    assert auth_server.url is not None
    return TsRun(auth_server.url, transport, f"clients/ts-refused-{transport}", headers)


@pytest.fixture(scope="module")
def auth_runs(node_clients: NodeClients, auth_server: Served) -> dict[TsRun, tuple[int, dict[str, Any]]]:
    """Every accepted and refused ts_client.mjs run against the token server (the two tests below), in one Node
    process: twelve Node starts cost more CPU than the runs."""
    runs = [accepted_run(auth_server, t, p.values[0]) for t in TRANSPORTS for p in ACCEPTED]
    runs += [refused_run(auth_server, t, p.values[0]) for t in TRANSPORTS for p in REFUSED]
    return ts_client_runs(node_clients, runs)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("header", ACCEPTED)
def test_ts_sdk_client_with_token(
    auth_runs: dict[TsRun, tuple[int, dict[str, Any]]], auth_server: Served, transport: str, header: str
) -> None:
    run = accepted_run(auth_server, transport, header)
    folder = run.folder
    code, summary = auth_runs[run]
    assert_all_checks_passed(code, summary, transport)
    assert (auth_server.workspace / folder / "temps.csv").read_text() == TEMPS_CSV


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("headers", REFUSED)
def test_ts_sdk_client_without_the_token_gets_401(
    auth_runs: dict[TsRun, tuple[int, dict[str, Any]]], auth_server: Served, transport: str, headers: tuple[str, ...]
) -> None:
    run = refused_run(auth_server, transport, headers)
    folder = run.folder
    code, summary = auth_runs[run]
    [result] = summary["results"]
    assert (code, summary["ok"], result.get("http_status")) == (1, False, 401), json.dumps(summary, indent=2)
    assert "tools" not in result  # it never got as far as listing tools
    assert not (auth_server.workspace / folder).exists()


@pytest.mark.parametrize("transport", ["sse", "http"])
def test_inspector_with_token(node_clients: NodeClients, auth_server: Served, transport: str) -> None:
    """The Inspector's --header reaches the server; without it the Inspector is refused (401 -> auth_required)."""
    assert auth_server.url is not None
    url = auth_server.url + ("/sse" if transport == "sse" else "/mcp")
    target = InspectorTarget(transport, [url, "--transport", transport], auth_server.workspace)
    tools = inspect(node_clients, target, "--header", f"Authorization: Bearer {TOKEN}", "--method", "tools/list")
    assert [t["name"] for t in tools["tools"]] == ["attp_execute"]
    refused = node_clients.run(
        node_clients.inspector, "--cli", *target.args, "--stored-auth-only", "--method", "tools/list"
    )
    assert refused.returncode != 0, refused.stdout
    assert refused.stdout == ""
    error = json.loads(refused.stderr.strip().splitlines()[-1])["error"]
    assert error["code"] == "auth_required", error
    assert "401" in error["message"] or "needs its token" in error["message"], error


# ---------------------------------------------------------------- approvals and session state from the TypeScript SDK


TS_APPROVAL = CLIENTS / "ts_approval.mjs"


@pytest.fixture(scope="module")
def approval_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A real HTTP server that asks the user before destructive tool calls."""
    workspace = tmp_path_factory.mktemp("approval-ws")
    with serving_http(workspace, *SERVE_FLAGS, "--approval", "destructive") as served:
        yield served


APPROVAL_ANSWERS = [
    pytest.param("accept", ["ok", "ok", "ok"], 2, id="accept"),
    pytest.param("accept-for-session", ["ok", "ok", "ok"], 1, id="accept-for-session"),
    pytest.param("decline", ["ok", "error", "error"], 2, id="decline"),
]


@pytest.fixture(scope="module")
def approval_runs(node_clients: NodeClients, approval_server: Served) -> dict[str, tuple[int, dict[str, Any], str]]:
    """ts_approval.mjs with every answer, in one Node process (the folder for an answer is
    ``clients/ts-approval-ANSWER``): per answer, the exit code a run with only it would have had (1 if a
    connection failed), its summary, and the script's stderr."""
    assert approval_server.url is not None
    answers = [p.values[0] for p in APPROVAL_ANSWERS]
    args = ["--url", approval_server.url, "--folder", "clients/ts-approval"]
    done = node_clients.run(TS_APPROVAL, *args, *(a for answer in answers for a in ("--answer", answer)))
    try:
        runs = json.loads(done.stdout)["runs"]
    except (json.JSONDecodeError, KeyError):
        pytest.fail(
            f"ts_approval.mjs exited {done.returncode} without its JSON summaries:\n{done.stdout}\n{done.stderr}"
        )
    assert [run["answer"] for run in runs] == answers, done.stdout
    connect_failed = [any(r.get("error", "").startswith("connect:") for r in run["results"]) for run in runs]
    # Its exit code says whether a connection failed; anything else is a crash after the summaries.
    assert done.returncode == int(any(connect_failed)), f"ts_approval.mjs exited {done.returncode}:\n{done.stderr}"
    return {run["answer"]: (int(failed), run, done.stderr) for run, failed in zip(runs, connect_failed, strict=True)}


@pytest.mark.parametrize(("answer", "statuses", "asked"), APPROVAL_ANSWERS)
def test_ts_sdk_client_answers_approvals_and_keeps_state(
    approval_runs: dict[str, tuple[int, dict[str, Any], str]],
    approval_server: Served,
    answer: str,
    statuses: list[str],
    asked: int,
) -> None:
    """The TypeScript SDK's own elicitation handling, over SSE and Streamable HTTP (sessions with an Mcp-Session-Id)."""
    folder = f"clients/ts-approval-{answer}"
    code, summary, stderr = approval_runs[answer]
    assert code == 0, stderr
    for result in summary["results"]:
        transport = result["transport"]
        assert "error" not in result, result
        assert [c["status"] for c in result["calls"]] == statuses, result
        assert result["calls"][0]["result"] == 41
        assert len(result["questions"]) == asked
        question = result["questions"][0]
        assert f"write_file(path='{folder}-{transport}.txt', content='approved')" in question["message"]
        assert "allow_for_session" in question["schema"]["properties"]
        written = approval_server.workspace / f"{folder}-{transport}.txt"
        if answer == "decline":
            assert [c["error"]["code"] for c in result["calls"][1:]] == ["APPROVAL_DENIED"] * 2
            assert not written.exists()
        else:
            assert [c["result"] for c in result["calls"][1:]] == [42, 42]  # x kept from the first call
            assert written.read_text() == "approved"
    assert [r["transport"] for r in summary["results"]] == ["sse", "streamable-http"]
