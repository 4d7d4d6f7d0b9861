"""Isolation: whose folder and memory a call's tools work on (``isolation = shared | session | tenant``).

A `Scope` is a folder under `workspace` and a memory database beside `db_path`. ``shared`` is the
server's own pair. ``tenant`` gives each token holder (`auth_tokens`) ``workspace/tenants/<name>/``
and ``<db dir>/tenants/<name>/<db file>``, kept across their sessions; the name is the operator's,
checked by the settings (a signed-in principal's is ``person.`` and a digest of its name). ``session``
gives each session (a handle, or a handshake-era transport's session) ``workspace/sessions/<key>/`` (and
the same under the database's folder), where the key is the session's keyed digest (`Session.folder`,
equal on every replica that shares `secret_file`), never anything the client sent. A session's folders
are removed when it ends, by whichever replica notices (`end_sessions`, idempotent), and `sweep_stale`
removes any whose session the store no longer has (a replica that died between the two).

`Scopes` builds each scope's tools once, on first use, from the server's registry: the packs that
may keep things (built from their `ToolpackContext`, not read-only) are bound to the scope's pair,
the rest (skills, upstream servers, packs of fixed tools) are shared.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
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
PERSON_PREFIX = "person."
"""A signed-in principal's tenant folder is this and a digest of its name: never a token's name (those have no dot)."""
_SESSION_FOLDER = re.compile(r"[0-9a-f]{32}")
_OLD_SESSION_FOLDER = re.compile(r"(\d+)-[0-9a-f]{16}")
"""Folders of earlier versions, named by the process that made them."""
STALE_AFTER_S = 60.0
"""A session folder is a leftover only when it is at least this old (its session may be being written)."""


@dataclass(frozen=True)
class Scope:
    """Where one caller's files and memory live."""

    name: str
    workspace: Path
    db_path: Path
    temporary: bool = False
    """Removed when its session ends (``isolation = "session"``)."""


class NoSession(Exception):
    """``isolation = "session"`` and the request has no session to give a folder to (a resource read on
    protocol 2026-07-28, which carries no ``session`` input)."""

    info = ErrorInfo(
        code=ErrorCode.FORBIDDEN,
        message="this server gives each session its own files and memory (isolation = session), and this "
        "request names no session",
        solution="Read it through attp_execute with your session handle instead (session = the value an earlier "
        "reply returned).",
    )


class Scopes:
    """Each scope's tools, built on first use and forgotten (and removed, when temporary) when it ends."""

    def __init__(self, settings: Settings, registry: ToolRegistry, separate: Callable[[], bool] | None = None) -> None:
        """`separate`: whether any call may have a session folder now (an access rule may give one when the
        server's ``isolation`` does not); default: the server's ``isolation`` is ``session``."""
        self.isolation = settings.isolation
        self.separate = separate or (lambda: self.isolation == "session")
        self.workspace = settings.workspace.resolve()
        self.db_path = settings.db_path.resolve()
        self.registry = registry
        self.shared = Scope("shared", self.workspace, self.db_path)
        self._built: OrderedDict[str, ToolRegistry] = OrderedDict()
        self._lock = anyio.Lock()

    def __len__(self) -> int:
        """How many scopes have their tools built right now."""
        return len(self._built)

    def scope_for(self, caller: Caller | None, session: Session | None, isolation: str | None = None) -> Scope:
        """The scope of a call under `isolation` (default: the server's; the caller's access rules may set another).
        Raises `NoSession` under session isolation for a request without a session."""
        isolation = isolation or self.isolation
        if isolation == "tenant":
            tenant = (caller.tenant if caller is not None else None) or DEFAULT_TENANT
            if caller is not None and caller.person is not None:  # a signed-in principal: its name may be any text
                tenant = PERSON_PREFIX + hashlib.sha256(caller.person.encode("utf-8", "surrogatepass")).hexdigest()[:32]
            return Scope(
                f"tenant {tenant}",
                self.workspace / TENANTS_DIR / tenant,
                self.db_path.parent / TENANTS_DIR / tenant / self.db_path.name,
            )
        if isolation == "session":
            if session is None:
                raise NoSession
            folder = session.folder
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
                built = await anyio.to_thread.run_sync(
                    self.registry.rebuilt, scope.workspace, scope.db_path, scope.name
                )
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

    def session_scope(self, key: str) -> Scope:
        return self.scope_for(None, Session(key, "", ""), "session")

    async def end_sessions(self, keys: list[str]) -> None:
        """Sessions ended (by their keys): under session isolation their scopes end with them (folders removed)."""
        if self.separate():
            for key in keys:
                await self.end(self.session_scope(key))

    async def end(self, scope: Scope) -> None:
        """Forget a scope's tools (their database connections close with them); remove it if temporary."""
        self._built.pop(scope.name, None)
        if scope.temporary:
            await anyio.to_thread.run_sync(_remove, scope)
            await anyio.to_thread.run_sync(self.registry.forget_scope, scope.workspace, scope.db_path, scope.name)

    def session_folders(self) -> list[str]:
        """The names of the session folders on disk that are older than `STALE_AFTER_S` (candidates for
        `sweep_stale`); leftovers of earlier versions whose process is gone are removed here."""
        names: set[str] = set()
        cutoff = time.time() - STALE_AFTER_S
        for base in (self.workspace / SESSIONS_DIR, self.db_path.parent / SESSIONS_DIR):
            if not base.is_dir():
                continue
            for path in base.iterdir():
                if path.is_symlink() or not path.is_dir():
                    continue
                old = _OLD_SESSION_FOLDER.fullmatch(path.name)
                if old is not None and not process_alive(int(old.group(1))):
                    shutil.rmtree(path, ignore_errors=True)
                elif _SESSION_FOLDER.fullmatch(path.name) and path.stat().st_mtime < cutoff:
                    names.add(path.name)
        return sorted(names)

    async def sweep_stale(self, present: Callable[[list[str]], Awaitable[set[str]]]) -> int:
        """Remove the session folders whose sessions the store no longer has; return how many sessions'."""
        if not self.separate():
            return 0
        names = await anyio.to_thread.run_sync(self.session_folders)
        if not names:
            return 0
        kept = await present(names)
        gone = [name for name in names if name not in kept]
        await self.end_sessions(gone)
        return len(gone)


def _remove(scope: Scope) -> None:
    for path in (scope.workspace, scope.db_path.parent):
        if path.is_dir() and not path.is_symlink() and _SESSION_FOLDER.fullmatch(path.name):
            shutil.rmtree(path, ignore_errors=True)
