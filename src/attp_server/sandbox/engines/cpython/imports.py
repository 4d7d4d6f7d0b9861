"""Imports in a locked-down worker: what was loaded before the walls closed, and a precise error for anything else.

The worker can no longer read a module's file, so an import finds only what `preload` loaded. `Preloaded` sits
first on ``sys.meta_path`` while a program runs and answers any other import with a ``ModuleNotFoundError`` that
says why and names the setting that decides it, instead of the import system's failed look for a file.

Runs in the worker. Imports nothing above `attp_server.sandbox`.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from attp_server.sandbox.engines.cpython.preload import Loaded

SETTING = "cpython_packages"


class Preloaded(importlib.abc.MetaPathFinder):
    """Refuses, with the reason, every import of a module that is not loaded already."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname in sys.modules:
            return None
        raise ModuleNotFoundError(refusal(fullname), name=fullname)

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def refusal(name: str) -> str:
    """Why `name` cannot be imported here, and what would change that."""
    top = name.partition(".")[0]
    loaded = ", ".join(Loaded.packages) or "none"
    if top in Loaded.packages:
        return (
            f"{name} is not available: it is a part of {top} that could not be loaded before the sandbox closed "
            "(it needs a package that is not installed, or files at run time); use another part of it"
        )
    if top in Loaded.missing:
        return (
            f"No module named {name!r}: {top} is in the {SETTING} setting but {Loaded.missing[top]} on this server "
            "(the server's operator installs it with pip install 'attp-server[data]')"
        )
    return (
        f"No module named {name!r} here: a program can import the standard library modules that work without "
        f"files, network or processes, and the packages of the server's {SETTING} setting ({loaded}); the "
        f"server's operator can add an installed package to {SETTING}"
    )
