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
(part "memory"); the SQL is this module's, since it differs from SQLite's (placeholders, the index).
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from attp_server.store.backend import StoreError
from attp_server.store.postgres import PostgresBackend, redacted
from attp_server.store.schema import MIGRATION_LOCK, SCHEMA_TABLE
from attp_server.toolpack import ToolError, ToolpackLoadError, current_call
from attp_server.toolpacks.memory.options import SegmentSpec
from attp_server.toolpacks.memory.store import (
    Column,
    Kind,
    Page,
    Segment,
    Visibility,
    like_pattern,
    now,
    stopped,
)

_PAGE_COLUMNS = """
    p.id, p.page_index, p.segment_id, p.kind, p.name, p.description, p.detail, p.parent, p.position,
    p.visibility, p.created_at, p.updated_at,
    (SELECT count(*) FROM memory_pages c WHERE c.scope = p.scope AND c.parent = p.page_index) AS child_count
"""

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


def _marks(values: Sequence[object]) -> str:
    return ", ".join(["%s"] * len(values))


class PgTx:
    """One open PostgreSQL transaction on one scope's tree."""

    def __init__(self, cursor: Any, scope: str) -> None:
        self.conn = cursor
        """A psycopg cursor returning dict rows; `execute` returns it, as a connection's does."""
        self.scope = scope

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return list(self.conn.execute(sql, params).fetchall())

    def _pages(self, where: str, params: Sequence[Any] = (), order: str = "p.position") -> list[Page]:
        sql = f"SELECT {_PAGE_COLUMNS} FROM memory_pages p WHERE p.scope = %s AND {where} ORDER BY {order}"  # noqa: S608 - constant SQL and placeholders only
        return [Page.from_row(row) for row in self._rows(sql, (self.scope, *params))]

    # ------------------------------------------------------------------ segments

    def segments(self) -> list[Segment]:
        rows = self._rows(
            'SELECT * FROM memory_segments WHERE scope = %s ORDER BY ordinal, id COLLATE "C"', (self.scope,)
        )
        return [Segment.from_row(row) for row in rows]

    def segment(self, segment_id: str) -> Segment | None:
        rows = self._rows("SELECT * FROM memory_segments WHERE scope = %s AND id = %s", (self.scope, segment_id))
        return Segment.from_row(rows[0]) if rows else None

    def ensure_segments(self, specs: Sequence[SegmentSpec]) -> None:
        """As `SqliteTx.ensure_segments`: create the missing, make existing ones match, keep the unlisted."""
        stamp = now()
        configured = {spec.id for spec in specs}
        for ordinal, spec in enumerate(specs):
            values = (spec.name, spec.type, spec.description, spec.effective_permission, ordinal)
            if self.segment(spec.id) is None:
                self.conn.execute(
                    "INSERT INTO memory_segments (name, type, description, permission, ordinal, scope, id,"
                    " created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (*values, self.scope, spec.id, stamp, stamp),
                )
                self._insert(f"{spec.id}-0", spec.id, "contents", spec.name, spec.description, None, None, "expanded")
                self._seed(spec.id, f"{spec.id}-0", spec.pages)
            else:
                self.conn.execute(
                    "UPDATE memory_segments SET name = %s, type = %s, description = %s, permission = %s, ordinal = %s,"
                    " updated_at = CASE WHEN name IS NOT DISTINCT FROM %s AND type IS NOT DISTINCT FROM %s"
                    " AND description IS NOT DISTINCT FROM %s AND permission IS NOT DISTINCT FROM %s"
                    " THEN updated_at ELSE %s END WHERE scope = %s AND id = %s",
                    (*values, *values[:4], stamp, self.scope, spec.id),
                )
            if spec.type == "system":  # Memci: a system segment's root always shows
                self.conn.execute(
                    "UPDATE memory_pages SET visibility = 'expanded' WHERE scope = %s AND page_index = %s",
                    (self.scope, f"{spec.id}-0"),
                )
        others = [s for s in self.segments() if s.id not in configured]
        for ordinal, segment in enumerate(others, start=len(specs)):
            self.conn.execute(
                "UPDATE memory_segments SET ordinal = %s WHERE scope = %s AND id = %s",
                (ordinal, self.scope, segment.id),
            )

    def _seed(self, segment_id: str, parent: str, pages: Iterable[Any]) -> None:
        for seed in pages:
            visibility: Visibility = "hidden" if seed.hidden else "expanded"
            kind: Kind = "detail" if seed.detail is not None else "contents"
            page = self.insert_page(segment_id, kind, seed.name, seed.description, seed.detail, parent, visibility)
            self._seed(segment_id, page.index, seed.pages)

    # ------------------------------------------------------------------ reading pages

    def page(self, index: str) -> Page | None:
        found = self._pages("p.page_index = %s", (index,))
        return found[0] if found else None

    def children(self, index: str) -> list[Page]:
        return self._pages("p.parent = %s", (index,))

    def ancestors(self, index: str) -> list[Page]:
        rows = self._rows(
            f"""
            WITH RECURSIVE up(page_index, depth) AS (
                SELECT parent, 1 FROM memory_pages WHERE scope = %s AND page_index = %s AND parent IS NOT NULL
                UNION ALL
                SELECT p.parent, up.depth + 1 FROM memory_pages p JOIN up ON p.page_index = up.page_index
                WHERE p.scope = %s AND p.parent IS NOT NULL
            )
            SELECT {_PAGE_COLUMNS} FROM memory_pages p JOIN up ON p.page_index = up.page_index
            WHERE p.scope = %s ORDER BY up.depth
            """,  # noqa: S608 - constant SQL and placeholders only
            (self.scope, index, self.scope, self.scope),
        )
        return [Page.from_row(row) for row in rows]

    def segment_pages(self, segment_ids: Sequence[str]) -> list[Page]:
        return self._pages(f"p.segment_id IN ({_marks(segment_ids)})", segment_ids, order="p.parent, p.position")

    def index_names(self, segment_ids: Sequence[str]) -> list[tuple[str, str]]:
        rows = self._rows(
            f"SELECT page_index, name FROM memory_pages WHERE scope = %s AND segment_id IN ({_marks(segment_ids)})",  # noqa: S608 - constant SQL and placeholders only
            (self.scope, *segment_ids),
        )
        return [(row["page_index"], row["name"]) for row in rows]

    # ------------------------------------------------------------------ changing pages

    def _insert(  # noqa: PLR0917 - one column each
        self,
        index: str,
        segment_id: str,
        kind: Kind,
        name: str,
        description: str,
        detail: str | None,
        parent: str | None,
        visibility: Visibility,
    ) -> Page:
        stamp = now()
        position = 0
        if parent is not None:
            rows = self._rows(
                "SELECT coalesce(max(position) + 1, 0) AS next FROM memory_pages WHERE scope = %s AND parent = %s",
                (self.scope, parent),
            )
            position = int(rows[0]["next"])
        self.conn.execute(
            "INSERT INTO memory_pages (scope, page_index, segment_id, kind, name, description, detail, parent,"
            " position, visibility, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                self.scope,
                index,
                segment_id,
                kind,
                name,
                description,
                detail,
                parent,
                position,
                visibility,
                stamp,
                stamp,
            ),
        )
        page = self.page(index)
        assert page is not None
        return page

    def insert_page(  # noqa: PLR0917 - one column each
        self,
        segment_id: str,
        kind: Kind,
        name: str,
        description: str,
        detail: str | None,
        parent: str,
        visibility: Visibility = "expanded",
    ) -> Page:
        rows = self._rows(
            "UPDATE memory_segments SET next_page = next_page + 1 WHERE scope = %s AND id = %s"
            " RETURNING next_page - 1 AS number",
            (self.scope, segment_id),
        )
        index = f"{segment_id}-{rows[0]['number']}"
        return self._insert(index, segment_id, kind, name, description, detail, parent, visibility)

    def update_page(self, index: str, changes: dict[str, str]) -> None:
        allowed = {"name", "description", "detail"}
        assert set(changes) <= allowed, changes
        if not changes:
            return
        assignments = ", ".join(f"{column} = %s" for column in changes)
        self.conn.execute(
            f"UPDATE memory_pages SET {assignments}, updated_at = %s WHERE scope = %s AND page_index = %s",  # noqa: S608 - constant SQL and placeholders only
            (*changes.values(), now(), self.scope, index),
        )

    def set_visibility(self, indexes: Iterable[str], visibility: Visibility) -> None:
        self.conn.executemany(
            "UPDATE memory_pages SET visibility = %s WHERE scope = %s AND page_index = %s",
            [(visibility, self.scope, index) for index in indexes],
        )

    def move(self, page: Page, parent: str, position: int | None) -> None:
        self.conn.execute(
            "UPDATE memory_pages SET position = position - 1 WHERE scope = %s AND parent = %s AND position > %s",
            (self.scope, page.parent, page.position),
        )
        count = self.child_count(parent, excluding=page.index)
        target = count if position is None else min(position, count)
        self.conn.execute(
            "UPDATE memory_pages SET position = position + 1"
            " WHERE scope = %s AND parent = %s AND position >= %s AND page_index != %s",
            (self.scope, parent, target, page.index),
        )
        stamp = now() if parent != page.parent else page.updated_at
        self.conn.execute(
            "UPDATE memory_pages SET parent = %s, position = %s, updated_at = %s WHERE scope = %s AND page_index = %s",
            (parent, target, stamp, self.scope, page.index),
        )

    def child_count(self, index: str, excluding: str | None = None) -> int:
        rows = self._rows(
            "SELECT count(*) AS n FROM memory_pages WHERE scope = %s AND parent = %s"
            " AND page_index IS DISTINCT FROM %s",
            (self.scope, index, excluding),
        )
        return int(rows[0]["n"])

    def remove_subtree(self, page: Page) -> int:
        cursor = self.conn.execute(
            """
            WITH RECURSIVE sub(page_index) AS (
                SELECT %s::text
                UNION ALL
                SELECT p.page_index FROM memory_pages p JOIN sub ON p.parent = sub.page_index WHERE p.scope = %s
            )
            DELETE FROM memory_pages WHERE scope = %s AND page_index IN (SELECT page_index FROM sub)
            """,
            (page.index, self.scope, self.scope),
        )
        removed = int(cursor.rowcount)
        self.conn.execute(
            "UPDATE memory_pages SET position = position - 1 WHERE scope = %s AND parent = %s AND position > %s",
            (self.scope, page.parent, page.position),
        )
        return removed

    # ------------------------------------------------------------------ find_page's reads

    def newest_matching(
        self, terms: Sequence[str], limit: int, *, every: bool, column: Column | None, segment_ids: Sequence[str] | None
    ) -> list[int]:
        columns = [column] if column else ["name", "description", "detail"]
        one = "(" + " OR ".join(f"p.{c} ILIKE %s" for c in columns) + ")"
        where = (" AND " if every else " OR ").join([one] * len(terms))
        params: list[Any] = [self.scope]
        for term in terms:
            params.extend([like_pattern(term)] * len(columns))
        segments = ""
        if segment_ids is not None:
            segments = f" AND p.segment_id IN ({_marks(segment_ids)})"
            params.extend(segment_ids)
        rows = self._rows(
            f"SELECT p.id FROM memory_pages p WHERE p.scope = %s AND ({where}){segments} ORDER BY p.id DESC LIMIT %s",  # noqa: S608 - constant SQL and placeholders only
            (*params, limit),
        )
        return [int(row["id"]) for row in rows]

    def containing(self, term: str, segment_ids: Sequence[str], limit: int) -> list[int]:
        pattern = like_pattern(term)
        rows = self._rows(
            f"""
            SELECT p.id FROM memory_pages p
            WHERE p.scope = %s AND (p.name ILIKE %s OR p.description ILIKE %s OR p.detail ILIKE %s)
            AND p.segment_id IN ({_marks(segment_ids)})
            ORDER BY p.id LIMIT %s
            """,  # noqa: S608 - constant SQL and placeholders only
            (self.scope, pattern, pattern, pattern, *segment_ids, limit),
        )
        return [int(row["id"]) for row in rows]

    def texts(self, rowids: Sequence[int]) -> list[tuple[int, str, str, str, str]]:
        rows = self._rows(
            "SELECT id, page_index, name, description, coalesce(detail, '') AS detail FROM memory_pages"
            " WHERE scope = %s AND id = ANY(%s)",
            (self.scope, list(rowids)),
        )
        return [(int(r["id"]), r["page_index"], r["name"], r["description"], r["detail"]) for r in rows]

    def page_count(self) -> int:
        rows = self._rows("SELECT count(*) AS n FROM memory_pages WHERE scope = %s", (self.scope,))
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


def migrate_sync(backend: PostgresBackend, part: str, steps: Sequence[Sequence[str]]) -> None:
    """`store.schema.migrate` from a thread: `part`'s steps not yet applied, under the store's migration lock."""
    lock = ("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
    *_, rows = backend.transaction_sync(
        [lock, (SCHEMA_TABLE, ()), ("SELECT version FROM attp_schema WHERE part = ?", (part,))]
    )
    done = int(rows[0][0]) if rows else 0
    if done >= len(steps):
        return
    statements: list[tuple[str, Sequence[Any]]] = [lock]
    for step in steps[done:]:
        statements.extend((sql, ()) for sql in step)
    statements.append(
        (
            "INSERT INTO attp_schema (part, version) VALUES (?, ?) "
            "ON CONFLICT (part) DO UPDATE SET version = excluded.version WHERE attp_schema.version < excluded.version",
            (part, len(steps)),
        )
    )
    backend.transaction_sync(statements)


def busy(wait_s: float) -> ToolError:
    return ToolError(
        "MEMORY_BUSY",
        f"The memory database stayed locked by another writer for {wait_s:g} s.",
        solution="Call the tool again; nothing was changed by this call.",
    )
