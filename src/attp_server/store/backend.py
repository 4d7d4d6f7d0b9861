"""What a store backend does: run a few SQL statements as one transaction, off the event loop.

SQL is written once, with ``?`` placeholders and the subset of SQL both SQLite (3.35 or later) and
PostgreSQL accept (``ON CONFLICT``, ``RETURNING``, ``DOUBLE PRECISION``, ``BIGINT``); the PostgreSQL
backend turns ``?`` into ``%s``. Write no literal ``%`` or ``?`` in a statement: pass values as parameters.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

Statement = tuple[str, Sequence[Any]]
"""One SQL statement and its parameters."""
Rows = list[tuple[Any, ...]]

SMALL_BYTES = 64 * 1024
"""Most data a `small` transaction reads or writes."""


class StoreError(Exception):
    """The store cannot be reached or refused a statement; the message says which store (never its password)."""


class Backend(ABC):
    """One database, reached by a pool of connections (PostgreSQL) or one connection in a thread (SQLite)."""

    kind: str
    """"sqlite" or "postgresql"."""
    label: str
    """Where it is, for logs and /healthz: a path, or a URL without its password."""

    @abstractmethod
    async def transaction(self, statements: Sequence[Statement], *, small: bool = False) -> list[Rows]:
        """Run `statements` in order as one transaction; the rows each returned (empty for none).

        `small`: the statements touch a few rows found by their key and carry little data (at most `SMALL_BYTES`);
        SQLite may then run them on the event loop, when the database is free that instant (see `sqlite`).

        Raises:
            StoreError: the database cannot be reached, or a statement failed (the transaction is rolled back).
        """

    @abstractmethod
    def transaction_sync(self, statements: Sequence[Statement]) -> list[Rows]:
        """`transaction` for code already on a thread (a toolpack's synchronous tool). Never on the event loop."""

    @abstractmethod
    async def close(self) -> None:
        """Close every connection."""

    async def execute(self, sql: str, *params: Any, small: bool = False) -> Rows:
        """One statement in its own transaction."""
        return (await self.transaction([(sql, params)], small=small))[0]
