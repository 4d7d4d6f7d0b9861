"""The ``shell`` toolpack (opt-in): run bash commands in the server's workspace.

Not enabled by default: it reaches beyond the workspace (processes, and the network if the host has
one). Enable it with ``--toolpack shell`` or ``[toolpacks] enabled = [..., "shell"]``; its options are
the ``[toolpacks.shell]`` table (`ShellOptions`).
"""

from __future__ import annotations

import os

from attp_server.toolpack import ToolFunction, Toolpack, ToolpackContext, ToolpackLoadError, make_folder
from attp_server.toolpacks.shell.options import DEFAULT_DENY_PATTERNS, ShellOptions
from attp_server.toolpacks.shell.tools import BASH, ShellTools

__all__ = ["DEFAULT_DENY_PATTERNS", "ShellOptions", "ShellTools", "build", "toolpack"]


def build(ctx: ToolpackContext) -> list[ToolFunction]:
    """Check that bash exists, create the workspace if needed, and bind the tool to it."""
    if not os.access(BASH, os.X_OK):
        raise ToolpackLoadError(f"toolpack 'shell' needs {BASH}, which is missing or not executable")
    options = ctx.options if isinstance(ctx.options, ShellOptions) else ShellOptions()
    make_folder("shell", ctx.workspace)
    return ShellTools(ctx.workspace.resolve(), options).tools()


toolpack = Toolpack(
    name="shell",
    description="Run bash commands in the workspace folder (scrubbed environment, timeout, capped output).",
    build=build,
    options=ShellOptions,
    read_only=False,
    open_world=True,
)
