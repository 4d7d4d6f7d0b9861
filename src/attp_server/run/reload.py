"""Edits of the upstream servers' configuration (and of the access rules), applied while serving.

`Reconfiguration.apply` starts the added and changed servers, puts them in the tool list (clients are told),
then stops the removed and replaced ones once the runs that started before have ended: a running program
finishes on the tools it started with. Each run counts itself under the generation it started in (`running`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import anyio
import anyio.abc

from attp_server.ops.live import LivePacks
from attp_server.run.reach import Reach
from attp_server.sessions.isolation import Scopes
from attp_server.settings import Settings
from attp_server.store.layout import misplaced, refusal
from attp_server.toolpack import Toolpack, ToolRegistry, load_factory

logger = logging.getLogger(__name__)

LIVE_SETTINGS = frozenset({"mcp_servers", "mcp_config", "access"})
"""What an edit of the configuration changes while serving."""


class Reconfiguration:
    """The generation of the upstream configuration, the runs in flight under each, and applying an edit."""

    def __init__(
        self,
        settings: Settings,
        registry: ToolRegistry,
        scopes: Scopes,
        refresh: Callable[..., Awaitable[None]],
        reach: Reach | None = None,
    ) -> None:
        """`refresh`: rebuild what the tools' changes change (``changed=True``: tell the clients even if the server's
        own description is as it was); `reach`: the access rules, which an edit changes too."""
        self.settings = settings
        self.registry = registry
        self.scopes = scopes
        self.refresh = refresh
        self.reach = reach
        self.live: LivePacks | None = None
        """The live packs' tasks (upstream MCP servers); None: nothing is live, edits change nothing."""
        self.tasks: anyio.abc.TaskGroup | None = None
        """Where packs wait to be stopped once the runs using them end."""
        self.generation = 0
        self._running: Counter[int] = Counter()
        """Runs in flight by the configuration generation they started under."""
        self._lock = anyio.Lock()

    @contextmanager
    def run(self) -> Iterator[None]:
        """Count a run under the current generation while it runs."""
        generation = self.generation
        self._running[generation] += 1
        try:
            yield
        finally:
            self._running[generation] -= 1
            if not self._running[generation]:
                del self._running[generation]

    async def apply(self, settings: Settings) -> None:
        """Apply the access rules of `settings` (from the next call on), and serve the upstream servers it configures
        (see the module's docstring)."""
        if self.reach is not None and self.reach.update(settings):
            await self.refresh(changed=True)  # what some callers read changed
        if self.live is None:
            return
        # The config file itself was checked at start (its place is fixed); an edit may name new files.
        problems = await anyio.to_thread.run_sync(misplaced, settings, None)
        if problems:
            logger.warning("configuration edit not applied (the running servers stay as they are): %s",
                           refusal(settings, problems))  # fmt: skip
            return
        async with self._lock:
            current = [pack for pack in self.registry.packs.values() if pack.live is not None]
            fixed = frozenset(name for name, pack in self.registry.packs.items() if pack.live is None)
            factory = load_factory("mcp")
            if factory.update is None:
                return
            try:
                wanted = list(factory.update(settings, current, fixed))
            except Exception as exc:
                logger.warning("configuration edit not applied: %s", exc)
                return
            added = [pack for pack in wanted if not any(pack is old for old in current)]
            removed = [pack for pack in current if not any(pack is new for new in wanted)]
            ignored = other_changes(self.settings, settings)
            if ignored:
                logger.warning("configuration edited: %s changed; only the upstream servers and the access rules "
                               "apply while serving, the rest at the next start", ", ".join(ignored))  # fmt: skip
            if not added and not removed:
                logger.info("configuration read again: the upstream servers are as they were")
                return
            for pack in added:
                logger.info("configuration edited: starting the mcp server of toolpack %r", pack.name)
            await self.live.start(added)
            self.registry.set_live(wanted)
            self.scopes.set_live(wanted)
            self.generation += 1
            await self.refresh()
            if removed:
                names = ", ".join(repr(pack.name) for pack in removed)
                logger.info("configuration edited: stopping the mcp servers %s once the runs using them end", names)
                if self.tasks is not None:
                    self.tasks.start_soon(self._retire, removed, self.generation)
                else:
                    self.live.stop(removed)

    async def _retire(self, packs: list[Toolpack], generation: int) -> None:
        """Stop `packs` when no run that started before `generation` is still running (bounded by the longest a
        run may take, paused approvals included)."""
        longest = self.settings.timeout_s + self.settings.approval_timeout_s + 5
        with anyio.move_on_after(longest):
            while any(count for started, count in self._running.items() if started < generation):
                await anyio.sleep(0.2)
        assert self.live is not None
        self.live.stop(packs)


def other_changes(before: Settings, after: Settings) -> list[str]:
    """The settings an edit changed besides the upstream servers (names only, never values)."""
    return [
        name
        for name in Settings.model_fields
        if name not in LIVE_SETTINGS and getattr(before, name) != getattr(after, name)
    ]
