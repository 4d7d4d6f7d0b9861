"""What starts with the server and stops with it: the registry of enabled toolpacks, the upstream servers' tasks,
the store, the worker pool, the configuration watch and the sweeps, around one `Runtime`.

`open_runtime` is what `attp serve` and `attp exec` run inside; `open_registry` is the registry alone with its live
packs started (``attp tools``, ``attp prompt``, ``attp check``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from attp_server.errors import ConfigError
from attp_server.model.docstrings import docstring_warnings
from attp_server.ops.live import ConfigWatch, LivePacks, config_stamp
from attp_server.run.runtime import Runtime
from attp_server.sandbox.engines import ENGINES
from attp_server.sandbox.process import fallen
from attp_server.sandbox.process.pool import WorkerPool, missing_layers
from attp_server.settings import Settings
from attp_server.store import open_store
from attp_server.store.layout import check_layout
from attp_server.toolpack import ToolpackLoadError, ToolRegistry, load_factory, load_toolpack

__all__ = ["build_registry", "live_tools", "open_registry", "open_runtime", "postgres_url"]

logger = logging.getLogger(__name__)


def postgres_url(settings: Settings) -> str | None:
    """`database_url` when it names a PostgreSQL server (packs such as memory keep their state there), else None."""
    url = settings.database_url.get_secret_value() if settings.database_url is not None else None
    return url if url is not None and url.startswith(("postgresql://", "postgres://")) else None


def build_registry(settings: Settings) -> ToolRegistry:
    """Load the enabled toolpacks and register their tools.

    A pack the user asked for by name must load (else `ToolpackLoadError` naming it); a pack that is
    only enabled by default is skipped with a warning, so one broken plugin cannot stop the server.
    """
    explicit = "toolpacks" in settings.model_fields_set
    packs = []
    for spec in settings.toolpacks:
        try:
            packs.append(load_toolpack(spec))
        except ToolpackLoadError as exc:
            if explicit:
                raise
            logger.warning("skipping default toolpack %r: %s", spec, exc)
    if settings.upstream_servers:  # the MCP gateway: one pack per configured server, made by its factory
        packs.extend(load_factory("mcp").make(settings, frozenset(p.name for p in packs)))
    registry = ToolRegistry(
        packs,
        settings.workspace.resolve(),
        settings.toolpack_options,
        settings.skills_dirs,
        db_path=settings.db_path.resolve(),
        database_url=postgres_url(settings),
    )
    for tool in registry.tools.values():
        for warning in docstring_warnings(tool):
            logger.warning("%s", warning)
    return registry


@asynccontextmanager
async def live_tools(registry: ToolRegistry, changed: Callable[[], Awaitable[None]]) -> AsyncIterator[LivePacks]:
    """Start the packs whose tools are live (upstream MCP servers), all at once; stop them on exit.

    Each reports back within its own startup timeout, connected or not (a server that fails is
    reported and its pack stays unavailable: it never stops the server). On exit their tasks are
    cancelled, which closes every connection and ends every child process they started. The `LivePacks`
    yielded starts and stops more of them while serving (`Reconfiguration.apply`).
    """
    async with anyio.create_task_group() as running:
        live = LivePacks(running, changed)
        await live.start([pack for pack in registry.packs.values() if pack.live is not None])
        registry.refresh()
        try:
            yield live
        finally:
            running.cancel_scope.cancel()


@asynccontextmanager
async def open_registry(settings: Settings) -> AsyncIterator[ToolRegistry]:
    """The registry with its live packs started (for the CLI's tools, prompt and check)."""
    registry = build_registry(settings)

    async def unchanged() -> None:
        registry.refresh()

    async with live_tools(registry, unchanged):
        yield registry


@asynccontextmanager
async def open_runtime(
    settings: Settings,
    *,
    registry: ToolRegistry | None = None,
    reload: Callable[[], Settings] | None = None,
    config_file: Path | None = None,
) -> AsyncIterator[Runtime]:
    """Start the live packs and the worker pool and yield a ready `Runtime`; stop them all on exit.

    `config_file` is the TOML file `settings` were read from, if any. With `reload` (reads the configuration again)
    and `config_poll_s` > 0, edits of it and of the ``mcp_config`` files are applied while serving (`ConfigWatch`,
    `Reconfiguration.apply`).

    Raises:
        AttpError: one of the server's own files lies where a program can reach it (`check_layout`), or what
            starts here fails (the store, a toolpack).
    """
    check_layout(settings, config_file)
    # Stamped before anything starts: an edit made while the upstream servers start is applied at the first look.
    stamp = config_stamp(config_file, settings) if reload is not None else None
    try:  # a test hook, read once here from the server process's own environment (`fallen`)
        fallen_workers = fallen.requested(
            os.environ, containment=settings.containment, transport=settings.transport, host=settings.host
        )
    except fallen.FallenRefused as exc:
        raise ConfigError(str(exc)) from None
    if fallen_workers:
        logger.warning(fallen.WARNING, fallen.ENVIRONMENT)
    registry = registry if registry is not None else build_registry(settings)
    runtime: Runtime | None = None

    async def changed() -> None:
        if runtime is not None:
            await runtime.refresh()
        else:
            registry.refresh()

    pool, data_pool = worker_pools(settings, fallen_workers)
    async with (
        open_store(settings) as store,
        live_tools(registry, changed) as live,
        pool,
        data_pool if data_pool is not None else contextlib.nullcontext(),
        anyio.create_task_group() as tasks,
    ):
        for each in (pool, data_pool):
            if each is not None:
                check_walls(each, settings)
        runtime = Runtime(settings, registry, pool, store, data_pool=data_pool)
        runtime.tasks = tasks
        runtime.reconfiguration.tasks = tasks
        runtime.reconfiguration.live = live
        await runtime.scopes.sweep_stale(store.handles.present)
        tasks.start_soon(_end_idle_sessions, runtime)
        watch = (
            ConfigWatch(reload, config_file, settings, runtime.reconfiguration.apply, stamp)
            if reload is not None
            else None
        )
        if watch is not None and settings.config_poll_s > 0 and watch.files:  # nothing to watch: nothing can change
            runtime.watching = True
            tasks.start_soon(watch.run)
        try:
            yield runtime
        finally:
            tasks.cancel_scope.cancel()
            await runtime.close()
            runtime.tools.close()


def worker_pools(settings: Settings, fallen_workers: bool = False) -> tuple[WorkerPool, WorkerPool | None]:
    """The server's worker pools: the default engine's, and the ``cpython`` engine's data-stack workers apart when it
    is offered beside other engines (one pool when it is the only one)."""
    offered = settings.offered_engines
    data = (
        WorkerPool(
            size=max(settings.workers, 1),  # one ready at start: its lockdown says at once whether the engine may run
            max_workers=settings.max_workers,
            memory_mb=settings.cpython_memory_mb,
            containment=settings.containment,
            fallen=fallen_workers,
            engine="cpython",
            packages=tuple(settings.cpython_packages),
            startup_timeout_s=CPYTHON_STARTUP_S,
        )
        if "cpython" in offered
        else None
    )
    if data is not None and set(offered) == {"cpython"}:
        return data, None
    pool = WorkerPool(
        size=settings.workers,
        max_workers=settings.max_workers,
        memory_mb=settings.memory_mb,
        containment=settings.containment,
        fallen=fallen_workers,
    )
    return pool, data


CPYTHON_STARTUP_S = 120.0
"""How long a data-stack worker may take to start: the first waits for its fork server to load the packages."""


def check_walls(pool: WorkerPool, settings: Settings) -> None:
    """Refuse to start a server offering an engine that needs every wall (``cpython``, ``asteval``) where the
    workers that run it cannot hold them."""
    walled = [name for name in settings.offered_engines if ENGINES[name].walls]
    runs = [name for name in walled if (name == "cpython") == (pool.engine == "cpython")]
    if not runs or pool.refused is None:
        return
    missing = missing_layers(pool.lockdown)
    layers = "; ".join(f"{layer}: {why}" for layer, why in missing.items()) or pool.refused
    raise ConfigError(
        f"engine {runs[0]!r} runs only where every containment layer holds, and on this machine the workers could "
        f"not apply {' and '.join(missing) or 'them'} ({layers}). Run `attp doctor` to see what holds here; offer "
        'engine = "python" on this machine.'
    )


SWEEP_PERIOD_S = 10.0
"""How often a server process sweeps the store (expiry, the total state bound, its stdio session's liveness)."""


async def _end_idle_sessions(runtime: Runtime) -> None:
    """Sessions end on time even when no call comes to notice it; leftover folders go too."""
    period = min(SWEEP_PERIOD_S, runtime.settings.session_idle_s / 2)
    sweeps = 0
    while True:
        await anyio.sleep(period)
        sweeps += 1
        try:
            await runtime.end_idle_sessions()
            if runtime.store is not None and sweeps % 30 == 0:
                await runtime.scopes.sweep_stale(runtime.store.handles.present)
        except Exception as exc:  # the store is down for a while: say so, and try again next time
            logger.warning("could not sweep the sessions in the store: %s", exc)
