"""A registry as one principal sees it: only the tools its `Grant` admits.

The view is a snapshot (`ToolRegistry.restricted`): the tools and aliases it leaves out are *withheld*, so a
program that names one is refused exactly as for a name that does not exist (``NAME_NOT_FOUND``), and the
refusal goes into the audit log. A pack none of whose tools the grant admits is left out whole (its name is
unknown to the program); a live pack whose tools are not known yet stays when a pattern could name its tools.
"""

from __future__ import annotations

from attp_server.access.policy import Grant
from attp_server.toolpack import ToolRegistry


def view(registry: ToolRegistry, grant: Grant | None) -> ToolRegistry:
    """`registry` as the holder of `grant` sees it (`grant` None: all of it, the registry itself)."""
    if grant is None:
        return registry
    return registry.restricted(lambda tool: grant.admits(tool.pack, tool.name), grant.admits_pack)
