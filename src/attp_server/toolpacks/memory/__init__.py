"""The ``memory`` toolpack: Memci's page tree (seed 002) on SQLite or PostgreSQL, the model's long-term memory.

Segments (configured by the operator, ``[toolpacks.memory]``) each hold a tree of pages: contents
pages group other pages, detail pages hold text. The model reads and reshapes the tree with the
tools, and expands or hides pages to decide what `view()` (and the ``memory://view`` resource)
shows. The database is the `db_path` setting (SQLite; several server processes on one machine may
share it), or the PostgreSQL server of `database_url` (replicas on several machines).

`pages` says what the tree is made of, `tree` its operations (one SQL for both databases), `store` and `pg`
the two databases (their connections and searches), `search` the ranking, `access` who may change what,
`render` what `view()` shows, `tools` the tools the model calls.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from attp_server.toolpack import (
    READ_ONLY,
    ToolError,
    ToolFunction,
    ToolMarks,
    Toolpack,
    ToolpackContext,
    ToolpackLoadError,
)
from attp_server.toolpacks.memory.options import MemoryOptions, SeedPage, SegmentSpec
from attp_server.toolpacks.memory.pages import PageStore
from attp_server.toolpacks.memory.schema import SCHEMA_VERSION
from attp_server.toolpacks.memory.store import Store
from attp_server.toolpacks.memory.tools import MemoryTools

__all__ = ["SCHEMA_VERSION", "MemoryOptions", "MemoryTools", "SeedPage", "SegmentSpec", "Store", "build", "toolpack"]

DEFAULT_DB_PATH = Path(".attp/memory.sqlite3")
"""Where the database goes when the server passes no `db_path` (the setting's own default)."""


def build(ctx: ToolpackContext) -> list[ToolFunction]:
    """Open (create, migrate) the database, reconcile the configured segments, and bind the tools to it.

    With a PostgreSQL `database_url` the tree lives there (every replica sees it), under the build's
    scope; otherwise in the SQLite file `db_path`, which the scope already names.
    """
    options = ctx.options if isinstance(ctx.options, MemoryOptions) else MemoryOptions()
    if ctx.database_url is not None:
        return MemoryTools(_open_postgres(ctx.database_url, ctx.scope, options), options).tools()
    path = (ctx.db_path or DEFAULT_DB_PATH).resolve()
    store = Store(path, busy_timeout_s=options.busy_timeout_s)
    try:
        store.open(options.segments)
    except OSError as exc:
        why = f"{exc.strerror or exc} ({exc.filename})" if exc.filename else str(exc.strerror or exc)
        raise ToolpackLoadError(f"toolpack 'memory': cannot open the database {path} (db_path): {why}") from None
    except sqlite3.Error as exc:
        raise ToolpackLoadError(f"toolpack 'memory': cannot open the database {path} (db_path): {exc}") from None
    return MemoryTools(store, options).tools()


def _open_postgres(url: str, scope: str, options: MemoryOptions) -> PageStore:
    from attp_server.store.postgres import redacted
    from attp_server.toolpacks.memory.pg import PgStore

    store = PgStore(url, scope, busy_timeout_s=options.busy_timeout_s)  # ToolpackLoadError without the driver
    try:
        store.open(options.segments)
    except ToolError as exc:
        raise ToolpackLoadError(f"toolpack 'memory': cannot open its pages in {redacted(url)}: {exc.message}") from None
    return store


def forget(ctx: ToolpackContext) -> None:
    """A session's scope ended: on PostgreSQL, delete its pages and segments (on SQLite its database file is in
    the session's folder, removed with it)."""
    if ctx.database_url is not None:
        from attp_server.toolpacks.memory.pg import PgStore

        PgStore(ctx.database_url, ctx.scope).drop()


toolpack = Toolpack(
    name="memory",
    description=(
        "Long-term memory: a tree of pages named by index ('usr-3'); by default yours is the 'usr' segment, "
        "root 'usr-0'. view() shows the tree."
    ),
    build=build,
    forget=forget,
    options=MemoryOptions,
    marks={
        **dict.fromkeys(
            [
                "list_segments",
                "get_segment",
                "get_page",
                "get_children",
                "get_parent",
                "get_ancestors",
                "find_page",
                "view",
            ],
            READ_ONLY,
        ),
        # Expanding or hiding changes only what view() shows, never what memory holds.
        **dict.fromkeys(["expand_details", "hide_details"], ToolMarks(idempotent=True)),
        **dict.fromkeys(
            ["create_detail_page", "create_contents_page", "update_page", "move_page", "remove_page"],
            ToolMarks(destructive=True),
        ),
    },
)
