"""Tables are created and brought up to date when the server starts, by each part that owns some.

`migrate(backend, part, steps)` applies the steps of `part` that the database has not seen yet and
records how many it has, in ``attp_schema``. Replicas may start at once: on PostgreSQL the steps run
under an advisory lock, on SQLite under the write lock, and every step must be idempotent
(``CREATE TABLE IF NOT EXISTS``, ``CREATE INDEX IF NOT EXISTS``, ``ADD COLUMN IF NOT EXISTS`` on
PostgreSQL), so a replica that finds the work done does it again harmlessly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attp_server.store.backend import Backend, Statement

MIGRATION_LOCK = 0x61747470  # "attp": the advisory lock id on PostgreSQL

SCHEMA_TABLE = """CREATE TABLE IF NOT EXISTS attp_schema (
    part TEXT PRIMARY KEY,
    version INTEGER NOT NULL
)"""

HANDLES: list[list[str]] = [
    [
        """CREATE TABLE IF NOT EXISTS attp_handles (
            key TEXT PRIMARY KEY,
            principal TEXT NOT NULL,
            kind TEXT NOT NULL,
            instance TEXT,
            created DOUBLE PRECISION NOT NULL,
            last_used DOUBLE PRECISION NOT NULL,
            state_bytes BIGINT NOT NULL DEFAULT 0,
            evicted INTEGER NOT NULL DEFAULT 0,
            lease TEXT,
            lease_until DOUBLE PRECISION NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX IF NOT EXISTS attp_handles_by_principal ON attp_handles (principal, last_used)",
        "CREATE INDEX IF NOT EXISTS attp_handles_by_last_used ON attp_handles (last_used)",
        "CREATE INDEX IF NOT EXISTS attp_handles_by_instance ON attp_handles (instance)",
        """CREATE TABLE IF NOT EXISTS attp_approvals (
            key TEXT NOT NULL REFERENCES attp_handles (key) ON DELETE CASCADE,
            tool TEXT NOT NULL,
            PRIMARY KEY (key, tool)
        )""",
    ],
    [  # the state in a row of its own (a database made by the first step keeps an unused state column)
        """CREATE TABLE IF NOT EXISTS attp_state (
            key TEXT PRIMARY KEY REFERENCES attp_handles (key) ON DELETE CASCADE,
            state TEXT NOT NULL
        )""",
    ],
]
"""The handles part: each handle's metadata and lease (a small row, rewritten by every call), its kept state (a
row of its own, written only when it changes: SQLite rewrites a whole row on any update), and the tools allowed
for the rest of its session."""


async def migrate(backend: Backend, part: str, steps: Sequence[Sequence[str]]) -> None:
    """Bring `part`'s tables up to `len(steps)`. Raises `StoreError`."""
    *_, rows = await backend.transaction(_asking(backend, part))
    todo = _applying(backend, part, steps, rows)
    if todo:
        await backend.transaction(todo)


def migrate_sync(backend: Backend, part: str, steps: Sequence[Sequence[str]]) -> None:
    """`migrate` for code already on a thread (a toolpack's setup). Raises `StoreError`."""
    *_, rows = backend.transaction_sync(_asking(backend, part))
    todo = _applying(backend, part, steps, rows)
    if todo:
        backend.transaction_sync(todo)


def _lock(backend: Backend) -> list[Statement]:
    # On PostgreSQL even CREATE TABLE IF NOT EXISTS races with itself: all of it runs under one advisory lock.
    return [("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))] if backend.kind == "postgresql" else []


def _asking(backend: Backend, part: str) -> list[Statement]:
    """The statements that make the schema table and read how many of `part`'s steps the database has."""
    return [*_lock(backend), (SCHEMA_TABLE, ()), ("SELECT version FROM attp_schema WHERE part = ?", (part,))]


def _applying(backend: Backend, part: str, steps: Sequence[Sequence[str]], rows: Sequence[Any]) -> list[Statement]:
    """The statements that apply the steps `rows` (the version read) says are missing, and record them; none when
    there are none."""
    done = int(rows[0][0]) if rows else 0
    if done >= len(steps):
        return []
    statements = _lock(backend)
    for step in steps[done:]:
        statements.extend((sql, ()) for sql in step)
    statements.append(
        (
            "INSERT INTO attp_schema (part, version) VALUES (?, ?) "
            "ON CONFLICT (part) DO UPDATE SET version = excluded.version WHERE attp_schema.version < excluded.version",
            (part, len(steps)),
        )
    )
    return statements
