"""The page tree: segments, pages, and the operations on them, without permission checks.

`Tx` is what the tools use: one transaction's queries and changes. This module implements it on
SQLite (`SqliteTx`, `Store`); `pg` implements both (`PageStore`) on PostgreSQL, for replicas sharing one database.

On SQLite, every tool call is one transaction on its own connection (`Store.transaction`): tools run in
threads, possibly several at once, and several server processes may share the database file. Writes
take the write lock up front (``BEGIN IMMEDIATE``), so a read-modify-write such as "append a child
at the end" can never interleave with another writer; WAL mode lets readers go on meanwhile.
"""

from __future__ import annotations

import sqlite3
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from attp_server.store.layout import private_file
from attp_server.toolpack import ToolError, current_call
from attp_server.toolpacks.memory.options import Permission, SeedPage, SegmentSpec, SegmentType
from attp_server.toolpacks.memory.schema import check_sqlite, connect, migrate

PROGRESS_STEPS = 10_000
"""SQLite VM steps between two looks at the run's deadline (a few hundred microseconds)."""

Kind = Literal["contents", "detail"]
Visibility = Literal["expanded", "hidden"]
Column = Literal["name", "description"]
_CHUNK = 500
"""Page ids per ``IN (...)`` list, well under SQLite's limit on parameters."""

_PAGE_COLUMNS = """
    p.id, p.page_index, p.segment_id, p.kind, p.name, p.description, p.detail, p.parent, p.position,
    p.visibility, p.created_at, p.updated_at,
    (SELECT count(*) FROM pages c WHERE c.parent = p.page_index) AS child_count
"""


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Segment:
    id: str
    name: str
    type: SegmentType
    description: str
    permission: Permission
    ordinal: int

    @property
    def root_index(self) -> str:
        return f"{self.id}-0"

    @classmethod
    def from_row(cls, row: Any) -> Segment:
        """From a row by column name (sqlite3.Row, or psycopg's dict row)."""
        return cls(
            id=row["id"],
            name=row["name"],
            type=row["type"],
            description=row["description"],
            permission=row["permission"],
            ordinal=row["ordinal"],
        )


@dataclass(frozen=True)
class Page:
    rowid: int
    index: str
    segment_id: str
    kind: Kind
    name: str
    description: str
    detail: str | None
    parent: str | None
    position: int
    visibility: Visibility
    created_at: str
    updated_at: str
    child_count: int

    @property
    def is_root(self) -> bool:
        return self.parent is None

    @classmethod
    def from_row(cls, row: Any) -> Page:
        """From a row by column name (sqlite3.Row, or psycopg's dict row)."""
        return cls(
            rowid=row["id"],
            index=row["page_index"],
            segment_id=row["segment_id"],
            kind=row["kind"],
            name=row["name"],
            description=row["description"],
            detail=row["detail"],
            parent=row["parent"],
            position=row["position"],
            visibility=row["visibility"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            child_count=row["child_count"],
        )


class Tx(Protocol):
    """One open transaction: the queries and changes the tools are made of, on either database."""

    def segments(self) -> list[Segment]: ...
    def segment(self, segment_id: str) -> Segment | None: ...
    def ensure_segments(self, specs: Sequence[SegmentSpec]) -> None: ...
    def page(self, index: str) -> Page | None: ...
    def children(self, index: str) -> list[Page]: ...
    def ancestors(self, index: str) -> list[Page]: ...
    def segment_pages(self, segment_ids: Sequence[str]) -> list[Page]: ...
    def index_names(self, segment_ids: Sequence[str]) -> list[tuple[str, str]]: ...
    def insert_page(  # noqa: PLR0917 - one column each
        self,
        segment_id: str,
        kind: Kind,
        name: str,
        description: str,
        detail: str | None,
        parent: str,
        visibility: Visibility = "expanded",
    ) -> Page: ...
    def update_page(self, index: str, changes: dict[str, str]) -> None: ...
    def set_visibility(self, indexes: Iterable[str], visibility: Visibility) -> None: ...
    def move(self, page: Page, parent: str, position: int | None) -> None: ...
    def child_count(self, index: str, excluding: str | None = None) -> int: ...
    def remove_subtree(self, page: Page) -> int: ...

    # find_page's reads (search.py)
    def newest_matching(
        self, terms: Sequence[str], limit: int, *, every: bool, column: Column | None, segment_ids: Sequence[str] | None
    ) -> list[int]:
        """Ids of the newest `limit` pages containing any (`every`: all) of `terms` (3+ characters each) in their
        name, description or detail (`column`: only there), of `segment_ids` (None: any segment), from the index."""
        ...

    def containing(self, term: str, segment_ids: Sequence[str], limit: int) -> list[int]:
        """Ids of the first `limit` pages containing `term` (any length) in name, description or detail."""
        ...

    def texts(self, rowids: Sequence[int]) -> list[tuple[int, str, str, str, str]]:
        """(id, index, name, description, detail or '') of these pages."""
        ...

    def page_count(self) -> int:
        """About how many pages there are (for BM25's IDF)."""
        ...


class PageStore(Protocol):
    """Where the page tree lives: opened once, then one transaction per tool call."""

    def open(self, segments: Sequence[SegmentSpec]) -> None: ...
    def close(self) -> None: ...
    def transaction(self, *, write: bool) -> AbstractContextManager[Tx]: ...


def like_pattern(term: str) -> str:
    """A LIKE pattern matching `term` anywhere (backslash escapes the wildcards)."""
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


class SqliteTx:
    """One open SQLite transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def _pages(self, where: str, params: Sequence[Any] = (), order: str = "p.position") -> list[Page]:
        sql = f"SELECT {_PAGE_COLUMNS} FROM pages p WHERE {where} ORDER BY {order}"  # noqa: S608 - constant SQL and placeholders only
        rows = self.conn.execute(sql, params)
        return [Page.from_row(row) for row in rows]

    # ------------------------------------------------------------------ segments

    def segments(self) -> list[Segment]:
        rows = self.conn.execute("SELECT * FROM segments ORDER BY ordinal, id")
        return [Segment.from_row(row) for row in rows]

    def segment(self, segment_id: str) -> Segment | None:
        row = self.conn.execute("SELECT * FROM segments WHERE id = ?", (segment_id,)).fetchone()
        return Segment.from_row(row) if row else None

    def ensure_segments(self, specs: Sequence[SegmentSpec]) -> None:
        """Create missing segments (with their root and seed pages); make existing ones match `specs`.

        Segments in the database that `specs` no longer lists keep their pages and settings and
        are shown after the configured ones.
        """
        stamp = now()
        configured = {spec.id for spec in specs}
        for ordinal, spec in enumerate(specs):
            values = (spec.name, spec.type, spec.description, spec.effective_permission, ordinal)
            if self.segment(spec.id) is None:
                self.conn.execute(
                    "INSERT INTO segments (name, type, description, permission, ordinal, id, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (*values, spec.id, stamp, stamp),
                )
                self._insert(f"{spec.id}-0", spec.id, "contents", spec.name, spec.description, None, None, "expanded")
                self._seed(spec.id, f"{spec.id}-0", spec.pages)
            else:
                self.conn.execute(
                    "UPDATE segments SET name = ?, type = ?, description = ?, permission = ?, ordinal = ?,"
                    " updated_at = CASE WHEN name IS ? AND type IS ? AND description IS ? AND permission IS ?"
                    " THEN updated_at ELSE ? END WHERE id = ?",
                    (*values, *values[:4], stamp, spec.id),
                )
            if spec.type == "system":  # Memci: a system segment's root always shows
                self.conn.execute("UPDATE pages SET visibility = 'expanded' WHERE page_index = ?", (f"{spec.id}-0",))
        others = [s for s in self.segments() if s.id not in configured]
        for ordinal, segment in enumerate(others, start=len(specs)):
            self.conn.execute("UPDATE segments SET ordinal = ? WHERE id = ?", (ordinal, segment.id))

    def _seed(self, segment_id: str, parent: str, pages: Iterable[SeedPage]) -> None:
        for seed in pages:
            visibility: Visibility = "hidden" if seed.hidden else "expanded"
            kind: Kind = "detail" if seed.detail is not None else "contents"
            page = self.insert_page(segment_id, kind, seed.name, seed.description, seed.detail, parent, visibility)
            self._seed(segment_id, page.index, seed.pages)

    # ------------------------------------------------------------------ reading pages

    def page(self, index: str) -> Page | None:
        found = self._pages("p.page_index = ?", (index,))
        return found[0] if found else None

    def children(self, index: str) -> list[Page]:
        return self._pages("p.parent = ?", (index,))

    def ancestors(self, index: str) -> list[Page]:
        """From the parent up to the root."""
        rows = self.conn.execute(
            f"""
            WITH RECURSIVE up(page_index, depth) AS (
                SELECT parent, 1 FROM pages WHERE page_index = ? AND parent IS NOT NULL
                UNION ALL
                SELECT p.parent, up.depth + 1 FROM pages p JOIN up ON p.page_index = up.page_index
                WHERE p.parent IS NOT NULL
            )
            SELECT {_PAGE_COLUMNS} FROM pages p JOIN up ON p.page_index = up.page_index ORDER BY up.depth
            """,  # noqa: S608 - constant SQL and placeholders only
            (index,),
        )
        return [Page.from_row(row) for row in rows]

    def segment_pages(self, segment_ids: Sequence[str]) -> list[Page]:
        """Every page of these segments, siblings in order (for rendering a whole tree)."""
        marks = ", ".join("?" * len(segment_ids))
        return self._pages(f"p.segment_id IN ({marks})", segment_ids, order="p.parent, p.position")

    def index_names(self, segment_ids: Sequence[str]) -> list[tuple[str, str]]:
        marks = ", ".join("?" * len(segment_ids))
        rows = self.conn.execute(
            f"SELECT page_index, name FROM pages WHERE segment_id IN ({marks})",  # noqa: S608 - constant SQL and placeholders only
            tuple(segment_ids),
        )
        return [(row[0], row[1]) for row in rows]

    def search_fts(self, match: str, segment_ids: Sequence[str], limit: int) -> list[tuple[Page, float]]:
        """Pages whose name, description or detail match an FTS5 query, with their bm25 score (lower is better).

        Weights: a hit in the name counts 10 times one in the detail, the description 4 times.
        """
        marks = ", ".join("?" * len(segment_ids))
        rows = self.conn.execute(
            f"""
            SELECT {_PAGE_COLUMNS}, bm25(page_fts, 10.0, 4.0, 1.0) AS score
            FROM page_fts JOIN pages p ON p.id = page_fts.rowid
            WHERE page_fts MATCH ? AND p.segment_id IN ({marks})
            ORDER BY score LIMIT ?
            """,  # noqa: S608 - constant SQL and placeholders only
            (match, *segment_ids, limit),
        )
        return [(Page.from_row(row), float(row["score"])) for row in rows]

    def search_like(self, term: str, segment_ids: Sequence[str], limit: int) -> list[Page]:
        """Pages containing `term` (too short for the trigram index) in name, description or detail."""
        pattern = "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        marks = ", ".join("?" * len(segment_ids))
        rows = self.conn.execute(
            f"""
            SELECT {_PAGE_COLUMNS} FROM pages p
            WHERE (p.name LIKE ? ESCAPE '\\' OR p.description LIKE ? ESCAPE '\\' OR p.detail LIKE ? ESCAPE '\\')
            AND p.segment_id IN ({marks})
            ORDER BY p.id LIMIT ?
            """,  # noqa: S608 - constant SQL and placeholders only
            (pattern, pattern, pattern, *segment_ids, limit),
        )
        return [Page.from_row(row) for row in rows]

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
            row = self.conn.execute("SELECT coalesce(max(position) + 1, 0) FROM pages WHERE parent = ?", (parent,))
            position = int(row.fetchone()[0])
        self.conn.execute(
            "INSERT INTO pages (page_index, segment_id, kind, name, description, detail, parent, position,"
            " visibility, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (index, segment_id, kind, name, description, detail, parent, position, visibility, stamp, stamp),
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
        """Add a page as the last child of `parent`, numbered from the segment's counter (never reused)."""
        row = self.conn.execute(
            "UPDATE segments SET next_page = next_page + 1 WHERE id = ? RETURNING next_page - 1", (segment_id,)
        ).fetchall()
        index = f"{segment_id}-{row[0][0]}"
        return self._insert(index, segment_id, kind, name, description, detail, parent, visibility)

    def update_page(self, index: str, changes: dict[str, str]) -> None:
        """Set some of name, description, detail."""
        allowed = {"name", "description", "detail"}
        assert set(changes) <= allowed, changes
        if not changes:
            return
        assignments = ", ".join(f"{column} = ?" for column in changes)
        self.conn.execute(
            f"UPDATE pages SET {assignments}, updated_at = ? WHERE page_index = ?",  # noqa: S608 - constant SQL and placeholders only
            (*changes.values(), now(), index),
        )

    def set_visibility(self, indexes: Iterable[str], visibility: Visibility) -> None:
        self.conn.executemany(
            "UPDATE pages SET visibility = ? WHERE page_index = ?", ((visibility, index) for index in indexes)
        )

    def move(self, page: Page, parent: str, position: int | None) -> None:
        """Make `page` the child of `parent` at `position` (None: last), keeping both sibling lists dense."""
        self.conn.execute(
            "UPDATE pages SET position = position - 1 WHERE parent = ? AND position > ?", (page.parent, page.position)
        )
        count = self.child_count(parent, excluding=page.index)
        target = count if position is None else min(position, count)
        self.conn.execute(
            "UPDATE pages SET position = position + 1 WHERE parent = ? AND position >= ? AND page_index != ?",
            (parent, target, page.index),
        )
        stamp = now() if parent != page.parent else page.updated_at
        self.conn.execute(
            "UPDATE pages SET parent = ?, position = ?, updated_at = ? WHERE page_index = ?",
            (parent, target, stamp, page.index),
        )

    def child_count(self, index: str, excluding: str | None = None) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM pages WHERE parent = ? AND page_index IS NOT ?", (index, excluding)
        ).fetchone()
        return int(row[0])

    def remove_subtree(self, page: Page) -> int:
        """Delete a page and everything under it; return how many pages went."""
        cursor = self.conn.execute(
            """
            WITH RECURSIVE sub(page_index) AS (
                SELECT ? UNION ALL SELECT p.page_index FROM pages p JOIN sub ON p.parent = sub.page_index
            )
            DELETE FROM pages WHERE page_index IN sub
            """,
            (page.index,),
        )
        self.conn.execute(
            "UPDATE pages SET position = position - 1 WHERE parent = ? AND position > ?", (page.parent, page.position)
        )
        return cursor.rowcount

    # ------------------------------------------------------------------ find_page's reads

    def newest_matching(
        self, terms: Sequence[str], limit: int, *, every: bool, column: Column | None, segment_ids: Sequence[str] | None
    ) -> list[int]:
        phrases = [(f"{{{column}}} : " if column else "") + _phrase(t) for t in terms]
        match = (" AND " if every else " OR ").join(phrases)
        if segment_ids is None:
            sql = "SELECT rowid FROM page_fts WHERE page_fts MATCH ? ORDER BY rowid DESC LIMIT ?"
            params: tuple[object, ...] = (match, limit)
        else:
            sql = f"""
                SELECT page_fts.rowid FROM page_fts JOIN pages p ON p.id = page_fts.rowid
                WHERE page_fts MATCH ? AND p.segment_id IN ({", ".join("?" * len(segment_ids))})
                ORDER BY page_fts.rowid DESC LIMIT ?
            """  # noqa: S608 - constant SQL and placeholders only
            params = (match, *segment_ids, limit)
        return [int(row[0]) for row in self.conn.execute(sql, params)]

    def containing(self, term: str, segment_ids: Sequence[str], limit: int) -> list[int]:
        # Forwards: a scan backwards is a quarter slower when nothing matches and it reads them all.
        pattern = like_pattern(term)
        rows = self.conn.execute(
            f"""
            SELECT p.id FROM pages p
            WHERE (p.name LIKE ? ESCAPE '\\' OR p.description LIKE ? ESCAPE '\\' OR p.detail LIKE ? ESCAPE '\\')
            AND p.segment_id IN ({", ".join("?" * len(segment_ids))})
            ORDER BY p.id LIMIT ?
            """,  # noqa: S608 - constant SQL and placeholders only
            (pattern, pattern, pattern, *segment_ids, limit),
        )
        return [int(row[0]) for row in rows]

    def texts(self, rowids: Sequence[int]) -> list[tuple[int, str, str, str, str]]:
        out: list[tuple[int, str, str, str, str]] = []
        cursor = self.conn.cursor()
        cursor.row_factory = None  # plain tuples: several hundred rows per search
        for start in range(0, len(rowids), _CHUNK):
            chunk = rowids[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            sql = f"SELECT id, page_index, name, description, coalesce(detail, '') FROM pages WHERE id IN ({marks})"  # noqa: S608 - constant SQL and placeholders only
            rows = cursor.execute(sql, chunk)
            out.extend(rows)
        return out

    def page_count(self) -> int:
        """The highest page id: near enough, since ids are never reused, and read from the index alone."""
        return int(self.conn.execute("SELECT coalesce(max(id), 0) FROM pages").fetchone()[0])


class Store:
    """The database file: opened and migrated once at startup, then one connection per transaction."""

    def __init__(self, path: Path, busy_timeout_s: float = 5.0) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self._keeper: weakref.finalize[[], Store] | None = None

    def open(self, segments: Sequence[SegmentSpec]) -> None:
        """Create the file if needed, switch it to WAL, migrate the schema, and reconcile the segments."""
        check_sqlite()
        private_file(self.path)  # for the server's user only, and so its -wal and -shm files
        conn = connect(self.path, self.busy_timeout_s, check_same_thread=False)
        try:
            # Persistent in the file; readers no longer block the writer, nor the writer them.
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise sqlite3.OperationalError(f"cannot switch {self.path.name} to WAL mode (got {mode!r})")
            migrate(conn)
        except BaseException:
            conn.close()
            raise
        # Held open for the store's lifetime, never used: when the last connection to a WAL database
        # closes, SQLite checkpoints and deletes the WAL, which would cost an fsync on every tool call.
        self._keeper = weakref.finalize(self, conn.close)
        with self.transaction(write=True) as tx:
            tx.ensure_segments(segments)

    def close(self) -> None:
        """Close the kept connection (it also closes when the store is garbage-collected)."""
        if self._keeper is not None:
            self._keeper()

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[SqliteTx]:
        """One transaction: committed when the block ends normally, rolled back on any exception.

        Within a run, no wait for a lock and no query goes on past the run's deadline: nobody waits
        for the answer any more, and the thread is needed by others.
        """
        left = current_call().remaining()
        if left == 0.0:
            raise stopped()
        wait_s = self.busy_timeout_s if left is None else min(self.busy_timeout_s, left)
        conn = connect(self.path, wait_s)
        if left is not None:
            deadline = time.monotonic() + left
            conn.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            yield SqliteTx(conn)
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if "interrupted" in str(exc):
                raise stopped() from None
            if "locked" in str(exc) or "busy" in str(exc):
                raise ToolError(
                    "MEMORY_BUSY",
                    f"The memory database stayed locked by another writer for {wait_s:g} s.",
                    solution="Call the tool again; nothing was changed by this call.",
                ) from None
            raise
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()


def stopped() -> ToolError:
    """The error of a memory call stopped at its run's deadline."""
    return ToolError(
        "TIMEOUT",
        "The memory call was stopped at the program's time limit; nothing was changed by it.",
        solution="Do less per program: fewer or narrower memory calls.",
    )
