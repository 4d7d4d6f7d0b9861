"""The page tree as the model sees it (the `view` tool and the ``memory://view`` resource).

One line per shown page: ``[index] name — description (kind, visibility, ...)``, indented by depth.
An expanded contents page shows its children below it; an expanded detail page shows its text,
each line prefixed with ``| ``; a hidden page shows only its own line. Segments are separated by a
blank line, in their configured order.
"""

from __future__ import annotations

from collections.abc import Sequence

from attp_server.toolpacks.memory.pages import Page, Segment

INDENT = "  "


def one_line(text: str) -> str:
    return " ".join(text.split())


def page_line(page: Page, segment: Segment, depth: int) -> str:
    tags: list[str] = [page.kind, page.visibility]
    if page.kind == "contents" and page.visibility == "hidden":
        tags.append(f"{page.child_count} page{'s' if page.child_count != 1 else ''} inside")
    if page.is_root and segment.permission == "read_only":
        tags.append("read-only")
    description = f" — {one_line(page.description)}" if page.description.strip() else ""
    return f"{INDENT * depth}[{page.index}] {one_line(page.name)}{description} ({', '.join(tags)})"


def render(segments: Sequence[Segment], pages: Sequence[Page]) -> str:
    """Render the trees of `segments` from `pages` (every page of those segments, siblings in order)."""
    by_index = {page.index: page for page in pages}
    children: dict[str, list[Page]] = {}
    for page in sorted(pages, key=lambda p: p.position):
        if page.parent is not None:
            children.setdefault(page.parent, []).append(page)
    blocks: list[str] = []
    for segment in segments:
        root = by_index.get(segment.root_index)
        if root is None:
            continue
        lines: list[str] = []
        _render_page(root, segment, 0, children, lines)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n" if blocks else "(no memory segments are visible)\n"


def _render_page(page: Page, segment: Segment, depth: int, children: dict[str, list[Page]], out: list[str]) -> None:
    out.append(page_line(page, segment, depth))
    if page.visibility == "hidden":
        return
    inner = INDENT * (depth + 1)
    if page.kind == "detail":
        text = page.detail or ""
        out.extend(f"{inner}| {line}".rstrip() for line in text.splitlines() or ["(no text)"])
        return
    kids = children.get(page.index, [])
    if not kids:
        out.append(f"{inner}(no pages yet)")
    for child in kids:
        _render_page(child, segment, depth + 1, children, out)
