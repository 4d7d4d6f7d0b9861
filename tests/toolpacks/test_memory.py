"""The memory toolpack, called directly: the tree, Memci's permission table, search, the view,
storage (WAL, migrations, one transaction per call, thread and process concurrency).

The tests of the tree, permissions, search and concurrency run on both databases: the SQLite file
(`db_path`) and a real PostgreSQL server (`database_url`, each test in a scope of its own); the
tests of SQLite's file handling (WAL, migrations, locks) run on SQLite.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness import past_deadline

from attp_server.model.docstrings import docstring_warnings
from attp_server.toolpack import ToolError, ToolpackLoadError, ToolRegistry, load_toolpack
from attp_server.toolpacks.memory import SCHEMA_VERSION, MemoryOptions, toolpack
from attp_server.toolpacks.memory.search import terms_of

# --------------------------------------------------------------------------------------- helpers


@dataclass(frozen=True)
class Place:
    """Where a test's memory lives: a SQLite file, or a scope in a PostgreSQL database."""

    db_path: Path
    url: str | None = None
    scope: str = "shared"

    def registry(self, workspace: Path, options: dict[str, Any]) -> ToolRegistry:
        return ToolRegistry(
            [toolpack], workspace, {"memory": options}, db_path=self.db_path, database_url=self.url, scope=self.scope
        )

    def query(self, table: str, where: str = "") -> list[dict[str, Any]]:
        """Every row of `table` (pages or segments) of this place, as dicts without the scope column."""
        if self.url is None:
            with closing(self.db_path) as conn:
                conn.row_factory = sqlite3.Row
                return [dict(r) for r in conn.execute(f"SELECT * FROM {table} {where} ORDER BY id")]
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self.url, row_factory=dict_row) as conn:
            rows = conn.execute(
                f"SELECT * FROM memory_{table} WHERE scope = %s {where.replace('WHERE', 'AND')} ORDER BY id",
                (self.scope,),
            ).fetchall()
        return [{k: v for k, v in row.items() if k != "scope"} for row in rows]

    def hide(self, index: str) -> None:
        """Hide a page behind the pack's back."""
        if self.url is None:
            with closing(self.db_path) as conn, conn:
                conn.execute("UPDATE pages SET visibility = 'hidden' WHERE page_index = ?", (index,))
            return
        import psycopg

        with psycopg.connect(self.url) as conn:
            conn.execute(
                "UPDATE memory_pages SET visibility = 'hidden' WHERE scope = %s AND page_index = %s",
                (self.scope, index),
            )


class Memory:
    """The pack's tools as methods, called the way the runtime calls them: validate, then call."""

    def __init__(self, registry: ToolRegistry, place: Place) -> None:
        self.registry = registry
        self.place = place
        self.db_path = place.db_path

    def __getattr__(self, name: str) -> Callable[..., Any]:
        tool = self.registry.resolve(name)
        if tool is None:
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            bound = tool.bind(args, kwargs)
            assert isinstance(bound, dict), bound
            return tool.function(**bound)

        return call

    def rows(self) -> list[tuple[Any, ...]]:
        """Every stored row, for checking that a refused call changed nothing."""
        rows = self.place.query("pages") + self.place.query("segments")
        return [tuple(r.values()) for r in rows]


class closing:
    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path)

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def open_memory(where: Path | Place, segments: list[dict[str, Any]] | None = None, **options: Any) -> Memory:
    """The pack on `where`: a Place, or a test's tmp_path (a SQLite file in it)."""
    place = where if isinstance(where, Place) else Place(where / "state" / "memory.sqlite3")
    if segments is not None:
        options["segments"] = segments
    return Memory(place.registry(place.db_path.parent.parent / "ws", options), place)


@pytest.fixture(scope="session")
def memory_database(postgres: Any) -> str:
    """One database on the test PostgreSQL server for this module's tests (each has its own scope in it)."""
    return str(postgres.create_database("memory_" + uuid.uuid4().hex[:8]))


@pytest.fixture(params=["sqlite", "postgresql"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    """Where a test's memory lives, once on each database."""
    db_path = tmp_path / "state" / "memory.sqlite3"
    if request.param == "sqlite":
        return Place(db_path)
    return Place(db_path, request.getfixturevalue("memory_database"), f"test {uuid.uuid4().hex}")


def raises_code(code: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> ToolError:
    with pytest.raises(ToolError) as info:
        call(*args, **kwargs)
    assert info.value.code == code, info.value.message
    return info.value


def assert_consistent(where: Path | Memory) -> None:
    """The tree invariants, checked on the raw tables (independently of the pack's own queries)."""
    place = where.place if isinstance(where, Memory) else Place(where)
    pages = {r["page_index"]: r for r in place.query("pages")}
    stored = place.query("segments")
    segments = [r["id"] for r in stored]
    next_page = {r["id"]: r["next_page"] for r in stored}
    if place.url is None:
        with closing(place.db_path) as conn:
            conn.execute("INSERT INTO page_fts(page_fts, rank) VALUES ('integrity-check', 1)")
    for segment in segments:
        root = pages[f"{segment}-0"]
        assert (root["parent"], root["kind"], root["segment_id"]) == (None, "contents", segment)
    siblings: dict[str, list[int]] = {}
    for index, page in pages.items():
        segment, _, number = index.rpartition("-")
        assert page["segment_id"] == segment and int(number) < next_page[segment], index
        assert (page["kind"] == "detail") == (page["detail"] is not None), index
        if page["parent"] is None:
            assert number == "0", f"{index} has no parent but is not a root"
            continue
        parent = pages[page["parent"]]
        assert parent["kind"] == "contents" and parent["segment_id"] == segment, index
        siblings.setdefault(page["parent"], []).append(page["position"])
        seen, up = {index}, page["parent"]
        while up is not None:  # every page reaches its root, no cycles
            assert up not in seen, f"cycle through {index}"
            seen.add(up)
            up = pages[up]["parent"]
    for parent, positions in siblings.items():
        assert sorted(positions) == list(range(len(positions))), f"children of {parent}: {sorted(positions)}"


TEST_SEGMENTS: list[dict[str, Any]] = [
    {
        "id": "sys",
        "name": "System",
        "type": "system",
        "permission": "read_only",
        "pages": [
            {"name": "Rules", "description": "How to behave", "detail": "Be kind."},
            {
                "name": "Policies",
                "description": "Company policies",
                "pages": [{"name": "Refunds", "detail": "30 days"}],
            },
        ],
    },
    {"id": "usr", "name": "User", "type": "user"},
    {
        "id": "sec",
        "name": "Security",
        "type": "system",
        "permission": "system_managed",
        "pages": [
            {"name": "Secret rule", "description": "never shown", "detail": "the password is swordfish"},
            {"name": "Vault", "pages": []},
        ],
    },
    {"id": "ops", "name": "Operations", "type": "system", "permission": "read_write"},
    {"id": "ref", "name": "Reference", "type": "custom", "permission": "read_only", "pages": [{"name": "Manual"}]},
]


@pytest.fixture
def mem(place: Place) -> Memory:
    return open_memory(place)


@pytest.fixture
def perm(place: Place) -> Memory:
    """sys (read_only system: sys-1 detail, sys-2 contents), usr (read_write: usr-1 detail, usr-2 contents),
    sec (system_managed: sec-1 detail, sec-2 contents), ops (read_write system), ref (read_only custom)."""
    memory = open_memory(place, TEST_SEGMENTS)
    assert memory.create_detail_page("Note", "a note", "text", "usr-0") == "usr-1"
    assert memory.create_contents_page("Folder", "a folder", "usr-0") == "usr-2"
    return memory


# ------------------------------------------------------------------------------------ the pack


def test_pack_registers_the_seed_tools_with_full_docstrings(mem: Memory) -> None:
    assert load_toolpack("memory") is toolpack
    assert not toolpack.read_only and not toolpack.open_world
    signatures = [t.signature_text() for t in mem.registry.tools.values()]
    assert signatures == [
        "get_segment(id: str) -> dict[str, Any]",
        "list_segments() -> list[dict[str, Any]]",
        "update_page(page_index: str, name: str | None = None, description: str | None = None, "
        "detail: str | None = None) -> None",
        "expand_details(page_index: str) -> None",
        "hide_details(page_index: str) -> None",
        "move_page(source: str, target: str, position: int | None = None) -> None",
        "remove_page(page_index: str, recursive: bool = False) -> None",
        "create_detail_page(name: str, description: str, detail: str, parent_index: str) -> str",
        "create_contents_page(name: str, description: str, parent_index: str, children: list[str] | None = None) -> str",
        "get_page(page_index: str) -> dict[str, Any]",
        "get_children(page_index: str) -> list[dict[str, Any]]",
        "get_parent(page_index: str) -> dict[str, Any] | None",
        "get_ancestors(page_index: str) -> list[dict[str, Any]]",
        "find_page(query: str, limit: int = 10, segment: str | None = None) -> list[dict[str, Any]]",
        "view(segment: str | None = None) -> str",
    ]
    clashes = {"read_file", "write_file", "edit_file", "list_files", "use_skill", "list_skills", "read_skill_file"}
    assert not clashes & set(mem.registry.tools)
    for tool in mem.registry.tools.values():
        assert docstring_warnings(tool) == [], tool.name
        sections = {"Returns:", "Example:"} | ({"Raises:"} if tool.name != "list_segments" else set())
        assert sections <= set(tool.doc.split()), tool.name


def test_first_start_creates_the_default_segments_in_a_wal_database(mem: Memory) -> None:
    assert mem.list_segments() == [
        {
            "id": "sys",
            "name": "System",
            "type": "system",
            "description": "Standing instructions and facts from the operator; you can read them but not change them.",
            "permission": "read_only",
            "root_index": "sys-0",
        },
        {
            "id": "usr",
            "name": "User",
            "type": "user",
            "description": "Your own notes about the user and the work; organise them as you like.",
            "permission": "read_write",
            "root_index": "usr-0",
        },
    ]
    assert mem.get_segment("usr")["root_index"] == "usr-0"
    if mem.place.url is None:
        with closing(mem.db_path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert_consistent(mem)


# ------------------------------------------------------------------------------------ the tree


def test_pages_are_numbered_per_segment_ordered_and_linked(mem: Memory) -> None:
    folder = mem.create_contents_page("Apollo", "Project Apollo", "usr-0")
    first = mem.create_detail_page("Deadline", "Launch in March", "March 3rd", folder)
    second = mem.create_detail_page("Budget", "10k", "ten thousand", folder)
    assert (folder, first, second) == ("usr-1", "usr-2", "usr-3")
    page = mem.get_page(first)
    assert page == {
        "index": "usr-2",
        "name": "Deadline",
        "description": "Launch in March",
        "type": "detail",
        "has_detail": True,
        "visibility": "expanded",
        "parent": "usr-1",
        "segment": "usr",
        "child_count": 0,
        "detail": "March 3rd",
        "children": [],
        "writable": True,
        "created_at": page["created_at"],
        "updated_at": page["created_at"],
    }
    assert page["created_at"].endswith("Z")
    assert mem.get_page(folder)["children"] == [first, second]
    assert [c["index"] for c in mem.get_children(folder)] == [first, second]
    assert mem.get_children(folder)[1]["name"] == "Budget"
    assert mem.get_parent(first)["index"] == folder
    assert mem.get_parent("usr-0") is None
    assert [a["index"] for a in mem.get_ancestors(first)] == [folder, "usr-0"]
    assert mem.get_ancestors("usr-0") == []
    assert mem.get_page("usr-0")["child_count"] == 1
    assert_consistent(mem)


def test_move_page_reparents_reorders_and_keeps_positions_dense(mem: Memory) -> None:
    a, b, c = (mem.create_detail_page(n, "", n, "usr-0") for n in "abc")
    folder = mem.create_contents_page("F", "", "usr-0")
    mem.move_page(c, "usr-0", position=0)
    assert mem.get_page("usr-0")["children"] == [c, a, b, folder]
    mem.move_page(a, folder)
    mem.move_page(b, folder, position=0)
    assert mem.get_page("usr-0")["children"] == [c, folder]
    assert mem.get_page(folder)["children"] == [b, a]
    assert mem.get_parent(a)["index"] == folder
    error = raises_code("INVALID_ARGUMENT", mem.move_page, c, folder, position=3)
    assert (error.parameter_name, error.suggested_value) == ("position", "2")
    assert_consistent(mem)


@pytest.mark.parametrize(
    ("source", "target", "code", "parameter"),
    [
        pytest.param("usr-1", "usr-1", "INVALID_MOVE", "source", id="under-itself"),
        pytest.param("usr-1", "usr-3", "INVALID_MOVE", "source", id="under-its-grandchild"),
        pytest.param("usr-0", "usr-1", "INVALID_MOVE", "source", id="a-root"),
        pytest.param("usr-1", "prj-0", "INVALID_MOVE", "source", id="to-another-segment"),
        pytest.param("usr-4", "usr-4", "NOT_A_CONTENTS_PAGE", "target", id="into-a-detail-page"),
        pytest.param("usr-9", "usr-0", "PAGE_NOT_FOUND", "source", id="unknown-source"),
        pytest.param("usr-4", "usr-99", "PAGE_NOT_FOUND", "target", id="unknown-target"),
    ],
)
def test_invalid_moves_are_refused_and_change_nothing(
    place: Place, source: str, target: str, code: str, parameter: str
) -> None:
    segments = [{"id": "usr", "name": "User", "type": "user"}, {"id": "prj", "name": "Projects"}]
    mem = open_memory(place, segments)
    mem.create_contents_page("A", "", "usr-0")  # usr-1
    mem.create_contents_page("B", "", "usr-1")  # usr-2
    mem.create_contents_page("C", "", "usr-2")  # usr-3
    mem.create_detail_page("D", "", "text", "usr-0")  # usr-4
    before = mem.rows()
    error = raises_code(code, mem.move_page, source, target)
    assert error.parameter_name == parameter
    assert mem.rows() == before


def test_create_contents_page_moves_the_given_children_in_order(mem: Memory) -> None:
    a, b, c = (mem.create_detail_page(n, "", n, "usr-0") for n in "abc")
    group = mem.create_contents_page("Group", "a and c", "usr-0", [c, a])
    assert mem.get_page(group)["children"] == [c, a]
    assert mem.get_page("usr-0")["children"] == [b, group]
    assert mem.create_contents_page("Empty", "", group, []) == "usr-5"
    assert_consistent(mem)


@pytest.mark.parametrize(
    ("children", "code"),
    [
        pytest.param(["usr-1", "usr-1"], "INVALID_MOVE", id="listed-twice"),
        pytest.param(["usr-1", "usr-0"], "INVALID_MOVE", id="a-root"),
        pytest.param(["usr-1", "usr-2"], "INVALID_MOVE", id="the-parent-itself"),
        pytest.param(["usr-1", "usr-7"], "PAGE_NOT_FOUND", id="unknown-child"),
        pytest.param(["sys-0"], "PERMISSION_DENIED", id="read-only-child"),
    ],
)
def test_create_contents_page_with_a_bad_child_creates_nothing(mem: Memory, children: list[str], code: str) -> None:
    mem.create_detail_page("a", "", "a", "usr-0")  # usr-1
    mem.create_contents_page("folder", "", "usr-0")  # usr-2
    before = mem.rows()
    error = raises_code(code, mem.create_contents_page, "New", "", "usr-2", children)
    assert error.parameter_name == "children"
    assert mem.rows() == before
    assert mem.create_detail_page("next", "", "", "usr-0") == "usr-3"  # the refused call used no number


def test_remove_page_refuses_non_empty_folders_unless_recursive(mem: Memory) -> None:
    folder = mem.create_contents_page("F", "", "usr-0")
    inner = mem.create_contents_page("G", "", folder)
    leaf = mem.create_detail_page("x", "", "x", inner)
    after = mem.create_detail_page("y", "", "y", "usr-0")
    error = raises_code("PAGE_NOT_EMPTY", mem.remove_page, folder)
    assert (error.parameter_name, error.suggested_value) == ("recursive", "True")
    mem.remove_page(folder, recursive=True)
    for gone in (folder, inner, leaf):
        raises_code("PAGE_NOT_FOUND", mem.get_page, gone)
    assert mem.get_page("usr-0")["children"] == [after]
    assert mem.get_page(after)["parent"] == "usr-0"
    mem.remove_page(after)
    assert mem.get_page("usr-0")["children"] == []
    raises_code("CANNOT_REMOVE_ROOT", mem.remove_page, "usr-0", recursive=True)
    assert mem.create_detail_page("z", "", "z", "usr-0") == "usr-5"  # numbers are never reused
    assert_consistent(mem)


def test_update_page_changes_only_what_is_given(mem: Memory) -> None:
    page = mem.create_detail_page("Old", "old summary", "old text", "usr-0")
    created = mem.get_page(page)["updated_at"]
    mem.update_page(page, description="new summary")
    mem.update_page(page, detail="new text")
    updated = mem.get_page(page)
    assert (updated["name"], updated["description"], updated["detail"]) == ("Old", "new summary", "new text")
    assert updated["updated_at"] >= created
    mem.update_page("usr-0", name="Mine")  # a read_write root can be renamed
    assert mem.get_page("usr-0")["name"] == "Mine"
    error = raises_code("NOT_A_DETAIL_PAGE", mem.update_page, "usr-0", detail="text")
    assert error.parameter_name == "detail"
    raises_code("INVALID_ARGUMENT", mem.update_page, page)


def test_detail_pages_hold_no_children(mem: Memory) -> None:
    page = mem.create_detail_page("Leaf", "", "text", "usr-0")
    for call in (
        lambda: mem.create_detail_page("x", "", "x", page),
        lambda: mem.create_contents_page("x", "", page),
        lambda: mem.get_children(page),
    ):
        error = raises_code("NOT_A_CONTENTS_PAGE", call)
        assert error.suggested_value == "usr-0"


@pytest.mark.parametrize(
    ("given", "suggested", "fragment"),
    [
        pytest.param("usr-13", "usr-1", "did you mean 'usr-1'", id="typo"),
        pytest.param("Groceries", "usr-2", "is the name of page 'usr-2'", id="a-name-instead-of-an-index"),
        pytest.param("page:001", None, "There is no page 'page:001'.", id="nothing-close"),
    ],
)
def test_page_not_found_suggests_the_page_meant(mem: Memory, given: str, suggested: str | None, fragment: str) -> None:
    mem.create_contents_page("Shopping", "", "usr-0")
    mem.create_detail_page("Groceries", "", "milk", "usr-1")
    error = raises_code("PAGE_NOT_FOUND", mem.get_page, given)
    assert (error.parameter_name, error.suggested_value) == ("page_index", suggested)
    assert fragment in error.message and error.solution and error.expected


def test_texts_are_checked_against_the_limits(place: Place) -> None:
    mem = open_memory(place, max_name_chars=5, max_detail_chars=10)
    assert raises_code("INVALID_ARGUMENT", mem.create_detail_page, "  ", "", "", "usr-0").parameter_name == "name"
    too_long = raises_code("INVALID_ARGUMENT", mem.create_detail_page, "n", "", "x" * 11, "usr-0")
    assert (too_long.parameter_name, too_long.expected) == ("detail", "at most 10 characters")
    assert raises_code("INVALID_ARGUMENT", mem.update_page, "usr-0", name="toolong").parameter_name == "name"
    assert mem.create_detail_page("short", "", "x" * 10, "usr-0") == "usr-1"


# -------------------------------------------------------------------------- expand, hide, view


def test_view_renders_expanded_and_hidden_pages(mem: Memory) -> None:
    folder = mem.create_contents_page("Apollo", "Project Apollo", "usr-0")
    note = mem.create_detail_page("Deadline", "Launch in March", "March 3rd\nat noon", folder)
    old = mem.create_contents_page("Archive", "", "usr-0")
    mem.create_detail_page("Old", "", "", old)
    mem.create_detail_page("Empty", "nothing yet", "", "usr-0")
    mem.hide_details(old)
    assert mem.view("usr") == (
        "[usr-0] User — Your own notes about the user and the work; organise them as you like. (contents, expanded)\n"
        "  [usr-1] Apollo — Project Apollo (contents, expanded)\n"
        "    [usr-2] Deadline — Launch in March (detail, expanded)\n"
        "      | March 3rd\n"
        "      | at noon\n"
        "  [usr-3] Archive (contents, hidden, 1 page inside)\n"
        "  [usr-5] Empty — nothing yet (detail, expanded)\n"
        "    | (no text)\n"
    )
    mem.hide_details(note)
    mem.hide_details(folder)
    assert mem.view("usr").splitlines()[1:3] == [
        "  [usr-1] Apollo — Project Apollo (contents, hidden, 1 page inside)",
        "  [usr-3] Archive (contents, hidden, 1 page inside)",
    ]
    mem.expand_details(note)  # also opens the folder above it
    assert "    [usr-2] Deadline — Launch in March (detail, expanded)\n      | March 3rd" in mem.view("usr")
    assert mem.get_page(folder)["visibility"] == "expanded"
    everything = mem.view()
    assert everything.startswith("[sys-0] System — ")
    assert "(contents, expanded, read-only)\n  (no pages yet)\n\n[usr-0] User" in everything
    error = raises_code("SEGMENT_NOT_FOUND", mem.view, "user")
    assert (error.parameter_name, error.suggested_value) == ("segment", "usr")


# ------------------------------------------------------------------------------------- search


@pytest.fixture
def library(mem: Memory) -> Memory:
    mem.create_detail_page("Deploy guide", "How to ship", "Run deploy.sh after the tests pass.", "usr-0")  # 1
    mem.create_detail_page("Team", "People and deploy rights", "Ana can deploy; Qi reviews.", "usr-0")  # 2
    mem.create_detail_page("Release notes", "What changed", "Version 2: faster deploys, new search.", "usr-0")  # 3
    mem.create_detail_page("新想法", "关于工具调用的思考", "详细内容：工具调用协议", "usr-0")  # 4
    mem.create_detail_page("100% done", "under_score", "literal wildcards", "usr-0")  # 5
    mem.hide_details("usr-3")
    return mem


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param("deploy", ["usr-1", "usr-2", "usr-3"], id="name-then-description-then-detail"),
        pytest.param("DEPLOY tests", ["usr-1", "usr-2", "usr-3"], id="more-terms-first-case-insensitive"),
        pytest.param("search", ["usr-3"], id="hidden-pages-are-searched"),
        pytest.param('"new search"', ["usr-3"], id="quoted-phrase"),
        pytest.param('"search new"', [], id="quoted-phrase-in-order"),
        pytest.param("工具", ["usr-4"], id="short-cjk-term"),
        pytest.param("调用协议", ["usr-4"], id="cjk-inside-text"),
        pytest.param("qi", ["usr-2"], id="short-latin-term"),
        pytest.param("%", ["usr-5"], id="percent-is-literal"),
        pytest.param("_", ["usr-5"], id="underscore-is-literal"),
        pytest.param("deploy AND:* NEAR( ^c", ["usr-1", "usr-2", "usr-3"], id="fts-syntax-is-not-interpreted"),
        pytest.param("nothing-like-this", [], id="no-match"),
    ],
)
def test_find_page_ranks_matches(library: Memory, query: str, expected: list[str]) -> None:
    assert [hit["index"] for hit in library.find_page(query)] == expected


def test_find_page_results_limit_segment_and_freshness(library: Memory) -> None:
    hit = library.find_page("faster")[0]
    assert hit["snippet"] == "Version 2: faster deploys, new search."
    assert hit["visibility"] == "hidden" and "detail" not in hit
    assert len(library.find_page("deploy", limit=2)) == 2
    assert library.find_page("deploy", segment="sys") == []
    library.update_page("usr-1", name="Shipping guide", detail="Run ship.sh.")
    assert [h["index"] for h in library.find_page("deploy.sh")] == []
    assert [h["index"] for h in library.find_page("ship.sh")] == ["usr-1"]
    library.remove_page("usr-2")
    assert [h["index"] for h in library.find_page("rights")] == []
    assert raises_code("INVALID_ARGUMENT", library.find_page, "   ").parameter_name == "query"
    assert raises_code("INVALID_ARGUMENT", library.find_page, "x", limit=0).parameter_name == "limit"
    assert raises_code("SEGMENT_NOT_FOUND", library.find_page, "x", segment="nope").parameter_name == "segment"
    assert_consistent(library)


@pytest.mark.parametrize(
    ("query", "says"),
    [
        pytest.param(" ".join(f"t{i:06d}" for i in range(60_000)), "1,000 characters", id="issue12-60000-terms"),
        pytest.param(" ".join(f"w{i}" for i in range(21)), "at most 20 distinct words", id="21-words"),
        pytest.param("x" * 1_001, "at most 1,000 characters", id="1001-characters"),
    ],
)
def test_find_page_refuses_oversized_queries(library: Memory, query: str, says: str) -> None:
    """Issue 12: a query of 60,000 terms cost minutes of server CPU (a term set rebuilt per term)."""
    error = raises_code("INVALID_ARGUMENT", library.find_page, query)
    assert says in error.message and error.parameter_name == "query"


def test_find_page_takes_twenty_words_and_repeats_count_once(library: Memory) -> None:
    assert [h["index"] for h in library.find_page(" ".join(["deploy"] * 50 + [f"w{i}" for i in range(19)]))] == [
        "usr-1",
        "usr-2",
        "usr-3",
    ]


def test_terms_are_distinct_in_linear_time() -> None:
    words = [f"t{i:06d}" for i in range(200_000)]
    assert terms_of(" ".join(words + [w.upper() for w in words])) == words


def test_create_contents_page_refuses_more_than_1000_children(library: Memory) -> None:
    """A list of 100,000 children cost a quadratic duplicate check (list.count per child) before any move."""
    before = library.rows()
    error = raises_code("INVALID_ARGUMENT", library.create_contents_page, "G", "", "usr-0", ["usr-1"] * 100_000)
    assert error.parameter_name == "children" and "1,000" in error.message
    assert library.rows() == before


def test_memory_call_past_its_runs_deadline_is_stopped(library: Memory) -> None:
    """Within a run, a memory call never outlives the run's deadline: SQLite is interrupted there."""
    with past_deadline():
        error = raises_code("TIMEOUT", library.find_page, "deploy")
        assert "time limit" in error.message
        raises_code("TIMEOUT", library.update_page, "usr-1", name="late")
    assert [h["index"] for h in library.find_page("deploy")] == ["usr-1", "usr-2", "usr-3"]  # nothing changed


# ---------------------------------------------------------------------------- permissions (Memci)

# The detail page and the contents page each segment's rows act on (see the `perm` fixture).
PAGES = {"read_only": ("sys-1", "sys-2"), "read_write": ("usr-1", "usr-2"), "system_managed": ("sec-1", "sec-2")}

OPERATIONS: dict[str, Callable[[Memory, str, str], Any]] = {
    "expand_details": lambda m, detail, contents: m.expand_details(detail),
    "hide_details": lambda m, detail, contents: m.hide_details(detail),
    "update_page": lambda m, detail, contents: m.update_page(detail, name="Changed"),
    "move_page": lambda m, detail, contents: m.move_page(detail, contents),
    "remove_page": lambda m, detail, contents: m.remove_page(detail),
    "create_detail_page": lambda m, detail, contents: m.create_detail_page("New", "", "text", contents),
    "create_contents_page": lambda m, detail, contents: m.create_contents_page("New", "", contents),
}

# segment.md, "受权限影响的操作": operation x (read_only, read_write, system_managed). None: allowed.
TABLE: dict[str, tuple[str | None, str | None, str | None]] = {
    "expand_details": (None, None, "PAGE_NOT_FOUND"),
    "hide_details": (None, None, "PAGE_NOT_FOUND"),  # "limited": see the system-root test below
    "update_page": ("PERMISSION_DENIED", None, "PAGE_NOT_FOUND"),
    "move_page": ("PERMISSION_DENIED", None, "PAGE_NOT_FOUND"),
    "remove_page": ("PERMISSION_DENIED", None, "PAGE_NOT_FOUND"),
    "create_detail_page": ("PERMISSION_DENIED", None, "PAGE_NOT_FOUND"),
    "create_contents_page": ("PERMISSION_DENIED", None, "PAGE_NOT_FOUND"),
}


@pytest.mark.parametrize(
    ("operation", "permission", "expected"),
    [
        pytest.param(operation, permission, TABLE[operation][column], id=f"{operation}-{permission}")
        for operation in TABLE
        for column, permission in enumerate(PAGES)
    ],
)
def test_permission_table(perm: Memory, operation: str, permission: str, expected: str | None) -> None:
    detail, contents = PAGES[permission]
    if operation == "expand_details":  # start from a hidden page, so that expanding has an effect
        perm.place.hide(detail)
    before = perm.rows()
    if expected is None:
        OPERATIONS[operation](perm, detail, contents)
        assert perm.rows() != before
        assert_consistent(perm)
        return
    error = raises_code(expected, OPERATIONS[operation], perm, detail, contents)
    assert perm.rows() == before
    if expected == "PERMISSION_DENIED":
        assert error.suggested_value == "usr-0" and "read-only segment 'sys'" in error.message
    else:
        assert error.suggested_value is None or not error.suggested_value.startswith("sec")


def test_allowed_operations_take_effect(perm: Memory) -> None:
    perm.hide_details("sys-1")  # read_only: hiding and expanding only change what is shown
    assert perm.get_page("sys-1")["visibility"] == "hidden"
    perm.expand_details("sys-1")
    assert perm.get_page("sys-1")["visibility"] == "expanded"
    assert perm.get_page("sys-1")["writable"] is False
    assert perm.get_children("sys-2")[0]["name"] == "Refunds"
    assert [a["index"] for a in perm.get_ancestors("sys-3")] == ["sys-2", "sys-0"]
    assert perm.get_parent("sys-3")["index"] == "sys-2"
    assert [h["index"] for h in perm.find_page("Refunds")] == ["sys-3"]


@pytest.mark.parametrize(
    ("root", "expected"),
    [
        pytest.param("sys-0", "PERMISSION_DENIED", id="read-only-system-segment"),
        pytest.param("ops-0", "PERMISSION_DENIED", id="read-write-system-segment"),
        pytest.param("ref-0", None, id="read-only-custom-segment"),
        pytest.param("usr-0", None, id="user-segment"),
    ],
)
def test_a_system_segments_root_cannot_be_hidden(perm: Memory, root: str, expected: str | None) -> None:
    if expected is None:
        perm.hide_details(root)
        assert perm.get_page(root)["visibility"] == "hidden"
        return
    raises_code(expected, perm.hide_details, root)
    assert perm.get_page(root)["visibility"] == "expanded"
    assert f"[{root}]" in perm.view()


def test_system_managed_segments_are_invisible(perm: Memory) -> None:
    assert [s["id"] for s in perm.list_segments()] == ["sys", "usr", "ops", "ref"]
    raises_code("SEGMENT_NOT_FOUND", perm.get_segment, "sec")
    for read in (perm.get_page, perm.get_children, perm.get_parent, perm.get_ancestors):
        raises_code("PAGE_NOT_FOUND", read, "sec-2")
    assert perm.find_page("swordfish") == [] and perm.find_page("Secret") == []
    raises_code("SEGMENT_NOT_FOUND", perm.find_page, "swordfish", segment="sec")
    raises_code("SEGMENT_NOT_FOUND", perm.view, "sec")
    assert "sec-" not in perm.view() and "Secret" not in perm.view()
    assert raises_code("PAGE_NOT_FOUND", perm.get_page, "Secret rule").suggested_value is None
    assert raises_code("PAGE_NOT_FOUND", perm.move_page, "usr-1", "sec-0").parameter_name == "target"


def test_writes_into_read_only_segments_are_refused_from_anywhere(perm: Memory) -> None:
    before = perm.rows()
    assert raises_code("PERMISSION_DENIED", perm.move_page, "usr-1", "sys-2").parameter_name == "target"
    assert raises_code("PERMISSION_DENIED", perm.create_contents_page, "G", "", "usr-0", ["sys-1"])
    assert raises_code("PERMISSION_DENIED", perm.update_page, "sys-0", name="Mine")
    assert raises_code("PERMISSION_DENIED", perm.remove_page, "ref-1")
    assert perm.rows() == before


# ------------------------------------------------------------------------ options and restarts


def test_restart_reconciles_segments_and_keeps_pages(place: Place) -> None:
    first = open_memory(place, TEST_SEGMENTS)
    first.create_detail_page("Kept", "", "kept", "usr-0")
    segments = [
        {"id": "usr", "name": "Me", "type": "user", "permission": "read_only"},
        {"id": "sys", "name": "System", "type": "system", "pages": [{"name": "Rules", "detail": "again"}]},
    ]
    again = open_memory(place, segments)
    assert [(s["id"], s["name"], s["permission"]) for s in again.list_segments()] == [
        ("usr", "Me", "read_only"),
        ("sys", "System", "read_only"),
        ("ops", "Operations", "read_write"),
        ("ref", "Reference", "read_only"),
    ]
    assert again.get_page("usr-1")["name"] == "Kept"
    assert raises_code("PERMISSION_DENIED", again.create_detail_page, "x", "", "", "usr-0")
    assert [c["name"] for c in again.get_children("sys-0")] == ["Rules", "Policies"]  # seeded once only
    assert_consistent(again)


def test_segments_option_accepts_json_text_from_the_environment(tmp_path: Path) -> None:
    text = json.dumps([{"id": "notes", "name": "Notes", "type": "user", "pages": [{"name": "Inbox", "pages": []}]}])
    registry = ToolRegistry([toolpack], tmp_path, {"memory": {"segments": text}}, db_path=tmp_path / "m.sqlite3")
    mem = Memory(registry, Place(tmp_path / "m.sqlite3"))
    assert [s["id"] for s in mem.list_segments()] == ["notes"]
    assert mem.get_page("notes-1")["type"] == "contents"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param({"segments": []}, "at least one segment", id="no-segments"),
        pytest.param({"segments": [{"id": "a", "name": "A"}, {"id": "a", "name": "B"}]}, "listed twice", id="dup"),
        pytest.param({"segments": [{"id": "my-notes", "name": "A"}]}, "pattern", id="dash-in-id"),
        pytest.param({"segments": "[not json"}, "JSON list", id="bad-json"),
        pytest.param({"segment": []}, "Extra inputs", id="typo"),
        pytest.param(
            {"segments": [{"id": "a", "name": "A", "pages": [{"name": "P", "detail": "x", "pages": [{"name": "Q"}]}]}]},
            "one or the other",
            id="seed-page-both-kinds",
        ),
    ],
)
def test_bad_options_stop_startup(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolpackLoadError, match=message):
        ToolRegistry([toolpack], tmp_path, {"memory": options}, db_path=tmp_path / "m.sqlite3")
    assert MemoryOptions().segments[0].id == "sys"


# ------------------------------------------------------------------------------ schema versions

# The schema of version 1 exactly as that release wrote it; never change this copy.
V1_SCHEMA = """
CREATE TABLE segments (
    id TEXT PRIMARY KEY, name TEXT NOT NULL,
    type TEXT NOT NULL CHECK (type IN ('system', 'user', 'tool', 'custom')),
    description TEXT NOT NULL DEFAULT '',
    permission TEXT NOT NULL CHECK (permission IN ('read_only', 'read_write', 'system_managed')),
    ordinal INTEGER NOT NULL DEFAULT 0, next_page INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL
);
CREATE TABLE pages (
    id INTEGER PRIMARY KEY, page_index TEXT NOT NULL UNIQUE, segment_id TEXT NOT NULL REFERENCES segments(id),
    kind TEXT NOT NULL CHECK (kind IN ('contents', 'detail')), name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '', detail TEXT, parent TEXT REFERENCES pages(page_index),
    position INTEGER NOT NULL DEFAULT 0, visibility TEXT NOT NULL CHECK (visibility IN ('expanded', 'hidden')),
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    CHECK ((kind = 'detail') = (detail IS NOT NULL))
);
CREATE INDEX pages_by_parent ON pages(parent, position);
CREATE INDEX pages_by_segment ON pages(segment_id);
INSERT INTO segments VALUES ('usr', 'User', 'user', 'old notes', 'read_write', 0, 3, 't', 't');
INSERT INTO pages VALUES (1, 'usr-0', 'usr', 'contents', 'User', 'old notes', NULL, NULL, 0, 'expanded', 't', 't');
INSERT INTO pages VALUES (2, 'usr-1', 'usr', 'contents', 'Travel', 'Trips', NULL, 'usr-0', 0, 'hidden', 't', 't');
INSERT INTO pages VALUES (3, 'usr-2', 'usr', 'detail', 'Passport', 'expires 2031', 'Renew in Bern', 'usr-1', 0,
                          'hidden', 't', 't');
PRAGMA user_version = 1;
"""


def test_an_older_database_is_migrated_on_startup(tmp_path: Path) -> None:
    db_path = tmp_path / "state" / "memory.sqlite3"
    db_path.parent.mkdir()
    with closing(db_path) as conn:
        conn.executescript(V1_SCHEMA)
    mem = open_memory(tmp_path, [{"id": "usr", "name": "User", "type": "user"}])
    with closing(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    assert [h["index"] for h in mem.find_page("Bern")] == ["usr-2"]  # old rows are in the new index
    assert mem.create_detail_page("Visa", "", "apply in Bern", "usr-1") == "usr-3"
    assert sorted(h["index"] for h in mem.find_page("Bern")) == ["usr-2", "usr-3"]
    assert "[usr-1] Travel — Trips (contents, hidden, 2 pages inside)" in mem.view()
    assert_consistent(mem)


@pytest.mark.parametrize(
    "content",
    [pytest.param(None, id="a-directory"), pytest.param(b"not a database" * 100, id="not-sqlite")],
)
def test_an_unusable_db_path_stops_startup_with_its_name(tmp_path: Path, content: bytes | None) -> None:
    db_path = tmp_path / "state" / "memory.sqlite3"
    if content is None:
        db_path.mkdir(parents=True)
    else:
        db_path.parent.mkdir()
        db_path.write_bytes(content)
    with pytest.raises(ToolpackLoadError, match=r"cannot open the database .*memory\.sqlite3 \(db_path\)"):
        open_memory(tmp_path)


def test_a_newer_database_is_refused(tmp_path: Path) -> None:
    db_path = tmp_path / "state" / "memory.sqlite3"
    open_memory(tmp_path)
    with closing(db_path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(ToolpackLoadError, match="newer than this attp-server understands"):
        open_memory(tmp_path)


# ---------------------------------------------------------------------------------- concurrency


def test_concurrent_calls_from_threads_lose_nothing(mem: Memory) -> None:
    folder = mem.create_contents_page("Shared", "", "usr-0")
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(25):
                index = mem.create_detail_page(f"t{n}-{i}", "", "x", folder)
                if i % 5 == 0:
                    mem.move_page(index, "usr-0", position=0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    names = {c["name"] for c in mem.get_children(folder)} | {c["name"] for c in mem.get_children("usr-0")}
    assert names >= {f"t{n}-{i}" for n in range(8) for i in range(25)}
    assert len(mem.get_children(folder)) == 8 * 20
    assert_consistent(mem)


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Memory]:
    """A memory whose database another connection holds the write lock of."""
    mem = open_memory(tmp_path, busy_timeout_s=0.2)
    other = sqlite3.connect(mem.db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    yield mem
    other.execute("ROLLBACK")
    other.close()


def test_a_write_blocked_by_another_process_reports_busy(locked: Memory) -> None:
    error = raises_code("MEMORY_BUSY", locked.create_detail_page, "x", "", "x", "usr-0")
    assert error.solution and "nothing was changed" in error.solution
    assert locked.get_page("usr-0")["child_count"] == 0  # reads go on under WAL


def test_a_write_blocked_by_another_replica_reports_busy_on_postgresql(memory_database: str, tmp_path: Path) -> None:
    """On PostgreSQL the scope's writers take one advisory lock: another replica holding it makes a write wait,
    then give up with MEMORY_BUSY, while reads go on."""
    import psycopg

    place = Place(tmp_path / "state" / "memory.sqlite3", memory_database, f"test {uuid.uuid4().hex}")
    mem = open_memory(place, busy_timeout_s=0.2)
    with psycopg.connect(memory_database) as other:
        other.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("attp memory " + place.scope,))
        error = raises_code("MEMORY_BUSY", mem.create_detail_page, "x", "", "x", "usr-0")
        assert error.solution and "nothing was changed" in error.solution
        assert mem.get_page("usr-0")["child_count"] == 0
    assert mem.create_detail_page("x", "", "x", "usr-0") == "usr-1"


def test_scopes_on_one_postgresql_database_are_apart(memory_database: str, tmp_path: Path) -> None:
    """Two scopes (tenants, sessions) in one database: same page numbers, neither sees the other's pages."""
    db_path = tmp_path / "state" / "memory.sqlite3"
    alice = open_memory(Place(db_path, memory_database, f"tenant alice {uuid.uuid4().hex}"))
    bob = open_memory(Place(db_path, memory_database, f"tenant bob {uuid.uuid4().hex}"))
    assert alice.create_detail_page("Alice's", "", "secret of alice", "usr-0") == "usr-1"
    assert bob.create_detail_page("Bob's", "", "secret of bob", "usr-0") == "usr-1"
    assert alice.get_page("usr-1")["name"] == "Alice's" and bob.get_page("usr-1")["name"] == "Bob's"
    assert alice.find_page("secret") and [h["index"] for h in alice.find_page("bob")] == []
    bob.remove_page("usr-1")
    assert alice.get_page("usr-1")["detail"] == "secret of alice"
    raises_code("PAGE_NOT_FOUND", bob.get_page, "usr-1")


def test_a_session_scope_that_ends_takes_its_postgresql_pages_with_it(memory_database: str, tmp_path: Path) -> None:
    """isolation = session on PostgreSQL: when a session ends, its scope's rows go (idempotently); others stay."""
    db_path = tmp_path / "state" / "memory.sqlite3"
    ending = Place(db_path, memory_database, f"session {uuid.uuid4().hex}")
    staying = Place(db_path, memory_database, f"session {uuid.uuid4().hex}")
    for place in (ending, staying):
        open_memory(place).create_detail_page("Note", "", "text", "usr-0")
    registry = open_memory(ending).registry
    registry.forget_scope(tmp_path / "ws", db_path, ending.scope)
    registry.forget_scope(tmp_path / "ws", db_path, ending.scope)  # another replica noticed it too
    assert ending.query("pages") == [] and ending.query("segments") == []
    assert [p["name"] for p in staying.query("pages")] == ["System", "User", "Note"]
