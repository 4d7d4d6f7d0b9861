"""Upstream MCP servers as configured: ``[mcp_servers.NAME]`` tables and Claude-Desktop JSON files.

A server is either local (``command``, ``args``, ``env``, ``cwd``: started as a child process and
spoken to over stdio) or remote (``url``, ``headers``, ``transport`` = ``"streamable-http"`` or
``"sse"``). Values in ``env`` and ``headers`` may reference the attp-server's own environment as
``${VAR}`` (or ``${VAR:-default}``); they are expanded only when the server is started, so the
settings never hold the secret itself. Values are `SecretStr`: a settings dump or a log line shows
``**********``, never a token.

``--mcp-config FILE`` reads the JSON that Claude Desktop, Cursor and others use::

    {"mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
                               "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}},
                    "search": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${KEY}"}}}}

A ``"disabled": true`` server is skipped, as other clients do. A key attp-server does not read is either an
error or a warning (`ignored_keys`): an error when ignoring it could leave callable a tool the operator meant to hide,
or start a server meant to stay off (a misspelt filter, ``exclude_tool`` for ``exclude_tools``; another client's tool
filter, ``disabledTools``); a warning otherwise (``autoApprove``, ``timeout`` and the like, which other clients
read from the same file), kept with the server (`McpServer.ignored`) and reported at start, by ``attp tools`` and
in ``/healthz``.

Filters, in either form: ``tools`` (an allow list of names or globs, ``["read_*", "list_*"]``),
``exclude_tools`` (names or globs taken out) and ``read_only = true`` (only the tools the server
annotates ``readOnlyHint``). A filtered tool is never made into a tool here: it is absent from what
the model reads and a call to it, by any name, is ``NAME_NOT_FOUND``.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from attp_server.errors import suggest

logger = logging.getLogger(__name__)

Transport = Literal["stdio", "streamable-http", "sse"]

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

_JSON_TRANSPORTS: dict[str, Transport] = {
    "stdio": "stdio",
    "sse": "sse",
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "streamable_http": "streamable-http",
    "streamablehttp": "streamable-http",
}
"""The ``type``/``transport`` spellings other clients write in their JSON, and what each means here."""

GATING_KEYS = ("tools", "exclude_tools", "read_only", "disabled")
"""Keys that keep tools (or a whole server) away from programs: a key that looks like one of them, or that names
tools at all, is never ignored."""
OTHER_CLIENTS_KEYS = frozenset(
    {"autoApprove", "alwaysAllow", "timeout", "description", "trust", "transportType", "envFile", "watchPaths"}
)
"""Keys other clients write in the same file (Claude Desktop, Cline, Roo Code, Cursor, Gemini CLI) that mean nothing
here and hide nothing: ignored with a warning."""
OTHER_CLIENTS_FILTERS = {
    "disabledTools": "exclude_tools",
    "excludeTools": "exclude_tools",
    "includeTools": "tools",
    "allowedTools": "tools",
    "enabledTools": "tools",
}
"""Other clients' tool filters, and the key that says the same here: an error naming it (never ignored)."""


class McpServer(BaseModel):
    """One upstream MCP server: a command to start (stdio) or a URL to reach."""

    model_config = ConfigDict(extra="forbid")
    _ignored: tuple[str, ...] = PrivateAttr(default=())

    command: str | None = Field(None, description="Program to start; it speaks MCP on its stdin/stdout.")
    args: list[str] = Field(default_factory=list, description="Arguments of the command.")
    env: dict[str, SecretStr] = Field(
        default_factory=dict, description="Environment variables added for the command; values may use ${VAR}."
    )
    cwd: Path | None = Field(None, description="Working directory of the command.")
    url: str | None = Field(None, description="URL of a remote server (Streamable HTTP or SSE).")
    headers: dict[str, SecretStr] = Field(
        default_factory=dict, description="HTTP headers sent to a remote server; values may use ${VAR}."
    )
    transport: Transport | None = Field(
        None, description='"stdio" with command; "streamable-http" (default with url) or "sse".'
    )
    save_media: bool = Field(
        False,
        description="Save images and audio a tool returns into the workspace (mcp-media/NAME/) and return the path.",
    )
    max_result_bytes: int = Field(
        10 * 1024 * 1024, ge=1024, description="Largest result accepted from one tool call (text and structured)."
    )
    tools: list[str] | None = Field(
        None,
        description='Only these tools (names as the server lists them, or globs: ["read_*", "get_time"]); '
        "the others are hidden and refused.",
    )
    exclude_tools: list[str] = Field(
        default_factory=list, description="Tools taken out (names or globs), after `tools`; hidden and refused."
    )
    read_only: bool = Field(
        False, description="Keep only the tools the server annotates read-only (readOnlyHint); hide the rest."
    )
    identity: Literal["shared", "per_user", "token_exchange"] = Field(
        "shared",
        description="Whose account a remote server's calls use: shared (one for everyone: headers or attp login), "
        "per_user (each signed-in person connects their own once), token_exchange (the caller's access token "
        "exchanged at oauth_issuer for one naming this server's url, RFC 8693). A command is always shared.",
    )
    audience: str | None = Field(
        None,
        description="identity = token_exchange: the audience asked for in the exchange (default: url; Keycloak "
        "wants the upstream's client id).",
    )

    @field_validator("tools", "exclude_tools")
    @classmethod
    def _patterns(cls, patterns: list[str] | None) -> list[str] | None:
        for pattern in patterns or []:
            if not pattern.strip():
                raise ValueError("a tool name or glob cannot be empty")
        return patterns

    def admits(self, names: tuple[str, ...], *, read_only: bool) -> bool:
        """Whether the filters keep a tool: `names` are the name the server lists and the Python name it is
        called by here (a pattern may match either); `read_only` is its readOnlyHint."""

        def matches(patterns: list[str]) -> bool:
            return any(fnmatch.fnmatchcase(name, pattern) for name in names for pattern in patterns)

        if self.tools is not None and not matches(self.tools):
            return False
        if matches(self.exclude_tools):
            return False
        return read_only or not self.read_only

    def filtered(self) -> bool:
        """Whether any filter is set."""
        return self.tools is not None or bool(self.exclude_tools) or self.read_only

    @model_validator(mode="after")
    def _one_kind(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a local server, started over stdio) or url (a remote server)")
        if self.command is not None:
            if self.transport not in (None, "stdio"):
                raise ValueError(f"transport {self.transport!r} needs url; a command is always spoken to over stdio")
            if self.headers:
                raise ValueError("headers apply to a url; a command gets env instead")
            if self.identity != "shared":
                raise ValueError(
                    f"identity = {self.identity!r} needs url: a command (stdio) runs once for everyone, so it is shared"
                )
            self.transport = "stdio"
        else:
            if self.transport == "stdio":
                raise ValueError('transport "stdio" needs command; a url uses "streamable-http" or "sse"')
            if self.args or self.env or self.cwd is not None:
                raise ValueError("args, env and cwd apply to a command; a url gets headers instead")
            if not str(self.url).startswith(("http://", "https://")):
                raise ValueError(f"url must start with http:// or https:// (got {self.url!r})")
            self.transport = self.transport or "streamable-http"
            if self.identity != "shared" and self.transport != "streamable-http":
                raise ValueError(f'identity = {self.identity!r} needs transport = "streamable-http"')
        return self

    @property
    def ignored(self) -> tuple[str, ...]:
        """The keys of its JSON entry attp-server does not read, each with what to do (`ignored_keys`)."""
        return self._ignored

    def describe(self) -> str:
        """Where the server is, without any secret: the command's name, or the URL without query or userinfo."""
        if self.command is not None:
            return f"command {Path(self.command).name!r} over stdio"
        url = re.sub(r"//[^/@]*@", "//", str(self.url)).split("?", 1)[0]
        return f"{url} ({self.transport})"


class ExpansionError(Exception):
    """A ``${VAR}`` names a variable the environment does not have."""


def expand(value: str, environ: Mapping[str, str], where: str) -> str:
    """Replace each ``${VAR}`` (or ``${VAR:-default}``) in `value` from `environ`.

    Raises:
        ExpansionError: naming the variable and where it is referenced, never the value.
    """

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise ExpansionError(
            f"environment variable {name} is not set (referenced by {where}); set it in the environment "
            "attp-server starts with, or write ${" + name + ":-default}"
        )

    return _REFERENCE.sub(substitute, value)


def references(value: str) -> list[str]:
    """The variable names `value` references as ``${VAR}``."""
    return [m.group(1) for m in _REFERENCE.finditer(value)]


def read_claude_config(path: Path) -> dict[str, McpServer]:
    """The ``mcpServers`` of a Claude-Desktop-style JSON file, validated.

    Raises:
        ValueError: naming the file, the server and what is wrong (never a value of env or headers).
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} cannot be read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    except RecursionError:
        raise ValueError(f"{path} nests too deeply to read") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ValueError(f'{path} has no "mcpServers" object; expected {{"mcpServers": {{"NAME": {{...}}}}}}')
    out: dict[str, McpServer] = {}
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise ValueError(f"{path}: mcpServers.{name} must be an object with command or url")
        if entry.get("disabled") is True:
            logger.info("mcp server %r in %s is disabled there; skipped", name, path)
            continue
        ignored = ignored_keys(entry, f"{path}: mcpServers.{name}")
        values = {key: entry[key] for key in McpServer.model_fields if key in entry}
        kind = entry.get("type", entry.get("transport"))
        if kind is not None:
            transport = _JSON_TRANSPORTS.get(str(kind).lower())
            if transport is None:
                raise ValueError(
                    f"{path}: mcpServers.{name}: unknown type {kind!r}; expected stdio, http, streamable-http or sse"
                )
            values["transport"] = transport
        out[name] = _validated(values, f"{path}: mcpServers.{name}")
        out[name]._ignored = tuple(ignored)
    return out


def ignored_keys(entry: Mapping[str, Any], where: str) -> list[str]:
    """The keys of a JSON entry (at `where`: the file and the server) attp-server does not read, each as a warning
    naming it (and the key it may have meant).

    Raises:
        ValueError: for a key in a gating place (`GATING_KEYS`): one spelled like a filter or ``disabled``, or one
            that names tools (another client's ``disabledTools``). Ignored, it would leave callable the tools it
            was meant to hide.
    """
    known = [*McpServer.model_fields, "type", "disabled"]
    notes = []
    for key in sorted(set(entry) - set(known)):
        hint = suggest(key, known)
        if "tool" in key.lower():  # another client's filter, or a misspelt one
            hint = OTHER_CLIENTS_FILTERS.get(key) or suggest(key, GATING_KEYS[:3], cutoff=0.0)
        if hint in GATING_KEYS:
            raise ValueError(
                f"{where}: unknown key {key!r}; did you mean {hint!r}? A key in a filter's place is never ignored: "
                "the tools it was meant to hide would stay callable (the filters are tools, exclude_tools and "
                'read_only; "disabled": true skips the server)'
            )
        if key in OTHER_CLIENTS_KEYS:
            notes.append(f"{where}: key {key!r} ignored (another client's key; it means nothing to attp-server)")
        else:
            notes.append(f"{where}: unknown key {key!r} ignored" + (f" (did you mean {hint!r}?)" if hint else ""))
    return notes


def _validated(values: Mapping[str, Any], where: str) -> McpServer:
    try:
        return McpServer.model_validate(dict(values))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"])
            text = str(error["msg"]).removeprefix("Value error, ")
            problems.append(f"{field}: {text}" if field else text)
        raise ValueError(f"{where}: " + "; ".join(problems)) from None


def merge_servers(tables: Mapping[str, McpServer], files: list[Path]) -> dict[str, McpServer]:
    """The ``[mcp_servers]`` tables plus every server of the JSON files; a name defined twice is an error."""
    merged = dict(tables)
    origin = dict.fromkeys(tables, "mcp_servers")
    for path in files:
        for name, server in read_claude_config(path).items():
            if name in merged:
                raise ValueError(
                    f"mcp server {name!r} is defined twice: in {origin[name]} and in {path}; remove or rename one"
                )
            merged[name] = server
            origin[name] = str(path)
    return merged


def default_environment() -> dict[str, str]:
    """The attp-server's own environment, where ``${VAR}`` references are looked up."""
    return dict(os.environ)
