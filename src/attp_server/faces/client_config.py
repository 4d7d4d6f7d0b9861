"""``attp config claude|n8n``: ready-to-paste client configurations for this installation.

Claude Desktop starts the server itself over stdio, so its entry needs absolute paths: the `attp`
script of this environment, the workspace, and the config file when a profile is used. n8n's two MCP
nodes connect over HTTP: they need the endpoint URLs, how to send the token, and (the standalone MCP
Client node, which reports a failed program as a successful step) how to check the result's status.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attp_server.errors import AttpError
from attp_server.settings import DEFAULT_CONFIG_FILE, N8N_MCP_CLIENT, Settings, is_loopback
from attp_server.store.layout import data_folder, data_home, misplaced, refusal

CLAUDE_CONFIG_LOCATIONS = (
    "macOS: ~/Library/Application Support/Claude/claude_desktop_config.json",
    "Windows: %APPDATA%\\Claude\\claude_desktop_config.json",
)


def server_command() -> list[str]:
    """How to start this installation's server: its `attp` script, else this Python with ``-m attp_server``.

    `sys.executable` is made absolute but not resolved: a virtual environment's python is a symlink
    whose target would lose the environment.
    """
    python = Path(os.path.abspath(sys.executable))
    script = python.parent / ("attp.exe" if os.name == "nt" else "attp")
    return [str(script)] if script.is_file() else [str(python), "-m", "attp_server"]


SERVE_FLAGS: dict[str, str] = {
    "toolpacks": "--toolpack",
    "skills_dirs": "--skills-dir",
    "mcp_config": "--mcp-config",
    "engine": "--engine",
    "engines": "--engines",
    "timeout_s": "--timeout-s",
    "memory_mb": "--memory-mb",
    "max_tool_calls": "--max-tool-calls",
    "result_format": "--result-format",
    "workers": "--workers",
    "isolation": "--isolation",
    "approval": "--approval",
    "log_level": "--log-level",
    "log_format": "--log-format",
}
"""The settings flags `attp config` passes on to the ``attp serve`` it prints (workspace and db_path apart)."""


class NotCarried(ValueError):
    """A flag given to `attp config` that the printed configuration cannot carry."""


def outside_the_workspace(settings: Settings, config: Path | None) -> tuple[Settings, str | None]:
    """`settings` with the server's own files out of the workspace, and a note when it moved one.

    A data folder left at its default (``.attp/`` of the current folder) that would lie inside the workspace moves
    to ``~/.attp-server/`` (the MCP Bundle's); a file the user placed there (`config`, an explicit `db_path`, ...)
    is theirs to move: `AttpError` says which and where, as `attp serve` would refuse to start.
    """
    note = None
    problems = misplaced(settings, config)
    if "db_path" not in settings.model_fields_set and any(f.path == data_folder(settings) for f, _ in problems):
        old, moved = data_folder(settings), data_home() / settings.db_path.name
        note = (
            f"attp: the data folder {old} would be inside the workspace, where programs could read the server's "
            f"secret: the configuration puts it in {moved.parent} instead"
            + (f" (move what {old} holds there to keep it)." if old.exists() else ".")
        )
        settings = settings.model_copy(update={"db_path": moved})
        problems = misplaced(settings, config)
    if problems:
        raise AttpError("this layout would not start: " + refusal(settings, problems))
    return settings, note


def serve_flags(values: Mapping[str, Any]) -> list[str]:
    """The flags given on the command line, as ``attp serve`` flags; paths made absolute (the client starts the
    server from a directory of its own)."""
    args: list[str] = []
    for field, flag in SERVE_FLAGS.items():
        value = values.get(field)
        if value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            args += [flag, str(Path(item).resolve()) if isinstance(item, Path) else str(item)]
    return args


def claude_config(
    settings: Settings,
    *,
    name: str = "attp",
    profile: str | None = None,
    config: Path | None = None,
    flags: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``mcpServers`` entry for ``claude_desktop_config.json``, every path absolute, with every serve flag
    that was given (`flags`, from the command line). Raises `NotCarried` for a flag Claude Desktop's stdio has
    no use for (--host, --port)."""
    flags = flags or {}
    if stray := [f"--{key}" for key in ("host", "port") if flags.get(key) is not None]:
        raise NotCarried(
            f"{' and '.join(stray)}: only for HTTP, and Claude Desktop starts the server over stdio (use `attp "
            "config n8n` for an HTTP client)"
        )
    command, *prefix = server_command()
    config = config if config is not None else (DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.exists() else None)
    args = [*prefix, "serve", "--workspace", str(settings.workspace.resolve())]
    # Always: its folder is the data folder (the store's state and secret), which must not land in Claude's cwd.
    args += ["--db-path", str(settings.db_path.resolve())]
    if config is not None:
        args += ["--config", str(config.resolve())]
    if profile is not None:
        args += ["--profile", profile]
    args += serve_flags(flags)
    for field in ("isolation", "approval"):  # set here (environment, file), so the server Claude starts must have it
        if field in settings.model_fields_set and field not in flags:
            args += [f"--{field}", str(getattr(settings, field))]
    return {"mcpServers": {name: {"command": command, "args": args}}}


def _n8n_sessions(settings: Settings) -> list[str]:
    """What isolation and approvals mean for n8n, when they are on."""
    lines = []
    if settings.approval != "never" and settings.approval_fallback == "deny":
        lines += [
            f"Approvals: n8n cannot answer the server's questions (elicitation): with approval = {settings.approval}",
            '  its destructive calls fail with APPROVAL_UNAVAILABLE. For n8n set approval = "never", or',
            '  approval_fallback = "allow" (ATTP_APPROVAL_FALLBACK=allow).',
            "",
        ]
    if settings.isolation == "session":
        lines += [
            "Isolation: each MCP session has its own folder and memory, removed when the session ends, so files",
            '  do not outlive one n8n execution. To keep them per person or workflow: isolation = "tenant" with',
            "  a token each in auth_tokens.",
            "",
        ]
    elif settings.isolation == "tenant":
        lines += [
            "Isolation: each token in auth_tokens has its own folder and memory; give each person or workflow its",
            "  own token (an n8n credential each).",
            "",
        ]
    return lines


def n8n_config(settings: Settings, *, docker: bool = False, flags: Mapping[str, Any] | None = None) -> str:
    """How to set up n8n's two MCP nodes for a server started with these settings, as text to follow."""
    named = bool(settings.auth_tokens)
    token = settings.auth_token is not None or named or docker  # from Docker the server listens beyond loopback
    wildcard = settings.host in ("0.0.0.0", "::")  # noqa: S104 - recognising it, not binding it
    host = "host.docker.internal" if docker else ("127.0.0.1" if wildcard else settings.host)
    base = f"http://{host}:{settings.port}"
    lines = [
        "n8n has two MCP nodes; both connect the same way:",
        "",
        f"  Server Transport: HTTP Streamable      MCP Endpoint URL: {base}/mcp",
        f"               or: Server Sent Events   MCP Endpoint URL: {base}/sse   (deprecated in n8n)",
    ]
    if named:
        lines += [
            "  Authentication: Bearer Auth   credential Bearer Token: one of the tokens in auth_tokens (one per",
            "                                person or workflow)",
            "              or: Header Auth   credential Name: X-API-Key   Value: that token",
        ]
    elif token:
        lines += [
            "  Authentication: Bearer Auth   credential Bearer Token: the value of ATTP_AUTH_TOKEN",
            "              or: Header Auth   credential Name: X-API-Key   Value: the value of ATTP_AUTH_TOKEN",
            '  (without a credential n8n sends no header; the server\'s 401 shows as "Authentication failed")',
        ]
    else:
        lines += [
            "  Authentication: None   (this server has no auth_token; fine on 127.0.0.1 only.",
            "    To require one: export ATTP_AUTH_TOKEN=$(python3 -c "
            "'import secrets; print(secrets.token_urlsafe(32))')",
            "    then choose Bearer Auth with that token, or Header Auth with Name X-API-Key.)",
        ]
    lines += ["", *_mcp_client_lines(settings), "", *_mcp_client_tool_lines(), ""]
    lines += _n8n_sessions(settings)
    given = [f"--workspace {_quoted(settings.workspace.resolve())}"] if (flags or {}).get("workspace") else []
    if (flags or {}).get("db_path"):
        given.append(f"--db-path {_quoted(settings.db_path.resolve())}")
    carried = serve_flags(flags or {})
    given += [f"{flag} {_quoted(value)}" for flag, value in zip(carried[::2], carried[1::2], strict=True)]
    serve = " ".join([f"attp serve --transport http --port {settings.port}", *given])
    if docker:
        lines += [
            "n8n runs in Docker, this server on the host:",
            f"  start it with:  ATTP_AUTH_TOKEN=... ATTP_ALLOWED_HOSTS='host.docker.internal:*' {serve} --host 0.0.0.0",
            "  (a non-loopback --host needs a token; the Host header n8n sends is host.docker.internal,",
            "   which allowed_hosts must list or the server answers 421)",
            "  on Linux, start n8n with:  --add-host=host.docker.internal:host-gateway",
        ]
        if "host.docker.internal:*" not in settings.allowed_hosts:
            lines.append("  note: allowed_hosts does not list host.docker.internal:* in the current settings")
    else:
        lines.append(
            f"Start the server with:  {serve}" + ("" if is_loopback(settings.host) else f" --host {settings.host}")
        )
        lines.append("For n8n in Docker, run:  attp config n8n --docker")
    return "\n".join(lines)


def _quoted(value: object) -> str:
    return shlex.quote(str(value))


def _mcp_client_lines(settings: Settings) -> list[str]:
    """The standalone MCP Client node: a workflow step, no agent; it hands the workflow the text block."""
    text = "$json.content[0].text"
    lines = [
        "MCP Client node (runs a program as a workflow step, no agent):",
        "  Tool: attp_execute (From List, or By ID)",
        "  Input Mode: JSON   JSON: {\"code\": \"write_file('out.txt', 'hi')\\n__result__ = read_file('out.txt')\"}",
        f"  Output: {{{{ {text} }}}} is the result object: status, result, and where they apply stdout, hint,",
        "    error, tool_calls (a summary line)",
        "    (this server answers this node in JSON, which n8n parses into that object)",
        "  Check status: n8n shows a failed program (an error, a timeout, an unknown tool) as a successful",
        "    step, because this node ignores isError. Follow it with an IF node:",
        f"      {{{{ {text}.status }}}}  is equal to  ok",
        f"    and on the false branch read {{{{ {text}.error.message }}}}.",
    ]
    if settings.result_format != "json" and N8N_MCP_CLIENT not in settings.json_clients:
        lines += [
            "  note: json_clients does not name this node and result_format is not json in the current",
            f'    settings, so {{{{ {text} }}}} is the result text as one string; set result_format = "json"',
            f'    or restore json_clients (default ["{N8N_MCP_CLIENT}"]).',
        ]
    return lines


def _mcp_client_tool_lines() -> list[str]:
    """The agent sub-node: the model reads the text block and sees isError."""
    return [
        "MCP Client Tool node (gives an AI Agent the tool):",
        "  Tools to Include: All (the server has one tool, attp_execute; from n8n 2.40 the agent sees it",
        "    as MCP_Client_Tool_attp_execute, so a prompt naming the tool should use that name)",
        "  The agent reads the result text; a failed program reaches it as the tool's answer (isError),",
        "    with what went wrong and how to fix it, so the model corrects its next call.",
    ]
