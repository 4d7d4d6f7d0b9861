"""The real n8n (opt-in: tests/n8n/run.sh): workflows of n8n's two MCP nodes call a real attp-server.

Skipped unless ATTP_TEST_N8N=1. n8n 2.8.4 comes from tests/n8n/node_modules, which run.sh installs from
the lockfile. The server runs over HTTP on a free loopback port with a token; n8n imports the
credentials (Bearer; Header Auth X-API-Key) and workflows of this folder with that URL and token filled
in, and runs each with `n8n execute --rawOutput`, which prints the whole run as JSON. n8n's user folder
(database, settings) and the server's workspace live in a temporary directory removed afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness import free_port, serving_http

from attp_server.faces.client_config import n8n_config
from attp_server.settings import Settings

HERE = Path(__file__).parent
N8N = HERE / "node_modules" / ".bin" / "n8n"

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(os.environ.get("ATTP_TEST_N8N") != "1", reason="opt-in real-n8n test: tests/n8n/run.sh"),
    pytest.mark.slow,
    pytest.mark.timeout(300),
]

ROUND_TRIP = "attpRoundTrip001"  # the ids in workflows.json
FAILING = "attpFailingRun01"
AGENT_TOOL = "attpAgentTool001"
TOML_TEXT = "attpTomlText0001"  # the round trip's first step against a server that answers n8n in TOML
WRITE = "Write report (Streamable HTTP, Bearer)"
READ = "Read it back (SSE, X-API-Key)"


@dataclass
class N8n:
    """The n8n command line against one private user folder."""

    env: dict[str, str]

    def run(self, *args: str) -> str:
        """Run one n8n command in its own process group (n8n starts a task runner) and return its stdout."""
        process = subprocess.Popen(
            [str(N8N), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env,
            start_new_session=True,
        )  # fmt: skip
        try:
            stdout, stderr = process.communicate(timeout=180)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # whatever n8n left behind
            process.wait()
        assert process.returncode == 0, f"n8n {' '.join(args)} exited {process.returncode}:\n{stdout}\n{stderr}"
        return stdout

    def execute(self, workflow_id: str) -> dict[str, Any]:
        """The run as `--rawOutput` prints it: the run's JSON from a line holding only "{", among log lines."""
        stdout = self.run("execute", f"--id={workflow_id}", "--rawOutput")
        run, _ = json.JSONDecoder().raw_decode(stdout[stdout.index("\n{\n") + 1 :])
        return dict(run)


def node_items(run: dict[str, Any], node: str) -> list[dict[str, Any]]:
    """The items a node passed on (its first output), as the next node sees them in `$json`."""
    return [item["json"] for item in run["data"]["resultData"]["runData"][node][0]["data"]["main"][0]]


def text_of(run: dict[str, Any], node: str) -> Any:
    """`$json.content[0].text` of the node's one item: the server's text block after the node's JSON.parse."""
    [item] = node_items(run, node)
    return item["content"][0]["text"]


def filled(template: Path, **values: str) -> Any:
    text = template.read_text()
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    return json.loads(text)


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    if not N8N.is_file():
        pytest.fail(f"n8n is not installed at {N8N}: run tests/n8n/run.sh, which installs it")
    with tempfile.TemporaryDirectory(prefix="attp-n8n-") as folder:
        yield Path(folder)


@pytest.fixture(scope="module")
def server_workspace(scratch: Path) -> Path:
    path = scratch / "workspace"
    path.mkdir()
    return path


@pytest.fixture(scope="module")
def n8n(scratch: Path, server_workspace: Path) -> Iterator[N8n]:
    """Two servers (JSON text, the default; and TOML for everyone), n8n with the credentials and workflows."""
    token = secrets.token_urlsafe(24)
    flags = ("--toolpack", "files")
    toml_env = {"ATTP_AUTH_TOKEN": token, "ATTP_JSON_CLIENTS": "[]", "ATTP_RESULT_FORMAT": "toml"}
    with (
        serving_http(server_workspace, *flags, env={"ATTP_AUTH_TOKEN": token}) as server,
        serving_http(scratch / "toml-workspace", *flags, env=toml_env) as toml_server,
    ):
        assert server.url is not None and toml_server.url is not None
        workflows = filled(HERE / "workflows.json", ATTP_URL=server.url)
        round_trip = next(w for w in workflows if w["id"] == ROUND_TRIP)
        trigger, write = (n for n in round_trip["nodes"] if n["name"] in ("Manual Trigger", WRITE))
        write = {**write, "parameters": {**write["parameters"], "endpointUrl": toml_server.url + "/mcp"}}
        connections = {"Manual Trigger": round_trip["connections"]["Manual Trigger"]}
        workflows.append({**round_trip, "id": TOML_TEXT, "nodes": [trigger, write], "connections": connections})

        user_folder = scratch / "n8n-user"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("N8N_", "ATTP_"))}
        env |= {
            "N8N_USER_FOLDER": str(user_folder),
            "N8N_ENCRYPTION_KEY": secrets.token_hex(16),
            "N8N_LOG_LEVEL": "info",  # at warn, `execute --rawOutput` prints nothing
            "N8N_DIAGNOSTICS_ENABLED": "false",
            "N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS": "false",
            "N8N_RUNNERS_BROKER_PORT": str(free_port()),  # its default, 5679, would collide between runs
        }
        n8n = N8n(env)
        imports = scratch / "imports"
        imports.mkdir()
        (imports / "credentials.json").write_text(json.dumps(filled(HERE / "credentials.json", ATTP_TOKEN=token)))
        (imports / "workflows.json").write_text(json.dumps(workflows))
        n8n.run("import:credentials", f"--input={imports / 'credentials.json'}")
        n8n.run("import:workflow", f"--input={imports / 'workflows.json'}")
        yield n8n


def test_a_workflow_writes_a_file_over_streamable_http_and_reads_it_back_over_sse(
    n8n: N8n, server_workspace: Path
) -> None:
    """Bearer over Streamable HTTP, then X-API-Key over SSE; the second program is built from the first's result."""
    run = n8n.execute(ROUND_TRIP)

    assert run["status"] == "success" and run["finished"] is True
    written = text_of(run, WRITE)
    assert written["status"] == "ok"
    assert written["result"] == {"path": "n8n-report.txt", "total": 8, "names": ["alpha", "beta"]}
    assert written["stdout"] == "wrote 2 rows\n"
    assert written["tool_calls"] == "write_file: 1"  # the lean text: one summary line, no per-call trace
    read = text_of(run, READ)
    assert (read["status"], read["result"]) == ("ok", "total = 8")
    assert (server_workspace / "n8n-report.txt").read_text() == "total = 8"


def test_a_failing_program_is_a_successful_step_that_an_if_node_on_status_catches(n8n: N8n) -> None:
    """The MCP Client node ignores isError: the run succeeds, and the IF node `attp config n8n` prints routes it."""
    workflow = next(w for w in json.loads((HERE / "workflows.json").read_text()) if w["id"] == FAILING)
    [check] = [node for node in workflow["nodes"] if node["type"] == "n8n-nodes-base.if"]
    [condition] = check["parameters"]["conditions"]["conditions"]
    printed = n8n_config(Settings(workspace=Path("workspace")))
    assert f"{condition['leftValue'].removeprefix('=')}  is equal to  {condition['rightValue']}" in printed

    run = n8n.execute(FAILING)

    assert run["status"] == "success"
    failed = text_of(run, "Run a program with a typo")
    assert failed["status"] == "error"
    assert failed["error"]["code"] == "NAME_NOT_FOUND"
    assert failed["error"]["suggested_value"] == "read_file"
    ran = run["data"]["resultData"]["runData"]
    assert "Failed" in ran and "Succeeded" not in ran
    assert node_items(run, "Failed") == [{"content": [{"type": "text", "text": failed}]}]


def test_with_json_clients_off_the_node_passes_the_toml_text_on_as_one_string(n8n: N8n) -> None:
    """Why the server answers this node in JSON: TOML is not JSON, so the workflow gets a string it cannot index."""
    run = n8n.execute(TOML_TEXT)

    text = text_of(run, WRITE)
    assert isinstance(text, str)
    assert tomllib.loads(text)["status"] == "ok"


def test_the_agent_sub_node_hands_the_model_the_text_and_a_failed_program_as_the_tool_answer(n8n: N8n) -> None:
    """MCP Client Tool, called as an AI Agent would call it (n8n's Tool Executor stands in for the LLM)."""
    run = n8n.execute(AGENT_TOOL)

    assert run["status"] == "success"
    [answer] = node_items(run, "Call the tool")  # the content blocks, as the JSON string the agent passes on
    [block] = json.loads(answer)
    assert json.loads(block["text"])["result"] == 42
    [failed] = node_items(run, "Call it with a typo")  # on isError: the text alone, which the model reads
    assert json.loads(failed)["error"]["suggested_value"] == "read_file"
    [tool_run] = run["data"]["resultData"]["runData"]["MCP Client Tool (SSE, X-API-Key)"]
    assert tool_run["error"]["message"] == failed  # and n8n marks the tool node as failed
