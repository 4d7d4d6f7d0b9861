"""What a newcomer putting their servers behind attp-server tripped on, through the real `attp` command: the
environment a stdio server gets (env_passthrough) and the variables it did not get, a missing uvx/npx, a
server named like a built-in pack, `attp tools` as the check it claims to be, `attp config` carrying every
flag, the reach rule with a remote server, ``--toolpack +PACK``, and a quiet ``attp exec``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness import server_env
from upstreams import everything_http, everything_stdio


def attp(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "attp_server", *args],
        capture_output=True, text=True, cwd=cwd, env={**server_env(), **(env or {})}, timeout=120, check=False,
    )  # fmt: skip


def servers(tmp_path: Path, entries: dict[str, Any]) -> Path:
    path = tmp_path / "upstream.json"
    path.write_text(json.dumps({"mcpServers": entries}))
    return path


def result(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return dict(json.loads(done.stdout))


def test_proxy_and_ca_variables_reach_a_stdio_server(tmp_path: Path) -> None:
    config = servers(tmp_path, {"everything": everything_stdio()})
    env = {"HTTPS_PROXY": "http://proxy.example:3128", "NODE_EXTRA_CA_CERTS": "/etc/ca.pem", "MY_REGION": "eu"}
    code = "__result__ = sorted(k for k in get_env() if k in ('HTTPS_PROXY', 'NODE_EXTRA_CA_CERTS', 'MY_REGION'))"
    done = attp("exec", "--mcp-config", str(config), "--json", "--code", code, cwd=tmp_path, env=env)
    assert result(done)["result"] == ["HTTPS_PROXY", "NODE_EXTRA_CA_CERTS"], done.stdout + done.stderr
    env["ATTP_ENV_PASSTHROUGH"] = "MY_*"  # replaces the default list
    done = attp("exec", "--mcp-config", str(config), "--json", "--code", code, cwd=tmp_path, env=env)
    assert result(done)["result"] == ["MY_REGION"], done.stdout + done.stderr


def test_a_misspelt_filter_stops_attp_tools_and_other_keys_are_reported(tmp_path: Path) -> None:
    """``exclude_tool`` would leave get_env callable: `attp tools` refuses the file (exit 2), naming the key and the
    one meant; a key that hides nothing is read past, and said on stderr."""
    config = servers(tmp_path, {"everything": {**everything_stdio(), "exclude_tool": ["get_env"]}})
    done = attp("tools", "--mcp-config", str(config), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"attp: invalid settings: mcp_config: {config}: mcpServers.everything: unknown key 'exclude_tool'; did you "
        "mean 'exclude_tools'? A key in a filter's place is never ignored: the tools it was meant to hide would stay "
        'callable (the filters are tools, exclude_tools and read_only; "disabled": true skips the server) (from '
        "command line)\n"
    )
    config = servers(tmp_path, {"gone": {"command": "attp-no-such-server", "timeout": 30}})
    done = attp("tools", "--mcp-config", str(config), cwd=tmp_path)
    assert done.returncode == 1
    assert f"mcp server 'gone': {config}: mcpServers.gone: key 'timeout' ignored (another client's key" in done.stderr


NPX_404 = """npm error code E404
npm error 404 Not Found - GET https://registry.npmjs.org/@modelcontextprotocol%2fserver-gihtub
npm error 404
npm error 404  The requested resource '@modelcontextprotocol/server-gihtub@*' could not be found or you do not have permission to access it.
npm error A complete log of this run can be found in: /root/.npm/_logs/2026-12-05T09_05_23_656Z-debug-0.log
"""  # what `npx -y @modelcontextprotocol/server-gihtub` says (npm 11), shortened


def test_attp_tools_shows_why_a_server_did_not_start(tmp_path: Path) -> None:
    """npx's 404 is the reason (not npm's log-file line), `attp tools` prints the stderr the reason points to, and a
    failure no variable causes names none (though the server did not get NODE_OPTIONS or the CA variables)."""
    npx = [sys.executable, "-c", f"import sys; sys.stderr.write({NPX_404!r}); sys.exit(1)"]
    config = servers(tmp_path, {"github": {"command": npx[0], "args": npx[1:]}})
    env = {"NODE_OPTIONS": "--use-openssl-ca", "AWS_CA_BUNDLE": "/etc/ca.pem", "PIP_INDEX_URL": "https://pypi.local"}
    done = attp("tools", "--mcp-config", str(config), cwd=tmp_path, env=env)
    assert done.returncode == 1
    [failed] = [line for line in done.stderr.splitlines() if "FAILED" in line]
    assert (
        "its stderr said: npm error 404 Not Found - GET https://registry.npmjs.org/@modelcontextprotocol%2fserver-gihtub "
        "(E404). Fix: correct the server or mcp_servers.github (its stderr: `attp tools` prints it" in failed
    )
    assert "NODE_OPTIONS" not in failed and "did not get" not in failed
    assert "attp:   its stderr (last 5 lines):\nattp:   | npm error code E404\n" in done.stderr
    assert "attp:   | npm error A complete log of this run can be found in: " in done.stderr


def test_attp_tools_is_a_check(tmp_path: Path) -> None:
    """Non-zero exit, each failed server with its reason (the variables it did not get; uvx not on PATH), the
    pack names of the others; the renamed one said."""
    failing = [sys.executable, "-c", "import sys; sys.exit('cannot reach the registry: certificate verify failed')"]
    config = servers(
        tmp_path,
        {
            "everything": everything_stdio(),
            "memory": {**everything_stdio(), "exclude_tools": ["get_env"]},
            "fetcher": {"command": failing[0], "args": failing[1:]},
            "uvxed": {"command": "uvx", "args": ["mcp-server-git"]},
        },
    )
    env = {"NODE_OPTIONS": "--use-openssl-ca", "SSL_CERT_FILE": "/etc/ca.pem", "PATH": "/usr/bin:/bin"}
    done = attp("tools", "--mcp-config", str(config), cwd=tmp_path, env=env)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    [fetcher] = [line for line in lines if line.startswith("attp: mcp server 'fetcher' FAILED")]
    assert "NODE_OPTIONS" in fetcher and "env_passthrough" in fetcher
    assert not re.search(r"\bSSL_CERT_FILE\b", fetcher)  # passed on by default
    [uvxed] = [line for line in lines if line.startswith("attp: mcp server 'uvxed' FAILED")]
    assert "'uvx' was not found on the PATH attp-server was started with (/usr/bin:/bin)" in uvxed
    assert "install uv" in uvxed and "absolute path" in uvxed and "which uvx" in uvxed
    assert "attp: mcp server 'everything': 13 tools as everything.NAME" in lines
    assert (
        "attp: mcp server 'memory' (toolpack memory_mcp): 12 tools as memory_mcp.NAME, 1 hidden by its filters" in lines
    )
    assert "is the toolpack 'memory_mcp'" in done.stderr  # the start-up warning
    assert "def get_sum" in done.stdout or "get_sum(" in done.stdout

    model = attp("tools", "--as-model", "--mcp-config", str(config), cwd=tmp_path, env=env)
    assert model.returncode == 1
    assert model.stdout.startswith("Run a short Python program")
    assert "Called memory_mcp.NAME(...): memory is the name of a built-in pack" in model.stdout
    assert "fetcher" in model.stdout and "uvxed" in model.stdout  # the model is told which are down


def test_a_server_named_like_a_built_in_pack(tmp_path: Path) -> None:
    config = servers(tmp_path, {"memory": everything_stdio()})
    done = attp("exec", "--mcp-config", str(config), "--code", "memory.get_sum(a=1, b=2)", cwd=tmp_path)
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "NAME_NOT_FOUND"
    assert "the MCP server 'memory' is the toolpack memory_mcp" in error["message"]
    assert error["suggested_value"] == "memory_mcp.get_sum"
    assert "is the toolpack 'memory_mcp'" in done.stderr
    ok = attp(
        "exec",
        "--mcp-config",
        str(config),
        "--code",
        "memory_mcp.echo(message='hi')",
        cwd=tmp_path,
    )
    assert json.loads(ok.stdout)["result"] == "Echo: hi", ok.stdout


def test_a_remote_server_is_said_to_reach_the_network(tmp_path: Path) -> None:
    with everything_http() as url:
        config = servers(tmp_path, {"remote": {"url": url}})
        done = attp("tools", "--as-model", "--toolpack", "files", "--mcp-config", str(config), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no enabled tool reaches" not in done.stdout
    assert "go beyond the workspace (network, commands, other systems): remote.*" in done.stdout
    alone = attp("tools", "--as-model", "--toolpack", "files", cwd=tmp_path)
    assert "no enabled tool reaches the network" in alone.stdout


def test_attp_config_carries_every_flag_or_refuses_it(tmp_path: Path) -> None:
    config = servers(tmp_path, {})
    flags = ["--mcp-config", "upstream.json", "--timeout-s", "30", "--toolpack", "+shell", "--approval", "never"]
    done = attp("config", "claude", *flags, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    args = json.loads(done.stdout)["mcpServers"]["attp"]["args"]
    assert args[args.index("--mcp-config") + 1] == str(config)
    assert args[args.index("--timeout-s") + 1] == "30.0"
    assert [args[i + 1] for i, a in enumerate(args) if a == "--toolpack"] == ["files", "skills", "memory", "shell"]
    assert args[args.index("--approval") + 1] == "never"
    refused = attp("config", "claude", "--port", "9000", cwd=tmp_path)
    assert refused.returncode == 2 and "--port" in refused.stderr and "stdio" in refused.stderr
    n8n = attp("config", "n8n", "--port", "9001", *flags, cwd=tmp_path)
    assert n8n.returncode == 0, n8n.stderr
    [start] = [line for line in n8n.stdout.splitlines() if line.startswith("Start the server with:")]
    assert (
        f"--port 9001 --toolpack files --toolpack skills --toolpack memory --toolpack shell --mcp-config {config}"
        in start
    )
    assert "--timeout-s 30.0" in start and "--approval never" in start


def test_toolpack_plus_adds_to_the_defaults(tmp_path: Path) -> None:
    done = attp("tools", "--format", "json", "--toolpack", "+shell", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert {t["pack"] for t in json.loads(done.stdout)} == {"files", "skills", "memory", "shell"}
    mixed = attp("tools", "--toolpack", "+shell", "--toolpack", "files", cwd=tmp_path)
    assert mixed.returncode == 2 and "not both" in mixed.stderr


def test_exec_prints_the_result_and_no_info_lines(tmp_path: Path) -> None:
    done = attp("exec", "--code", "__result__ = 1 + 1", cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["result"] == 2
    assert " INFO " not in done.stderr, done.stderr
    loud = attp("exec", "--log-level", "INFO", "--code", "__result__ = 1", cwd=tmp_path)
    assert " INFO " in loud.stderr
