"""The memory tools (Memci's agent API). Their docstrings are what the model reads, so they are written for it.

Each tool call is exactly one transaction: it sees one consistent tree and its changes land
completely or not at all.
"""

from __future__ import annotations

from typing import Any

from attp_server.errors import short_repr
from attp_server.toolpack import ToolError, ToolFunction, current_call
from attp_server.toolpacks.memory.access import (
    Located,
    check_move,
    check_position,
    check_text,
    contents_page,
    invalid_move,
    locate,
    visible_segment,
    visible_segments,
    writable,
)
from attp_server.toolpacks.memory.options import MemoryOptions
from attp_server.toolpacks.memory.pages import Page, PageStore, Segment, stopped
from attp_server.toolpacks.memory.render import render
from attp_server.toolpacks.memory.search import MAX_QUERY_CHARS, MAX_TERMS, SearchStopped, search, terms_of

MAX_FIND_RESULTS = 100
MAX_CHILDREN = 1_000
"""Most pages one create_contents_page call moves (each move shifts its siblings' positions)."""


def segment_info(segment: Segment) -> dict[str, Any]:
    return {
        "id": segment.id,
        "name": segment.name,
        "type": segment.type,
        "description": segment.description,
        "permission": segment.permission,
        "root_index": segment.root_index,
    }


def page_summary(page: Page) -> dict[str, Any]:
    return {
        "index": page.index,
        "name": page.name,
        "description": page.description,
        "type": page.kind,
        "has_detail": bool(page.detail),
        "visibility": page.visibility,
        "parent": page.parent,
        "segment": page.segment_id,
        "child_count": page.child_count,
    }


def _check_query_size(query: str) -> None:
    """INVALID_ARGUMENT for a query past MAX_QUERY_CHARS or MAX_TERMS (terms are counted in linear time)."""
    if len(query) > MAX_QUERY_CHARS:
        problem = f"a query of at most {MAX_QUERY_CHARS:,} characters; this one has {len(query):,}"
    elif (terms := len(terms_of(query))) > MAX_TERMS:
        problem = f"at most {MAX_TERMS} distinct words per query; this one has {terms}"
    else:
        return
    raise ToolError(
        "INVALID_ARGUMENT",
        f"find_page() takes {problem}.",
        parameter_name="query",
        received=short_repr(query),
        expected=f"at most {MAX_TERMS} words and {MAX_QUERY_CHARS:,} characters",
        solution="Search for the few most distinctive words; call find_page again for other words.",
    )


class MemoryTools:
    """The tools, bound to one store and the pack's limits."""

    def __init__(self, store: PageStore, options: MemoryOptions) -> None:
        self.store = store
        self.options = options

    def tools(self) -> list[ToolFunction]:
        return [
            self.get_segment,
            self.list_segments,
            self.update_page,
            self.expand_details,
            self.hide_details,
            self.move_page,
            self.remove_page,
            self.create_detail_page,
            self.create_contents_page,
            self.get_page,
            self.get_children,
            self.get_parent,
            self.get_ancestors,
            self.find_page,
            self.view,
        ]

    # ------------------------------------------------------------------ segments

    def get_segment(self, id: str) -> dict[str, Any]:
        """Describe one memory segment (a top-level area of the page tree) by its id.

        Args:
            id: The segment id, e.g. "usr" (list_segments() shows them).

        Returns:
            {"id": str, "name": str, "type": "system" | "user" | "tool" | "custom", "description": str,
            "permission": "read_only" | "read_write", "root_index": the index of its root page, e.g. "usr-0"}.

        Raises:
            ToolError: SEGMENT_NOT_FOUND (suggested_value holds the closest segment id).

        Example:
            root = get_segment("usr")["root_index"]
        """
        with self.store.transaction(write=False) as tx:
            return segment_info(visible_segment(tx, id, "id"))

    def list_segments(self) -> list[dict[str, Any]]:
        """List the memory segments in display order: each is a page tree with its own root page.

        A read_only segment (e.g. "sys", the operator's standing instructions) can be read and
        expanded but not changed; write your own notes into a read_write segment (e.g. "usr").

        Returns:
            A list of {"id", "name", "type", "description", "permission", "root_index"}, as get_segment returns.

        Example:
            writable = [s["root_index"] for s in list_segments() if s["permission"] == "read_write"]
        """
        with self.store.transaction(write=False) as tx:
            return [segment_info(s) for s in visible_segments(tx)]

    # ------------------------------------------------------------------ changing what is shown

    def update_page(
        self, page_index: str, name: str | None = None, description: str | None = None, detail: str | None = None
    ) -> None:
        """Change a page's name, description, or (detail pages only) detail text; arguments left out stay as they are.

        Args:
            page_index: The page's index, e.g. "usr-3".
            name: The new name (short title).
            description: The new one-line summary, shown even when the page is hidden.
            detail: The new full text of a detail page (replaces the old text entirely).

        Returns:
            None.

        Raises:
            ToolError: PAGE_NOT_FOUND (suggested_value holds the closest index), PERMISSION_DENIED (a read-only
                segment), NOT_A_DETAIL_PAGE (detail given for a contents page), INVALID_ARGUMENT (nothing to change,
                empty or too long text), MEMORY_BUSY (another server process held the database too long: call
                again).

        Example:
            update_page("usr-3", description="Deadlines moved to March")
            update_page("usr-4", detail=get_page("usr-4")["detail"] + "\\n- new fact")
        """
        changes = {
            key: value
            for key, value in (("name", name), ("description", description), ("detail", detail))
            if value is not None
        }
        if not changes:
            raise ToolError(
                "INVALID_ARGUMENT",
                "update_page() was given nothing to change.",
                expected="at least one of name, description, detail",
                solution='Call it as update_page("usr-3", description="...").',
            )
        for key, value in changes.items():
            check_text(self.options, key, value)
        with self.store.transaction(write=True) as tx:
            found = writable(tx, page_index, "update")
            if detail is not None and found.page.kind != "detail":
                raise ToolError(
                    "NOT_A_DETAIL_PAGE",
                    f"{page_index!r} is a contents page: it holds child pages, not detail text.",
                    parameter_name="detail",
                    solution=f'Add a page under it: create_detail_page(name, description, detail, "{page_index}").',
                )
            tx.update_page(found.page.index, changes)

    def expand_details(self, page_index: str) -> None:
        """Expand a page so view() shows its content: a contents page its children, a detail page its text.

        The contents pages above it are expanded too, so the page itself is in view. Works in
        read-only segments as well.

        Args:
            page_index: The page's index, e.g. "usr-3".

        Returns:
            None.

        Raises:
            ToolError: PAGE_NOT_FOUND (suggested_value holds the closest index), MEMORY_BUSY (another server process
                held the database too long: call again).

        Example:
            expand_details("usr-7")
        """
        with self.store.transaction(write=True) as tx:
            found = locate(tx, page_index)
            tx.set_visibility([found.page.index, *(a.index for a in tx.ancestors(found.page.index))], "expanded")

    def hide_details(self, page_index: str) -> None:
        """Fold a page so view() shows only its one line: a contents page hides its children, a detail page its text.

        Nothing is deleted; expand_details brings it back. Works in read-only segments too, except
        on the root page of a system segment, which always stays expanded.

        Args:
            page_index: The page's index, e.g. "usr-3".

        Returns:
            None.

        Raises:
            ToolError: PAGE_NOT_FOUND (suggested_value holds the closest index), PERMISSION_DENIED (the root page of
                a system segment), MEMORY_BUSY (another server process held the database too long: call again).

        Example:
            for page in get_children("usr-0"):
                hide_details(page["index"])
        """
        with self.store.transaction(write=True) as tx:
            found = locate(tx, page_index)
            if found.page.is_root and found.segment.type == "system":
                raise ToolError(
                    "PERMISSION_DENIED",
                    f"{page_index!r} is the root of the system segment {found.segment.id!r}; it always stays "
                    "expanded so its instructions remain in view.",
                    parameter_name="page_index",
                    received=short_repr(page_index),
                    expected="any other page",
                    solution="Hide the pages below it instead, if they are not needed now.",
                )
            tx.set_visibility([found.page.index], "hidden")

    # ------------------------------------------------------------------ changing the tree

    def move_page(self, source: str, target: str, position: int | None = None) -> None:
        """Move a page (with everything under it) into another contents page of the same segment, or reorder it.

        Args:
            source: Index of the page to move, e.g. "usr-5".
            target: Index of the contents page that becomes its parent, e.g. "usr-2" (may be its current parent).
            position: 0-based place among the target's children; None puts it last.

        Returns:
            None.

        Raises:
            ToolError: PAGE_NOT_FOUND (suggested_value holds the closest index), PERMISSION_DENIED (a read-only
                segment), NOT_A_CONTENTS_PAGE (target is a detail page), INVALID_MOVE (the page under itself or one
                of its descendants, a root page, or another segment), INVALID_ARGUMENT (position out of range),
                MEMORY_BUSY (another server process held the database too long: call again).

        Example:
            move_page("usr-5", "usr-2")
            move_page("usr-9", "usr-0", position=0)
        """
        with self.store.transaction(write=True) as tx:
            moved = writable(tx, source, "move", "source")
            into = writable(tx, target, "move a page into", "target")
            contents_page(into, "move a page into", "target")
            check_move(tx, moved, into, "source")
            check_position(tx, position, into, moved)
            tx.move(moved.page, into.page.index, position)

    def remove_page(self, page_index: str, recursive: bool = False) -> None:
        """Delete a page for good. A contents page that still has children needs recursive=True.

        Args:
            page_index: The page's index, e.g. "usr-5".
            recursive: Also delete every page under a contents page. Without it, such a page is refused.

        Returns:
            None.

        Raises:
            ToolError: PAGE_NOT_FOUND (suggested_value holds the closest index), PERMISSION_DENIED (a read-only
                segment), PAGE_NOT_EMPTY (a contents page with children and recursive=False), CANNOT_REMOVE_ROOT (a
                segment's root page), MEMORY_BUSY (another server process held the database too long: call again).

        Example:
            remove_page("usr-5")
            remove_page("usr-2", recursive=True)
        """
        with self.store.transaction(write=True) as tx:
            found = writable(tx, page_index, "remove")
            page = found.page
            if page.is_root:
                raise ToolError(
                    "CANNOT_REMOVE_ROOT",
                    f"{page_index!r} is the root page of segment {found.segment.id!r} and cannot be removed.",
                    parameter_name="page_index",
                    received=short_repr(page_index),
                    expected="a page below a root",
                    solution="Remove its children one by one, or with remove_page(child, recursive=True).",
                )
            if page.child_count and not recursive:
                raise ToolError(
                    "PAGE_NOT_EMPTY",
                    f"{page_index!r} ({page.name}) still has {page.child_count} child page(s).",
                    parameter_name="recursive",
                    received="False",
                    expected="True to delete the children as well",
                    suggested_value="True",
                    solution=f'Call remove_page("{page_index}", recursive=True), or move the children elsewhere first.',
                )
            tx.remove_subtree(page)

    def create_detail_page(self, name: str, description: str, detail: str, parent_index: str) -> str:
        """Create a detail page (a note with a text) as the last child of a contents page.

        Args:
            name: Short title, e.g. "Preferred stack".
            description: One-line summary; shown even when the page is hidden, so make it informative.
            detail: The full text (any length up to the server's limit; Markdown is fine).
            parent_index: Index of the contents page to put it in, e.g. "usr-0".

        Returns:
            The new page's index, e.g. "usr-12". New pages start expanded.

        Raises:
            ToolError: PAGE_NOT_FOUND (suggested_value holds the closest index), PERMISSION_DENIED (a read-only
                segment), NOT_A_CONTENTS_PAGE (parent_index is a detail page), INVALID_ARGUMENT (empty name, text
                too long), MEMORY_BUSY (another server process held the database too long: call again).

        Example:
            index = create_detail_page("Preferred stack", "Python 3.11, FastAPI, Postgres",
                                       "The user wants type hints everywhere.", "usr-0")
        """
        check_text(self.options, "name", name)
        check_text(self.options, "description", description)
        check_text(self.options, "detail", detail)
        with self.store.transaction(write=True) as tx:
            parent = writable(tx, parent_index, "create a page under", "parent_index")
            contents_page(parent, "create a page under", "parent_index")
            return tx.insert_page(parent.segment.id, "detail", name, description, detail, parent.page.index).index

    def create_contents_page(
        self, name: str, description: str, parent_index: str, children: list[str] | None = None
    ) -> str:
        """Create a contents page (a folder of pages) under a contents page, optionally moving pages into it.

        Args:
            name: Short title, e.g. "Project Apollo".
            description: One-line summary of what the group holds; shown even when it is hidden.
            parent_index: Index of the contents page to put it in, e.g. "usr-0".
            children: Indexes of existing pages (same segment) to move into it, in this order (at most 1,000);
                [] or None for none.

        Returns:
            The new page's index, e.g. "usr-13". New pages start expanded.

        Raises:
            ToolError: PAGE_NOT_FOUND (suggested_value holds the closest index), PERMISSION_DENIED (a read-only
                segment), NOT_A_CONTENTS_PAGE (parent_index is a detail page), INVALID_MOVE (a child is a root, the
                parent itself or one of its ancestors, in another segment, or listed twice), INVALID_ARGUMENT (empty
                name, text too long, over 1,000 children), MEMORY_BUSY (another server process held the database
                too long: call again).

        Example:
            group = create_contents_page("Project Apollo", "Everything about Apollo", "usr-0", ["usr-4", "usr-7"])
        """
        check_text(self.options, "name", name)
        check_text(self.options, "description", description)
        wanted = list(children or [])
        if len(wanted) > MAX_CHILDREN:
            raise ToolError(
                "INVALID_ARGUMENT",
                f"create_contents_page() moves at most {MAX_CHILDREN:,} pages at once; children lists {len(wanted):,}.",
                parameter_name="children",
                received=f"{len(wanted):,} page indexes",
                expected=f"at most {MAX_CHILDREN:,} page indexes",
                solution="Create the page with some of them, then move the others with move_page(source, target).",
            )
        with self.store.transaction(write=True) as tx:
            parent = writable(tx, parent_index, "create a page under", "parent_index")
            contents_page(parent, "create a page under", "parent_index")
            moving: list[Located] = []
            seen: set[str] = set()
            for child in wanted:
                if child in seen:
                    raise invalid_move(f"{child!r} is listed twice in children.", "children", child)
                seen.add(child)
                if current_call().remaining() == 0.0:
                    raise stopped()
                found = writable(tx, child, "move", "children")
                check_move(tx, found, parent, "children")
                moving.append(found)
            page = tx.insert_page(parent.segment.id, "contents", name, description, None, parent.page.index)
            for found in moving:
                current = tx.page(found.page.index)  # positions shift as earlier children move
                assert current is not None
                tx.move(current, page.index, None)
            return page.index

    # ------------------------------------------------------------------ reading

    def get_page(self, page_index: str) -> dict[str, Any]:
        """Read one page, including a detail page's full text, whether it is expanded or hidden.

        Args:
            page_index: The page's index, e.g. "usr-3".

        Returns:
            {"index": str, "name": str, "description": str, "type": "contents" | "detail",
            "has_detail": bool (a detail page with non-empty text), "visibility": "expanded" | "hidden",
            "parent": parent index or None for a root, "segment": segment id, "child_count": int,
            "detail": the text (detail pages) or None, "children": child indexes in order (contents pages),
            "writable": bool (False in read-only segments), "created_at": ISO time, "updated_at": ISO time}.

        Raises:
            ToolError: PAGE_NOT_FOUND (suggested_value holds the closest index, or the index of the page whose name
                was given by mistake).

        Example:
            text = get_page("usr-3")["detail"]
        """
        with self.store.transaction(write=False) as tx:
            found = locate(tx, page_index)
            page = found.page
            return {
                **page_summary(page),
                "detail": page.detail,
                "children": [child.index for child in tx.children(page.index)],
                "writable": found.segment.permission == "read_write",
                "created_at": page.created_at,
                "updated_at": page.updated_at,
            }

    def get_children(self, page_index: str) -> list[dict[str, Any]]:
        """List the children of a contents page, in order.

        Args:
            page_index: Index of a contents page, e.g. "usr-0".

        Returns:
            A list of {"index", "name", "description", "type", "has_detail", "visibility", "parent", "segment",
            "child_count"} (get_page's fields without the text; call get_page for that).

        Raises:
            ToolError: PAGE_NOT_FOUND (suggested_value holds the closest index), NOT_A_CONTENTS_PAGE.

        Example:
            names = [c["name"] for c in get_children("usr-0")]
        """
        with self.store.transaction(write=False) as tx:
            found = locate(tx, page_index)
            contents_page(found, "list the children of", "page_index")
            return [page_summary(child) for child in tx.children(found.page.index)]

    def get_parent(self, page_index: str) -> dict[str, Any] | None:
        """Return the contents page that holds a page, or None for a segment's root page.

        Args:
            page_index: The page's index, e.g. "usr-3".

        Returns:
            The parent as {"index", "name", "description", "type", "has_detail", "visibility", "parent",
            "segment", "child_count"}, or None.

        Raises:
            ToolError: PAGE_NOT_FOUND (suggested_value holds the closest index).

        Example:
            folder = get_parent("usr-3")["index"]
        """
        with self.store.transaction(write=False) as tx:
            found = locate(tx, page_index)
            if found.page.parent is None:
                return None
            parent = tx.page(found.page.parent)
            return page_summary(parent) if parent else None

    def get_ancestors(self, page_index: str) -> list[dict[str, Any]]:
        """Return the path above a page: its parent first, the segment's root page last.

        Args:
            page_index: The page's index, e.g. "usr-9".

        Returns:
            A list of page summaries as get_children returns ([] for a root page).

        Raises:
            ToolError: PAGE_NOT_FOUND (suggested_value holds the closest index).

        Example:
            path = " / ".join(a["name"] for a in reversed(get_ancestors("usr-9")))
        """
        with self.store.transaction(write=False) as tx:
            found = locate(tx, page_index)
            return [page_summary(page) for page in tx.ancestors(found.page.index)]

    def find_page(self, query: str, limit: int = 10, segment: str | None = None) -> list[dict[str, Any]]:
        """Search every page's name, description and detail text (hidden pages included), best match first.

        The query is split into words at spaces ("quoted words" stay together); matching is a
        case-insensitive substring match, so "deploy" also finds "deployment" and Chinese text needs
        no spaces. Pages containing more of the words rank first, then hits in the name, then in the
        description, then in the text.

        Args:
            query: Words to look for, e.g. "deadline Apollo" or '"release notes"' (at most 20 words).
            limit: Most results to return, 1 to 100.
            segment: Only search this segment id, e.g. "usr"; None searches all.

        Returns:
            A list of page summaries as get_children returns, each with a "snippet": up to 160
            characters around the first hit (from the detail text when it matches there).

        Raises:
            ToolError: INVALID_ARGUMENT (empty query, over 1,000 characters or 20 words, limit out of range),
                SEGMENT_NOT_FOUND.

        Example:
            hits = find_page("deadline Apollo", limit=5)
            __result__ = [(h["index"], h["name"], h["snippet"]) for h in hits]
        """
        if not query.split():
            raise ToolError(
                "INVALID_ARGUMENT",
                "find_page() needs a query with at least one word.",
                parameter_name="query",
                received=short_repr(query),
                expected='words to search for, e.g. "deadline"',
                solution="Call view() to browse the whole tree instead.",
            )
        _check_query_size(query)
        if not 1 <= limit <= MAX_FIND_RESULTS:
            raise ToolError(
                "INVALID_ARGUMENT",
                f"limit must be between 1 and {MAX_FIND_RESULTS}, not {limit}.",
                parameter_name="limit",
                received=str(limit),
                expected=f"1 to {MAX_FIND_RESULTS}",
                suggested_value="10",
            )
        with self.store.transaction(write=False) as tx:
            segments = [visible_segment(tx, segment, "segment")] if segment is not None else visible_segments(tx)
            try:
                hits = search(tx, query, [s.id for s in segments], limit, current_call().remaining)
            except SearchStopped:
                raise stopped() from None
            return [{**page_summary(hit.page), "snippet": hit.snippet} for hit in hits]

    def view(self, segment: str | None = None) -> str:
        """Render the memory page tree as you see it: expanded pages show their content, hidden ones one line.

        Each line is "[index] name — description (type, visibility, ...)", indented under its parent.
        An expanded contents page lists its children below it; an expanded detail page shows its text
        (lines starting with "| "); a hidden page shows only its line ("N pages inside" for a folded
        contents page). Use the indexes with the other memory tools.

        Args:
            segment: Only this segment's tree, e.g. "usr"; None shows every segment in order.

        Returns:
            The tree as text, e.g.
            "[usr-0] User — Your notes (contents, expanded)\\n  [usr-1] Stack — Python 3.11 (detail, hidden)\\n".

        Raises:
            ToolError: SEGMENT_NOT_FOUND (suggested_value holds the closest segment id).

        Example:
            print(view("usr"))
        """
        with self.store.transaction(write=False) as tx:
            segments = [visible_segment(tx, segment, "segment")] if segment is not None else visible_segments(tx)
            return render(segments, tx.segment_pages([s.id for s in segments]))
