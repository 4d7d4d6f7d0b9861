"""The memory issue's acceptance items, end to end: every tool from one attp_execute program over
Streamable HTTP and SSE; 8 concurrent sessions on two server processes sharing one database; a
SIGKILLed server loses nothing it acknowledged; find_page past the matches it ranks exhaustively.

The tree's invariants are checked on the raw SQLite file by `tree_problems` (read-only, independent
of the pack's own queries); `test_tree_problems_catches_corruption` shows it finds each kind of damage.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import Served, in_process, make_settings, serving_http
from mcp import Client

from attp_server.toolpack import ToolRegistry
from attp_server.toolpacks.memory import MemoryOptions, Store, toolpack
from attp_server.toolpacks.memory.search import CANDIDATES

pytestmark = [pytest.mark.anyio, pytest.mark.process]

ROOTS = 2
"""sys-0 and usr-0, the default segments' root pages."""


def serve_flags(db_path: Path, *extra: str) -> tuple[str, ...]:
    return ("--toolpack", "memory", "--db-path", str(db_path), "--timeout-s", "60", "--max-tool-calls", "1000", *extra)


async def execute(client: Client, code: str) -> dict[str, Any]:
    reply = await client.call_tool("attp_execute", {"code": code})
    assert reply.structured_content is not None, reply
    return dict(reply.structured_content)


def result_of(out: dict[str, Any]) -> Any:
    assert out["status"] == "ok", out["error"]
    return out["result"]


# ------------------------------------------------------------------ the tree's invariants, on the raw file


def read_only(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def stored_pages(db_path: Path) -> dict[str, sqlite3.Row]:
    conn = read_only(db_path)
    try:
        return {row["page_index"]: row for row in conn.execute("SELECT * FROM pages")}
    finally:
        conn.close()


def tree_problems(db_path: Path) -> list[str]:
    """Every broken invariant: each page reachable from exactly one segment root (its own segment's),
    no orphan, no cycle, parents are contents pages, sibling positions 0..n-1, indexes below their
    segment's counter, kind and detail agree; SQLite's and the FTS index's integrity checks pass."""
    conn = read_only(db_path)
    try:
        integrity = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        dangling = conn.execute("PRAGMA foreign_key_check").fetchall()
        segments = {row["id"]: row["next_page"] for row in conn.execute("SELECT id, next_page FROM segments")}
        pages = {row["page_index"]: row for row in conn.execute("SELECT * FROM pages")}
    finally:
        conn.close()
    problems = [] if integrity == ["ok"] else [f"integrity_check: {integrity[:3]}"]
    problems += [f"foreign key of {row[0]} row {row[1]} points at nothing in {row[2]}" for row in dangling]
    writer = sqlite3.connect(db_path)  # the FTS check is an INSERT in form (it changes nothing)
    try:
        writer.execute("INSERT INTO page_fts(page_fts, rank) VALUES ('integrity-check', 1)")
    except sqlite3.DatabaseError as exc:
        problems.append(f"FTS index does not match the pages: {exc}")
    finally:
        writer.close()

    roots = {f"{segment}-0": segment for segment in segments}
    children: dict[str, list[sqlite3.Row]] = {}
    for index, page in pages.items():
        segment, _, number = index.rpartition("-")
        if page["segment_id"] != segment or segment not in segments:
            problems.append(f"{index} is stored in segment {page['segment_id']!r}")
        elif not number.isdigit() or int(number) >= segments[segment]:
            problems.append(f"{index} is not below its segment's counter {segments[segment]}")
        if (page["kind"] == "detail") != (page["detail"] is not None):
            problems.append(f"{index} is a {page['kind']} page with detail {page['detail']!r}")
        parent = page["parent"]
        if parent is None:
            if index not in roots:
                problems.append(f"{index} has no parent but is not a segment root")
            continue
        if index in roots:
            problems.append(f"root {index} has a parent {parent}")
        if parent not in pages:
            problems.append(f"{index} is an orphan: its parent {parent} does not exist")
            continue
        if pages[parent]["kind"] != "contents":
            problems.append(f"{index} is under {parent}, a detail page")
        if pages[parent]["segment_id"] != page["segment_id"]:
            problems.append(f"{index} is under {parent} of another segment")
        children.setdefault(parent, []).append(page)
    for parent, kids in children.items():
        positions = sorted(kid["position"] for kid in kids)
        if positions != list(range(len(kids))):
            problems.append(f"children of {parent} have positions {positions[:10]}, not 0..{len(kids) - 1}")
    for index, segment in roots.items():
        if index not in pages:
            problems.append(f"segment {segment} has no root page {index}")
        elif pages[index]["kind"] != "contents":
            problems.append(f"root {index} is not a contents page")

    reached: dict[str, str] = {}
    for root in (r for r in roots if r in pages):
        stack = [root]
        while stack:
            index = stack.pop()
            if index in reached:
                problems.append(f"{index} is reached twice, from {reached[index]} and {root}")
                continue
            reached[index] = root
            stack.extend(kid["page_index"] for kid in children.get(index, []))
    unreached = sorted(set(pages) - set(reached))
    if unreached:
        problems.append(f"{len(unreached)} page(s) reachable from no root (a cycle or an orphan): {unreached[:5]}")
    return problems


def small_tree(tmp_path: Path) -> Path:
    """usr-1 Folder > usr-2 Sub > usr-3 Note; usr-4 Other note; usr-5 Empty folder; sys pages none."""
    db_path = tmp_path / "small.sqlite3"
    store = Store(db_path)
    store.open(MemoryOptions().segments)
    with store.transaction(write=True) as tx:
        folder = tx.insert_page("usr", "contents", "Folder", "", None, "usr-0").index
        sub = tx.insert_page("usr", "contents", "Sub", "", None, folder).index
        tx.insert_page("usr", "detail", "Note", "", "text", sub)
        tx.insert_page("usr", "detail", "Other note", "", "more", "usr-0")
        tx.insert_page("usr", "contents", "Empty folder", "", None, "usr-0")
    store.close()
    return db_path


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        pytest.param("UPDATE pages SET parent = 'usr-2' WHERE page_index = 'usr-1'", "reachable from no root",
                     id="cycle"),
        pytest.param("UPDATE pages SET parent = 'usr-99' WHERE page_index = 'usr-4'", "orphan", id="orphan"),
        pytest.param("DELETE FROM pages WHERE page_index = 'usr-2'", "orphan", id="deleted-parent"),
        pytest.param("UPDATE pages SET parent = NULL WHERE page_index = 'usr-2'", "not a segment root",
                     id="second-root"),
        pytest.param("UPDATE pages SET parent = 'usr-3', position = 0 WHERE page_index = 'usr-4'", "a detail page",
                     id="under-a-detail-page"),
        pytest.param("UPDATE pages SET parent = 'sys-0', position = 0 WHERE page_index = 'usr-5'",
                     "of another segment", id="across-segments"),
        pytest.param("UPDATE pages SET position = 7 WHERE page_index = 'usr-4'", "positions", id="position-gap"),
        pytest.param("UPDATE pages SET position = 0 WHERE page_index = 'usr-4'", "positions",
                     id="duplicate-position"),
        pytest.param("UPDATE segments SET next_page = 3 WHERE id = 'usr'", "counter", id="counter-behind"),
        pytest.param("PRAGMA ignore_check_constraints = ON; UPDATE pages SET detail = NULL WHERE page_index = 'usr-3'",
                     "detail page with detail",
                     id="detail-without-text"),
        pytest.param("UPDATE pages SET parent = 'usr-0' WHERE page_index = 'usr-0'", "root usr-0 has a parent",
                     id="root-with-parent"),
        pytest.param("INSERT INTO page_fts(page_fts, rowid, name, description, detail)"
                     " SELECT 'delete', id, name, description, detail FROM pages WHERE page_index = 'usr-4'",
                     "FTS index", id="page-missing-from-the-index"),
    ],
)  # fmt: skip
def test_tree_problems_catches_corruption(tmp_path: Path, damage: str, expected: str) -> None:
    db_path = small_tree(tmp_path)
    assert tree_problems(db_path) == []
    conn = sqlite3.connect(db_path)  # foreign keys off, FTS triggers on: damage as a bug in the pack might do it
    conn.executescript(damage)
    conn.close()
    problems = tree_problems(db_path)
    assert any(expected in problem for problem in problems), problems


# ------------------------------------------------------------------ 1. every tool from one program

ALL_TOOLS = [
    "get_segment", "list_segments", "update_page", "expand_details", "hide_details", "move_page", "remove_page",
    "create_detail_page", "create_contents_page", "get_page", "get_children", "get_parent", "get_ancestors",
    "find_page", "view",
]  # fmt: skip
"""The 14 seed tools and view."""


def pack_tools(tmp_path: Path) -> list[str]:
    registry = ToolRegistry([toolpack], tmp_path, {"memory": {}}, db_path=tmp_path / "names.sqlite3")
    return list(registry.tools)


EVERY_TOOL = """
segments = [(s["id"], s["permission"], s["root_index"]) for s in list_segments()]
root = get_segment("usr")["root_index"]
projects = create_contents_page("Projects", "Everything in flight", root)
apollo = create_contents_page("Apollo", "The moon project", projects)
deadline = create_detail_page("Deadline", "When Apollo ships", "Launch on March 3.", apollo)
team = create_detail_page("Team", "Who works on Apollo", "Ana and Qi.", apollo)
budget = create_detail_page("Budget", "Apollo money", "Ten million.", apollo)
archive = create_contents_page("Archive", "Done and dusted", root)
loose = create_detail_page("数据库迁移", "迁移计划", "先备份，再迁移。", root)
old = create_contents_page("Old notes", "Regrouped notes", archive, [loose])
three_levels = [a["index"] for a in get_ancestors(deadline)]
move_page(apollo, archive)
move_page(budget, apollo, position=0)
hide_details(apollo)
hide_details(old)
folded = view("usr")
expand_details(deadline)
update_page(deadline, description="When Apollo ships, moved", detail="Launch on April 1.")
page = get_page(deadline)
children = [(c["index"], c["name"], c["visibility"]) for c in get_children(apollo)]
parent = get_parent(deadline)["index"]
path = [a["index"] for a in get_ancestors(deadline)]
found = [(h["index"], h["snippet"]) for h in find_page("april LAUNCH")]
found_cn = [h["index"] for h in find_page("迁移")]
remove_page(team)
try:
    remove_page(archive)
    refused = None
except ToolError as e:
    refused = e.code
remove_page(projects)
__result__ = {
    "segments": segments, "root": root, "parent_of_root": get_parent(root),
    "made": [projects, apollo, deadline, team, budget, archive, loose, old],
    "three_levels": three_levels, "folded": folded, "children": children, "parent": parent, "path": path,
    "page": {k: page[k] for k in ("index", "name", "description", "detail", "type", "visibility", "parent",
                                  "segment", "child_count", "children", "writable", "has_detail")},
    "found": found, "found_cn": found_cn, "refused": refused, "view": view(),
}
"""

USR_ROOT = "[usr-0] User — Your own notes about the user and the work; organise them as you like. (contents, expanded)"
SYS_ROOT = (
    "[sys-0] System — Standing instructions and facts from the operator; you can read them but not change them."
    " (contents, expanded, read-only)"
)

EVERY_TOOL_CALLS = [
    ("list_segments", True, None), ("get_segment", True, None),
    *[("create_contents_page", True, None)] * 2, *[("create_detail_page", True, None)] * 3,
    ("create_contents_page", True, None), ("create_detail_page", True, None), ("create_contents_page", True, None),
    ("get_ancestors", True, None), ("move_page", True, None), ("move_page", True, None),
    ("hide_details", True, None), ("hide_details", True, None), ("view", True, None),
    ("expand_details", True, None), ("update_page", True, None), ("get_page", True, None),
    ("get_children", True, None), ("get_parent", True, None), ("get_ancestors", True, None),
    ("find_page", True, None), ("find_page", True, None), ("remove_page", True, None),
    ("remove_page", False, "PAGE_NOT_EMPTY"), ("remove_page", True, None), ("get_parent", True, None),
    ("view", True, None),
]  # fmt: skip


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_every_tool_works_from_one_program_over_a_real_transport(tmp_path: Path, transport: str) -> None:
    db_path = tmp_path / "state" / "memory.sqlite3"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with serving_http(workspace, *serve_flags(db_path)) as served:
        async with Served(transport, workspace, url=served.url).client() as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            out = await execute(client, EVERY_TOOL)
    assert tools == ["attp_execute"]
    result = result_of(out)
    calls = [(c["tool"], c["ok"], c["error_code"]) for c in out["calls"]]
    assert calls == EVERY_TOOL_CALLS
    assert {tool for tool, _ok, _code in calls} == set(pack_tools(tmp_path)) == set(ALL_TOOLS)

    assert result["segments"] == [["sys", "read_only", "sys-0"], ["usr", "read_write", "usr-0"]]
    assert (result["root"], result["parent_of_root"]) == ("usr-0", None)
    assert result["made"] == [f"usr-{n}" for n in range(1, 9)]
    assert result["three_levels"] == ["usr-2", "usr-1", "usr-0"]  # Deadline < Apollo < Projects < root
    assert result["folded"] == (
        f"{USR_ROOT}\n"
        "  [usr-1] Projects — Everything in flight (contents, expanded)\n"
        "    (no pages yet)\n"
        "  [usr-6] Archive — Done and dusted (contents, expanded)\n"
        "    [usr-8] Old notes — Regrouped notes (contents, hidden, 1 page inside)\n"
        "    [usr-2] Apollo — The moon project (contents, hidden, 3 pages inside)\n"
    )
    assert result["children"] == [
        ["usr-5", "Budget", "expanded"], ["usr-3", "Deadline", "expanded"], ["usr-4", "Team", "expanded"]
    ]  # fmt: skip
    assert (result["parent"], result["path"]) == ("usr-2", ["usr-2", "usr-6", "usr-0"])  # moved with its subtree
    assert result["page"] == {
        "index": "usr-3", "name": "Deadline", "description": "When Apollo ships, moved",
        "detail": "Launch on April 1.", "type": "detail", "visibility": "expanded", "parent": "usr-2",
        "segment": "usr", "child_count": 0, "children": [], "writable": True, "has_detail": True,
    }  # fmt: skip
    assert result["found"] == [["usr-3", "Launch on April 1."]]
    assert result["found_cn"] == ["usr-7"]
    assert result["refused"] == "PAGE_NOT_EMPTY"
    assert result["view"] == (
        f"{SYS_ROOT}\n"
        "  (no pages yet)\n"
        "\n"
        f"{USR_ROOT}\n"
        "  [usr-6] Archive — Done and dusted (contents, expanded)\n"
        "    [usr-8] Old notes — Regrouped notes (contents, hidden, 1 page inside)\n"
        "    [usr-2] Apollo — The moon project (contents, expanded)\n"
        "      [usr-5] Budget — Apollo money (detail, expanded)\n"
        "        | Ten million.\n"
        "      [usr-3] Deadline — When Apollo ships, moved (detail, expanded)\n"
        "        | Launch on April 1.\n"
    )

    assert tree_problems(db_path) == []
    pages = stored_pages(db_path)
    assert sorted(pages) == ["sys-0", "usr-0", "usr-2", "usr-3", "usr-5", "usr-6", "usr-7", "usr-8"]
    assert (pages["usr-7"]["parent"], pages["usr-7"]["detail"]) == ("usr-8", "先备份，再迁移。")


# ------------------------------------------------------------------ 2. eight concurrent sessions, two servers

SESSIONS = 8
PAGES_PER_SESSION = 50
"""Each session's creates and moves (25 of them, every kind of target several times over) take seconds of wall
time, so the eight sessions' runs overlap by far; more pages only cost CPU (about 2.5 s per 50 more)."""
SUBFOLDERS = 3

RETRY = """
busy = [0]
def retry(tool, *args, **kwargs):
    for attempt in range(100):
        try:
            return tool(*args, **kwargs)
        except ToolError as e:
            if e.code != "MEMORY_BUSY":
                raise
            busy[0] += 1
    raise RuntimeError("the memory stayed busy")
"""
"""MEMORY_BUSY means "nothing changed, call again": what a model is told to do."""

MAKE_FOLDERS = (
    RETRY
    + """
mine = retry(create_contents_page, "S{n}", "folder of session {n}", "usr-0")
subs = [retry(create_contents_page, "S{n}." + str(k), "subfolder of session {n}", mine) for k in range({subfolders})]
__result__ = [mine, subs]
"""
)

CREATE_AND_MOVE = (
    RETRY
    + """
N = {n}
FOLDERS = {folders}
mine, subs = FOLDERS[N]
made = []
moves = []
for i in range({pages}):
    parent = [mine, subs[0], subs[1], subs[2], "usr-0"][i % 5]
    made.append(retry(create_detail_page, "s%d-%d" % (N, i), "note %d of session %d" % (i, N), "text %d/%d" % (N, i),
                      parent))
    if i % 2 == 1:  # move the previous page: into another session's folder, our own, or to the top
        other = FOLDERS[(N + i) % len(FOLDERS)]
        target, position = [(other[1][i % 3], None), (subs[i % 3], 0), ("usr-0", 0), (other[0], 0)][(i // 2) % 4]
        retry(move_page, made[-2], target, position=position)
        moves.append([made[-2], target])
__result__ = {{"made": made, "moves": moves, "busy": busy[0]}}
"""
)

RING_MOVE = (
    RETRY
    + """
try:
    retry(move_page, "{mine}", "{target}")
    __result__ = "moved"
except ToolError as e:
    __result__ = e.code
"""
)
"""Each session moves its folder into the next session's: the eighth move would close a cycle."""


WALK = """
children = {}
todo = ["usr-0"]
while todo:
    index = todo.pop()
    kids = get_children(index)
    children[index] = [c["index"] for c in kids]
    todo.extend(c["index"] for c in kids if c["type"] == "contents")
__result__ = children
"""
"""The tree as the tools see it: every contents page's children, in order."""


def created_parent(i: int, mine: str, subs: list[str]) -> str:
    return [mine, subs[0], subs[1], subs[2], "usr-0"][i % 5]


@pytest.mark.soak
@pytest.mark.slow
async def test_eight_concurrent_sessions_on_two_servers_keep_the_tree_consistent(tmp_path: Path) -> None:
    db_path = tmp_path / "shared" / "memory.sqlite3"
    started = time.monotonic()
    workspaces = [tmp_path / "a", tmp_path / "b"]
    for workspace in workspaces:
        workspace.mkdir()
    flags = serve_flags(db_path, "--workers", "4")
    with serving_http(workspaces[0], *flags) as first, serving_http(workspaces[1], *flags) as second:
        # sessions 0-3 on the first server, 4-7 on the second; odd sessions over SSE, even over Streamable HTTP
        servers = [first if n < SESSIONS // 2 else second for n in range(SESSIONS)]
        async with AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(
                    Served("sse" if n % 2 else "streamable-http", servers[n].workspace, url=servers[n].url).client()
                )
                for n in range(SESSIONS)
            ]

            async def each(program: Callable[[int], str]) -> list[Any]:
                results: list[Any] = [None] * SESSIONS

                async def one(n: int) -> None:
                    results[n] = result_of(await execute(clients[n], program(n)))

                with anyio.fail_after(45):
                    async with anyio.create_task_group() as group:
                        for n in range(SESSIONS):
                            group.start_soon(one, n)
                return results

            folders = await each(lambda n: MAKE_FOLDERS.format(n=n, subfolders=SUBFOLDERS))
            work = await each(
                lambda n: CREATE_AND_MOVE.format(n=n, folders=json.dumps(folders), pages=PAGES_PER_SESSION)
            )
            ring = await each(lambda n: RING_MOVE.format(mine=folders[n][0], target=folders[(n + 1) % SESSIONS][1][0]))
            walked = result_of(await execute(clients[0], WALK))
    elapsed = time.monotonic() - started

    assert tree_problems(db_path) == []
    pages = stored_pages(db_path)
    made = [index for w in work for index in w["made"]]
    assert len(made) == len(set(made)) == SESSIONS * PAGES_PER_SESSION  # every create got its own index
    assert len(pages) == ROOTS + SESSIONS * (1 + SUBFOLDERS) + SESSIONS * PAGES_PER_SESSION  # nothing lost or extra
    conn = read_only(db_path)
    try:
        counter = conn.execute("SELECT next_page FROM segments WHERE id = 'usr'").fetchone()[0]
    finally:
        conn.close()
    assert counter == len(pages) - ROOTS + 1  # every index handed out belongs to a stored page

    for n, (w, (mine, subs)) in enumerate(zip(work, folders, strict=True)):
        assert len(w["moves"]) == PAGES_PER_SESSION // 2
        expected = {index: created_parent(i, mine, subs) for i, index in enumerate(w["made"])}
        expected.update(dict(w["moves"]))
        for i, index in enumerate(w["made"]):
            page = pages[index]
            assert (page["name"], page["description"], page["detail"], page["kind"]) == (
                f"s{n}-{i}",
                f"note {i} of session {n}",
                f"text {n}/{i}",
                "detail",
            )
            assert page["parent"] == expected[index], (index, page["parent"], expected[index])
        assert [pages[s]["parent"] for s in subs] == [mine] * SUBFOLDERS

    # The tools' view of the tree is the file's: children lists in position order, every page in one.
    raw: dict[str, list[str]] = {index: [] for index, page in pages.items() if page["kind"] == "contents"}
    for page in sorted(pages.values(), key=lambda page: page["position"]):
        if page["parent"] is not None:
            raw[page["parent"]].append(page["page_index"])
    assert walked == {index: kids for index, kids in raw.items() if index != "sys-0"}

    # The ring: exactly one of the eight folder moves was refused, the one that would have closed a cycle.
    assert sorted(ring) == ["INVALID_MOVE"] + ["moved"] * (SESSIONS - 1), ring
    refused = ring.index("INVALID_MOVE")
    for n, (mine, _subs) in enumerate(folders):
        parent = "usr-0" if n == refused else folders[(n + 1) % SESSIONS][1][0]
        assert pages[mine]["parent"] == parent

    # The sessions really ran at once, on both servers: their pages' numbers interleave.
    spans = [(min(numbers), max(numbers)) for numbers in ([int(i.split("-")[1]) for i in w["made"]] for w in work)]
    assert all(lo < other_hi and other_lo < hi for lo, hi in spans for other_lo, other_hi in spans), spans
    print(f"8 sessions x {PAGES_PER_SESSION} pages: {elapsed:.1f} s, MEMORY_BUSY retries {[w['busy'] for w in work]}")


# ------------------------------------------------------------------ 3. SIGKILL in the middle of writing

WRITERS = 3

ONE_PAGE = '__result__ = create_detail_page("{name}", "{description}", "{detail}", "usr-0")'

LONG_PROGRAM = """
for i in range({count}):
    create_detail_page("long-%d" % i, "written by one long program", "long text %d" % i, "usr-0")
"""


def content(writer: int, n: int) -> tuple[str, str, str]:
    """Name, description and detail of the n-th page a writer sends: unique, and easy to check exactly."""
    return f"w{writer}-{n}", f"page {n} of writer {writer}", f"detail {n} of writer {writer}\n" + "x" * (n % 97)


def kill(served: Served) -> None:
    """SIGKILL the server and everything it started (its workers), and reap it."""
    assert served.process is not None
    os.killpg(served.process.pid, signal.SIGKILL)
    served.process.wait(timeout=10)


def detail_pages(db_path: Path) -> dict[str, tuple[str, str, str | None, str | None]]:
    return {
        index: (row["name"], row["description"], row["detail"], row["parent"])
        for index, row in stored_pages(db_path).items()
        if row["kind"] == "detail"
    }


async def reopen_and_read(db_path: Path, tmp_path: Path, indexes: list[str]) -> dict[str, Any]:
    """A new server on the same database file: the acknowledged pages through the tools, and one more write.
    (The server in this process, over memory streams: what is read is the file the killed process left.)"""
    workspace = tmp_path / "after"
    workspace.mkdir(exist_ok=True)
    code = f"""
pages = [get_page(i) for i in {indexes!r}]
__result__ = {{"pages": [[p["index"], p["name"], p["description"], p["detail"]] for p in pages],
              "new": create_detail_page("after the crash", "", "still works", "usr-0"), "view": view("usr")}}
"""
    settings = make_settings(workspace, toolpacks=["memory"], db_path=db_path, timeout_s=60, max_tool_calls=1000)
    async with in_process(settings) as client:
        return dict(result_of(await execute(client, code)))


@pytest.mark.soak
@pytest.mark.slow
@pytest.mark.parametrize("delay_ms", [0, 4, 17, 41])
async def test_killing_the_server_mid_write_loses_nothing_acknowledged(tmp_path: Path, delay_ms: int) -> None:
    db_path = tmp_path / "state" / "memory.sqlite3"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    sent: dict[str, tuple[str, str, str]] = {}
    acknowledged: dict[str, tuple[str, str, str]] = {}  # index -> what was written
    in_flight: list[int] = []
    with serving_http(workspace, *serve_flags(db_path, "--workers", str(WRITERS))) as served:

        async def write(writer: int) -> None:
            async with served.client() as client:
                for n in range(10_000):
                    page = content(writer, n)
                    sent[page[0]] = page
                    name, description, detail = (json.dumps(text)[1:-1] for text in page)
                    code = ONE_PAGE.format(name=name, description=description, detail=detail)
                    in_flight.append(writer)
                    out = await execute(client, code)
                    in_flight.remove(writer)
                    acknowledged[result_of(out)] = page

        async def killer() -> None:
            while len(acknowledged) < 30:
                await anyio.sleep(0.001)
            await anyio.sleep(delay_ms / 1000)
            busy = len(in_flight)
            kill(served)
            assert busy, "no write was under way when the server died"

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for writer in range(WRITERS):
                    group.start_soon(_until_the_server_dies, write, writer)
                await killer()
                group.cancel_scope.cancel()

    assert tree_problems(db_path) == []
    stored = detail_pages(db_path)
    for index, (name, description, detail) in acknowledged.items():
        assert stored.get(index) == (name, description, detail, "usr-0"), index  # every acknowledged page, exactly
    unacknowledged = {index: page for index, page in stored.items() if index not in acknowledged}
    assert len(unacknowledged) <= WRITERS  # at most the calls in flight got committed without a reply
    for row in unacknowledged.values():
        assert row == (*sent[row[0]], "usr-0")  # and those are whole too

    after = await reopen_and_read(db_path, tmp_path, sorted(acknowledged))
    assert after["pages"] == [[index, *acknowledged[index]] for index in sorted(acknowledged)]
    numbers = [int(index.split("-")[1]) for index in stored]
    assert int(after["new"].split("-")[1]) == max(numbers) + 1  # the page counter survived too
    assert re.findall(r"^  \[(usr-\d+)\]", after["view"], flags=re.MULTILINE) == sorted(
        [*stored, after["new"]], key=lambda index: int(index.split("-")[1])
    )  # the reopened tree renders every page, in creation order
    assert tree_problems(db_path) == []


async def _until_the_server_dies(write: Callable[[int], Any], writer: int) -> None:
    """Run a writer until its connection breaks (the kill), which is the expected end."""
    with contextlib.suppress(Exception):  # any transport error, once the server is gone
        await write(writer)


@pytest.mark.soak
@pytest.mark.slow
@pytest.mark.parametrize("delay_ms", [0, 9, 33])
async def test_killing_the_server_inside_a_long_program_keeps_every_finished_call(
    tmp_path: Path, delay_ms: int
) -> None:
    db_path = tmp_path / "state" / "memory.sqlite3"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    count = 5000
    acknowledged: dict[str, tuple[str, str, str]] = {}
    with serving_http(workspace, *serve_flags(db_path)[:-2], "--max-tool-calls", str(count)) as served:
        async with served.client() as client:
            for n in range(10):  # separate, acknowledged calls first
                page = content(0, n)
                name, description, detail = (json.dumps(text)[1:-1] for text in page)
                index = result_of(await execute(client, ONE_PAGE.format(name=name, description=description,
                                                                         detail=detail)))  # fmt: skip
                acknowledged[index] = page

        async def long_program(_writer: int) -> None:
            async with served.client() as client:
                await execute(client, LONG_PROGRAM.format(count=count))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(_until_the_server_dies, long_program, 0)
                while not _long_pages(db_path):  # wait until the program is writing
                    await anyio.sleep(0.002)
                await anyio.sleep(delay_ms / 1000)
                kill(served)
                group.cancel_scope.cancel()

    assert tree_problems(db_path) == []
    stored = detail_pages(db_path)
    for index, (name, description, detail) in acknowledged.items():
        assert stored[index] == (name, description, detail, "usr-0"), index
    written = _long_pages(db_path)
    assert 0 < len(written) < count, "the kill did not land inside the program"
    # Each tool call is its own transaction: a prefix of the program's pages, each whole, numbered in order.
    assert written == [(f"usr-{11 + i}", f"long-{i}", f"long text {i}") for i in range(len(written))]
    assert set(stored) == set(acknowledged) | {index for index, _name, _detail in written}
    after = await reopen_and_read(db_path, tmp_path, sorted(acknowledged))
    assert after["pages"] == [[index, *acknowledged[index]] for index in sorted(acknowledged)]
    assert after["new"] == f"usr-{11 + len(written)}"


def _long_pages(db_path: Path) -> list[tuple[str, str, str]]:
    if not db_path.exists():
        return []
    try:
        conn = read_only(db_path)
        try:
            rows = conn.execute(
                "SELECT page_index, name, detail FROM pages WHERE name LIKE 'long-%' ORDER BY id"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.OperationalError:  # the server is still creating the file
        return []
    return [(row[0], row[1], row[2]) for row in rows]


# ------------------------------------------------------------------ find_page past CANDIDATES matches

FLOOD = CANDIDATES + 100
"""More pages match than find_page ranks exhaustively: it reads the index newest first, in tiers."""


def flooded(tmp_path: Path, segments: list[dict[str, Any]] | None = None) -> Callable[..., Any]:
    """find_page, called as the runtime calls it, over a tree where FLOOD pages, newer than the ones
    the tests look for, mention "alpha" in their text only."""
    db_path = tmp_path / "flood.sqlite3"
    options = MemoryOptions.model_validate({"segments": segments} if segments else {})
    store = Store(db_path)
    store.open(options.segments)
    with store.transaction(write=True) as tx:
        tx.insert_page("usr", "detail", "Alpha plan", "the alpha plan, in short", "how alpha works", "usr-0")  # 1
        tx.insert_page("usr", "detail", "Old note", "nothing", "alpha and beta together", "usr-0")  # 2
        tx.insert_page("usr", "detail", "Beta", "only beta here", "beta", "usr-0")  # 3
        folder = tx.insert_page("usr", "contents", "Noise", "", None, "usr-0").index  # 4
        for n in range(FLOOD):
            tx.insert_page("usr", "detail", f"Noise {n}", "filler", f"alpha mentioned in passing {n}", folder)
    store.close()
    registry = ToolRegistry([toolpack], tmp_path, {"memory": options.model_dump()}, db_path=db_path)
    tool = registry.resolve("find_page")
    assert tool is not None

    def find(*args: Any, **kwargs: Any) -> Any:
        bound = tool.bind(args, kwargs)
        assert isinstance(bound, dict), bound
        return tool.function(**bound)

    return find


def test_find_page_past_the_exhaustive_limit_still_ranks_the_best_pages_first(tmp_path: Path) -> None:
    find = flooded(tmp_path)
    hits = find("alpha", limit=100)
    assert hits[0]["index"] == "usr-1"  # the one name hit first, though older than all the others
    assert len(hits) == 100 and all(h["snippet"] for h in hits)
    both = [h["index"] for h in find("ALPHA beta")]
    assert both[0] == "usr-2" and set(both[1:3]) == {"usr-1", "usr-3"}  # both terms first, then strong hits
    assert [h["index"] for h in find("beta", limit=5)] == ["usr-3", "usr-2"]  # small sets: all of them
    assert find("alpha plan")[0]["snippet"] == "how alpha works"


def test_find_page_past_the_exhaustive_limit_respects_segments(tmp_path: Path) -> None:
    segments: list[dict[str, Any]] = [
        {"id": "sys", "name": "System", "type": "system", "pages": [{"name": "Alpha rules", "detail": "alpha"}]},
        {"id": "usr", "name": "User", "type": "user"},
        {"id": "sec", "name": "Hidden", "type": "system", "permission": "system_managed",
         "pages": [{"name": "Alpha secret", "description": "alpha", "detail": "alpha alpha"}]},
    ]  # fmt: skip
    find = flooded(tmp_path, segments)
    everywhere = [h["index"] for h in find("alpha", limit=100)]
    assert everywhere[:2] == ["usr-1", "sys-1"] and "sec-1" not in everywhere
    assert [h["index"] for h in find("alpha", segment="sys")] == ["sys-1"]
    assert find("alpha", segment="usr", limit=1)[0]["index"] == "usr-1"
