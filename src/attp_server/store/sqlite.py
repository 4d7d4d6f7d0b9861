"""The embedded backend: one SQLite file (WAL) in the data folder.

A transaction runs on the store's own threads, on one connection behind a lock: SQLite writes one
transaction at a time anyway, and each statement here takes microseconds. A `small` one (a call
taking or giving back its session: a few rows found by key) runs at once on the event loop instead,
on a connection of its own that never waits: if the database is busy that instant (another thread or
process is writing), it is rolled back untouched and runs on a thread like the rest. The hop to a
thread and back costs more than such a transaction; on a loaded machine, several times more.

What could make the loop wait is kept off it: with ``synchronous = NORMAL`` a commit in WAL mode
only appends to the log, and the loop's connection never checkpoints (copies the log into the
database and syncs it to disk); a thread does that after every `CHECKPOINT_EVERY` of its commits.

Several processes on one machine may share the file (WAL mode and a busy timeout); several machines
need PostgreSQL.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import anyio

from attp_server.store.backend import Backend, Rows, Statement, StoreError
from attp_server.store.layout import private_file

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
MIN_VERSION = (3, 35, 0)  # RETURNING
CHECKPOINT_EVERY = 200
"""Commits on the event loop between two checkpoints on a thread (a commit appends a few pages to the log; SQLite's
own checkpoints come every 1,000 pages)."""
_WAIT_CODES = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED (the primary code: the low byte)


class SQLiteBackend(Backend):
    kind = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.label = str(path)
        if sqlite3.sqlite_version_info < MIN_VERSION:
            raise StoreError(f"SQLite {sqlite3.sqlite_version} is too old for the store; it needs 3.35 or later")
        try:
            private_file(path)  # for the server's user only, and so its -wal and -shm files
            self._db = self._connect(BUSY_TIMEOUT_MS / 1000)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._loop_db = self._connect(0)
            """The event loop's connection: never waits for a lock, never checkpoints."""
            self._loop_db.execute("PRAGMA wal_autocheckpoint=0")
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the store {path}: {exc}") from None
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(4)
        """The store's own threads: a burst of tool threads never keeps a call from its state."""
        self._uncheckpointed = 0

    def _connect(self, timeout_s: float) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=timeout_s)
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        return db

    async def transaction(self, statements: Sequence[Statement], *, small: bool = False) -> list[Rows]:
        if small:
            results = self._at_once(statements)
            if results is not None:
                self._uncheckpointed += 1
                if self._uncheckpointed >= CHECKPOINT_EVERY:
                    self._uncheckpointed = 0
                    with anyio.CancelScope(shield=True):  # the transaction is done: its caller must hear so
                        await anyio.to_thread.run_sync(self._checkpoint, limiter=self._limiter)
                return results
        return await anyio.to_thread.run_sync(self.transaction_sync, statements, limiter=self._limiter)

    def _at_once(self, statements: Sequence[Statement]) -> list[Rows] | None:
        """`statements` as one transaction on the loop's connection, or None (nothing done) if the database is busy."""
        db = self._loop_db
        try:
            if len(statements) == 1:  # a statement alone is a transaction of its own
                sql, params = statements[0]
                return [db.execute(sql, tuple(params)).fetchall()]
            db.execute("BEGIN IMMEDIATE")
            try:
                results = [db.execute(sql, tuple(params)).fetchall() for sql, params in statements]
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _WAIT_CODES:
                return None  # another writer holds the database: wait for it on a thread
            raise StoreError(f"the store {self.path} failed: {exc}") from None
        return results

    def _checkpoint(self) -> None:
        with self._lock:
            try:
                self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error as exc:
                logger.warning("the store %s could not checkpoint its log: %s", self.path, exc)

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
            self._loop_db.close()
            self._db.close()
