"""The page tree on SQLite: `SqliteTx` (the tree's operations, `tree.TreeTx`, on one SQLite transaction, with the
FTS5 trigram searches) and `Store` (the database file); `pg` does the same on PostgreSQL, for replicas sharing one
database.

On SQLite, every tool call is one transaction on its own connection (`Store.transaction`): tools run in
threads, possibly several at once, and several server processes may share the database file. Writes
take the write lock up front (``BEGIN IMMEDIATE``), so a read-modify-write such as "append a child
at the end" can never interleave with another writer; WAL mode lets readers go on meanwhile.
"""

from __future__ import annotations

import sqlite3
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from attp_server.store.layout import private_file
from attp_server.toolpack import current_call
from attp_server.toolpacks.memory.options import SegmentSpec
from attp_server.toolpacks.memory.pages import Column, busy, like_pattern, stopped
from attp_server.toolpacks.memory.schema import check_sqlite, connect, migrate
from attp_server.toolpacks.memory.tree import SQLITE, TreeTx

PROGRESS_STEPS = 10_000
"""SQLite VM steps between two looks at the run's deadline (a few hundred microseconds)."""

_CHUNK = 500
"""Page ids per ``IN (...)`` list, well under SQLite's limit on parameters."""


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


class SqliteTx(TreeTx):
    """One open SQLite transaction."""

    dialect = SQLITE

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
                raise busy(wait_s) from None
            raise
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()
