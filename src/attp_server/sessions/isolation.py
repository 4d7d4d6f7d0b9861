"""Isolation: whose folder and memory a call's tools work on (``isolation = shared | session | tenant``).

A `Scope` is a folder under `workspace` and a memory database beside `db_path`. ``shared`` is the
server's own pair. ``tenant`` gives each token holder (`auth_tokens`) ``workspace/tenants/<name>/``
and ``<db dir>/tenants/<name>/<db file>``, kept across their sessions; the name is the operator's,
checked by the settings. ``session`` gives each MCP session ``workspace/sessions/<pid>-<digest>/``
(and the same under the database's folder), where the digest is the session's keyed id, never
anything the client sent; those are removed when the session ends, and at start-up when the server
process that made them is gone.

`Scopes` builds each scope's tools once, on first use, from the server's registry: the packs that
may keep things (built from their `ToolpackContext`, not read-only) are bound to the scope's pair,
the rest (skills, upstream servers, packs of fixed tools) are shared.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from attp_server.errors import ErrorCode, ErrorInfo
from attp_server.sandbox.process.pool import process_alive
from attp_server.sessions.registry import Caller, Session
from attp_server.settings import DEFAULT_TENANT, Settings
from attp_server.toolpack import Toolpack, ToolRegistry

logger = logging.getLogger(__name__)

MAX_BUILT = 64
"""Scopes whose tools are kept built; past it the least recently used are rebuilt on their next call (each
holds open files, e.g. a memory database connection, so their number is bounded)."""

SESSIONS_DIR = "sessions"
TENANTS_DIR = "tenants"
_SESSION_FOLDER = re.compile(r"(\d+)-[0-9a-f]{16}")


@dataclass(frozen=True)
class Scope:
    """Where one caller's files and memory live."""

    name: str
    workspace: Path
    db_path: Path
    temporary: bool = False
    """Removed when its session ends (``isolation = "session"``)."""


class NoSession(Exception):
    """``isolation = "session"`` and the request has no MCP session to give a folder to."""

    info = ErrorInfo(
        code=ErrorCode.FORBIDDEN,
        message="this server gives each MCP session its own files and memory (isolation = session), and this "
        "request has no session: it came over Streamable HTTP with protocol 2026-07-28, which has none",
        solution="Connect with a client that keeps an MCP session (the initialize handshake, protocol 2025-11-25 "
        "or older; SSE), or ask the operator for isolation = tenant with a token of your own.",
    )


class Scopes:
    """Each scope's tools, built on first use and forgotten (and removed, when temporary) when it ends."""

    def __init__(self, settings: Settings, registry: ToolRegistry) -> None:
        self.isolation = settings.isolation
        self.workspace = settings.workspace.resolve()
        self.db_path = settings.db_path.resolve()
        self.registry = registry
        self.shared = Scope("shared", self.workspace, self.db_path)
        self._built: OrderedDict[str, ToolRegistry] = OrderedDict()
        self._lock = anyio.Lock()

    def __len__(self) -> int:
        """How many scopes have their tools built right now."""
        return len(self._built)

    def scope_for(self, caller: Caller | None, session: Session | None) -> Scope:
        """The scope of a call. Raises `NoSession` under session isolation for a request without a session."""
        if self.isolation == "tenant":
            tenant = (caller.tenant if caller is not None else None) or DEFAULT_TENANT
            return Scope(
                f"tenant {tenant}",
                self.workspace / TENANTS_DIR / tenant,
                self.db_path.parent / TENANTS_DIR / tenant / self.db_path.name,
            )
        if self.isolation == "session":
            if session is None:
                raise NoSession
            folder = f"{os.getpid()}-{session.id[:16]}"
            return Scope(
                f"session {folder}",
                self.workspace / SESSIONS_DIR / folder,
                self.db_path.parent / SESSIONS_DIR / folder / self.db_path.name,
                temporary=True,
            )
        return self.shared

    async def tools(self, scope: Scope) -> ToolRegistry:
        """The registry whose tools work on `scope`'s folder and database (built on first use, off the event loop)."""
        if scope.name == self.shared.name:
            return self.registry
        built = self._built.get(scope.name)
        if built is not None:
            self._built.move_to_end(scope.name)
            return built
        async with self._lock:
            built = self._built.get(scope.name)
            if built is None:
                built = await anyio.to_thread.run_sync(self.registry.rebuilt, scope.workspace, scope.db_path)
                self._built[scope.name] = built
                while len(self._built) > MAX_BUILT:
                    self._built.popitem(last=False)
        return built

    def set_live(self, packs: Sequence[Toolpack]) -> None:
        """The live packs were replaced (the configuration was edited): every built scope serves the new ones."""
        for built in self._built.values():
            built.set_live(packs)

    def refresh(self) -> None:
        """The live packs' tools changed (an upstream server's list): every built scope settles its names again."""
        for built in self._built.values():
            built.refresh()

    async def end_sessions(self, ended: list[Session]) -> None:
        """Sessions ended: under session isolation their scopes end with them (folders removed)."""
        if self.isolation == "session":
            for session in ended:
                await self.end(self.scope_for(None, session))

    async def end(self, scope: Scope) -> None:
        """Forget a scope's tools (their database connections close with them); remove it if temporary."""
        self._built.pop(scope.name, None)
        if scope.temporary:
            await anyio.to_thread.run_sync(_remove, scope)

    def sweep_stale(self) -> int:
        """Remove the session folders that server processes no longer running left behind; return how many."""
        removed = 0
        for base in (self.workspace / SESSIONS_DIR, self.db_path.parent / SESSIONS_DIR):
            if not base.is_dir():
                continue
            for path in base.iterdir():
                match = _SESSION_FOLDER.fullmatch(path.name)
                if match is None or process_alive(int(match.group(1))) or path.is_symlink() or not path.is_dir():
                    continue
                shutil.rmtree(path, ignore_errors=True)
                removed += 1
        return removed


def _remove(scope: Scope) -> None:
    for path in (scope.workspace, scope.db_path.parent):
        if path.is_dir() and not path.is_symlink() and _SESSION_FOLDER.fullmatch(path.name):
            shutil.rmtree(path, ignore_errors=True)
