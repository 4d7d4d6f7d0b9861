"""What the memory pack's tree is made of, on either database: segments, pages, where the tree lives (`PageStore`),
and the errors a tool call on it can end in.

`tree.TreeTx` implements `Tx` once for both databases; `store` (SQLite) and `pg` (PostgreSQL) give it a
connection and their searches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from attp_server.toolpack import ToolError
from attp_server.toolpacks.memory.options import Permission, SegmentSpec, SegmentType

if TYPE_CHECKING:
    from attp_server.toolpacks.memory.tree import TreeTx

Kind = Literal["contents", "detail"]
Visibility = Literal["expanded", "hidden"]
Column = Literal["name", "description"]


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
        return from_row(cls, row)


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
        return from_row(cls, row)


Row = TypeVar("Row", "Segment", "Page")
_COLUMNS = {"rowid": "id", "index": "page_index"}
"""Fields whose column has another name."""


def from_row(cls: type[Row], row: Any) -> Row:
    """A `Segment` or `Page` from a row, each field read from its column by name."""
    return cls(**{f.name: row[_COLUMNS.get(f.name, f.name)] for f in dataclasses.fields(cls)})


class PageStore(Protocol):
    """Where the page tree lives: opened once, then one transaction per tool call."""

    def open(self, segments: Sequence[SegmentSpec]) -> None: ...
    def close(self) -> None: ...
    def transaction(self, *, write: bool) -> AbstractContextManager[TreeTx]: ...


def like_pattern(term: str) -> str:
    """A LIKE pattern matching `term` anywhere (backslash escapes the wildcards)."""
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def stopped() -> ToolError:
    """The error of a memory call stopped at its run's deadline."""
    return ToolError(
        "TIMEOUT",
        "The memory call was stopped at the program's time limit; nothing was changed by it.",
        solution="Do less per program: fewer or narrower memory calls.",
    )


def busy(wait_s: float) -> ToolError:
    """The error of a memory call whose write waited `wait_s` for another writer (another replica's, or process's)."""
    return ToolError(
        "MEMORY_BUSY",
        f"The memory database stayed locked by another writer for {wait_s:g} s.",
        solution="Call the tool again; nothing was changed by this call.",
    )
