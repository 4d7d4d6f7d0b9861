"""The one `Settings` class, and `load_settings`, which builds it from pydantic-settings' sources and names the
culprit of a bad value.

Sources, highest first: command-line flags (`InitSettingsSource`), ``ATTP_*`` environment variables
(`EnvSettingsSource`, nested with ``__``), the TOML file given by ``--config`` or ``./attp.toml`` if present
(`TomlConfigSettingsSource`), defaults. pydantic-settings reads and merges them; this module adds only the
file's own shape (``[toolpacks]``, ``[profiles]``), comma-separated lists in the environment, and error
messages that name the source a bad value came from. Settings are built once, in `attp_server.faces.cli.main`,
and passed down; tests build ``Settings(...)`` directly (it reads no environment).
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import os
import re
import sys
import tomllib
from collections.abc import Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import (
    Field,
    PositiveInt,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from pydantic_settings.sources.utils import parse_env_vars

from attp_server.access_config import AccessRule
from attp_server.errors import ConfigError, suggest
from attp_server.mcp_config import McpServer, merge_servers
from attp_server.sandbox.engines import ENGINES, EngineName
from attp_server.sandbox.stdlib.namespaces import MODULE_NAMES

ENV_PREFIX = "ATTP_"
DEFAULT_TENANT = "default"
"""The tenant name of whoever presents `auth_token` (and of stdio and unauthenticated callers)."""
TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
DEFAULT_CONFIG_FILE = Path("attp.toml")
PROXY_AND_CA_VARIABLES = (
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
)  # fmt: skip
"""What a server behind a proxy, or one trusting a company CA, needs to reach the network (`env_passthrough`)."""
_SECRET_BEARING = frozenset({"mcp_servers", "auth_token", "auth_tokens", "oauth_client_secret", "database_url"})
"""Settings whose values are never repeated in an error message (env and headers of upstream servers, tokens)."""
CPYTHON_PACKAGES = ("numpy", "pandas", "matplotlib")
"""What ``cpython_packages`` lists by default (those installed): what ``attp-server[data]`` installs."""
CPYTHON_MEMORY_MB = 2048
"""A cpython worker's default address-space limit, set from a measured pandas run (``python -m bench``, section Data):
a group-by over 10,000,000 rows peaks at 1.8 GB of address space in a worker, the loaded data stack's 0.5 GB
included, and fits with room; over 1,000,000 rows it peaks at 0.66 GB."""
N8N_MCP_CLIENT = "@n8n/n8n-nodes-langchain.mcpClient"  # the clientInfo name of n8n's standalone MCP Client node


class Settings(BaseSettings):
    """Everything that configures the server. Every field can be set by flag, environment or file."""

    model_config = SettingsConfigDict(extra="forbid", validate_default=True, env_prefix=ENV_PREFIX)

    workspace: Path = Field(
        Path("workspace"),
        description="Root directory of the files toolpack (created if missing). It must not hold any of the server's "
        "own files.",
    )
    toolpacks: list[str] = Field(
        default_factory=lambda: ["files", "skills", "memory"],
        description="Enabled toolpacks: entry-point names (files, shell, ...) or import specs 'module:attribute'.",
    )
    toolpack_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-pack options, the file's [toolpacks.<pack>] tables."
    )
    skills_dirs: list[Path] = Field(default_factory=list, description="Skills library directories.")
    modules: list[str] = Field(
        default_factory=lambda: list(MODULE_NAMES),
        description="Curated modules programs can use by name (an import of one binds the same): "
        + ", ".join(MODULE_NAMES)
        + ". Default: all of them.",
    )
    engine: EngineName = Field(
        "python",
        description="The engine a program runs on when it names none: python (the project's evaluator), asteval "
        "(asteval's own Interpreter), cpython (real CPython behind every containment layer, with the data stack of "
        "cpython_packages), or starlark (extra attp-server[starlark]).",
    )
    engines: list[EngineName] = Field(
        default_factory=list,
        description="The engines a call (its engine argument, or an envelope's tool_call.engine) may pick, besides "
        "engine, which is always offered. Default: engine alone; the tool's input schema lists them.",
    )
    cpython_packages: list[str] = Field(
        default_factory=lambda: [name for name in CPYTHON_PACKAGES if importlib.util.find_spec(name) is not None],
        description="Packages a cpython program can import, loaded before the walls close (default: numpy, pandas "
        "and matplotlib, those installed; pip install 'attp-server[data]' installs them).",
    )
    cpython_memory_mb: int = Field(
        CPYTHON_MEMORY_MB,
        ge=256,
        le=65536,
        description="Address-space limit of one cpython worker (the data stack it has loaded included).",
    )
    cpython_max_state_bytes: int = Field(
        32 * 1024 * 1024,
        ge=0,
        le=48 * 1024 * 1024,
        description="Most bytes a session keeps of its cpython runs (the pickled top-level names they leave, "
        "DataFrames included); the rest is named in hint.",
    )
    timeout_s: float = Field(10.0, gt=0, le=3600, description="Wall-clock limit of one run; the worker is killed.")
    memory_mb: int = Field(256, ge=64, le=65536, description="Address-space limit of one worker process.")
    max_tool_calls: int = Field(200, ge=0, description="Tool calls one run may make.")
    max_code_chars: int = Field(20_000, ge=1, description="Longest program accepted.")
    max_output_bytes: int = Field(65_536, ge=0, description="Captured print output kept per run (then truncated).")
    max_result_bytes: int = Field(1_048_576, ge=1, description="Largest __result__, as JSON bytes.")
    capture_print: bool = Field(True, description="Return print output as stdout (false discards it).")
    allow_imports: bool = Field(
        True,
        description="Accept `import m` / `from m import x` for the available modules (they bind the same "
        "pre-injected namespaces, so they are never needed); false refuses every import statement.",
    )
    result_format: Literal["toml", "json"] = Field(
        "json",
        description="Format of the result's text block (the lean view the model reads): json, or toml. "
        "structuredContent always carries the whole result.",
    )
    json_clients: list[str] = Field(
        default_factory=lambda: [N8N_MCP_CLIENT],
        description="MCP clients, by the clientInfo name they send, whose text rendering is JSON whatever "
        "result_format says. The default names n8n's MCP Client node, which JSON-parses the text into the "
        "workflow's data; [] turns this off.",
    )
    envelope_strict: bool = Field(False, description="Demand a bare ATTP envelope with a thought.")
    transport: Literal["stdio", "http"] = Field("stdio", description="stdio, or http (Streamable HTTP + SSE).")
    host: str = Field("127.0.0.1", description="HTTP bind address.")
    port: int = Field(8765, ge=0, le=65535, description="HTTP port (0 picks a free one).")
    auth_token: SecretStr | None = Field(None, description="Token every HTTP request must carry.")
    auth_tokens: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="Named tokens {name: token}, each accepted like auth_token; under isolation = tenant each name "
        "(lower-case letters, digits, - and _) gets its own folder and memory.",
    )
    allowed_hosts: list[str] = Field(default_factory=list, description="Extra Host values accepted over HTTP.")
    max_connections: int = Field(
        512,
        ge=1,
        le=65536,
        description="Most HTTP connections open at once (lowered to fit ulimit -n); past it a new connection closes "
        "the one waiting longest for its request head, or is closed itself when every connection is serving.",
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="How long an HTTP connection may take to send a request head (from when it opens, or from its "
        "last answer when kept alive) before it is closed.",
    )
    db_path: Path = Field(
        Path(".attp/memory.sqlite3"),
        description="SQLite file of the memory toolpack. Its folder is the data folder (the store, secret.key), "
        "created for the server's user only and never inside the workspace.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Log level (stderr).")
    log_format: Literal["text", "json"] = Field("text", description="Log lines as text, or one JSON object each.")
    insecure_no_auth: bool = Field(
        False, description="Allow serving HTTP on a non-loopback address without auth_token (not recommended)."
    )
    workers: int = Field(2, ge=0, le=64, description="Sandbox worker processes kept ready.")
    containment: Literal["required", "best-effort"] = Field(
        default_factory=lambda: "required" if sys.platform.startswith("linux") else "best-effort",
        description="required (default on Linux): no program runs unless every worker holds Landlock and seccomp; "
        "best-effort: run with a warning where a layer cannot be applied (attp doctor shows what holds).",
    )
    max_workers: int = Field(
        16,
        ge=1,
        le=256,
        description="Most programs running at once; more wait up to queue_timeout_s, then get SERVER_BUSY.",
    )
    max_runs_per_session: int = Field(
        4, ge=1, le=256, description="Most programs one session may run at once (also its share of tool_threads)."
    )
    queue_timeout_s: float = Field(
        10.0, ge=0, le=3600, description="Longest a program waits for its turn to run before SERVER_BUSY."
    )
    tool_threads: int = Field(
        16,
        ge=1,
        le=1024,
        description="Threads for synchronous tool calls, shared by all sessions; a call whose run ended keeps "
        "its thread until it returns.",
    )
    mcp_servers: dict[str, McpServer] = Field(
        default_factory=dict,
        description="Upstream MCP servers, the file's [mcp_servers.NAME] tables: each becomes a toolpack named NAME.",
    )
    mcp_config: list[Path] = Field(
        default_factory=list,
        description='Claude-Desktop-style JSON files ({"mcpServers": {...}}) whose servers become toolpacks too.',
    )
    mcp_startup_timeout_s: float = Field(
        20.0, gt=0, le=600, description="How long startup waits for the upstream MCP servers (all at once)."
    )
    env_passthrough: list[str] = Field(
        default_factory=lambda: list(PROXY_AND_CA_VARIABLES),
        description="Variables of attp-server's environment passed on to upstream stdio servers (names or globs, "
        "e.g. NODE_*), besides HOME, PATH and the like; by default the proxy and CA certificate variables.",
    )
    config_poll_s: float = Field(
        2.0,
        ge=0,
        le=3600,
        description="While serving, how often the config file and mcp_config files are checked for edits to the "
        "upstream servers (added ones start, removed ones stop, changed ones restart); 0: never.",
    )
    _upstream: dict[str, McpServer] = PrivateAttr(default_factory=dict)
    session_state: bool = Field(
        True,
        description="Keep the variables and functions a program leaves for the next call of its MCP session "
        "(reset = true clears them).",
    )
    max_state_bytes: int = Field(
        1_048_576, ge=0, le=64 * 1024 * 1024, description="Most JSON bytes a session keeps; the rest is named in hint."
    )
    session_idle_s: float = Field(
        1800.0,
        gt=0,
        le=7 * 24 * 3600,
        description="A session idle this long ends: its kept state (and, under isolation = session, its folder and "
        "memory) is removed, and its Streamable HTTP session closed.",
    )
    session_max_age_s: float = Field(
        7 * 24 * 3600.0,
        gt=0,
        le=365 * 24 * 3600,
        description="A session handle this old ends even if it is in use (its kept state, approvals and, under "
        "isolation = session, its folder are removed); its next call gets SESSION_NOT_FOUND.",
    )
    max_sessions_per_principal: int = Field(
        1000,
        ge=1,
        le=1_000_000,
        description="Most session handles one principal (token name, or the anonymous principal) keeps; past it "
        "the one used longest ago ends.",
    )
    max_total_state_bytes: int = Field(
        256 * 1024 * 1024,
        ge=0,
        description="Most JSON bytes of kept state the store holds for all sessions together. Each principal that "
        "keeps state has an equal share: past the total, only the principals past their share lose kept variables, "
        "their own sessions used longest ago first (each is told so on its next call).",
    )
    database_url: SecretStr | None = Field(
        None,
        description="Where sessions' state lives: unset for an SQLite file (state.sqlite3) in the data folder (the "
        "folder of db_path), sqlite:///PATH, or postgresql://USER:PASSWORD@HOST:PORT/DB (extra attp-server[postgres]) "
        "shared by replicas.",
    )
    database_timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="How long the server waits for a connection to database_url (at startup, and for a free "
        "pooled connection while serving) before a clear error.",
    )
    session_lease_s: float = Field(
        15.0,
        ge=1,
        le=3600,
        description="How long a running call's hold on its session lasts unless renewed (it is, every third of "
        "this while the call runs): a replica that dies mid-run holds its sessions this long.",
    )
    secret_file: Path | None = Field(
        None,
        description="File holding the server's secret (at least 16 bytes): the key of keyed digests (session "
        "folders) and of sealed approval round trips. Replicas share one; unset, it is generated as secret.key in "
        "the data folder.",
    )
    isolation: Literal["shared", "session", "tenant"] = Field(
        "shared",
        description="Whose files and memory a call sees: shared (everyone's the same), session (each MCP session its "
        "own, removed when it ends), tenant (each token name of auth_tokens its own, kept across its sessions).",
    )
    approval: Literal["never", "destructive", "always"] = Field(
        "never",
        description="Ask the user (MCP elicitation) before a tool call: never, before destructive tools (writes, "
        "shell, memory changes), or before every tool call.",
    )
    approval_fallback: Literal["deny", "allow"] = Field(
        "deny",
        description="What a call that needs approval does when the client cannot ask its user: deny "
        "(APPROVAL_UNAVAILABLE) or allow.",
    )
    approval_timeout_s: float = Field(
        300.0,
        gt=0,
        le=86400,
        description="How long to wait for the user's answer before the call is denied; this wait does not count "
        "against timeout_s.",
    )
    audit_log: Path | None = Field(
        None,
        description="A file that gets one JSON line per call of a tool that is not read-only, per approval decision "
        "and per refused call (who, which tool, a SHA-256 of the arguments, the outcome); off when unset.",
    )
    audit_arguments: bool = Field(
        False,
        description="Also write the arguments' values into audit_log (the server's own secrets are still redacted).",
    )
    rate_limit_per_minute: PositiveInt | dict[str, PositiveInt] | None = Field(
        None,
        description="Tool calls per minute per principal (the token's name, or anonymous): a number for everyone, "
        "or a table {name = n, default = n}; past it a call fails with RATE_LIMITED. Off when unset.",
    )
    # Sign-in through an OAuth 2.1 / OpenID Connect authorization server (docs/identity.md).
    oauth_issuer: str | None = Field(
        None,
        description="The issuer URL of the OAuth 2.1 / OpenID Connect authorization server people sign in with "
        "(turns sign-in on over HTTP; needs public_url).",
    )
    public_url: str | None = Field(
        None, description="This server's URL as clients reach it (https://attp.example.com), without /mcp."
    )
    oauth_audience: str | None = Field(
        None,
        min_length=1,
        description="The audience an access token must name (aud; the RFC 8707 resource clients ask for). Default: "
        "public_url + /mcp.",
    )
    oauth_jwks_url: str | None = Field(
        None, description="Where the issuer's signing keys are (JWKS). Default: jwks_uri of the issuer's metadata."
    )
    oauth_introspection_url: str | None = Field(
        None,
        description="Token introspection endpoint (RFC 7662) for opaque (non-JWT) access tokens; needs "
        "oauth_client_id and oauth_client_secret.",
    )
    oauth_client_id: str | None = Field(
        None, description="This server's client at the issuer: for introspection and token exchange (RFC 8693)."
    )
    oauth_client_secret: SecretStr | None = Field(None, description="The secret of oauth_client_id.")
    oauth_scopes: list[str] = Field(
        default_factory=list,
        description="Scopes clients ask for when they sign in (the metadata's scopes_supported), when the "
        "authorization server wants some (Entra: api://APP/.default; Okta, Auth0: a custom scope).",
    )
    oauth_principal_claim: str = Field(
        "sub", min_length=1, description="The access-token claim that names the principal (sub, email, ...)."
    )
    oauth_groups_claim: str = Field(
        "groups", min_length=1, description="The access-token claim that lists the principal's groups."
    )
    access: dict[str, AccessRule] = Field(
        default_factory=dict,
        description="Who reaches what, the file's [access.NAME] tables (principals, groups, tools globs of "
        "pack.tool, engines, approval, rate_limit_per_minute); when any exists, each principal reaches only the "
        "tools of the rules that match it.",
    )

    @field_validator("auth_tokens")
    @classmethod
    def _token_names(cls, tokens: dict[str, SecretStr], info: ValidationInfo) -> dict[str, SecretStr]:
        for name, token in tokens.items():
            if not TENANT_NAME.fullmatch(name):
                raise ValueError(
                    f"token name {name!r} must be 1-40 lower-case letters, digits, '-' or '_', starting with a letter "
                    "or digit (it names the tenant's folder)"
                )
            if not token.get_secret_value():
                raise ValueError(f"token {name!r} is empty")
        values = [t.get_secret_value() for t in tokens.values()]
        unnamed = info.data.get("auth_token")
        if isinstance(unnamed, SecretStr):
            if DEFAULT_TENANT in tokens:
                raise ValueError(f"{DEFAULT_TENANT!r} is the name auth_token's holder goes by; choose another name")
            values.append(unnamed.get_secret_value())
        if len(set(values)) != len(values):
            raise ValueError("two tokens have the same value; each holder needs a token of their own")
        return tokens

    @field_validator("modules")
    @classmethod
    def _modules_exist(cls, modules: list[str]) -> list[str]:
        unknown = [name for name in modules if name not in MODULE_NAMES]
        if unknown:
            hint = suggest(unknown[0], MODULE_NAMES)
            raise ValueError(
                f"unknown module {unknown[0]!r}"
                + (f" (did you mean {hint!r}?)" if hint else "")
                + f"; the modules are {', '.join(MODULE_NAMES)}"
            )
        return list(dict.fromkeys(modules))  # each once, in the order given

    @field_validator("engine")
    @classmethod
    def _engine_is_installed(cls, engine: str) -> str:
        missing = ENGINES[engine].missing()
        if missing is not None:
            raise ValueError(missing)
        return engine

    @field_validator("engines")
    @classmethod
    def _engines_are_installed(cls, engines: list[EngineName]) -> list[EngineName]:
        for engine in engines:
            missing = ENGINES[engine].missing()
            if missing is not None:
                raise ValueError(missing)
        return list(dict.fromkeys(engines))  # each once, in the order given

    @field_validator("cpython_packages")
    @classmethod
    def _packages_are_installed(cls, packages: list[str]) -> list[str]:
        for name in packages:
            if not all(part.isidentifier() for part in name.split(".")):
                raise ValueError(f"{name!r} is not a module name (e.g. numpy, pandas, sklearn)")
            if importlib.util.find_spec(name.partition(".")[0]) is None:
                raise ValueError(f"package {name!r} is not installed (pip install it beside attp-server)")
        return list(dict.fromkeys(packages))

    @model_validator(mode="after")
    def _walls_hold(self) -> Settings:
        walled = [name for name in self.offered_engines if ENGINES[name].walls]
        if walled and self.containment != "required":
            raise ValueError(
                f"containment: engine {walled[0]!r} runs only where every containment layer holds (real CPython, "
                'or an interpreter that bounds neither memory nor time): it needs containment = "required" (attp '
                "doctor shows what holds on this machine)"
            )
        return self

    @model_validator(mode="after")
    def _read_mcp_config(self) -> Settings:
        try:
            self._upstream = merge_servers(self.mcp_servers, self.mcp_config)
        except ValueError as exc:
            raise ValueError(f"mcp_config: {exc}") from None
        return self

    @model_validator(mode="after")
    def _sign_in_is_complete(self) -> Settings:
        for name in ("oauth_issuer", "public_url", "oauth_jwks_url", "oauth_introspection_url"):
            value = getattr(self, name)
            if value is not None and not value.startswith(("https://", "http://")):
                raise ValueError(f"{name}: must be an http:// or https:// URL")
        if self.oauth_issuer is not None and self.public_url is None:
            raise ValueError("public_url: sign-in (oauth_issuer) needs this server's URL as clients reach it")
        has_client = self.oauth_client_id is not None and self.oauth_client_secret is not None
        if self.oauth_introspection_url is not None and not has_client:
            raise ValueError("oauth_introspection_url: introspection needs oauth_client_id and oauth_client_secret")
        for name, server in self._upstream.items():
            if server.identity == "token_exchange" and (self.oauth_issuer is None or not has_client):
                raise ValueError(
                    f"mcp_servers: {name} has identity = token_exchange, which needs oauth_issuer, oauth_client_id "
                    "and oauth_client_secret (the exchange is made at the issuer as that client)"
                )
            if server.identity == "per_user" and self.public_url is None:
                raise ValueError(
                    f"mcp_servers: {name} has identity = per_user, which needs public_url (people's browsers come "
                    "back to public_url/oauth/callback)"
                )
        return self

    @property
    def resource_url(self) -> str | None:
        """The audience an access token must name: `oauth_audience`, or `public_url` + ``/mcp``."""
        if self.oauth_audience is not None:
            return self.oauth_audience
        return self.public_url.rstrip("/") + "/mcp" if self.public_url is not None else None

    @property
    def offered_engines(self) -> tuple[EngineName, ...]:
        """The engines a call may pick: `engine` (the default) first, then the others `engines` lists."""
        return tuple(dict.fromkeys([self.engine, *self.engines]))

    @property
    def upstream_servers(self) -> dict[str, McpServer]:
        """Every configured upstream MCP server: the [mcp_servers] tables and the mcp_config files' servers."""
        return dict(self._upstream)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # `Settings(...)` takes only the values it is given (tests, embedding); `load_settings` hands
        # pydantic-settings the command line, the environment and the file as built sources.
        return (init_settings,)


class _Environment(EnvSettingsSource):
    """pydantic-settings' environment source (``ATTP_`` prefix, any case, ``__`` nesting, ``null``), with three
    additions: lists may also be comma-separated, ``ATTP_<PACK>__<OPTION>`` sets a toolpack option, and an
    ``ATTP_`` variable that matches nothing is an error (a typo must not pass silently)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(
            Settings, case_sensitive=False, env_prefix=ENV_PREFIX, env_nested_delimiter="__", env_parse_none_str="null"
        )

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(self._environ, False, False, "null")

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        variable = f"{ENV_PREFIX}{field_name.upper()}"
        text = str(value).strip()
        is_list = get_origin(field.annotation) is list
        if is_list and not text.startswith("["):
            return [item.strip() for item in text.split(",") if item.strip()]
        try:
            return json.loads(text)
        except ValueError as exc:
            if not text.startswith(("[", "{")):
                raise ConfigError(f"environment variable {variable} must be a JSON object") from None
            raise ConfigError(f"environment variable {variable} is not valid JSON: {exc}") from None

    def __call__(self) -> dict[str, Any]:
        values = super().__call__()
        pack_options: dict[str, dict[str, Any]] = {}
        for name, raw in self.env_vars.items():
            if not name.startswith(ENV_PREFIX.lower()):
                continue
            head, _, rest = name[len(ENV_PREFIX) :].partition("__")
            field = Settings.model_fields.get(head)
            if field is not None and (not rest or get_origin(field.annotation) is dict):
                continue  # read by pydantic-settings above
            if field is None and rest:
                pack_options.setdefault(head, {})[rest] = raw
                continue
            hint = suggest(name[len(ENV_PREFIX) :], Settings.model_fields)
            raise ConfigError(
                f"unknown environment variable {name.upper()}"
                + (f"; did you mean {ENV_PREFIX}{hint.upper()}?" if hint else "")
            )
        if pack_options:
            values["toolpack_options"] = _deep_merge(pack_options, values.get("toolpack_options", {}))
        return values


class _ConfigFile(TomlConfigSettingsSource):
    """pydantic-settings' TOML source, with the file's own shape: ``[toolpacks] enabled = [...]`` beside
    ``[toolpacks.<pack>]`` option tables, ``[profiles.<name>]`` laid over the top level, and errors naming the file."""

    def __init__(self, path: Path, profile: str | None) -> None:
        if not path.exists():
            raise ConfigError(f"config file {path} does not exist")
        if path.is_dir():
            raise ConfigError(f"config file {path} is a directory, not a TOML file")
        self._path, self._profile = path, profile
        super().__init__(Settings, toml_file=path)

    def _read_file(self, file_path: Path | Traversable) -> dict[str, Any]:
        try:
            data = super()._read_file(file_path)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {self._path} is not valid TOML: {exc}") from None
        except RecursionError:
            raise ConfigError(f"config file {self._path} nests arrays or inline tables too deeply to read") from None
        except OSError as exc:
            raise ConfigError(f"config file {self._path} cannot be read: {exc}") from None
        return _apply_profile(self._path, _read_toolpacks_table(self._path, data), self._profile)


def _deep_merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_toolpacks_table(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """``[toolpacks] enabled = [...]`` plus ``[toolpacks.<pack>]`` option tables -> toolpacks, toolpack_options."""
    packs = data.get("toolpacks")
    if isinstance(packs, dict):
        for key, value in packs.items():
            if key != "enabled" and not isinstance(value, dict):
                hint = suggest(key, ["enabled"])
                raise ConfigError(
                    f"config file {path}: unknown key {key!r} in [toolpacks]; it holds 'enabled = [...]' and "
                    "[toolpacks.<pack>] tables" + (f" (did you mean {hint!r}?)" if hint else "")
                )
        tables = {k: v for k, v in packs.items() if isinstance(v, dict)}
        data["toolpack_options"] = _deep_merge(tables, data.get("toolpack_options", {}))
        if "enabled" in packs:
            data["toolpacks"] = packs["enabled"]
        else:
            data.pop("toolpacks")
    return data


def _apply_profile(path: Path, values: dict[str, Any], profile: str | None) -> dict[str, Any]:
    """Lay a ``[profiles.<name>]`` table over the file's top-level values (per-agent tool sets)."""
    profiles = values.pop("profiles", {})
    if not isinstance(profiles, dict):
        raise ConfigError(f"config file {path}: profiles must be tables, [profiles.<name>]")
    if profile is None:
        return values
    if profile not in profiles or not isinstance(profiles[profile], dict):
        known = ", ".join(sorted(profiles)) or "none"
        hint = suggest(profile, profiles)
        raise ConfigError(
            f"config file {path} has no [profiles.{profile}]; profiles: {known}"
            + (f" (did you mean {hint!r}?)" if hint else "")
        )
    chosen = dict(profiles[profile])
    if isinstance(chosen.get("toolpacks"), dict):
        chosen = _read_toolpacks_table(path, chosen)
    return _deep_merge(values, chosen)


def load_settings(
    cli: Mapping[str, Any] | None = None,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    profile: str | None = None,
) -> Settings:
    """Build `Settings` from pydantic-settings' sources, highest first: flags, environment, (profile over) config
    file, defaults. A bad value raises `ConfigError` naming the field and the source its value came from."""
    path = config_file if config_file is not None else (DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.exists() else None)
    if path is None and profile is not None:
        raise ConfigError(
            f"profile {profile!r} needs a config file (--config or ./attp.toml) with [profiles.{profile}]"
        )
    sources: dict[str, PydanticBaseSettingsSource] = {
        "command line": InitSettingsSource(Settings, {k: v for k, v in (cli or {}).items() if v is not None}),
        "environment": _Environment(os.environ if environ is None else environ),
    }
    if path is not None:
        sources[f"config file {path}"] = _ConfigFile(path, profile)
    try:
        return Settings(_build_sources=(tuple(sources.values()), {}))
    except ValidationError as exc:
        raise ConfigError("invalid settings: " + "; ".join(_problems(exc, sources))) from None


def _problems(exc: ValidationError, sources: Mapping[str, PydanticBaseSettingsSource]) -> list[str]:
    """Each validation error as 'field: what is wrong (got value from source)'; the source is the highest one
    that set the field, and values of secret-bearing fields are never repeated."""
    given = [(name, source()) for name, source in sources.items()]
    problems = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else "?"
        if not error["loc"]:  # a check across fields names its field first: "mcp_config: ..."
            named, _, rest = str(error["msg"]).removeprefix("Value error, ").partition(": ")
            if named in Settings.model_fields:
                field, error["msg"] = named, rest
        source, received = next(
            ((name, values[field]) for name, values in given if field in values), ("defaults", None)
        )
        if source == "environment":
            source = f"environment variable {ENV_PREFIX}{field.upper()}"
        if error["type"] == "extra_forbidden":
            problems.append(_unknown_key(tuple(str(part) for part in error["loc"]), source))
            continue
        message = _PLAIN_MESSAGES.get(error["type"]) or str(error["msg"]).removeprefix("Value error, ")
        if len(error["loc"]) > 1 and isinstance(error["loc"][-1], int):
            message = f"item {error['loc'][-1] + 1}: {message}"
        if field in _SECRET_BEARING:  # never echo a value that may hold a token; name where it is instead
            where = ".".join(str(part) for part in error["loc"])
            problems.append(f"{where}: {message} (from {source})")
        elif source == "defaults":
            problems.append(f"{field}: {message} (got <default>)")
        elif not error["loc"]:  # a check across fields: its message names the culprit (mcp_config's file) already
            problems.append(f"{field}: {message} (from {source})")
        else:
            problems.append(f"{field}: {message} (got {_plain(received)} from {source})")
    return problems


_PLAIN_MESSAGES = {"path_type": "expected a path, as text"}
"""Pydantic's messages that name a Python class (``Input is not a valid path for <class 'pathlib.Path'>``), as a
person who writes a config file reads them."""


def _plain(value: Any) -> str:
    """A value as a person wrote it: a path as its text, a list as its items, never a Python repr of either."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_plain(item) for item in value) + "]"
    return repr(value)


def _unknown_key(path: tuple[str, ...], source: str) -> str:
    """'unknown setting ...' naming the whole key path (``mcp_servers.github.exclude_tool``) and the closest key
    known at that place (``exclude_tools``, a field of the table the key is in)."""
    known = _keys_at(Settings, path[:-1])
    hint = suggest(path[-1], known) if known else None
    meant = ".".join([*path[:-1], hint]) if hint else None
    return f"unknown setting {'.'.join(path)!r} in {source}" + (f"; did you mean {meant!r}?" if meant else "")


def _keys_at(model: Any, path: tuple[str, ...]) -> list[str]:
    """The keys a table at `path` below `model` may have: the fields of the model found there (a ``dict[str, M]``
    field takes a name, then M's fields), or none when the place holds free keys."""
    place: Any = model
    for part in path:
        fields = getattr(place, "model_fields", None)
        if fields is not None and part in fields:
            place = fields[part].annotation
        elif get_origin(place) is dict:
            place = get_args(place)[1]
        else:
            return []
    if get_origin(place) is dict:
        return []
    return list(getattr(place, "model_fields", {}))


LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 in brackets or not) is this machine's loopback only."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
