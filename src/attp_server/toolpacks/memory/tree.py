"""The page tree's operations, written once for both databases: `TreeTx`.

A tool's transaction reads and changes the tree through `TreeTx`: segments made to match the
configuration, pages read, added, changed, moved and removed, sibling positions kept dense. Its SQL is
written once, with named parameters (``:index``) and a few names each database spells its own way
(`Dialect`: the tables, PostgreSQL's ``scope`` column that keeps every isolation scope's tree apart in
one database, its null-safe comparison); `store.SqliteTx` and `pg.PgTx` give the dialect and the
connection, and add the searches, which do differ (SQLite's FTS5 trigram index, PostgreSQL's pg_trgm).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from attp_server.toolpacks.memory.options import SeedPage, SegmentSpec
from attp_server.toolpacks.memory.pages import Column, Kind, Page, Segment, Visibility, now


@dataclass(frozen=True)
class Dialect:
    """How one database spells what the tree's SQL leaves open."""

    pages: str
    segments: str
    scoped: str
    """Before a condition on an unaliased table: ``""``, or ``"scope = :scope AND "``."""
    p_scoped: str
    """The same for the table aliased ``p``."""
    c_scoped: str
    """The child-count subquery's condition tying ``c`` to ``p``'s scope."""
    scope_column: str
    """Before the first column of an INSERT: ``""``, or ``"scope, "``; `scope_value` is its value."""
    scope_value: str
    same: str
    """The null-safe equality: SQLite's ``IS``, PostgreSQL's ``IS NOT DISTINCT FROM``."""
    binary: str
    """Ordering text by its bytes: SQLite's default; PostgreSQL's ``COLLATE "C"``."""
    named: bool
    """Named parameters as ``:name`` (SQLite); else as ``%(name)s`` (psycopg)."""

    @functools.cache  # noqa: B019 - a few dialects, a few dozen constant statements each
    def sql(self, template: str) -> str:
        """`template` for this database: its names filled in, its parameters in this driver's style."""
        text = template.format(
            pages=self.pages, segments=self.segments, scoped=self.scoped, p_scoped=self.p_scoped, same=self.same,
            c_scoped=self.c_scoped, scope_column=self.scope_column, scope_value=self.scope_value, binary=self.binary,
            columns=_PAGE_COLUMNS.format(pages=self.pages, c_scoped=self.c_scoped),
        )  # fmt: skip
        return text if self.named else _NAMED.sub(r"%(\1)s", text)


_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
"""``:name``, not ``::type`` (a cast) nor ``a:b`` inside a word."""

_PAGE_COLUMNS = """
    p.id, p.page_index, p.segment_id, p.kind, p.name, p.description, p.detail, p.parent, p.position,
    p.visibility, p.created_at, p.updated_at,
    (SELECT count(*) FROM {pages} c WHERE {c_scoped}c.parent = p.page_index) AS child_count
"""


SQLITE = Dialect(
    pages="pages", segments="segments", scoped="", p_scoped="", c_scoped="", scope_column="", scope_value="",
    same="IS", binary="", named=True,
)  # fmt: skip
"""One file per scope: no scope column."""


POSTGRES = Dialect(
    pages="memory_pages", segments="memory_segments", scoped="scope = :scope AND ", p_scoped="p.scope = :scope AND ",
    c_scoped="c.scope = p.scope AND ", scope_column="scope, ", scope_value=":scope, ", same="IS NOT DISTINCT FROM",
    binary=' COLLATE "C"', named=False,
)  # fmt: skip
"""Every scope in the same two tables: each statement names its scope."""


def listed(name: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """``:name0, :name1, ...`` for an ``IN (...)`` list, and its parameters."""
    params = {f"{name}{i}": value for i, value in enumerate(values)}
    return ", ".join(f":{key}" for key in params), params


class TreeTx:
    """One open transaction on one scope's tree (see the module): what the tools are made of. A subclass sets the
    `dialect` and implements find_page's reads (`newest_matching`, `containing`, `texts`, `page_count`)."""

    dialect: Dialect

    def __init__(self, conn: Any, scope: str = "") -> None:
        self.conn = conn
        """A connection, or a cursor (PostgreSQL's, returning dict rows): `execute` returns a cursor."""
        self.scope = scope

    def execute(self, sql: str, params: Mapping[str, Any]) -> Any:
        """Run one statement (in this database's spelling); return its cursor."""
        return self.conn.execute(sql, params)

    def run(self, template: str, **params: Any) -> Any:
        return self.execute(self.dialect.sql(template), {"scope": self.scope, **params})

    def rows(self, template: str, **params: Any) -> list[Any]:
        return list(self.run(template, **params).fetchall())

    def _pages(self, where: str, order: str = "p.position", **params: Any) -> list[Page]:
        template = "SELECT {columns} FROM {pages} p WHERE {p_scoped}" + where + " ORDER BY " + order  # noqa: S608 - constant SQL and placeholders only
        return [Page.from_row(row) for row in self.rows(template, **params)]

    # ------------------------------------------------------------------ segments

    def segments(self) -> list[Segment]:
        rows = self.rows("SELECT * FROM {segments} WHERE {scoped}TRUE ORDER BY ordinal, id{binary}")
        return [Segment.from_row(row) for row in rows]

    def segment(self, segment_id: str) -> Segment | None:
        rows = self.rows("SELECT * FROM {segments} WHERE {scoped}id = :id", id=segment_id)
        return Segment.from_row(rows[0]) if rows else None

    def ensure_segments(self, specs: Sequence[SegmentSpec]) -> None:
        """Create missing segments (with their root and seed pages); make existing ones match `specs`.

        Segments in the database that `specs` no longer lists keep their pages and settings and
        are shown after the configured ones.
        """
        stamp = now()
        configured = {spec.id for spec in specs}
        for ordinal, spec in enumerate(specs):
            values = {
                "name": spec.name, "type": spec.type, "description": spec.description,
                "permission": spec.effective_permission, "ordinal": ordinal, "id": spec.id, "stamp": stamp,
            }  # fmt: skip
            if self.segment(spec.id) is None:
                self.run(
                    "INSERT INTO {segments} ({scope_column}id, name, type, description, permission, ordinal,"
                    " created_at, updated_at) VALUES ({scope_value}:id, :name, :type, :description, :permission,"
                    " :ordinal, :stamp, :stamp)",
                    **values,
                )
                self._insert(f"{spec.id}-0", spec.id, "contents", spec.name, spec.description, None, None, "expanded")
                self._seed(spec.id, f"{spec.id}-0", spec.pages)
            else:
                self.run(
                    "UPDATE {segments} SET name = :name, type = :type, description = :description,"
                    " permission = :permission, ordinal = :ordinal, updated_at = CASE WHEN name {same} :name"
                    " AND type {same} :type AND description {same} :description AND permission {same} :permission"
                    " THEN updated_at ELSE :stamp END WHERE {scoped}id = :id",
                    **values,
                )
            if spec.type == "system":  # Memci: a system segment's root always shows
                self.run(
                    "UPDATE {pages} SET visibility = 'expanded' WHERE {scoped}page_index = :index",
                    index=f"{spec.id}-0",
                )
        others = [s for s in self.segments() if s.id not in configured]
        for ordinal, segment in enumerate(others, start=len(specs)):
            self.run("UPDATE {segments} SET ordinal = :ordinal WHERE {scoped}id = :id", ordinal=ordinal, id=segment.id)

    def _seed(self, segment_id: str, parent: str, pages: Iterable[SeedPage]) -> None:
        for seed in pages:
            visibility: Visibility = "hidden" if seed.hidden else "expanded"
            kind: Kind = "detail" if seed.detail is not None else "contents"
            page = self.insert_page(segment_id, kind, seed.name, seed.description, seed.detail, parent, visibility)
            self._seed(segment_id, page.index, seed.pages)

    # ------------------------------------------------------------------ reading pages

    def page(self, index: str) -> Page | None:
        found = self._pages("p.page_index = :index", index=index)
        return found[0] if found else None

    def children(self, index: str) -> list[Page]:
        return self._pages("p.parent = :index", index=index)

    def ancestors(self, index: str) -> list[Page]:
        """From the parent up to the root."""
        rows = self.rows(
            """
            WITH RECURSIVE up(page_index, depth) AS (
                SELECT parent, 1 FROM {pages} WHERE {scoped}page_index = :index AND parent IS NOT NULL
                UNION ALL
                SELECT p.parent, up.depth + 1 FROM {pages} p JOIN up ON p.page_index = up.page_index
                WHERE {p_scoped}p.parent IS NOT NULL
            )
            SELECT {columns} FROM {pages} p JOIN up ON p.page_index = up.page_index
            WHERE {p_scoped}TRUE ORDER BY up.depth
            """,
            index=index,
        )
        return [Page.from_row(row) for row in rows]

    def segment_pages(self, segment_ids: Sequence[str]) -> list[Page]:
        """Every page of these segments, siblings in order (for rendering a whole tree)."""
        marks, params = listed("segment", segment_ids)
        return self._pages(f"p.segment_id IN ({marks})", order="p.parent, p.position", **params)

    def index_names(self, segment_ids: Sequence[str]) -> list[tuple[str, str]]:
        marks, params = listed("segment", segment_ids)
        rows = self.rows(f"SELECT page_index, name FROM {{pages}} WHERE {{scoped}}segment_id IN ({marks})", **params)  # noqa: S608 - constant SQL and placeholders only
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
        position = 0
        if parent is not None:
            found = self.rows(
                "SELECT coalesce(max(position) + 1, 0) AS next FROM {pages} WHERE {scoped}parent = :parent",
                parent=parent,
            )
            position = int(found[0]["next"])
        self.run(
            "INSERT INTO {pages} ({scope_column}page_index, segment_id, kind, name, description, detail, parent,"
            " position, visibility, created_at, updated_at) VALUES ({scope_value}:index, :segment, :kind, :name,"
            " :description, :detail, :parent, :position, :visibility, :stamp, :stamp)",
            index=index, segment=segment_id, kind=kind, name=name, description=description, detail=detail,
            parent=parent, position=position, visibility=visibility, stamp=now(),
        )  # fmt: skip
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
        rows = self.rows(
            "UPDATE {segments} SET next_page = next_page + 1 WHERE {scoped}id = :id RETURNING next_page - 1 AS number",
            id=segment_id,
        )
        index = f"{segment_id}-{rows[0]['number']}"
        return self._insert(index, segment_id, kind, name, description, detail, parent, visibility)

    def update_page(self, index: str, changes: dict[str, str]) -> None:
        """Set some of name, description, detail."""
        allowed = ("name", "description", "detail")
        assert set(changes) <= set(allowed), changes
        if not changes:
            return
        assignments = ", ".join(f"{column} = :{column}" for column in allowed if column in changes)
        self.run(
            f"UPDATE {{pages}} SET {assignments}, updated_at = :stamp WHERE {{scoped}}page_index = :index",  # noqa: S608 - constant SQL and placeholders only
            **changes, stamp=now(), index=index,
        )  # fmt: skip

    def set_visibility(self, indexes: Iterable[str], visibility: Visibility) -> None:
        for index in indexes:
            self.run(
                "UPDATE {pages} SET visibility = :visibility WHERE {scoped}page_index = :index",
                visibility=visibility, index=index,
            )  # fmt: skip

    def move(self, page: Page, parent: str, position: int | None) -> None:
        """Make `page` the child of `parent` at `position` (None: last), keeping both sibling lists dense."""
        self._close_gap(page)
        count = self.child_count(parent, excluding=page.index)
        target = count if position is None else min(position, count)
        self.run(
            "UPDATE {pages} SET position = position + 1"
            " WHERE {scoped}parent = :parent AND position >= :target AND page_index != :index",
            parent=parent, target=target, index=page.index,
        )  # fmt: skip
        self.run(
            "UPDATE {pages} SET parent = :parent, position = :target, updated_at = :stamp"
            " WHERE {scoped}page_index = :index",
            parent=parent, target=target, index=page.index, stamp=now() if parent != page.parent else page.updated_at,
        )  # fmt: skip

    def _close_gap(self, page: Page) -> None:
        """The siblings after `page` move up one place (it is leaving)."""
        self.run(
            "UPDATE {pages} SET position = position - 1 WHERE {scoped}parent = :parent AND position > :position",
            parent=page.parent, position=page.position,
        )  # fmt: skip

    def child_count(self, index: str, excluding: str | None = None) -> int:
        rows = self.rows(
            "SELECT count(*) AS n FROM {pages} WHERE {scoped}parent = :index AND NOT (page_index {same} :excluding)",
            index=index, excluding=excluding,
        )  # fmt: skip
        return int(rows[0]["n"])

    def remove_subtree(self, page: Page) -> int:
        """Delete a page and everything under it; return how many pages went."""
        cursor = self.run(
            """
            WITH RECURSIVE sub(page_index) AS (
                SELECT CAST(:index AS TEXT)
                UNION ALL
                SELECT p.page_index FROM {pages} p JOIN sub ON p.parent = sub.page_index WHERE {p_scoped}TRUE
            )
            DELETE FROM {pages} WHERE {scoped}page_index IN (SELECT page_index FROM sub)
            """,
            index=page.index,
        )
        removed = int(cursor.rowcount)
        self._close_gap(page)
        return removed

    # ------------------------------------------------------------------ find_page's reads (search.py)

    def newest_matching(
        self, terms: Sequence[str], limit: int, *, every: bool, column: Column | None, segment_ids: Sequence[str] | None
    ) -> list[int]:
        """Ids of the newest `limit` pages containing any (`every`: all) of `terms` (3+ characters each) in their
        name, description or detail (`column`: only there), of `segment_ids` (None: any segment), from the index."""
        raise NotImplementedError

    def containing(self, term: str, segment_ids: Sequence[str], limit: int) -> list[int]:
        """Ids of the first `limit` pages containing `term` (any length) in name, description or detail."""
        raise NotImplementedError

    def texts(self, rowids: Sequence[int]) -> list[tuple[int, str, str, str, str]]:
        """(id, index, name, description, detail or '') of these pages."""
        raise NotImplementedError

    def page_count(self) -> int:
        """About how many pages there are (for BM25's IDF)."""
        raise NotImplementedError
