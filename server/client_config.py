"""``attp config claude|n8n``: ready-to-paste client configurations for this installation.

Claude Desktop starts the server itself over stdio, so its entry needs absolute paths: the `attp`
script of this environment, the workspace, and the config file when a profile is used. n8n's MCP
Client Tool node connects over HTTP; it needs the endpoint URLs and how to send the token.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from attp_server.http import is_loopback
from attp_server.settings import DEFAULT_CONFIG_FILE, Settings

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


def claude_config(
    settings: Settings, *, name: str = "attp", profile: str | None = None, config: Path | None = None
) -> dict[str, Any]:
    """The ``mcpServers`` entry for ``claude_desktop_config.json``, every path absolute."""
    command, *prefix = server_command()
    args = [*prefix, "serve", "--workspace", str(settings.workspace.resolve())]
    if "memory" in settings.toolpacks:
        args += ["--db-path", str(settings.db_path.resolve())]
    config = config if config is not None else (DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.exists() else None)
    if config is not None:
        args += ["--config", str(config.resolve())]
    if profile is not None:
        args += ["--profile", profile]
    if "toolpacks" in settings.model_fields_set and profile is None:
        for pack in settings.toolpacks:
            args += ["--toolpack", pack]
    for field in ("isolation", "approval"):  # set here, so the server Claude starts must have it too
        if field in settings.model_fields_set:
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


def n8n_config(settings: Settings, *, docker: bool = False) -> str:
    """The MCP Client Tool node's settings for a server started with these settings, as text to follow."""
    named = bool(settings.auth_tokens)
    token = settings.auth_token is not None or named or docker  # from Docker the server listens beyond loopback
    wildcard = settings.host in ("0.0.0.0", "::")  # noqa: S104 - recognising it, not binding it
    host = "host.docker.internal" if docker else ("127.0.0.1" if wildcard else settings.host)
    base = f"http://{host}:{settings.port}"
    lines = [
        "n8n: MCP Client Tool node",
        "",
        f"  Server Transport: HTTP Streamable      Endpoint: {base}/mcp",
        f"  Server Transport: Server Sent Events   Endpoint: {base}/sse   (older n8n versions)",
        "",
    ]
    if named:
        lines += [
            "  Authentication: Bearer Auth   Token: one of the tokens in auth_tokens (one per person or workflow)",
            "    or Header Auth              Name: X-API-Key   Value: that token",
        ]
    elif token:
        lines += [
            "  Authentication: Bearer Auth   Token: the value of ATTP_AUTH_TOKEN",
            "    or Header Auth              Name: X-API-Key   Value: the value of ATTP_AUTH_TOKEN",
        ]
    else:
        lines += [
            "  Authentication: None   (this server has no auth_token; fine on 127.0.0.1 only.",
            "    To require one: export ATTP_AUTH_TOKEN=$(python3 -c "
            "'import secrets; print(secrets.token_urlsafe(32))')",
            "    then choose Bearer Auth with that token, or Header Auth with Name X-API-Key.)",
        ]
    lines += ["", "  Tools to Include: All (the server has one tool, attp_execute)", ""]
    lines += _n8n_sessions(settings)
    serve = f"attp serve --transport http --port {settings.port}"
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
