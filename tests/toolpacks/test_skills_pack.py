"""The skills toolpack: its three tools through a ToolRegistry, end to end in the sandbox, and the
bundled skills' own code (the pack template and its tests, the example programs)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness import run_code, running

from attp_server.model.skills import SkillLibraryError
from attp_server.run.checks import KnownNames, check_program
from attp_server.toolpack import ToolError, Toolpack, ToolRegistry, load_toolpack
from attp_server.toolpacks.skills import toolpack

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "src" / "attp_server" / "bundled_skills" / "toolpack-authoring" / "templates"
EXAMPLES = sorted((REPO / "src" / "attp_server" / "bundled_skills").glob("*/examples/*.py"))


def write_library(root: Path) -> Path:
    """A small library: one skill with attached files (one binary), one in another category."""
    guide = root / "guide"
    (guide / "templates").mkdir(parents=True)
    (guide / "SKILL.md").write_text("---\nname: guide\ndescription: How to guide.\ncategory: docs\n---\n# Guide\n")
    (guide / "templates" / "page.md").write_text("# Page\n")
    (guide / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00")
    (root / "other").mkdir()
    (root / "other" / "SKILL.md").write_text("---\nname: other\ndescription: Other things.\ncategory: Ops\n---\n")
    return root


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    library = write_library(tmp_path / "skills")
    return ToolRegistry([load_toolpack("skills")], tmp_path / "ws", {}, [library])


def call(registry: ToolRegistry, name: str, *args: Any, **kwargs: Any) -> Any:
    """Call a tool the way the runtime does: resolve, validate the arguments, then call."""
    tool = registry.resolve(name)
    assert tool is not None, name
    bound = tool.bind(args, kwargs)
    assert isinstance(bound, dict), bound
    return tool.function(**bound)


# --- the pack -------------------------------------------------------------------------------------


def test_pack_registers_three_documented_read_only_tools(registry: ToolRegistry) -> None:
    assert toolpack.read_only and not toolpack.open_world
    assert sorted(registry.namespaces()["skills"]) == ["list_skills", "read_skill_file", "use_skill"]
    signatures = sorted(t.signature_text() for t in registry.tools.values())
    assert signatures == [
        "list_skills(category: str | None = None) -> list[dict[str, Any]]",
        "read_skill_file(name: str, path: str) -> str",
        "use_skill(name: str) -> dict[str, Any]",
    ]
    for tool in registry.tools.values():
        assert {"Args:", "Returns:", "Raises:", "Example:"} <= set(tool.doc.split()), tool.name


def test_without_skills_dirs_the_bundled_library_is_used(tmp_path: Path) -> None:
    bundled = ToolRegistry([toolpack], tmp_path, {})
    names = [s["name"] for s in call(bundled, "list_skills")]
    assert names == ["attp-programs", "memory-tidy", "skill-authoring", "toolpack-authoring"]


def test_missing_skills_dir_stops_startup(tmp_path: Path) -> None:
    with pytest.raises(SkillLibraryError, match="does not exist"):
        ToolRegistry([toolpack], tmp_path, {}, [tmp_path / "nope"])


# --- use_skill / list_skills / read_skill_file ----------------------------------------------------


def test_use_skill(registry: ToolRegistry) -> None:
    skill = call(registry, "use_skill", "guide")
    assert skill == {
        "name": "guide",
        "title": "Guide",
        "description": "How to guide.",
        "category": "docs",
        "files": ["logo.png", "templates/page.md"],
        "content": "---\nname: guide\ndescription: How to guide.\ncategory: docs\n---\n# Guide\n",
    }


@pytest.mark.parametrize(
    ("category", "names"),
    [
        pytest.param(None, ["guide", "other"], id="all"),
        pytest.param("docs", ["guide"], id="one"),
        pytest.param("OPS", ["other"], id="case-insensitive"),
    ],
)
def test_list_skills(registry: ToolRegistry, category: str | None, names: list[str]) -> None:
    listed = call(registry, "list_skills", category)
    assert [s["name"] for s in listed] == names
    assert all(set(s) == {"name", "title", "description", "category"} for s in listed)


def test_read_skill_file(registry: ToolRegistry) -> None:
    assert call(registry, "read_skill_file", "guide", "templates/page.md") == "# Page\n"


@pytest.mark.parametrize(
    ("tool", "args", "code", "parameter", "suggested"),
    [
        pytest.param("use_skill", ("guid",), "SKILL_NOT_FOUND", "name", "guide", id="skill-typo"),
        pytest.param("read_skill_file", ("gide", "x.md"), "SKILL_NOT_FOUND", "name", "guide", id="file-skill-typo"),
        pytest.param(
            "read_skill_file", ("guide", "templates/pag.md"), "SKILL_FILE_NOT_FOUND", "path", "templates/page.md",
            id="file-typo",
        ),
        pytest.param("read_skill_file", ("guide", "../other/SKILL.md"), "PATH_OUTSIDE_SKILL", "path", None, id="dotdot"),
        pytest.param("read_skill_file", ("guide", "/etc/passwd"), "PATH_OUTSIDE_SKILL", "path", None, id="absolute"),
        pytest.param("read_skill_file", ("guide", "logo.png"), "BINARY_FILE", "path", None, id="binary"),
        pytest.param("list_skills", ("doc",), "CATEGORY_NOT_FOUND", "category", "docs", id="category"),
    ],
)  # fmt: skip
def test_errors_name_the_argument_and_the_fix(
    registry: ToolRegistry, tool: str, args: tuple[str, ...], code: str, parameter: str, suggested: str | None
) -> None:
    with pytest.raises(ToolError) as info:
        call(registry, tool, *args)
    error = info.value
    assert (error.code, error.parameter_name, error.suggested_value) == (code, parameter, suggested)
    assert error.received == repr(args[-1] if parameter != "name" else args[0])
    assert error.solution


def test_skill_not_found_lists_the_skills(registry: ToolRegistry) -> None:
    with pytest.raises(ToolError) as info:
        call(registry, "use_skill", "nothing-like-it")
    assert info.value.suggested_value is None
    assert info.value.expected == "one of: guide, other"
    assert info.value.solution is not None and "list_skills()" in info.value.solution


# --- end to end -----------------------------------------------------------------------------------


async def test_use_skill_from_a_program(workspace: Path) -> None:
    async with running(workspace, toolpacks=["files", "skills"]) as runtime:
        result = await run_code(runtime, '__result__ = use_skill("attp-programs")["title"]')
        failed = await run_code(runtime, 'use_skill("attp-program")')
    assert (result["status"], result["result"]) == ("ok", "Writing attp_execute programs")
    assert failed["status"] == "error"
    assert (failed["error"]["code"], failed["error"]["suggested_value"]) == ("SKILL_NOT_FOUND", "attp-programs")


# --- the bundled skills' code ---------------------------------------------------------------------


def _load_template() -> Any:
    spec = importlib.util.spec_from_file_location("attp_pack_template", TEMPLATES / "pack_template.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the options model's annotations through it
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_pack_template_imports_registers_and_works(tmp_path: Path) -> None:
    template = _load_template()
    assert isinstance(template.toolpack, Toolpack)
    registry = ToolRegistry([template.toolpack, toolpack], tmp_path, {"tables": {"max_rows": 2}})
    assert sorted(registry.namespaces()["tables"]) == ["describe_table", "list_tables", "query_table"]
    for tool in registry.tools.values():
        assert {"Returns:", "Example:"} <= set(tool.doc.split()), tool.name
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "sales.csv").write_text("region,amount\nEU,1\nUS,2\nEU,3\n")
    assert call(registry, "query_table", "sales", where={"region": "EU"}) == [
        {"region": "EU", "amount": "1"},
        {"region": "EU", "amount": "3"},
    ]
    assert len(call(registry, "query_table", "sales")) == 2  # the default limit, capped by max_rows
    assert len(call(registry, "query_table", "sales", limit=1)) == 1
    with pytest.raises(ToolError) as info:
        call(registry, "query_table", "sales", limit=0)
    assert (info.value.code, info.value.suggested_value) == ("LIMIT_OUT_OF_RANGE", "1")


@pytest.mark.process
@pytest.mark.slow
def test_pack_template_tests_pass() -> None:
    """The test file shipped beside the template passes, run the way its docstring says."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_pack_template.py"],
        cwd=TEMPLATES, env=env, capture_output=True, text=True, timeout=100, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert " passed" in completed.stdout


@pytest.fixture(scope="module")
def known(tmp_path_factory: pytest.TempPathFactory) -> KnownNames:
    workspace = tmp_path_factory.mktemp("ws")
    return ToolRegistry([load_toolpack("files"), toolpack], workspace, {}).known_names()


def test_there_are_example_programs() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("example", [pytest.param(p, id=p.stem) for p in EXAMPLES])
def test_example_program_passes_the_static_check(example: Path, known: KnownNames) -> None:
    assert check_program(example.read_text(), known) is None


def seed_workspace(workspace: Path) -> None:
    files = {
        "notes/a.md": "# A\nTODO: one\nthe colour red\n",
        "notes/b.md": "no heading, TODO twice TODO\n",
        "data/good.json": '{"x": 1}',
        "data/bad.json": "{not json",
        "logs/run.txt": "one\ntwo\n",
    }
    for name, text in files.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text)


@pytest.mark.slow
async def test_example_programs_run(workspace: Path) -> None:
    seed_workspace(workspace)
    async with running(workspace, toolpacks=["files", "skills"]) as runtime:
        results = {p.stem: await run_code(runtime, p.read_text()) for p in EXAMPLES}
    failed = {name: r["error"] for name, r in results.items() if r["status"] != "ok"}
    assert not failed
    assert results["markdown_overview"]["result"]["most_todos"][0] == {"path": "notes/b.md", "todos": 2}
    assert results["load_json_tolerantly"]["result"]["problems"][0]["code"] == "INVALID_JSON"
    assert results["resumable_batch"]["result"]["results"] == {"logs/run.txt": 2}
    assert results["replace_everywhere"]["result"]["plan"] == [{"path": "notes/a.md", "replacements": 1, "lines": [3]}]
