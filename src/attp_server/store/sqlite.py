"""The embedded backend: one SQLite file (WAL) in the data folder, used from a thread.

One connection per server process, behind a lock: SQLite writes one transaction at a time anyway,
and each statement here takes microseconds. Several processes on one machine may share the file
(WAL mode and a busy timeout); several machines need PostgreSQL.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import anyio

from attp_server.store.backend import Backend, Rows, Statement, StoreError

BUSY_TIMEOUT_MS = 10_000
MIN_VERSION = (3, 35, 0)  # RETURNING


class SQLiteBackend(Backend):
    kind = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.label = str(path)
        if sqlite3.sqlite_version_info < MIN_VERSION:
            raise StoreError(f"SQLite {sqlite3.sqlite_version} is too old for the store; it needs 3.35 or later")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the store {path}: {exc}") from None
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(4)
        """The store's own threads: a burst of tool threads never keeps a call from its state."""

    async def transaction(self, statements: Sequence[Statement]) -> list[Rows]:
        return await anyio.to_thread.run_sync(self.transaction_sync, statements, limiter=self._limiter)

    def transaction_sync(self, statements: Sequence[Statement]) -> list[Rows]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    results = [self._db.execute(sql, tuple(params)).fetchall() for sql, params in statements]
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"the store {self.path} failed: {exc}") from None
        return results

    async def close(self) -> None:
        with self._lock:
            self._db.close()
