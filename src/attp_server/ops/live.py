"""Live packs while serving: started together, stopped one by one, and replaced when the configuration is edited.

`LivePacks` owns the task of every live pack (an upstream MCP server): `start` starts some at once and
waits until each has made its first connection attempt (each within its own startup timeout); `stop`
ends some (their connections close and their child processes end).

`ConfigWatch` applies edits of the configuration while serving: it polls the files the upstream servers
come from (the config file with its ``[mcp_servers]`` tables and every ``mcp_config`` JSON file) every
`config_poll_s`, and when one changed it reads the whole configuration again and hands the new settings
to `apply` (the runtime's reload). An edit that does not read (bad JSON, an unknown key, a server with
neither command nor url) is logged and changes nothing: what is serving goes on serving.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio
import anyio.abc
from anyio.abc import TaskStatus

from attp_server.settings import Settings
from attp_server.toolpack import LiveTools, Toolpack

logger = logging.getLogger(__name__)

Changed = Callable[[], Awaitable[None]]
Stamp = tuple[tuple[str, int, int] | None, ...]


class LivePacks:
    """The tasks of the live packs being served, in a task group that outlives each of them."""

    def __init__(self, group: anyio.abc.TaskGroup, changed: Changed) -> None:
        self._group = group
        self._changed = changed
        self._scopes: dict[int, anyio.CancelScope] = {}

    async def start(self, packs: Sequence[Toolpack]) -> None:
        """Start the packs' tasks at once; return when every one has made its first connection attempt."""
        async with anyio.create_task_group() as starting:
            for pack in packs:
                if pack.live is not None:
                    starting.start_soon(self._group.start, functools.partial(self._serve, pack.live))

    async def _serve(self, live: LiveTools, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.CancelScope() as scope:
            self._scopes[id(live)] = scope
            try:
                await live.serve(self._changed, task_status=task_status)
            finally:
                self._scopes.pop(id(live), None)

    def stop(self, packs: Sequence[Toolpack]) -> None:
        """End the packs' tasks (their connections close; a stdio server's process tree ends)."""
        for pack in packs:
            scope = self._scopes.get(id(pack.live))
            if scope is not None:
                scope.cancel()


class ConfigWatch:
    """Polls the configuration's files; on a change reads the settings again and applies them (see the module)."""

    def __init__(
        self,
        load: Callable[[], Settings],
        config_file: Path | None,
        settings: Settings,
        apply: Callable[[Settings], Awaitable[None]],
        stamp: Stamp | None = None,
    ) -> None:
        """`stamp`: the files' `config_stamp` from before `settings` were read and served (default: now); an edit
        made since, while the upstream servers started, is applied at the first look."""
        self.load = load
        self.config_file = config_file
        self.apply = apply
        self.period = settings.config_poll_s
        self.files = watched_files(config_file, settings)
        self._stamp = stamp if stamp is not None else _stamp(self.files)

    async def run(self) -> None:
        """Poll until cancelled."""
        while True:
            await anyio.sleep(self.period)
            await self.check()

    async def check(self) -> bool:
        """Read and apply the configuration if one of its files changed since the last look; True if it did."""
        stamp = await anyio.to_thread.run_sync(_stamp, self.files)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            settings = await anyio.to_thread.run_sync(self.load)
        except Exception as exc:  # ConfigError names the file, the server and the problem; never a secret
            logger.warning("configuration edit not applied (the running servers stay as they are): %s", exc)
            return True
        read = dict(zip(self.files, stamp, strict=True))
        self.files = watched_files(self.config_file, settings)
        # Each file keeps the stamp it had before the read: one written while it was read is read again at the
        # next look. (A file watched from now on has none: it is read once more, harmlessly.)
        self._stamp = tuple(read.get(path) for path in self.files)
        await self.apply(settings)
        return True


def watched_files(config_file: Path | None, settings: Settings) -> list[Path]:
    """The files the configuration comes from: `config_file` (attp.toml, if any) and the ``mcp_config`` files."""
    return [*([config_file] if config_file is not None else []), *settings.mcp_config]


def config_stamp(config_file: Path | None, settings: Settings) -> Stamp:
    """What `ConfigWatch` compares: the stamps of the configuration's files."""
    return _stamp(watched_files(config_file, settings))


def _stamp(files: Sequence[Path]) -> Stamp:
    """What changes when a file is written, replaced or removed: its inode, modification time and size."""
    found: list[tuple[str, int, int] | None] = []
    for path in files:
        try:
            stat = os.stat(path)
        except OSError:
            found.append(None)
            continue
        found.append((f"{stat.st_dev}:{stat.st_ino}", stat.st_mtime_ns, stat.st_size))
    return tuple(found)
