"""The memory database's schema, as a list of migrations, and the connection settings every caller uses.

The schema version lives in ``PRAGMA user_version``. Migrations run in one ``BEGIN IMMEDIATE``
transaction, so several server processes starting on one fresh database apply each step once, and
a crash half-way leaves the previous version intact. Never edit a released migration: add a new one.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from attp_server.toolpack import ToolpackLoadError


@dataclass(frozen=True)
class Migration:
    version: int
    title: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "segments and the page tree",
        (
            """
            CREATE TABLE segments (
                id          TEXT PRIMARY KEY,
                name        TEXT NOT NULL,
                type        TEXT NOT NULL CHECK (type IN ('system', 'user', 'tool', 'custom')),
                description TEXT NOT NULL DEFAULT '',
                permission  TEXT NOT NULL CHECK (permission IN ('read_only', 'read_write', 'system_managed')),
                ordinal     INTEGER NOT NULL DEFAULT 0,
                next_page   INTEGER NOT NULL DEFAULT 1,
                created_at  TEXT NOT NULL,
                updated_at  TEXT NOT NULL
            )
            """,
            # `id` is the stable rowid the search index refers to; `page_index` ("usr-3") is what the model sees.
            """
            CREATE TABLE pages (
                id          INTEGER PRIMARY KEY,
                page_index  TEXT NOT NULL UNIQUE,
                segment_id  TEXT NOT NULL REFERENCES segments(id),
                kind        TEXT NOT NULL CHECK (kind IN ('contents', 'detail')),
                name        TEXT NOT NULL,
                description TEXT NOT NULL DEFAULT '',
                detail      TEXT,
                parent      TEXT REFERENCES pages(page_index),
                position    INTEGER NOT NULL DEFAULT 0,
                visibility  TEXT NOT NULL CHECK (visibility IN ('expanded', 'hidden')),
                created_at  TEXT NOT NULL,
                updated_at  TEXT NOT NULL,
                CHECK ((kind = 'detail') = (detail IS NOT NULL))
            )
            """,
            "CREATE INDEX pages_by_parent ON pages(parent, position)",
            "CREATE INDEX pages_by_segment ON pages(segment_id)",
        ),
    ),
    Migration(
        2,
        "full-text search over name, description and detail",
        (
            # Trigram tokens match any substring of 3+ characters, so words inside Chinese text and
            # word stems ("tool" in "toolpacks") are found; shorter terms are matched with LIKE.
            """
            CREATE VIRTUAL TABLE page_fts USING fts5(
                name, description, detail, content='pages', content_rowid='id', tokenize='trigram'
            )
            """,
            """
            CREATE TRIGGER pages_fts_insert AFTER INSERT ON pages BEGIN
                INSERT INTO page_fts(rowid, name, description, detail)
                VALUES (new.id, new.name, new.description, new.detail);
            END
            """,
            """
            CREATE TRIGGER pages_fts_delete AFTER DELETE ON pages BEGIN
                INSERT INTO page_fts(page_fts, rowid, name, description, detail)
                VALUES ('delete', old.id, old.name, old.description, old.detail);
            END
            """,
            """
            CREATE TRIGGER pages_fts_update AFTER UPDATE OF name, description, detail ON pages BEGIN
                INSERT INTO page_fts(page_fts, rowid, name, description, detail)
                VALUES ('delete', old.id, old.name, old.description, old.detail);
                INSERT INTO page_fts(rowid, name, description, detail)
                VALUES (new.id, new.name, new.description, new.detail);
            END
            """,
            "INSERT INTO page_fts(page_fts) VALUES ('rebuild')",
        ),
    ),
)

SCHEMA_VERSION = MIGRATIONS[-1].version


def connect(path: Path, busy_timeout_s: float, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """A connection in autocommit mode: every transaction is an explicit BEGIN ... COMMIT."""
    conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=check_same_thread)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    # In WAL mode NORMAL still never corrupts and never loses a commit when a process dies; only a
    # power cut may drop the last commits. FULL would fsync on every tool call.
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Bring the database up to `target`; return the version it had before. Safe to race."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = schema_version(conn)
        if found > SCHEMA_VERSION:
            raise ToolpackLoadError(
                f"toolpack 'memory': the database has schema version {found}, newer than this attp-server "
                f"understands ({SCHEMA_VERSION}); upgrade attp-server or point db_path at another file"
            )
        for migration in MIGRATIONS:
            if found < migration.version <= target:
                for statement in migration.statements:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {migration.version:d}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return found


def check_sqlite() -> None:
    """Fail at startup, not at the first search, when this Python's SQLite lacks FTS5 trigrams."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE probe USING fts5(text, tokenize='trigram')")
    except sqlite3.OperationalError as exc:
        raise ToolpackLoadError(
            f"toolpack 'memory' needs SQLite with FTS5 and the trigram tokenizer (3.34 or newer); "
            f"this Python has SQLite {sqlite3.sqlite_version}: {exc}"
        ) from None
    finally:
        conn.close()
