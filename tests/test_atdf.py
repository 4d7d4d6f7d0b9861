"""ATDF 2.x descriptors: every built-in tool validates against the vendored enhanced schema; fields come out right."""

from __future__ import annotations

import enum
import importlib.metadata
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import demo_pack
import jsonschema
import pytest
from pydantic import BaseModel

from attp_server.model.atdf import SCHEMA_VERSION, atdf_catalog, atdf_descriptor
from attp_server.toolpack import Tool, ToolRegistry, make_tool
from attp_server.toolpacks.files import toolpack as files_toolpack
from attp_server.toolpacks.shell import toolpack as shell_toolpack
from attp_server.toolpacks.skills import toolpack as skills_toolpack

SCHEMA = json.loads((Path(__file__).parent / "data" / "atdf" / "enhanced_atdf_schema.json").read_text())
VALIDATOR_CLASS = jsonschema.validators.validator_for(SCHEMA)
VALIDATOR = VALIDATOR_CLASS(SCHEMA)

FILES_TOOLS = ("read_file", "write_file", "edit_file", "list_files")
BUILTIN_TOOLS = (*FILES_TOOLS, "bash", "use_skill", "list_skills", "read_skill_file")
DEMO_TOOLS = tuple(function.__name__ for function in demo_pack.toolpack.tools)


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    packs = [files_toolpack, shell_toolpack, skills_toolpack, demo_pack.toolpack]
    return ToolRegistry(packs, tmp_path / "ws", {})


def schema_errors(descriptor: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(descriptor)]


def inputs(descriptor: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in descriptor["how_to_use"]["inputs"]}


def failures(descriptor: dict[str, Any]) -> dict[str, str]:
    return {f["code"]: f["description"] for f in descriptor["how_to_use"]["outputs"]["failure"]}


def test_vendored_schema_is_draft_7() -> None:
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert VALIDATOR_CLASS is jsonschema.Draft7Validator
    VALIDATOR_CLASS.check_schema(SCHEMA)


def test_the_schema_is_strict_where_the_descriptor_relies_on_it(registry: ToolRegistry) -> None:
    """Controls: validation is not vacuous. A default beside an input, or no when_to_use, is rejected."""
    descriptor = atdf_descriptor(registry.tools["read_file"])
    with_default = json.loads(json.dumps(descriptor))
    with_default["how_to_use"]["inputs"][1]["default"] = 1000
    without_when = {k: v for k, v in descriptor.items() if k != "when_to_use"}
    both_ids = {**descriptor, "id": "read_file"}
    assert schema_errors(with_default)
    assert schema_errors(without_when)
    assert schema_errors(both_ids)


def test_every_builtin_tool_is_covered(registry: ToolRegistry) -> None:
    assert sorted(registry.tools) == sorted(BUILTIN_TOOLS + DEMO_TOOLS)


@pytest.mark.parametrize("name", [pytest.param(name, id=name) for name in BUILTIN_TOOLS + DEMO_TOOLS])
def test_builtin_descriptor_validates(registry: ToolRegistry, name: str) -> None:
    tool = registry.tools[name]
    descriptor = atdf_descriptor(tool)
    assert schema_errors(descriptor) == []
    assert json.loads(json.dumps(descriptor)) == descriptor, "plain JSON data"
    assert descriptor["schema_version"] == SCHEMA_VERSION
    assert descriptor["tool_id"] == descriptor["name"] == name
    assert descriptor["description"].startswith(tool.summary)
    assert descriptor["metadata"]["category"] == tool.pack
    assert descriptor["metadata"]["signature"] == tool.signature_text()
    assert [i["name"] for i in descriptor["how_to_use"]["inputs"]] == list(tool.signature.parameters)
    assert list(failures(descriptor))[-2:] == ["INVALID_ARGUMENT", "TOOL_ERROR"]


RETURNS = 'Returns str: The text of the lines, exactly as in the file and nothing else: "" once offset reaches the end.'


def test_read_file_descriptor(registry: ToolRegistry) -> None:
    descriptor = atdf_descriptor(registry.tools["read_file"])
    summary = "a UTF-8 text file from the workspace: max_lines lines (5000 at most) from line offset (0-based)."
    assert descriptor["description"].startswith("Read " + summary + "\n\nTo read a whole file longer than that cap")
    assert descriptor["when_to_use"] == "When you need to read " + summary
    assert inputs(descriptor) == {
        "path": {
            "name": "path",
            "type": "string",
            "description": 'File path relative to the workspace root, e.g. "notes/todo.md".',
            "required": True,
            "schema": {"type": "string"},
        },
        "max_lines": {
            "name": "max_lines",
            "type": "integer",
            "description": "Most lines to return (at least 1); the server caps it (5000 by default). "
            "Optional (default 1000).",
            "required": False,
            "schema": {"type": "integer", "default": 1000},
        },
        "offset": {
            "name": "offset",
            "type": "integer",
            "description": "Number of lines to skip first (0-based: 0 is the first line), to continue a long file. Optional (default 0).",
            "required": False,
            "schema": {"type": "integer", "default": 0},
        },
    }
    assert descriptor["how_to_use"]["outputs"]["success"].startswith("Returns str: The text of the lines, exactly")
    assert list(failures(descriptor)) == [
        "FILE_NOT_FOUND",
        "IS_A_DIRECTORY",
        "BINARY_FILE",
        "FILE_TOO_LARGE",
        "LINE_OUT_OF_RANGE",
        "PATH_OUTSIDE_WORKSPACE",
        "INVALID_PATH",
        "INVALID_ARGUMENT",
        "TOOL_ERROR",
    ]
    assert failures(descriptor)["FILE_NOT_FOUND"] == "File not found: suggested_value holds the closest existing name."
    assert failures(descriptor)["LINE_OUT_OF_RANGE"] == "Line out of range: offset past the end."
    assert failures(descriptor)["IS_A_DIRECTORY"] == "Is a directory."
    assert [(e["input_values"], e["expected_result"]) for e in descriptor["examples"]] == [
        ({"path": "notes/todo.md"}, RETURNS),
        ({"path": "logs/big.log", "max_lines": 200, "offset": 1000}, RETURNS),
        ({"path": "data/big.jsonl", "max_lines": 5000}, RETURNS),
    ]


def test_builtin_pack_metadata_names_its_distribution(registry: ToolRegistry) -> None:
    metadata = atdf_descriptor(registry.tools["list_files"])["metadata"]
    assert metadata["version"] == importlib.metadata.version("attp-server")
    assert metadata["author"] == "attp-server developers"
    assert metadata["tags"] == ["files", "list"]


def test_a_pack_no_distribution_ships_gets_no_made_up_version(registry: ToolRegistry) -> None:
    metadata = atdf_descriptor(registry.tools["add"])["metadata"]
    assert "version" not in metadata and "author" not in metadata
    assert metadata["category"] == "demo"


def test_edit_file_optional_inputs_and_rich_failures(registry: ToolRegistry) -> None:
    descriptor = atdf_descriptor(registry.tools["edit_file"])
    old_string = inputs(descriptor)["old_string"]
    assert (old_string["type"], old_string["required"]) == ("string", False)
    assert old_string["schema"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert old_string["description"] == "Replace mode: the exact text to find. Optional (default None)."
    assert inputs(descriptor)["start_line"]["type"] == "integer"
    assert "Use exactly one of two modes:" in descriptor["description"]
    assert failures(descriptor)["OLD_STRING_NOT_UNIQUE"] == "Old string not unique: names the count and line numbers."
    assert [e["input_values"] for e in descriptor["examples"]][2] == {
        "path": "notes/todo.md",
        "start_line": 3,
        "end_line": 4,
        "new_content": "- done\n",
    }


def test_list_files_boolean_default_and_solution_in_failure(registry: ToolRegistry) -> None:
    descriptor = atdf_descriptor(registry.tools["list_files"])
    recursive = inputs(descriptor)["recursive"]
    assert (recursive["type"], recursive["required"], recursive["schema"]) == (
        "boolean",
        False,
        {"type": "boolean", "default": False},
    )
    assert failures(descriptor)["TOO_MANY_FILES"] == (
        "Too many files: over 10000 results: narrow the pattern or the folder."
    )
    assert [e["input_values"] for e in descriptor["examples"]] == [
        {},
        {"directory": "src", "pattern": "*.py", "recursive": True},
    ]


def test_demo_tools_without_raises_or_examples(registry: ToolRegistry) -> None:
    add = atdf_descriptor(registry.tools["add"])
    assert [(i["name"], i["type"], i["required"]) for i in add["how_to_use"]["inputs"]] == [
        ("a", "integer", True),
        ("b", "integer", True),
    ]
    assert add["how_to_use"]["outputs"]["success"] == "Returns int: The sum."
    assert list(failures(add)) == ["INVALID_ARGUMENT", "TOOL_ERROR"]
    assert "examples" not in add, "no example is invented"
    crash = atdf_descriptor(registry.tools["crash"])
    assert crash["how_to_use"]["inputs"] == []
    assert crash["how_to_use"]["outputs"]["success"] == "Completes without a result (returns None)."
    assert atdf_descriptor(registry.tools["refuse"])["when_to_use"] == (
        "When you need to always fail with a ToolError carrying `code`."
    )


def test_catalog_is_a_list_in_registry_order(registry: ToolRegistry) -> None:
    catalog = atdf_catalog(registry.tools.values())
    assert [d["tool_id"] for d in catalog] == list(registry.tools)
    assert all(schema_errors(d) == [] for d in catalog)


# Synthetic tools: shapes the built-in packs do not have.


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


def shapes(
    plain,
    mode: Literal["fast", "slow"],
    colour: Colour | None,
    tags: list[str],
    options: dict[str, Any],
    point: Point,
    either: str | int,
    anything: Any,
    callback: Callable[[int], int] | None = None,
    where: Path = Path("."),
    *rest: int,
    **extra: str,
) -> list[dict[str, int]]:
    """Take one argument of each kind.

    Args:
        plain: No annotation.
        mode: How.
    """
    return []


def undocumented(a, b=1):
    return a


def fetch(url: str, retries: int = 3) -> str:
    """Fetches a page.

    Raises:
        ToolError: NOT_FOUND when the page does not exist; TIMEOUT (took too long),
            RATE_LIMITED: wait a minute and retry, or BAD_URL.
        ToolError: one of HTTP_ERROR_CODES, described in running text.
        ValueError: If the url is empty.
        KeyError

    Example:
        >>> fetch("https://example.com")
        '<html>...</html>'
        >>> web.fetch("https://example.com/a", retries=1)
        >>> fetch(url_from_somewhere)

        fetch("https://example.com/b")  # the second page
    """
    return url


@pytest.mark.parametrize(
    "function",
    [pytest.param(shapes, id="shapes"), pytest.param(undocumented, id="undocumented"), pytest.param(fetch, id="fetch")],
)
def test_synthetic_descriptor_validates(function: Callable[..., Any]) -> None:
    assert schema_errors(atdf_descriptor(make_tool(function, "web"))) == []


def test_input_types_from_annotations() -> None:
    tool: Tool = make_tool(shapes, "pack")
    descriptor = atdf_descriptor(tool)
    got = {name: (entry["type"], entry["required"]) for name, entry in inputs(descriptor).items()}
    assert got == {
        "plain": ("any", True),
        "mode": ("string", True),
        "colour": ("string", True),
        "tags": ("array", True),
        "options": ("object", True),
        "point": ("object", True),
        "either": ("string|integer", True),
        "anything": ("any", True),
        "callback": ("any", False),
        "where": ("string", False),
    }, "*rest and **extra are not inputs"
    entries = inputs(descriptor)
    assert "schema" not in entries["plain"] and "schema" not in entries["anything"]
    assert entries["mode"]["schema"] == {"enum": ["fast", "slow"], "type": "string"}
    assert entries["point"]["schema"]["required"] == ["x"]
    assert entries["callback"]["schema"] == {"default": None}, "a Callable has no JSON Schema; the default is kept"
    assert "default" not in entries["where"]["schema"], "a Path default is not JSON"
    assert entries["where"]["description"] == f"Optional (default {Path('.')!r})."
    assert entries["mode"]["description"] == "How."
    assert "description" not in entries["tags"]


def test_undocumented_tool_is_described_truthfully() -> None:
    descriptor = atdf_descriptor(make_tool(undocumented, "pack"))
    assert descriptor["description"] == "undocumented, a tool of the pack toolpack (undocumented): undocumented(a, b=1)"
    assert (
        descriptor["when_to_use"] == "When a task needs undocumented; it has no docstring, so judge from its signature."
    )
    assert descriptor["how_to_use"]["outputs"]["success"] == "Returns a JSON-compatible value (not documented)."
    assert inputs(descriptor)["b"] == {
        "name": "b",
        "type": "any",
        "description": "Optional (default 1).",
        "required": False,
        "schema": {"default": 1},
    }


def test_raises_codes_and_examples_of_many_forms() -> None:
    descriptor = atdf_descriptor(make_tool(fetch, "web"))
    assert descriptor["when_to_use"] == "When you need this: Fetches a page."
    assert failures(descriptor) == {
        "NOT_FOUND": "Not found when the page does not exist.",
        "TIMEOUT": "Timeout: took too long.",
        "RATE_LIMITED": "Rate limited: wait a minute and retry.",
        "BAD_URL": "Bad url.",
        "HTTP_ERROR_CODES": "Http error codes: described in running text.",
        "INVALID_ARGUMENT": "The arguments do not fit fetch(url: str, retries: int = 3) -> str; parameter_name, "
        "received and expected say which one and why.",
        "TOOL_ERROR": "Any other failure inside the tool; the message names the exception. "
        "Documented: ValueError: If the url is empty; KeyError.",
    }
    assert [(e["goal"], e["input_values"], e["expected_result"]) for e in descriptor["examples"]] == [
        ('Fetches a page: fetch("https://example.com")', {"url": "https://example.com"}, "'<html>...</html>'"),
        (
            'Fetches a page: web.fetch("https://example.com/a", retries=1)',
            {"url": "https://example.com/a", "retries": 1},
            "Returns str.",
        ),
        ("the second page", {"url": "https://example.com/b"}, "Returns str."),
    ], "namespaced calls count; calls with non-literal arguments are skipped; a trailing comment is the goal"
