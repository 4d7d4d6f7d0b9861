"""The tool description the model reads (SPEC §4): rules, one compact signature line per tool, the budget."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest

from attp_server.model.catalog import (
    DESCRIPTION_BUDGET,
    Catalog,
    compact_signature,
    enabled_modules,
    shorten,
)
from attp_server.run.startup import build_registry
from attp_server.settings import Settings
from attp_server.toolpack import (
    Tool,
    ToolMarks,
    Toolpack,
    ToolpackLoadError,
    ToolRegistry,
    annotation_text,
    make_tool,
)


def settings_for(tmp_path: Path, **overrides: Any) -> Settings:
    return Settings(workspace=tmp_path / "ws", db_path=tmp_path / "memory.sqlite3", workers=0, **overrides)


def catalog_of(tmp_path: Path, **overrides: Any) -> Catalog:
    settings = settings_for(tmp_path, **overrides)
    return Catalog(build_registry(settings), settings)


def generated_pack(name: str, count: int, *, open_world: bool = False) -> Toolpack:
    """A pack of `count` distinct tools with realistic signatures, as an upstream MCP server might have."""

    def make(i: int) -> Any:
        def tool(query: str, limit: int = 10, region: str | None = None) -> list[dict[str, Any]]:
            return []

        tool.__name__ = f"{name}_tool_{i}"
        tool.__doc__ = f"Search the {name} index number {i} for records that match a query, newest first."
        return tool

    return Toolpack(
        name=name, description=f"The {name} service.", tools=[make(i) for i in range(count)], open_world=open_world
    )


def catalog_with(tmp_path: Path, packs: list[Toolpack]) -> Catalog:
    settings = settings_for(tmp_path)
    return Catalog(ToolRegistry(packs, tmp_path, {}), settings)


# --- the default packs --------------------------------------------------------------------------


def test_default_packs_show_every_tool_with_its_signature_within_budget(tmp_path: Path) -> None:
    """Issue 13: past 4,000 characters only pack and tool names were listed, so every trial began with help()."""
    catalog = catalog_of(tmp_path)
    description = catalog.description
    assert {"files", "skills", "memory"} <= set(catalog.registry.packs)
    assert len(description) <= DESCRIPTION_BUDGET
    for tool in catalog.registry.tools.values():
        assert f"  {compact_signature(tool)} — " in description, tool.name
    assert "read_file(path, max_lines=1000, offset=0) -> str — Read a UTF-8 text file" in description
    assert "too long" not in description
    assert "file_reader = read_file" in description


def test_the_docs_state_the_default_description_size(tmp_path: Path) -> None:
    catalog = catalog_of(tmp_path)
    programs = (Path(__file__).parent.parent / "docs" / "programs.md").read_text(encoding="utf-8")
    stated = re.search(r"The default packs'\s+(\d+) tools take ([\d,]+) characters", programs)
    assert stated is not None
    assert (int(stated.group(1)), int(stated.group(2).replace(",", ""))) == (
        len(catalog.registry.tools),
        len(catalog.description),
    )


def test_description_rules(tmp_path: Path) -> None:
    description = catalog_of(tmp_path).description
    for needle in (
        "__result__",
        "except ToolError as e:",
        "e.code",
        "e.suggested_value",
        "math, json, datetime, re, random, statistics",
        'help("name")',
        'tools("word")',
        "Limits per call: 10 s, 200 tool calls",
        "The reply is a JSON object",
        "tool_calls",
    ):
        assert needle in description, needle


def test_description_says_plainly_that_nothing_reaches_the_network(tmp_path: Path) -> None:
    description = catalog_of(tmp_path).description
    assert "no enabled tool reaches the network or runs commands" in description


def test_a_pack_that_reaches_out_is_named_in_the_rules(tmp_path: Path) -> None:
    description = catalog_of(tmp_path, toolpacks=["files", "shell"]).description
    assert "no enabled tool reaches the network" not in description
    assert "only these go beyond the workspace (network, commands, other systems): bash." in description
    assert "  bash(command, timeout=120" in description


def test_toml_result_format_is_described(tmp_path: Path) -> None:
    assert "The reply is TOML" in catalog_of(tmp_path, result_format="toml").description


def test_starlark_description(tmp_path: Path) -> None:
    description = catalog_of(tmp_path, engine="starlark").description
    assert description.startswith("Run a short Starlark program")
    assert "Modules ready to use: json, math." in description
    assert "except ToolError" not in description  # Starlark has no try
    assert "no while" in description


def test_modules_come_from_one_place(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    catalog = Catalog(build_registry(settings), settings)
    modules = ", ".join(enabled_modules(settings))
    assert modules in catalog.description
    assert modules in catalog.prompt()
    assert modules in catalog.prompt("zh")


def test_no_tools_enabled(tmp_path: Path) -> None:
    description = catalog_with(tmp_path, []).description
    assert description.endswith("No tools are enabled: only the modules above are available.")


# --- past the budget ----------------------------------------------------------------------------


def test_past_the_budget_summaries_give_way_before_signatures(tmp_path: Path) -> None:
    """Issue 24: with 45 tools, 8 lost their signature while every summary was kept whole."""
    catalog = catalog_with(tmp_path, [generated_pack("crm", 40), generated_pack("wiki", 40)])
    description = catalog.description
    assert len(description) <= DESCRIPTION_BUDGET
    for tool in catalog.registry.tools.values():
        assert compact_signature(tool) in description, tool.name
    assert "too long" not in description and "also:" not in description
    summaries = re.findall(r"^  \S.* — (.*)$", description, re.MULTILINE)
    assert summaries, "the summaries were shortened, not dropped"
    for summary in summaries:  # whole, or cut after a clause: "..., newest first." -> "... match a query…"
        assert summary.endswith(("first.", "match a query…")), summary


class FixedLive:
    """The live tools of an upstream server, fixed (a catalog test needs no connection)."""

    problem = told = None

    def __init__(self, pack: Toolpack) -> None:
        self._tools = [make_tool(f, pack.name, marks=ToolMarks()) for f in pack.tools]

    def tools(self) -> list[Tool]:
        return self._tools

    def health(self) -> dict[str, Any]:
        return {}

    async def serve(self, changed: Any, *, task_status: Any) -> None:
        task_status.started()


def test_past_the_budget_the_users_own_servers_keep_their_signatures(tmp_path: Path) -> None:
    """Too many tools even for one shared line per pack: the built-in packs' signatures go first."""
    upstream = generated_pack("crm", 30)
    live = Toolpack(name="crm", description="The crm server.", live=FixedLive(upstream))
    registry = ToolRegistry([generated_pack("wiki", 200), live], tmp_path, {})
    registry.refresh()
    catalog = Catalog(registry, settings_for(tmp_path))
    description = catalog.description
    assert len(description) <= DESCRIPTION_BUDGET
    tools = list(catalog.registry.tools.values())
    shown = [t for t in tools if compact_signature(t) in description]
    assert [t.pack for t in shown if t.pack == "crm"] == ["crm"] * 30  # every tool of the user's server
    assert 30 < len(shown) < 230
    assert all(t.name in description for t in tools)  # the rest by name
    assert f"{len(shown)} of 230 tools are shown with their signature" in description
    assert "help('name')" in description and "tools('word')" in description


def test_hundreds_of_tools_are_counted_per_pack(tmp_path: Path) -> None:
    catalog = catalog_with(tmp_path, [generated_pack("crm", 400), generated_pack("wiki", 400, open_world=True)])
    description = catalog.description
    assert len(description) <= DESCRIPTION_BUDGET
    assert "Toolpacks (800 tools; too many to list their signatures here)" in description
    assert "crm — The crm service." in description
    assert "  400 tools: crm_tool_0, crm_tool_1" in description
    assert "more" in description
    assert (  # the rules name the tools that reach out, the first eight of them
        "wiki_tool_0, wiki_tool_1, wiki_tool_2, wiki_tool_3, wiki_tool_4, wiki_tool_5, wiki_tool_6, wiki_tool_7 "
        "and 392 more." in description
    )


@pytest.mark.parametrize("count", [200, 2000])
def test_many_packs_still_fit(tmp_path: Path, count: int) -> None:
    packs = [generated_pack(f"server{i}", 3) for i in range(count)]
    description = catalog_with(tmp_path, packs).description
    assert len(description) <= DESCRIPTION_BUDGET
    assert f"Toolpacks ({3 * count} tools in {count} packs; tool count in brackets): server0 (3), server1 (3)" in (
        description
    )
    assert ("more packs." in description) == (count == 2000)


def test_a_tool_name_two_packs_define_is_refused_naming_both(tmp_path: Path) -> None:
    """The clash check looks names up in an index of the packs added before (it scanned every pack per tool)."""
    packs = [generated_pack(f"server{i}", 3) for i in range(50)]
    packs[40].tools[2].__name__ = "server7_tool_1"
    with pytest.raises(
        ToolpackLoadError, match="'server7_tool_1' is defined by toolpack 'server7' and by toolpack 'server40'"
    ):
        catalog_with(tmp_path, packs)


# --- signatures ---------------------------------------------------------------------------------


def sample(
    path: str,
    items: list[dict[str, Any]],
    mode: Literal["fast", "slow"],
    limit: int = 10,
    label: str | None = None,
    tags: list[str] | None = None,
    *rest: Annotated[str, "more"],
    **options: Any,
) -> dict[str, Any] | None:
    """Do a sample thing."""
    return None


def many_parameters(a: str, b: int, c: str = "x" * 40, d: str = "y" * 40, e: str = "z" * 40, f: int = 1) -> str:
    """Take many parameters."""
    return ""


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        pytest.param(
            sample,
            "sample(path, items: list[dict], mode: Literal['fast', 'slow'], limit=10, label=None, tags: list[str] = None, "
            "*rest, **options) -> dict | None",
            id="every-kind",
        ),
        pytest.param(
            many_parameters,
            "many_parameters(a, b: int, c='" + "x" * 40 + "', d='" + "y" * 40 + "', ...) -> str",
            id="long-is-cut-after-required",
        ),
    ],
)
def test_compact_signature(function: Any, expected: str) -> None:
    assert compact_signature(make_tool(function, "demo", marks=ToolMarks())) == expected


@pytest.mark.parametrize(
    ("annotation", "text"),
    [
        pytest.param(str, "str", id="str"),
        pytest.param(Any, "any", id="any"),
        pytest.param(None, "None", id="none"),
        pytest.param(dict[str, int | str], "dict", id="dict"),
        pytest.param(list[dict[str, Any]], "list[dict]", id="list-of-dict"),
        pytest.param(tuple[int, int], "list", id="tuple"),
        pytest.param(int | None, "int | None", id="optional"),
        pytest.param(Literal["a", "b"], "Literal['a', 'b']", id="literal"),
    ],
)
def test_compact_type_text(annotation: Any, text: str) -> None:
    """The description's spelling, of the one rendering of types (`annotation_text`) that help() and ATDF use too."""
    assert annotation_text(annotation, 0, compact=True) == text


GIT_SHOW = "Shows the contents of a commit, or of a file or directory given as <revision>:<path>"
READ_FILE = "Read a UTF-8 text file from the workspace: max_lines lines (5000 at most) from line offset (0-based)."


@pytest.mark.parametrize(
    ("text", "limit", "cut"),
    [
        pytest.param("  spaced\n out  ", 50, "spaced out", id="fits"),
        pytest.param(READ_FILE, 60, "Read a UTF-8 text file from the workspace: max_lines lines…", id="before-paren"),
        pytest.param(READ_FILE, 45, "Read a UTF-8 text file from the workspace…", id="clause"),
        pytest.param(READ_FILE, 40, "", id="no-clause-fits"),
        pytest.param(
            "Delete a page for good. Children need recursive=True.", 40, "Delete a page for good…", id="sentence"
        ),
        pytest.param("Get the time in a zone, e.g. Europe/Oslo - or UTC", 40, "Get the time in a zone…", id="e.g."),
        pytest.param(GIT_SHOW, 60, "Shows the contents of a commit… (<revision>:<path>)", id="format-kept"),
        pytest.param(GIT_SHOW, 30, "<revision>:<path>", id="format-before-prose"),
        pytest.param(
            "Find code, e.g. `repo:owner/name` - newest first.", 40, "Find code… (`repo:owner/name`)", id="ticks"
        ),
        pytest.param("Change a page's name, description, or parent.", 40, "", id="not-mid-list"),
        pytest.param(
            "Change a page's name, description, or (detail pages only) detail text; the rest stays.",
            55,
            "",
            id="not-after-or",
        ),
        pytest.param(
            "Execute an INSERT, UPDATE, or DELETE query on the SQLite database", 40, "", id="not-mid-list-oxford"
        ),
        pytest.param(
            "Merge two lists, sets and dicts, keeping order", 45, "Merge two lists, sets and dicts…", id="list"
        ),
        pytest.param(
            "Read a text file attached to a skill: a template, a script, or an example.",
            60,
            "Read a text file attached to a skill…",
            id="before-the-list",
        ),
        pytest.param(
            "List the files of a folder, with their sizes and kinds, newest first",
            60,
            "List the files of a folder, with their sizes and kinds…",
            id="clause-comma",
        ),
    ],
)
def test_shorten_cuts_at_a_sentence_or_clause_and_keeps_formats(text: str, limit: int, cut: str) -> None:
    """Issue 34: "Read a UTF-8 text file from the…" said less than nothing; git's <revision>:<path> was cut away;
    "Execute an INSERT, UPDATE…" read as if DELETE were not allowed (a list is kept whole or not at all)."""
    assert shorten(text, limit) == cut
    assert len(cut) <= limit


@pytest.mark.parametrize(
    ("annotation", "full", "compact"),
    [
        pytest.param(dict[str, int], "dict[str, int]", "dict", id="dict"),
        pytest.param(tuple[int, str], "tuple[int, str]", "list", id="tuple"),
        pytest.param(Any, "Any", "any", id="any"),
        pytest.param(Annotated[int, "a note"], "int", "int", id="annotated"),
        pytest.param(list[Annotated[str, "x"]] | None, "list[str] | None", "list[str] | None", id="nested-annotated"),
    ],
)
def test_one_rendering_of_types_in_two_spellings(annotation: Any, full: str, compact: str) -> None:
    """help() and ATDF spell a type in full; the description's line compactly; both from one function."""
    assert (annotation_text(annotation), annotation_text(annotation, compact=True)) == (full, compact)
