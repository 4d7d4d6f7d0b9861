"""The MCP gateway: every configured upstream MCP server becomes a toolpack named after it.

Registered like the built-in packs, under the entry point ``mcp`` of ``attp.toolpacks``, as a
`ToolpackFactory`: at startup it turns each ``[mcp_servers.NAME]`` table (and each server of the
``mcp_config`` JSON files) into a `Toolpack` whose tools are live (`Upstream`): discovered when the
server connects, refreshed when it says its tool list changed. Calls go through the same path as any
tool's: validated, traced, counted, answered from the server process; the sandbox only has stubs.

A server name becomes the pack name as a Python identifier (``brave-search`` -> ``brave_search``);
a name an enabled pack or a sandbox built-in already has gets ``_mcp`` (``memory`` -> ``memory_mcp``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from attp_server.mcp_config import default_environment
from attp_server.toolpack import RESERVED_NAMES, Toolpack, ToolpackFactory
from attp_server.toolpacks.mcp.oauth import Vault
from attp_server.toolpacks.mcp.person import Person
from attp_server.toolpacks.mcp.upstream import Upstream

logger = logging.getLogger(__name__)

__all__ = ["Upstream", "factory", "upstream_toolpacks"]


def upstream_toolpacks(settings: Any, taken: frozenset[str]) -> Sequence[Toolpack]:
    """One toolpack per configured upstream server (not yet connected: the runtime starts them)."""
    return updated_toolpacks(settings, (), taken)


def updated_toolpacks(settings: Any, current: Sequence[Toolpack], taken: frozenset[str]) -> Sequence[Toolpack]:
    """The packs for the servers `settings` configures now: those of `current` whose server is configured as
    before, unchanged (the same objects); a new pack, under the same name, for a server whose configuration
    changed; a new pack with a free name for a server added."""
    from attp_server.toolpacks.mcp.schema import identifier

    serving = {pack.live.config_name: pack for pack in current if isinstance(pack.live, Upstream)}
    wanted = settings.upstream_servers
    used = {*taken, *RESERVED_NAMES, *(pack.name for name, pack in serving.items() if name in wanted)}
    packs = []
    workspace = settings.workspace.resolve()
    environ = default_environment()
    vault = Vault(settings) if any(config.url is not None for config in wanted.values()) else None
    for name, config in wanted.items():
        old = serving.get(name)
        if old is not None and isinstance(old.live, Upstream) and old.live.config == config:
            packs.append(old)
            continue
        if old is not None:
            pack_name = old.name
        else:
            pack_name = identifier(name)
            if pack_name in used:
                pack_name = identifier(f"{pack_name}_mcp", frozenset(used))
            if pack_name != name:
                logger.warning("mcp server %r is the toolpack %r: %s", name, pack_name, _why_renamed(name, pack_name))
            used.add(pack_name)
        for note in config.ignored:  # at start, and when an edit starts it anew: where the operator reads
            logger.warning("mcp server %r: %s", name, note)
        person = Person(pack_name, name, config, settings, vault) if config.identity != "shared" and vault else None
        live = Upstream(
            pack_name,
            config,
            workspace=workspace,
            startup_timeout_s=settings.mcp_startup_timeout_s,
            environ=environ,
            config_name=name,
            passthrough=tuple(settings.env_passthrough),
            vault=vault,
            person=person,
        )
        description = f"Tools of the MCP server {name!r} ({config.describe()})."
        if pack_name != name:
            description += f" Called {pack_name}.NAME(...): {_why_renamed(name, pack_name)}."
        packs.append(Toolpack(name=pack_name, description=description, live=live, open_world=True, origin=name))
    return packs


def _why_renamed(name: str, pack_name: str) -> str:
    from attp_server.toolpacks.mcp.schema import identifier

    if identifier(name) != name:
        return f"{name!r} is not a Python name"
    return f"{name} is the name of a built-in pack or module here, so its tools are {pack_name}.NAME"


factory = ToolpackFactory(make=upstream_toolpacks, update=updated_toolpacks)
