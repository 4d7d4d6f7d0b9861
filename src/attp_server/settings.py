"""The one `Settings` class, and `load_settings`, which merges its sources and names the culprit of a bad value.

Sources, highest first: command-line flags, ``ATTP_*`` environment variables (nested with ``__``),
the TOML file given by ``--config`` (or ``./attp.toml`` if present), defaults. Settings are built
once, in `attp_server.faces.cli.main`, and passed down; tests build ``Settings(...)`` directly.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, SecretStr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from attp_server.errors import ConfigError, suggest
from attp_server.mcp_config import McpServer, merge_servers
from attp_server.sandbox.starlark import engine as starlark_engine
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
_SECRET_BEARING = frozenset({"mcp_servers", "auth_token"})
"""Settings whose values are never repeated in an error message (env and headers of upstream servers, tokens)."""
N8N_MCP_CLIENT = "@n8n/n8n-nodes-langchain.mcpClient"  # the clientInfo name of n8n's standalone MCP Client node


class Settings(BaseSettings):
    """Everything that configures the server. Every field can be set by flag, environment or file."""

    model_config = SettingsConfigDict(extra="forbid", validate_default=True, env_prefix=ENV_PREFIX)

    workspace: Path = Field(Path("workspace"), description="Root directory of the files toolpack (created if missing).")
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
    engine: Literal["python", "starlark"] = Field(
        "python", description="Language of programs: python (sandboxed), or starlark (extra attp-server[starlark])."
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
    db_path: Path = Field(Path(".attp/memory.sqlite3"), description="SQLite file of the memory toolpack.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Log level (stderr).")
    log_format: Literal["text", "json"] = Field("text", description="Log lines as text, or one JSON object each.")
    insecure_no_auth: bool = Field(
        False, description="Allow serving HTTP on a non-loopback address without auth_token (not recommended)."
    )
    workers: int = Field(2, ge=0, le=64, description="Sandbox worker processes kept ready.")
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
        if engine == "starlark" and not starlark_engine.available():
            raise ValueError(starlark_engine.missing_extra_message())
        return engine

    @model_validator(mode="after")
    def _read_mcp_config(self) -> Settings:
        try:
            self._upstream = merge_servers(self.mcp_servers, self.mcp_config)
        except ValueError as exc:
            raise ValueError(f"mcp_config: {exc}") from None
        return self

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
        # Only explicit values: `load_settings` merges the sources itself so it can name them in errors.
        return (init_settings,)


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"config file {path} nests arrays or inline tables too deeply to read") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc}") from None
    return _read_toolpacks_table(path, data)


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


def _read_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """``ATTP_*`` variables as setting values. Lists may be JSON or comma-separated; ``ATTP_<PACK>__<OPTION>``
    sets a toolpack option; an ``ATTP_`` variable that matches nothing is an error (a typo must not pass)."""
    values: dict[str, Any] = {}
    pack_options: dict[str, dict[str, Any]] = {}
    for raw_name, raw in environ.items():
        if not raw_name.upper().startswith(ENV_PREFIX):
            continue
        name = raw_name[len(ENV_PREFIX) :].lower()
        head, _, rest = name.partition("__")
        if head in Settings.model_fields and not rest:
            values[head] = _env_value(head, raw)
        elif head == "toolpack_options" and rest:
            pack, _, option = rest.partition("__")
            pack_options.setdefault(pack, {})[option] = raw
        elif rest and head not in Settings.model_fields:
            pack_options.setdefault(head, {})[rest] = raw
        else:
            hint = suggest(name, Settings.model_fields)
            raise ConfigError(
                f"unknown environment variable {raw_name}"
                + (f"; did you mean {ENV_PREFIX}{hint.upper()}?" if hint else "")
            )
    if pack_options:
        values["toolpack_options"] = pack_options
    return values


def _env_value(field: str, raw: str) -> Any:
    annotation = str(Settings.model_fields[field].annotation)
    if annotation.startswith(("list[", "dict[")):
        text = raw.strip()
        if text.startswith(("[", "{")):
            try:
                return json.loads(text)
            except ValueError as exc:
                raise ConfigError(
                    f"environment variable {ENV_PREFIX}{field.upper()} is not valid JSON: {exc}"
                ) from None
        if annotation.startswith("list["):
            return [item.strip() for item in text.split(",") if item.strip()]
        raise ConfigError(f"environment variable {ENV_PREFIX}{field.upper()} must be a JSON object")
    return None if raw == "null" else raw


def _deep_merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _apply_profile(path: Path | None, values: dict[str, Any], profile: str | None) -> dict[str, Any]:
    """Lay a ``[profiles.<name>]`` table over the file's top-level values (seed 004's per-agent tool sets)."""
    profiles = values.pop("profiles", {})
    if not isinstance(profiles, dict):
        raise ConfigError(f"config file {path}: profiles must be tables, [profiles.<name>]")
    if profile is None:
        return values
    if path is None:
        raise ConfigError(
            f"profile {profile!r} needs a config file (--config or ./attp.toml) with [profiles.{profile}]"
        )
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
    """Merge flags > environment > profile > config file > defaults; a bad value raises `ConfigError`
    naming the field and its source."""
    cli = {k: v for k, v in (cli or {}).items() if v is not None}
    environ = os.environ if environ is None else environ
    path = config_file if config_file is not None else (DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.exists() else None)
    layers: list[tuple[str, dict[str, Any]]] = []
    if path is not None or profile is not None:
        file_values = _read_config_file(path) if path is not None else {}
        layers.append((f"config file {path}", _apply_profile(path, file_values, profile)))
    layers.append(("environment", _read_environment(environ)))
    layers.append(("command line", dict(cli)))

    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for source, values in layers:
        for key, value in values.items():
            if key not in Settings.model_fields:
                hint = suggest(key, Settings.model_fields)
                where = f"{ENV_PREFIX}{key.upper()}" if source == "environment" else key
                raise ConfigError(
                    f"unknown setting {where!r} in {source}" + (f"; did you mean {hint!r}?" if hint else "")
                )
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = _deep_merge(merged[key], value)
            else:
                merged[key] = value
            origin[key] = source
    try:
        return Settings(**merged)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else "?"
            if not error["loc"]:  # a check across fields names its field first: "mcp_config: ..."
                named, _, rest = str(error["msg"]).removeprefix("Value error, ").partition(": ")
                if named in Settings.model_fields:
                    field, error["msg"] = named, rest
            source = origin.get(field, "defaults")
            if source == "environment":
                source = f"environment variable {ENV_PREFIX}{field.upper()}"
            if field in _SECRET_BEARING:  # never echo a value that may hold a token; name where it is instead
                where = ".".join(str(part) for part in error["loc"])
                problems.append(f"{where}: {error['msg']} (from {source})")
                continue
            received = merged.get(field, "<default>")
            problems.append(f"{field}: {error['msg']} (got {received!r} from {source})")
        raise ConfigError("invalid settings: " + "; ".join(problems)) from None
