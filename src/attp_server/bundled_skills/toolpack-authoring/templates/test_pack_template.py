"""Tests for the pack in pack_template.py; copy beside your pack and change the import.

Run with ``pytest``. The pack is tested the way the server uses it: built from a `ToolpackContext`,
registered in a `ToolRegistry` (which refuses bad tool names, clashes and bad options exactly as the
server does at startup), and called with the arguments a model would pass.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pack_template import TablesOptions, toolpack  # your module: from mypkg.tables import ...

from attp_server import ToolError, ToolpackContext
from attp_server.toolpack import ToolpackLoadError, ToolRegistry


def make_tools(workspace: Path, **options: Any) -> dict[str, Callable[..., Any]]:
    """The pack's tools by name, built the way the server builds them."""
    assert toolpack.build is not None
    built = toolpack.build(ToolpackContext(workspace=workspace, options=TablesOptions(**options)))
    return {f.__name__: f for f in built}


def write_sales(workspace: Path) -> None:
    (workspace / "tables").mkdir(parents=True, exist_ok=True)
    (workspace / "tables" / "sales.csv").write_text(
        "date,region,amount\n2024-01-02,EU,10.5\n2024-01-03,US,7\n2024-01-04,EU,3\n", encoding="utf-8"
    )


def test_registers_with_every_tool_documented(tmp_path: Path) -> None:
    registry = ToolRegistry([toolpack], tmp_path, {"tables": {"max_rows": 50}})
    assert sorted(registry.tools) == ["describe_table", "list_tables", "query_table"]
    for tool in registry.tools.values():
        assert "Returns:" in tool.doc and "Example:" in tool.doc, tool.name


def test_bad_options_stop_startup(tmp_path: Path) -> None:
    with pytest.raises(ToolpackLoadError, match="max_row"):
        ToolRegistry([toolpack], tmp_path, {"tables": {"max_row": 50}})


def test_query_filters_and_projects(tmp_path: Path) -> None:
    write_sales(tmp_path)
    tools = make_tools(tmp_path)
    assert tools["list_tables"]() == ["sales"]
    rows = tools["query_table"]("sales", where={"region": "EU"}, columns=["amount"])
    assert rows == [{"amount": "10.5"}, {"amount": "3"}]


@pytest.mark.parametrize(
    ("call", "code", "suggested"),
    [
        pytest.param(lambda t: t["describe_table"]("sale"), "TABLE_NOT_FOUND", "sales", id="table-typo"),
        pytest.param(lambda t: t["describe_table"]("../sales"), "TABLE_NOT_FOUND", "sales", id="path-not-name"),
        pytest.param(lambda t: t["query_table"]("sales", columns=["amont"]), "UNKNOWN_COLUMN", "amount", id="column"),
        pytest.param(lambda t: t["query_table"]("sales", limit=0), "LIMIT_OUT_OF_RANGE", "1", id="limit"),
    ],
)
def test_errors_tell_the_model_what_to_change(
    tmp_path: Path, call: Callable[[dict[str, Callable[..., Any]]], Any], code: str, suggested: str
) -> None:
    write_sales(tmp_path)
    with pytest.raises(ToolError) as info:
        call(make_tools(tmp_path))
    assert (info.value.code, info.value.suggested_value) == (code, suggested)
