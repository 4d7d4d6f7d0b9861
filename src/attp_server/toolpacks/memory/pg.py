"""The page tree on PostgreSQL, for replicas that share one database (``database_url = "postgresql://..."``).

The same tree as on SQLite, in two tables (``memory_segments``, ``memory_pages``) shared by every
scope: a `scope` column keeps the server's shared memory, each tenant's and each session's apart,
and every query names it. Search uses pg_trgm GIN indexes (substring match of 3+ characters, as
SQLite's trigram FTS5); the ranking itself is search.py's, the same on both databases.

Every tool call is one transaction on a pooled connection. A write first takes a transaction-level
advisory lock on its scope, so writers of one scope run one at a time (as ``BEGIN IMMEDIATE`` makes
them on SQLite) whichever replica they are on; a read runs in one REPEATABLE READ snapshot. Within a
run, waits (for a connection, for the lock) and statements stop at the run's deadline.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

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

POOL_MAX = 16
"""Connections one server process keeps to the database for the memory tools (tools run in threads)."""

SCHEMA_LOCK = 0x6174_7470_6D65_6D
"""Advisory lock key taken while creating or upgrading the tables (several replicas may start at once)."""

PG_SCHEMA_VERSION = 1

_PAGE_COLUMNS = """
    p.id, p.page_index, p.segment_id, p.kind, p.name, p.description, p.detail, p.parent, p.position,
    p.visibility, p.created_at, p.updated_at,
    (SELECT count(*) FROM memory_pages c WHERE c.scope = p.scope AND c.parent = p.page_index) AS child_count
"""

_SCHEMA = (
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE TABLE IF NOT EXISTS memory_schema (version INTEGER NOT NULL)",
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
)


# ---------------------------------------------------------------------------------- connections

_pools: dict[str, Any] = {}
_pools_lock = threading.Lock()


def shared_pool(url: str) -> Any:
    """This process's connection pool for `url` (one for every scope), opened on first use."""
    with _pools_lock:
        pool = _pools.get(url)
        if pool is None:
            try:
                from psycopg.rows import dict_row
                from psycopg_pool import ConnectionPool
            except ImportError:
                raise ToolpackLoadError(
                    "toolpack 'memory': database_url is PostgreSQL, and psycopg is not installed; "
                    "install attp-server[postgres]"
                ) from None
            pool = ConnectionPool(
                url,
                min_size=1,
                max_size=POOL_MAX,
                kwargs={"autocommit": True, "row_factory": dict_row},
                name="attp-memory",
                open=False,
            )
            pool.open(wait=False)
            _pools[url] = pool
        return pool


@atexit.register
def _close_pools() -> None:
    with _pools_lock:
        for pool in _pools.values():
            pool.close()
        _pools.clear()


# ---------------------------------------------------------------------------------- one transaction


def _marks(values: Sequence[object]) -> str:
    return ", ".join(["%s"] * len(values))


class PgTx:
    """One open PostgreSQL transaction on one scope's tree."""

    def __init__(self, conn: Any, scope: str) -> None:
        self.conn = conn
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
        with self.conn.cursor() as cursor:
            cursor.executemany(
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
        self.pool = shared_pool(url)

    def open(self, segments: Sequence[SegmentSpec]) -> None:
        """Create (or check) the tables, then reconcile this scope's segments."""
        with self.pool.connection(timeout=30) as conn:
            conn.execute("BEGIN")
            try:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                for statement in _SCHEMA:
                    conn.execute(statement)
                rows = conn.execute("SELECT max(version) AS v FROM memory_schema").fetchall()
                found = rows[0]["v"] if rows else None
                if found is None:
                    conn.execute("INSERT INTO memory_schema (version) VALUES (%s)", (PG_SCHEMA_VERSION,))
                elif found > PG_SCHEMA_VERSION:
                    raise ToolpackLoadError(
                        f"toolpack 'memory': the database has memory schema version {found}, newer than this "
                        f"attp-server understands ({PG_SCHEMA_VERSION}); upgrade attp-server"
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        with self.transaction(write=True) as tx:
            tx.ensure_segments(segments)

    def close(self) -> None:
        """Nothing of its own to close: the pool is the process's, shared by every scope."""

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[PgTx]:
        """One transaction: committed when the block ends normally, rolled back on any exception."""
        import psycopg
        from psycopg_pool import PoolTimeout

        left = current_call().remaining()
        if left == 0.0:
            raise stopped()
        wait_s = self.busy_timeout_s if left is None else min(self.busy_timeout_s, left)
        started = time.monotonic()
        try:
            with self.pool.connection(timeout=wait_s) as conn:
                try:
                    if write:
                        conn.execute("BEGIN")
                    else:
                        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{max(1, int(wait_s * 1000))}ms",))
                    if left is not None:
                        remaining = max(0.001, left - (time.monotonic() - started))
                        conn.execute(
                            "SELECT set_config('statement_timeout', %s, true)", (f"{max(1, int(remaining * 1000))}ms",)
                        )
                    if write:
                        conn.execute(
                            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("attp memory " + self.scope,)
                        )
                    yield PgTx(conn, self.scope)
                    conn.execute("COMMIT")
                except BaseException:
                    if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                        conn.execute("ROLLBACK")
                    raise
        except PoolTimeout:
            raise busy(wait_s) from None
        except psycopg.errors.LockNotAvailable:
            raise busy(wait_s) from None
        except psycopg.errors.QueryCanceled:
            raise stopped() from None


def busy(wait_s: float) -> ToolError:
    return ToolError(
        "MEMORY_BUSY",
        f"The memory database stayed locked by another writer for {wait_s:g} s.",
        solution="Call the tool again; nothing was changed by this call.",
    )
