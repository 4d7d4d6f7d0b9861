"""The ``attp`` command: serve, exec, check, tools. Thin faces over the runtime.

``main(argv) -> int`` does all the work (tests call it directly); ``cli()`` only exits with it.
Exit codes: 0 ok, 1 the program failed (status error or fail), 2 bad usage or configuration.

The verbs that need the MCP SDK (serve, login, manifest, doctor, config) import it, and the faces built on it,
when they run: importing it is most of a second of start-up that exec, check and tools would pay for nothing.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from attp_server import __version__
from attp_server.errors import AttpError, ErrorCode, ErrorInfo
from attp_server.faces.logs import configure_logging
from attp_server.model.atdf import atdf_descriptor
from attp_server.model.catalog import LANGUAGES, Catalog, tool_text
from attp_server.model.results import ExecutionResult, render
from attp_server.run.checks import check_code
from attp_server.run.envelope import Declined, EnvelopeError, looks_like_envelope, parse_envelope
from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import build_registry, open_registry, open_runtime
from attp_server.run.tam import TamError, looks_like_tam, translate_tam
from attp_server.sandbox.engines import ENGINE_NAMES, ENGINES, EngineName
from attp_server.settings import DEFAULT_CONFIG_FILE, Settings, load_settings
from attp_server.toolpack import ToolRegistry

logger = logging.getLogger("attp_server")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
PARSE_ERRORS = (ErrorCode.SYNTAX_ERROR, ErrorCode.INVALID_ENVELOPE)
EXIT_BROKEN_PIPE = 128 + 13
"""What a shell reports for a process ended by SIGPIPE; `attp tools | head -1` ends with it, silently."""


def _settings_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("settings (override ATTP_* variables and the config file)")
    group.add_argument("--config", type=Path, help="TOML config file (default: ./attp.toml if present)")
    group.add_argument("--profile", help="use the config file's [profiles.NAME] (toolpacks, workspace, ...)")
    group.add_argument("--workspace", type=Path, help="root directory of the files toolpack")
    group.add_argument(
        "--toolpack",
        dest="toolpacks",
        action="append",
        metavar="PACK",
        help="enable only this toolpack (repeatable); +PACK adds it to the default packs instead",
    )
    group.add_argument(
        "--skills-dir",
        dest="skills_dirs",
        action="append",
        type=Path,
        metavar="DIR",
        help="skills library (repeatable)",
    )
    group.add_argument("--db-path", dest="db_path", type=Path, help="SQLite file of the memory toolpack")
    group.add_argument(
        "--database-url",
        dest="database_url",
        metavar="URL",
        help="where sessions' state lives: postgresql://... for replicas (default: state.sqlite3 in the data folder); "
        "a password here shows in ps: give it in ATTP_DATABASE_URL, the config file or ~/.pgpass instead",
    )
    group.add_argument(
        "--secret-file",
        dest="secret_file",
        type=Path,
        metavar="FILE",
        help="the server's secret, shared by replicas (default: generated as secret.key in the data folder)",
    )
    group.add_argument(
        "--mcp-config",
        dest="mcp_config",
        action="append",
        type=Path,
        metavar="FILE",
        help='MCP servers to put behind attp: a Claude-Desktop-style JSON {"mcpServers": ...} (repeatable)',
    )
    group.add_argument(
        "--engine", choices=ENGINE_NAMES, help="the engine programs run on when they name none (default python)"
    )
    group.add_argument(
        "--engines",
        action="append",
        choices=ENGINE_NAMES,
        metavar="ENGINE",
        help="an engine a call may pick besides --engine (repeatable; one of %(choices)s)",
    )
    group.add_argument("--timeout-s", dest="timeout_s", type=float, help="wall-clock limit per run")
    group.add_argument("--memory-mb", dest="memory_mb", type=int, help="memory limit per worker")
    group.add_argument("--max-tool-calls", dest="max_tool_calls", type=int, help="tool calls per run")
    group.add_argument("--result-format", dest="result_format", choices=["toml", "json"])
    group.add_argument("--workers", type=int, help="sandbox workers kept ready")
    group.add_argument(
        "--isolation", choices=["shared", "session", "tenant"], help="whose files and memory a call sees"
    )
    group.add_argument(
        "--approval", choices=["never", "destructive", "always"], help="ask the user before tool calls (elicitation)"
    )
    group.add_argument("--log-level", dest="log_level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    group.add_argument("--log-format", dest="log_format", choices=["text", "json"], help="log lines on stderr")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attp", description="attp-server: one MCP tool that runs Python programs.")
    parser.add_argument("--version", action="version", version=f"attp-server {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the MCP server (stdio by default)")
    serve.add_argument("--transport", choices=["stdio", "http"])
    serve.add_argument("--host", help="HTTP bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="HTTP port (default 8765)")
    serve.add_argument(
        "--insecure-no-auth",
        dest="insecure_no_auth",
        action="store_const",
        const=True,
        help="allow a non-loopback --host without ATTP_AUTH_TOKEN (only behind an authenticating proxy)",
    )
    _settings_flags(serve)

    run = commands.add_parser("exec", help="run one program or envelope and print the result")
    _input_arguments(run)
    run.add_argument(
        "--json",
        action="store_true",
        help="print the whole result object (every tool call, timings) as JSON, not the text the model reads",
    )
    _settings_flags(run)

    check = commands.add_parser("check", help="check a program or envelope statically; runs nothing")
    _input_arguments(check)
    _settings_flags(check)

    tools = commands.add_parser("tools", help="print the catalog of enabled tools")
    tools.add_argument("--format", choices=["attp", "atdf", "json"], default="attp")
    tools.add_argument(
        "--as-model",
        dest="as_model",
        action="store_true",
        help="print what the model reads: attp_execute's description (rules, signatures, servers that are down)",
    )
    _settings_flags(tools)

    prompt = commands.add_parser("prompt", help="print the ATTP system prompt with the enabled tools")
    prompt.add_argument("--language", choices=["en", "zh"], default="en")
    _settings_flags(prompt)

    config = commands.add_parser("config", help="print a ready-to-paste client configuration (claude, n8n)")
    config.add_argument("client", choices=["claude", "n8n"])
    config.add_argument("--name", default="attp", help="server name in claude_desktop_config.json")
    config.add_argument("--docker", action="store_true", help="n8n runs in Docker, this server on the host")
    config.add_argument("--host", help="HTTP bind address the server will use (n8n)")
    config.add_argument("--port", type=int, help="HTTP port the server will use (n8n)")
    _settings_flags(config)

    login = commands.add_parser(
        "login", help="connect an upstream MCP server that needs OAuth (prints the URL to open, keeps the tokens)"
    )
    login.add_argument("name", help="the server's name in [mcp_servers] or the --mcp-config file")
    login.add_argument(
        "--callback-port", type=int, default=0, help="loopback port for the browser's redirect (default: any free)"
    )
    login.add_argument("--wait-s", type=float, default=300.0, help="how long to wait for the browser (default 300)")
    _settings_flags(login)

    logout = commands.add_parser(
        "logout", help="remove the OAuth tokens kept for an upstream MCP server (everyone's, or one principal's)"
    )
    logout.add_argument("name", help="the server's name in [mcp_servers] or the --mcp-config file")
    logout.add_argument("--principal", help="only this principal's own tokens (identity = per_user)")
    _settings_flags(logout)

    bundle = commands.add_parser(
        "bundle", help="write an MCP Bundle (.mcpb) that Claude Desktop installs with one click"
    )
    bundle.add_argument(
        "--output", type=Path, default=Path("attp-server.mcpb"), help="the file (default attp-server.mcpb)"
    )
    doctor = commands.add_parser(
        "doctor", help="probe what the sandbox worker's containment holds on this machine (exit 1 if a probe escapes)"
    )
    doctor.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    doctor.add_argument(
        "--probe",
        type=Path,
        metavar="FILE.py",
        help="run your own probe file as plain CPython in a locked-down worker: its stdout is passed through, "
        "how the worker ended goes to stderr",
    )
    _settings_flags(doctor)

    manifest = commands.add_parser("manifest", help="write mcp_manifest.json (or --check that it is current)")
    manifest.add_argument("--path", type=Path, default=Path("mcp_manifest.json"))
    manifest.add_argument("--check", action="store_true", help="exit 1 if the file differs from what would be written")
    manifest.add_argument("--toolpack", dest="toolpacks", action="append", metavar="PACK", help=argparse.SUPPRESS)
    return parser


def _input_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        help="a program (.py; .star for Starlark), an envelope or TAM blocks (.toml), or - for standard input; "
        "other files are read as an envelope when they have a [tool_call] table or TAM blocks, else as code",
    )
    parser.add_argument("--code", help="a program (in the engine's language) given inline")
    parser.add_argument(
        "--as",
        dest="read_as",
        choices=["code", "envelope"],
        help="read FILE as code or as an envelope (TAM included), whatever its name or content",
    )


def _cli_values(args: argparse.Namespace) -> dict[str, Any]:
    keys = (
        "workspace", "toolpacks", "skills_dirs", "db_path", "engine", "engines", "timeout_s", "memory_mb",
        "max_tool_calls", "result_format", "workers", "log_level", "log_format", "transport", "host", "port",
        "insecure_no_auth", "mcp_config",
        "isolation", "approval", "database_url", "secret_file",
    )  # fmt: skip
    return {key: getattr(args, key) for key in keys if getattr(args, key, None) is not None}


def _flag_values(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the flags give. ``--toolpack +PACK`` adds PACK to the packs the configuration enables
    (the defaults, or the config file's); ``--toolpack PACK`` replaces them."""
    values = _cli_values(args)
    packs: list[str] = values.get("toolpacks") or []
    added = [pack[1:] for pack in packs if pack.startswith("+")]
    if not added:
        return values
    if len(added) != len(packs):
        raise AttpError(
            "give either --toolpack PACK (enables only the packs named) or --toolpack +PACK (adds to the packs "
            f"enabled by default or by the config file), not both (got {' '.join(packs)})"
        )
    base = load_settings({k: v for k, v in values.items() if k != "toolpacks"}, args.config, profile=args.profile)
    values["toolpacks"] = [*base.toolpacks, *(pack for pack in added if pack not in base.toolpacks)]
    return values


def _read_input(path: str | None) -> str:
    if path is None or path == "-":
        return sys.stdin.read()
    return Path(path).read_text(encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)

    try:
        if args.command == "manifest":
            return _manifest(args)
        if args.command == "bundle":
            return _bundle(args)
        values = _flag_values(args)
        settings = load_settings(values, args.config, profile=args.profile)
    except AttpError as exc:
        print(f"attp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    quiet = args.command != "serve" and "log_level" not in settings.model_fields_set
    configure_logging("WARNING" if quiet else settings.log_level, settings.log_format)  # exec: the result, no INFO
    try:
        if args.command == "serve":
            reload = functools.partial(load_settings, values, args.config, profile=args.profile)
            return _serve(settings, reload, _config_file(args))
        if args.command == "exec":
            return _exec(settings, args, _config_file(args))
        if args.command == "check":
            return _check(settings, args)
        if args.command == "config":
            return _config(settings, args)
        if args.command == "login":
            return _login(settings, args)
        if args.command == "logout":
            return _logout(settings, args)
        if args.command == "doctor":
            from attp_server.faces import doctor

            return doctor.run(settings, as_json=args.json, probe_file=args.probe)
        if args.command == "prompt":
            print(Catalog(_registry(settings), settings).prompt(args.language))
            return EXIT_OK
        return _tools(settings, args)
    except AttpError as exc:
        print(f"attp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return _reader_gone()
    except OSError as exc:
        print(f"attp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


def _config_file(args: argparse.Namespace) -> Path | None:
    """The TOML file the settings were read from: --config, else ./attp.toml if there is one."""
    if args.config is not None:
        return Path(args.config)
    return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.exists() else None


def _serve(settings: Settings, reload: Callable[[], Settings], config: Path | None) -> int:
    """Serve until stopped; edits of the config file and the mcp_config files apply while serving (`reload`)."""
    from attp_server.faces.app import create_server, serve_stdio
    from attp_server.faces.http import check_exposure, serve_http

    if settings.transport == "http":
        check_exposure(settings)

    async def run() -> None:
        async with open_runtime(settings, reload=reload, config_file=config) as runtime:
            server = create_server(runtime)
            _log_containment(runtime)
            if settings.transport == "http":
                await serve_http(server, runtime)
            else:
                await serve_stdio(server, runtime)

    try:
        anyio.run(run)
    except BaseExceptionGroup as group:  # a startup error raised inside the runtime's task groups
        error = _single_attp_error(group)
        if error is None:
            raise
        raise error from None
    # Stopped: the runtime has closed its workers, sessions and store. What is left (the SDK's models, the
    # catalog) lives until the process ends, so the collector need not walk it again at exit: that walk was
    # most of the second a stopped server took to exit.
    gc.freeze()
    return EXIT_OK


def _log_containment(runtime: Runtime) -> None:
    """Once at start-up: what the workers' walls are, and whether programs will run."""
    pool = runtime.pool
    report = pool.containment_report()
    logger.info("sandbox lockdown: %s", pool.lockdown)
    if not pool.lockdown:
        logger.info("sandbox containment: no worker started yet (workers = 0); the first run reports it")
    elif report["holds"]:
        logger.info("sandbox containment holds: %s", "; ".join(f"{k}: {v}" for k, v in report["layers"].items()))
    elif pool.refused is not None:
        logger.error("sandbox containment: %s", pool.refused)


def _single_attp_error(group: BaseExceptionGroup[BaseException]) -> AttpError | None:
    """The one `AttpError` a group of nested task-group errors holds, if that is all it holds."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, AttpError) else None


CODE_SUFFIXES: dict[str, EngineName] = {}
for _engine in ENGINES.values():  # .py: the first engine written in Python, python
    CODE_SUFFIXES.setdefault(_engine.language.suffix, _engine.name)
ENVELOPE_SUFFIXES = (".toml",)


@dataclass(frozen=True)
class Input:
    """What `exec` and `check` were given, and how it was read (said when parsing fails)."""

    request: ExecuteRequest
    reading: str | None = None
    """``"Python code (the .py extension)"``; None for --code and --as, which leave no doubt."""


def _input(args: argparse.Namespace, settings: Settings) -> Input:
    if args.code is not None:
        if args.file not in (None, "-") or args.read_as is not None:
            raise AttpError("give either FILE or --code, not both (--as applies to FILE)")
        return Input(ExecuteRequest(code=args.code))
    text = _read_input(args.file)
    suffix = "" if args.file in (None, "-") else Path(args.file).suffix.lower()
    engine = CODE_SUFFIXES.get(suffix)
    if engine is not None and ENGINES[settings.engine].language.suffix == suffix:
        engine = settings.engine  # a .py file on a server whose default engine runs Python (cpython, asteval)
    if args.read_as is not None:
        as_code, why = args.read_as == "code", f"--as {args.read_as}"
    elif engine is not None:
        as_code, why = True, f"the {suffix} extension"
    elif suffix in ENVELOPE_SUFFIXES:
        as_code, why = False, f"the {suffix} extension"
    elif looks_like_tam(text):
        as_code, why = False, "it has TAM blocks"
    elif looks_like_envelope(text):
        as_code, why = False, "it has a [tool_call] table"
    else:
        as_code, why = True, "it has no [tool_call] table"
    language = LANGUAGES[engine or settings.engine]
    reading = None if args.read_as is not None else f"{language} code ({why})" if as_code else f"an envelope ({why})"
    if not as_code:
        return Input(ExecuteRequest(envelope=text), reading)
    return Input(ExecuteRequest(code=text, engine=engine), reading)


def _say_how_it_was_read(source: str, given: Input, error: ErrorInfo | None) -> None:
    """When the input did not parse, say on stderr how it was read and how to choose otherwise."""
    if given.reading is None or error is None or error.code not in PARSE_ERRORS:
        return
    name = "standard input" if source in (None, "-") else source
    print(
        f"attp: read {name} as {given.reading}; to choose, name the file .py, .star or .toml, or give "
        "--as code / --as envelope",
        file=sys.stderr,
    )


def _exec(settings: Settings, args: argparse.Namespace, config: Path | None) -> int:

    given = _input(args, settings)
    update: dict[str, Any] = {"workers": 0}
    if given.request.engine is not None and given.request.engine in ENGINES:  # the file's own language (.star)
        update["engines"] = [*settings.engines, given.request.engine]
    settings = settings.model_copy(update=update)

    async def run() -> Any:
        async with open_runtime(settings, config_file=config) as runtime:
            return await runtime.execute(given.request)

    result = anyio.run(run)
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=2))
    else:
        print(render(result, settings.result_format))
    _say_how_it_was_read(args.file, given, result.error)
    return EXIT_OK if result.status == "ok" else EXIT_FAILED


def _check(settings: Settings, args: argparse.Namespace) -> int:

    given = _input(args, settings)
    request = given.request
    registry = _registry(settings)
    known = registry.known_names(settings.modules)
    problem: ErrorInfo | None = None
    hint = "the program passed the static checks (nothing was run)"
    code = request.code
    engine = request.engine
    if request.envelope is not None and looks_like_tam(request.envelope):
        try:
            tam = translate_tam(request.envelope, registry, max_steps=settings.max_tool_calls)
        except TamError as exc:
            problem = exc.info
        else:
            steps = ", ".join(f"{s.step}. {s.tool} (line {s.line})" for s in tam.steps)
            hint = f"the TAM blocks passed the checks (nothing was run); steps: {steps}"
    elif request.envelope is not None:
        try:
            parsed = parse_envelope(request.envelope, strict=settings.envelope_strict)
        except EnvelopeError as exc:
            problem = exc.info
        else:
            if isinstance(parsed, Declined):
                hint = f'the envelope declines the task (status = "fail"): {parsed.message}'
            else:
                code, engine = parsed.code, parsed.engine or engine
    if problem is None and code is not None:
        problem = check_code(code, engine or settings.engine, known)
    result = ExecutionResult(status="error" if problem else "ok", error=problem, hint=None if problem else hint)
    print(render(result, settings.result_format))
    _say_how_it_was_read(args.file, given, problem)
    return EXIT_FAILED if problem else EXIT_OK


def _registry(settings: Settings) -> ToolRegistry:
    """The enabled tools, upstream MCP servers included: they are connected to list theirs, then closed."""
    if not settings.upstream_servers:
        return build_registry(settings)

    async def connect() -> ToolRegistry:
        async with open_registry(settings) as registry:
            return registry

    return anyio.run(connect)


def _tools(settings: Settings, args: argparse.Namespace) -> int:
    """Print the catalog; with upstream servers, say on stderr how each one went, and exit 1 if one failed."""
    registry = _registry(settings)
    failed = _report_upstreams(registry)
    if args.as_model:
        print(Catalog(registry, settings).description)
    elif args.format == "atdf":
        print(json.dumps([atdf_descriptor(t) for t in registry.tools.values()], indent=2, ensure_ascii=False))
    elif args.format == "json":
        data = [
            {"name": t.ref, "pack": t.pack, "signature": t.signature_text(), "doc": t.doc}
            for t in registry.tools.values()
        ]
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print("\n\n".join(tool_text(t) for t in registry.tools.values()))
    return EXIT_FAILED if failed else EXIT_OK


def _report_upstreams(registry: ToolRegistry) -> bool:
    """One line per upstream server on stderr: its toolpack (the name programs use) and its tools, or why it
    failed. True if one failed."""
    failed = False
    for pack in registry.packs.values():
        if pack.live is None:
            continue
        health = pack.live.health()
        name = str(health.get("name", pack.name))
        where = f"mcp server {name!r}" + (f" (toolpack {pack.name})" if pack.name != name else "")
        if pack.live.problem is not None:
            failed = True
            print(f"attp: {where} FAILED: {pack.live.problem}", file=sys.stderr)
            said = [str(line) for line in health.get("stderr", [])]
            if said:  # what the reason points to (attp serve logs it; at this command's log level it is not shown)
                print(f"attp:   its stderr (last {len(said)} lines):", file=sys.stderr)
                print("\n".join(f"attp:   | {line}" for line in said), file=sys.stderr)
            continue
        hidden = int(health.get("hidden", 0))
        count = sum(1 for tool in registry.tools.values() if tool.pack == pack.name)
        extra = f", {hidden} hidden by its filters" if hidden else ""
        print(f"attp: {where}: {count} tools as {pack.name}.NAME{extra}", file=sys.stderr)
    return failed


def _config(settings: Settings, args: argparse.Namespace) -> int:
    from attp_server.faces.client_config import (
        CLAUDE_CONFIG_LOCATIONS,
        NotCarried,
        claude_config,
        n8n_config,
        outside_the_workspace,
    )

    flags = _flag_values(args)
    settings, moved = outside_the_workspace(settings, _config_file(args))
    if moved is not None:
        print(moved, file=sys.stderr)
        flags = {**flags, "db_path": settings.db_path}
    if args.client == "n8n":
        print(n8n_config(settings, docker=args.docker, flags=flags))
        return EXIT_OK
    try:
        entry = claude_config(settings, name=args.name, profile=args.profile, config=args.config, flags=flags)
    except NotCarried as exc:
        print(f"attp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(entry, indent=2))
    print("Merge into claude_desktop_config.json (" + "; ".join(CLAUDE_CONFIG_LOCATIONS) + ").", file=sys.stderr)
    return EXIT_OK


def _manifest(args: argparse.Namespace) -> int:
    """Built from defaults and the code only, never from this machine's ATTP_* variables or config file."""
    from attp_server.faces.manifest import build_manifest, differences
    from attp_server.faces.manifest import render as render_manifest

    settings = Settings(toolpacks=args.toolpacks) if args.toolpacks else Settings()
    manifest = anyio.run(build_manifest, settings, build_registry(settings))
    if args.check:
        changed = differences(args.path, manifest)
        if changed:
            print(f"attp: {args.path} is out of date ({', '.join(changed)}); run: attp manifest", file=sys.stderr)
            return EXIT_FAILED
        print(f"{args.path} is up to date")
        return EXIT_OK
    args.path.write_text(render_manifest(manifest), encoding="utf-8")
    print(f"wrote {args.path}")
    return EXIT_OK


def _login(settings: Settings, args: argparse.Namespace) -> int:
    """``attp login NAME``: the OAuth authorization code flow with PKCE for one remote server; the tokens go to
    the server's store (sealed), never to stdout or the log."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from attp_server.toolpacks.mcp.oauth import Vault
    from attp_server.toolpacks.mcp.oauth import login as oauth_login

    servers = settings.upstream_servers
    config = servers.get(args.name)
    if config is None:
        known = ", ".join(sorted(servers)) or "none (give --config or --mcp-config as for attp serve)"
        print(f"attp: no upstream server named {args.name!r}; configured: {known}", file=sys.stderr)
        return EXIT_USAGE
    if config.url is None or config.transport != "streamable-http":
        print(
            f"attp: {args.name!r} is {config.describe()}; OAuth login is for a remote Streamable HTTP server (url)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    url = str(config.url)
    # The SDK logs the flow's failure with a traceback; the one line below says it (unless --log-level DEBUG).
    if settings.log_level != "DEBUG":
        logging.getLogger("mcp.client.auth").setLevel(logging.CRITICAL)

    async def connect(auth: Any) -> int:
        http = create_mcp_http_client(auth=auth)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            return len((await client.list_tools()).tools)

    async def run() -> int:
        return await oauth_login(
            args.name, url, Vault(settings), connect, port=args.callback_port, timeout_s=args.wait_s, say=_say
        )

    try:
        tools = anyio.run(run)
    except Exception as exc:  # the flow's own errors, the server's, the network's: one line each, no traceback
        cause: BaseException = exc
        while isinstance(cause, BaseExceptionGroup) and cause.exceptions:
            cause = cause.exceptions[0]
        reason = str(cause) or type(cause).__name__
        if isinstance(cause, TimeoutError):
            reason = f"no redirect came back within {args.wait_s:g} s (--wait-s)"
        print(f"attp: login to {args.name!r} failed: {reason}", file=sys.stderr)
        return EXIT_FAILED
    _say(f"Logged in to {args.name!r}: {tools} tools. The tokens are kept in the server's store (encrypted) and")
    _say("refreshed before they expire; attp serve uses them from its next connection to this server.")
    return EXIT_OK


def _logout(settings: Settings, args: argparse.Namespace) -> int:
    """``attp logout NAME [--principal P]``: remove the tokens kept for one remote server: the gateway's own
    (``attp login``) and every person's (``identity = "per_user"``), or only one principal's."""
    from attp_server.toolpacks.mcp.personal import forget

    config = settings.upstream_servers.get(args.name)
    if config is None or config.url is None:
        known = ", ".join(sorted(n for n, c in settings.upstream_servers.items() if c.url is not None)) or "none"
        print(f"attp: no remote upstream server named {args.name!r}; configured: {known}", file=sys.stderr)
        return EXIT_USAGE
    removed = anyio.run(forget, settings, args.name, str(config.url), args.principal)
    whose = f"{args.principal}'s" if args.principal else "every"
    _say(f"Logged out of {args.name!r}: removed {whose} tokens ({removed} kept record{'s' if removed != 1 else ''}).")
    return EXIT_OK


def _say(text: str) -> None:
    print(text, flush=True)


def _bundle(args: argparse.Namespace) -> int:
    """Built from this installation only (the attp script's path), never from ATTP_* variables or a config file."""
    from attp_server.faces.bundle import write_bundle

    if args.output.suffix != ".mcpb":
        print(f"attp: --output {args.output} must end in .mcpb (Claude Desktop opens only those)", file=sys.stderr)
        return EXIT_USAGE
    manifest = write_bundle(args.output)
    command = manifest["server"]["mcp_config"]["command"]
    print(f"wrote {args.output}: double-click it (or drag it onto Claude Desktop's Settings > Extensions) to install")
    print(f"it starts {command} serve; the install dialog asks for the workspace folder, the upstream servers file")
    print("(a Claude-format JSON, optional) and the approval mode")
    return EXIT_OK


def _reader_gone() -> int:
    """The reader of our stdout went away (``attp tools | head -1``): end quietly, as Unix tools do.

    Stdout is pointed at /dev/null so that the interpreter's final flush cannot fail a second time,
    and the exit status is the shell's for a process ended by SIGPIPE.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


def cli() -> None:
    # The objects the modules made live as long as the process: out of every later collection, including the
    # full ones as the interpreter exits, which otherwise take a second or more of a server's shutdown.
    gc.freeze()
    sys.exit(main())
