"""The page tree on PostgreSQL, for replicas that share one database (``database_url = "postgresql://..."``).

The same tree as on SQLite, in two tables (``memory_segments``, ``memory_pages``) shared by every
scope: a `scope` column keeps the server's shared memory, each tenant's and each session's apart,
and every query names it. Search uses pg_trgm GIN indexes (substring match of 3+ characters, as
SQLite's trigram FTS5); the ranking itself is search.py's, the same on both databases.

Every tool call is one transaction on a pooled connection. A write first takes a transaction-level
advisory lock on its scope, so writers of one scope run one at a time (as ``BEGIN IMMEDIATE`` makes
them on SQLite) whichever replica they are on; a read runs in one REPEATABLE READ snapshot. Within a
run, waits (for a connection, for the lock) and statements stop at the run's deadline.

The connections are the store module's (`attp_server.store.postgres`: its blocking pool, one per
process and URL, shared by every scope) and the tables are created by the store's migrations
(part "memory"). The tree's operations are `tree.TreeTx`'s, written once for both databases (`tree.POSTGRES`
spells them here); this module adds the searches, on the pg_trgm indexes.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from attp_server.store.backend import StoreError
from attp_server.store.postgres import PostgresBackend, redacted
from attp_server.store.schema import migrate_sync
from attp_server.toolpack import ToolError, ToolpackLoadError, current_call
from attp_server.toolpacks.memory.options import SegmentSpec
from attp_server.toolpacks.memory.pages import Column, busy, like_pattern, stopped
from attp_server.toolpacks.memory.tree import POSTGRES, TreeTx, listed

MEMORY_STEPS: list[list[str]] = [
    [
        "CREATE EXTENSION IF NOT EXISTS pg_trgm",
        """
    CREATE TABLE IF NOT EXISTS memory_segments (
        scope       TEXT NOT NULL,
        id          TEXT NOT NULL,
        name        TEXT NOT NULL,
        type        TEXT NOT NULL CHECK (type IN ('system', 'user', 'tool', 'custom')),
        description TEXT NOT NULL DEFAULT '',
        permission  TEXT NOT NULL CHECK (permission IN ('read_only', 'read_write', 'system_managed')),
        ordinal     INTEGER NOT NULL DEFAULT 0,
        next_page   INTEGER NOT NULL DEFAULT 1,
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL,
        PRIMARY KEY (scope, id)
    )
    """,
        """
    CREATE TABLE IF NOT EXISTS memory_pages (
        id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        scope       TEXT NOT NULL,
        page_index  TEXT NOT NULL,
        segment_id  TEXT NOT NULL,
        kind        TEXT NOT NULL CHECK (kind IN ('contents', 'detail')),
        name        TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        detail      TEXT,
        parent      TEXT,
        position    INTEGER NOT NULL DEFAULT 0,
        visibility  TEXT NOT NULL CHECK (visibility IN ('expanded', 'hidden')),
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL,
        UNIQUE (scope, page_index),
        FOREIGN KEY (scope, segment_id) REFERENCES memory_segments (scope, id),
        FOREIGN KEY (scope, parent) REFERENCES memory_pages (scope, page_index),
        CHECK ((kind = 'detail') = (detail IS NOT NULL))
    )
    """,
        "CREATE INDEX IF NOT EXISTS memory_pages_by_parent ON memory_pages (scope, parent, position)",
        "CREATE INDEX IF NOT EXISTS memory_pages_by_segment ON memory_pages (scope, segment_id)",
        "CREATE INDEX IF NOT EXISTS memory_pages_name_trgm ON memory_pages USING gin (name gin_trgm_ops)",
        "CREATE INDEX IF NOT EXISTS memory_pages_description_trgm ON memory_pages USING gin (description gin_trgm_ops)",
        "CREATE INDEX IF NOT EXISTS memory_pages_detail_trgm ON memory_pages USING gin (detail gin_trgm_ops)",
    ],
]
"""The memory part's migrations (`store.schema`): each step idempotent; never edit a released step, add one."""


# ---------------------------------------------------------------------------------- connections

_backends: dict[str, PostgresBackend] = {}
_backends_lock = threading.Lock()


def shared_backend(url: str) -> PostgresBackend:
    """This process's store backend for `url`, whose blocking pool every scope's tools share (the store module's
    connection setup: its pool size, timeouts and driver check)."""
    with _backends_lock:
        backend = _backends.get(url)
        if backend is None:
            try:
                backend = PostgresBackend(url)
            except StoreError as exc:
                raise ToolpackLoadError(f"toolpack 'memory': {exc}") from None
            _backends[url] = backend
        return backend


@atexit.register
def _close_pools() -> None:
    with _backends_lock:
        for backend in _backends.values():
            if backend._sync is not None:
                backend._sync.close()
        _backends.clear()


# ---------------------------------------------------------------------------------- one transaction


class PgTx(TreeTx):
    """One open PostgreSQL transaction on one scope's tree."""

    dialect = POSTGRES

    # ------------------------------------------------------------------ find_page's reads

    def newest_matching(
        self, terms: Sequence[str], limit: int, *, every: bool, column: Column | None, segment_ids: Sequence[str] | None
    ) -> list[int]:
        columns = [column] if column else ["name", "description", "detail"]
        params: dict[str, Any] = {"limit": limit}
        matches = []
        for i, term in enumerate(terms):
            params[f"term{i}"] = like_pattern(term)
            matches.append("(" + " OR ".join(f"p.{c} ILIKE :term{i}" for c in columns) + ")")
        where = (" AND " if every else " OR ").join(matches)
        if segment_ids is not None:
            marks, segments = listed("segment", segment_ids)
            where = f"({where}) AND p.segment_id IN ({marks})"
            params.update(segments)
        rows = self.rows(
            f"SELECT p.id FROM {{pages}} p WHERE {{p_scoped}}({where}) ORDER BY p.id DESC LIMIT :limit",  # noqa: S608 - constant SQL and placeholders only
            **params,
        )
        return [int(row["id"]) for row in rows]

    def containing(self, term: str, segment_ids: Sequence[str], limit: int) -> list[int]:
        marks, segments = listed("segment", segment_ids)
        rows = self.rows(
            "SELECT p.id FROM {pages} p WHERE {p_scoped}(p.name ILIKE :term OR p.description ILIKE :term"  # noqa: S608 - constant SQL and placeholders only
            f" OR p.detail ILIKE :term) AND p.segment_id IN ({marks}) ORDER BY p.id LIMIT :limit",
            term=like_pattern(term), limit=limit, **segments,
        )  # fmt: skip
        return [int(row["id"]) for row in rows]

    def texts(self, rowids: Sequence[int]) -> list[tuple[int, str, str, str, str]]:
        rows = self.rows(
            "SELECT id, page_index, name, description, coalesce(detail, '') AS detail FROM {pages}"
            " WHERE {scoped}id = ANY(:ids)",
            ids=list(rowids),
        )
        return [(int(r["id"]), r["page_index"], r["name"], r["description"], r["detail"]) for r in rows]

    def page_count(self) -> int:
        rows = self.rows("SELECT count(*) AS n FROM {pages} WHERE {scoped}TRUE")
        return int(rows[0]["n"])


# ---------------------------------------------------------------------------------- the store


class PgStore:
    """One scope's page tree in a PostgreSQL database: the tables are created once, shared by all scopes."""

    def __init__(self, url: str, scope: str, busy_timeout_s: float = 5.0) -> None:
        self.url = url
        self.scope = scope
        self.busy_timeout_s = busy_timeout_s
        self.backend = shared_backend(url)

    def open(self, segments: Sequence[SegmentSpec]) -> None:
        """Create or bring up to date the tables (the store's migrations, part "memory"), then reconcile this
        scope's segments. Raises ToolpackLoadError."""
        try:
            migrate_sync(self.backend, "memory", MEMORY_STEPS)
        except StoreError as exc:
            raise ToolpackLoadError(f"toolpack 'memory': cannot set up its tables: {exc}") from None
        with self.transaction(write=True) as tx:
            tx.ensure_segments(segments)

    def close(self) -> None:
        """Nothing of its own to close: the pool is the process's, shared by every scope."""

    def drop(self) -> None:
        """Delete this scope's pages and segments (its session ended). Idempotent: replicas may race to do it."""
        with self.transaction(write=True) as tx:
            tx.conn.execute("DELETE FROM memory_pages WHERE scope = %s", (self.scope,))
            tx.conn.execute("DELETE FROM memory_segments WHERE scope = %s", (self.scope,))

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[PgTx]:
        """One transaction: committed when the block ends normally, rolled back on any exception."""
        import psycopg
        from psycopg.rows import dict_row
        from psycopg_pool import PoolTimeout

        left = current_call().remaining()
        if left == 0.0:
            raise stopped()
        wait_s = self.busy_timeout_s if left is None else min(self.busy_timeout_s, left)
        started = time.monotonic()
        try:
            with self.backend.sync_pool().connection(timeout=wait_s) as conn:
                cursor = conn.cursor(row_factory=dict_row)
                try:  # the connection is not in autocommit: the first statement opens the transaction
                    if not write:
                        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    cursor.execute("SELECT set_config('lock_timeout', %s, true)", (f"{max(1, int(wait_s * 1000))}ms",))
                    if left is not None:
                        remaining = max(0.001, left - (time.monotonic() - started))
                        cursor.execute(
                            "SELECT set_config('statement_timeout', %s, true)", (f"{max(1, int(remaining * 1000))}ms",)
                        )
                    if write:
                        key = "attp memory " + self.scope
                        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
                    yield PgTx(cursor, self.scope)
                    conn.commit()
                except BaseException:
                    if not conn.closed:
                        conn.rollback()
                    raise
        except PoolTimeout:
            raise busy(wait_s) from None
        except psycopg.errors.LockNotAvailable:
            raise busy(wait_s) from None
        except psycopg.errors.QueryCanceled:
            raise stopped() from None
        except psycopg.OperationalError as exc:
            raise ToolError(
                "MEMORY_UNAVAILABLE",
                f"The memory database {redacted(self.url)} could not be reached: {str(exc).strip()}",
                solution="Call the tool again in a moment; if it keeps failing, tell the operator.",
            ) from None
