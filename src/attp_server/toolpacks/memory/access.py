"""What the model may see and change: Memci's permission table, in one place.

| operation                          | read_only      | read_write | system_managed |
|------------------------------------|----------------|------------|----------------|
| get_*, find_page, view             | yes            | yes        | invisible      |
| expand_details                     | yes            | yes        | invisible      |
| hide_details                       | yes (limited)  | yes        | invisible      |
| update/move/remove/create pages    | PERMISSION_DENIED | yes     | invisible      |

"Invisible" means the page does not exist for the model: PAGE_NOT_FOUND, never listed, never found.
"Limited": the root page of a system-type segment can never be hidden, whatever its permission, so
the operator's standing instructions always stay in view.
"""

from __future__ import annotations

from dataclasses import dataclass

from attp_server.errors import short_repr, suggest
from attp_server.toolpack import ToolError
from attp_server.toolpacks.memory.options import MemoryOptions
from attp_server.toolpacks.memory.pages import Page, Segment
from attp_server.toolpacks.memory.tree import TreeTx

INDEX_FORMAT = "a page index such as 'usr-3' (segment id, dash, number), as view() and find_page() show it"


@dataclass(frozen=True)
class Located:
    page: Page
    segment: Segment


def visible_segments(tx: TreeTx) -> list[Segment]:
    return [s for s in tx.segments() if s.permission != "system_managed"]


def visible_segment(tx: TreeTx, segment_id: str, parameter: str) -> Segment:
    segments = visible_segments(tx)
    for segment in segments:
        if segment.id == segment_id:
            return segment
    ids = [s.id for s in segments]
    hint = suggest(segment_id, ids)
    raise ToolError(
        "SEGMENT_NOT_FOUND",
        f"There is no segment {segment_id!r}; the segments are: {', '.join(ids) or 'none'}.",
        parameter_name=parameter,
        received=short_repr(segment_id),
        expected="one of: " + ", ".join(ids),
        suggested_value=hint,
        solution="Call list_segments() to see them.",
    )


def locate(tx: TreeTx, index: str, parameter: str = "page_index") -> Located:
    """The page and its segment, or PAGE_NOT_FOUND (also for pages of system-managed segments)."""
    page = tx.page(index)
    segment = tx.segment(page.segment_id) if page is not None else None
    if page is None or segment is None or segment.permission == "system_managed":
        raise _not_found(tx, index, parameter)
    return Located(page, segment)


def _not_found(tx: TreeTx, index: str, parameter: str) -> ToolError:
    pairs = tx.index_names([s.id for s in visible_segments(tx)])
    by_name = {name.casefold(): page_index for page_index, name in pairs}
    named = by_name.get(index.strip().casefold())
    if named is not None:
        message = f"{index!r} is the name of page {named!r}; pages are addressed by their index, not their name."
        suggestion: str | None = named
    else:
        suggestion = suggest(index, [page_index for page_index, _ in pairs])
        message = f"There is no page {index!r}" + (f"; did you mean {suggestion!r}?" if suggestion else ".")
    return ToolError(
        "PAGE_NOT_FOUND",
        message,
        parameter_name=parameter,
        received=short_repr(index),
        expected=INDEX_FORMAT,
        suggested_value=suggestion,
        solution="Call view() to see the page tree with every index, or find_page(query) to search.",
    )


def writable(tx: TreeTx, index: str, action: str, parameter: str = "page_index") -> Located:
    """The page, if the model may change it (its segment is read_write); else PERMISSION_DENIED."""
    found = locate(tx, index, parameter)
    if found.segment.permission != "read_write":
        raise deny(tx, found, action, parameter)
    return found


def deny(tx: TreeTx, found: Located, action: str, parameter: str) -> ToolError:
    writable_roots = [s.root_index for s in visible_segments(tx) if s.permission == "read_write"]
    where = f" Write in {' or '.join(repr(r) for r in writable_roots)} instead." if writable_roots else ""
    return ToolError(
        "PERMISSION_DENIED",
        f"Cannot {action} {found.page.index!r}: it belongs to the read-only segment {found.segment.id!r}"
        f" ({found.segment.name}). You may read and expand its pages, not change them.",
        parameter_name=parameter,
        received=short_repr(found.page.index),
        expected="a page of a read_write segment",
        suggested_value=writable_roots[0] if writable_roots else None,
        solution=f"Leave this page as it is.{where}",
    )


def contents_page(found: Located, action: str, parameter: str) -> None:
    """NOT_A_CONTENTS_PAGE unless the page can hold children."""
    if found.page.kind == "contents":
        return
    page = found.page
    raise ToolError(
        "NOT_A_CONTENTS_PAGE",
        f"Cannot {action} {page.index!r}: it is a detail page ({page.name!r}), and only contents pages have children.",
        parameter_name=parameter,
        received=short_repr(page.index),
        expected="the index of a contents page",
        suggested_value=page.parent,
        solution=(
            f"Use its parent {page.parent!r}, or turn it into a group: create_contents_page(name, description, "
            f"{page.parent!r}, [{page.index!r}]) and use the new page."
        ),
    )


def check_text(options: MemoryOptions, parameter: str, value: str) -> None:
    """INVALID_ARGUMENT for a blank name, or a name, description or detail over its limit."""
    if parameter == "name" and not value.strip():
        raise ToolError(
            "INVALID_ARGUMENT",
            "A page needs a name that is not blank.",
            parameter_name="name",
            received=short_repr(value),
            expected='a short title, e.g. "Preferred stack"',
        )
    limit = {
        "name": options.max_name_chars,
        "description": options.max_description_chars,
        "detail": options.max_detail_chars,
    }[parameter]
    if len(value) > limit:
        raise ToolError(
            "INVALID_ARGUMENT",
            f"{parameter} is {len(value):,} characters long; the limit is {limit:,}.",
            parameter_name=parameter,
            received=short_repr(value),
            expected=f"at most {limit:,} characters",
            solution="Shorten it, or split the text over several detail pages under one contents page."
            if parameter == "detail"
            else f"Shorten it; put longer text in a detail page (up to {options.max_detail_chars:,} characters).",
        )


def check_move(tx: TreeTx, moved: Located, into: Located, parameter: str) -> None:
    """INVALID_MOVE for a root, another segment, or a page going under itself or its own descendant."""
    page = moved.page
    if page.is_root:
        raise invalid_move(f"{page.index!r} is a segment's root page; roots cannot move.", parameter, page.index)
    if moved.segment.id != into.segment.id:
        raise invalid_move(
            f"{page.index!r} is in segment {moved.segment.id!r} and {into.page.index!r} in "
            f"{into.segment.id!r}; pages move only within their segment.",
            parameter,
            page.index,
            solution="Create a copy in the other segment (create_detail_page) and remove the original.",
        )
    above = {into.page.index, *(a.index for a in tx.ancestors(into.page.index))}
    if page.index in above:
        relation = "itself" if page.index == into.page.index else f"its own descendant {into.page.index!r}"
        raise invalid_move(f"Cannot put {page.index!r} under {relation}.", parameter, page.index)


def check_position(tx: TreeTx, position: int | None, into: Located, moved: Located) -> None:
    """INVALID_ARGUMENT unless `position` is None or a place among the target's other children."""
    if position is None:
        return
    count = tx.child_count(into.page.index, excluding=moved.page.index)
    if not 0 <= position <= count:
        raise ToolError(
            "INVALID_ARGUMENT",
            f"position {position} is out of range: {into.page.index!r} would have {count} other child(ren).",
            parameter_name="position",
            received=str(position),
            expected=f"0 to {count}, or None for last",
            suggested_value=str(count),
        )


def invalid_move(message: str, parameter: str, received: str, solution: str | None = None) -> ToolError:
    return ToolError(
        "INVALID_MOVE",
        message,
        parameter_name=parameter,
        received=short_repr(received),
        solution=solution or "Choose a target outside the page being moved (view() shows the tree).",
    )
