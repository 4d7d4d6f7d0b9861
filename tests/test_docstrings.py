"""Google-style docstring parsing over many shapes, every built-in tool's docstring, and startup warnings."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import demo_pack
import pytest

from attp_server.model.docstrings import Docstring, docstring_warnings, parse_docstring
from attp_server.toolpack import ToolRegistry, make_tool
from attp_server.toolpacks.files import FileTools
from attp_server.toolpacks.files import toolpack as files_toolpack

SEARCH_WEB = """
    在网络上搜索信息，返回搜索结果的列表。

    Args:
        query: 搜索查询字符串
        max_results: 返回结果的最大数量，默认为5

    Returns:
        list[dict]: 搜索结果列表，每个结果包含以下字段：
            - title: str - 标题
            - url: str - 链接地址

    Example:
        >>> results = search_web("Python异步编程", max_results=3)
        >>> print(results[0]["title"])
        '深入理解Python异步编程'
    """


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param(None, Docstring(), id="none"),
        pytest.param("", Docstring(), id="empty"),
        pytest.param("   \n\n  ", Docstring(), id="blank"),
        pytest.param("Add two numbers.", Docstring(summary="Add two numbers."), id="summary-only"),
        pytest.param(
            "Add two numbers\n    that were given.\n\n    More words.\n",
            Docstring(summary="Add two numbers that were given.", description="More words."),
            id="wrapped-summary-raw-indentation",
        ),
        pytest.param(
            """Sum.

            Args:
                a (int): The first.
                b (list[dict[str, int]], optional): The second,
                    wrapped over
                    three lines.
                c: Plain form.
            """,
            Docstring(
                summary="Sum.",
                args={"a": "The first.", "b": "The second, wrapped over three lines.", "c": "Plain form."},
            ),
            id="args-typed-untyped-multiline",
        ),
        pytest.param(
            "Sum.\n\nArguments:\n    a: A.\n\nParameters:\n    b: B.\n\nKeyword Args:\n    c: C.\n",
            Docstring(summary="Sum.", args={"a": "A.", "b": "B.", "c": "C."}),
            id="args-section-aliases",
        ),
        pytest.param(
            "Sum.\n\nargs:\n    a: A.\nRETURNS:\n    The sum.\n",
            Docstring(summary="Sum.", args={"a": "A."}, returns="The sum."),
            id="header-case-insensitive-no-blank-line",
        ),
        pytest.param(
            "Sum.\n\nArgs:\n    *args: Numbers.\n    **kwargs: Options.\n",
            Docstring(summary="Sum.", args={"args": "Numbers.", "kwargs": "Options."}),
            id="star-args-named-without-stars",
        ),
        pytest.param(
            "Sum.\n\nArgs:\n    a: A.\n\n        Still about a.\n    b:\n        B on the next line.\n",
            Docstring(summary="Sum.", args={"a": "A.\n\nStill about a.", "b": "B on the next line."}),
            id="arg-paragraphs-and-text-below-name",
        ),
        pytest.param(
            "Sum.\n\nReturns: The sum.\n",
            Docstring(summary="Sum.", returns="The sum."),
            id="returns-inline",
        ),
        pytest.param(
            "Sum.\n\nReturn:\n    int: The sum,\n    never negative.\n",
            Docstring(summary="Sum.", returns="int: The sum, never negative."),
            id="return-singular-wrapped",
        ),
        pytest.param(
            "Items.\n\nYields:\n    One item at a time.\n",
            Docstring(summary="Items.", returns="One item at a time."),
            id="yields-as-returns",
        ),
        pytest.param(
            "Open.\n\nRaises:\n    ToolError: FILE_NOT_FOUND (no such file),\n        IS_A_DIRECTORY.\n    ValueError: If\n        the name is empty.\n    KeyError\n",
            Docstring(
                summary="Open.",
                raises=[
                    ("ToolError", "FILE_NOT_FOUND (no such file), IS_A_DIRECTORY."),
                    ("ValueError", "If the name is empty."),
                    ("KeyError", ""),
                ],
            ),
            id="raises-multiline-and-bare",
        ),
        pytest.param(
            "Open.\n\nRaises:\n    server.ToolError: BAD_NAME when it is bad.\n",
            Docstring(summary="Open.", raises=[("server.ToolError", "BAD_NAME when it is bad.")]),
            id="raises-dotted-name",
        ),
        pytest.param(
            "Open.\n\nExample:\n    >>> f(1)\n    2\n\n    >>> f(2)\n    3\n\nExamples:\n    f(3)\n",
            Docstring(summary="Open.", examples=[">>> f(1)\n2", ">>> f(2)\n3", "f(3)"]),
            id="example-blocks-split-at-blank-lines",
        ),
        pytest.param(
            "Loop.\n\nExample:\n    for x in xs:\n        f(x)\n\n        g(x)\n",
            Docstring(summary="Loop.", examples=["for x in xs:\n    f(x)\n\n    g(x)"]),
            id="example-blank-line-inside-a-block",
        ),
        pytest.param(
            "Sum.\n\nArgs:\na: A.\nb: B,\n    continued.\n\nReturns:\nThe sum.\n\nTrailing words.\n",
            Docstring(
                summary="Sum.",
                description="Trailing words.",
                args={"a": "A.", "b": "B, continued."},
                returns="The sum.",
            ),
            id="flush-left-sections",
        ),
        pytest.param(
            "Sum.\n\nFirst paragraph.\n\n\n- a bullet\n  continued\n\nNote:\n    Keep me.\n\nArgs:\n    a: A.\n\nAfter the sections.\n",
            Docstring(
                summary="Sum.",
                description="First paragraph.\n\n- a bullet\n  continued\n\nNote:\n    Keep me.\n\nAfter the sections.",
                args={"a": "A."},
            ),
            id="description-unknown-section-and-text-after-sections",
        ),
        pytest.param(
            "Args:\n    a: A.\n",
            Docstring(args={"a": "A."}),
            id="no-summary",
        ),
        pytest.param(
            "Sum.\n\n\tArgs:\n\t\ta: A.\n",
            Docstring(summary="Sum.", args={"a": "A."}),
            id="tabs",
        ),
        pytest.param(
            "Pick.\n\nArgs:\n    mode (Literal['a', 'b']): Which (see notes).\n    when (datetime | None): When: now or later.\n",
            Docstring(summary="Pick.", args={"mode": "Which (see notes).", "when": "When: now or later."}),
            id="arg-types-with-brackets-and-colons-in-text",
        ),
        pytest.param(
            SEARCH_WEB,
            Docstring(
                summary="在网络上搜索信息，返回搜索结果的列表。",
                args={"query": "搜索查询字符串", "max_results": "返回结果的最大数量，默认为5"},
                returns="list[dict]: 搜索结果列表，每个结果包含以下字段：\n- title: str - 标题\n- url: str - 链接地址",
                examples=[
                    '>>> results = search_web("Python异步编程", max_results=3)\n'
                    '>>> print(results[0]["title"])\n'
                    "'深入理解Python异步编程'"
                ],
            ),
            id="seed-000-search-web",
        ),
    ],
)
def test_parse_docstring(doc: str | None, expected: Docstring) -> None:
    assert parse_docstring(doc) == expected


@pytest.mark.parametrize(
    ("function", "args", "raises", "examples"),
    [
        pytest.param(FileTools.read_file, ["path", "max_lines", "offset"], ["ToolError"], 1, id="read_file"),
        pytest.param(FileTools.write_file, ["path", "content"], ["ToolError"], 1, id="write_file"),
        pytest.param(
            FileTools.edit_file,
            ["path", "old_string", "new_string", "start_line", "end_line", "new_content", "replace_all"],
            ["ToolError"],
            1,
            id="edit_file",
        ),
        pytest.param(FileTools.list_files, ["directory", "pattern", "recursive"], ["ToolError"], 1, id="list_files"),
        pytest.param(demo_pack.add, ["a", "b"], [], 0, id="demo-add"),
        pytest.param(demo_pack.slow_echo, ["text", "delay"], [], 0, id="demo-slow_echo"),
        pytest.param(demo_pack.records, ["n"], [], 0, id="demo-records"),
        pytest.param(demo_pack.refuse, ["code"], [], 0, id="demo-refuse"),
        pytest.param(demo_pack.crash, [], [], 0, id="demo-crash"),
        pytest.param(demo_pack.rich, [], [], 0, id="demo-rich"),
    ],
)
def test_builtin_tool_docstrings(
    function: Callable[..., Any], args: list[str], raises: list[str], examples: int
) -> None:
    doc = parse_docstring(function.__doc__)
    assert doc.summary == inspect.getdoc(function).splitlines()[0]  # type: ignore[union-attr]
    assert list(doc.args) == args
    assert all(text and "\n" not in text for text in doc.args.values()), "wrapped arg lines are joined"
    assert [name for name, _ in doc.raises] == raises
    assert all(text for _, text in doc.raises)
    assert len(doc.examples) == examples
    assert "Args:" not in doc.description and "Returns:" not in doc.description


def test_read_file_docstring_in_full() -> None:
    doc = parse_docstring(FileTools.read_file.__doc__)
    assert doc.args["max_lines"] == "Most lines to return (at least 1); the server caps it (5000 by default)."
    assert doc.returns is not None and doc.returns.startswith(
        "The text of the lines, exactly as in the file and nothing else"
    )
    assert doc.raises[0][1].startswith(
        "FILE_NOT_FOUND (suggested_value holds the closest existing name), IS_A_DIRECTORY"
    )
    assert doc.raises[0][1].endswith("PATH_OUTSIDE_WORKSPACE, INVALID_PATH.")
    assert doc.examples == [
        'text = read_file("notes/todo.md")\nrest = read_file("logs/big.log", offset=1000, max_lines=200)\n'
        'text, page = "", read_file("data/big.jsonl", max_lines=5000)\n'
        'while page.endswith("\\n"):  # only the file\'s last page can end inside a line\n'
        '    text += page\n    page = read_file("data/big.jsonl", max_lines=5000, offset=text.count("\\n"))\n'
        "text += page"
    ]


def test_edit_file_description_keeps_its_layout() -> None:
    doc = parse_docstring(FileTools.edit_file.__doc__)
    assert doc.description.startswith("Use exactly one of two modes:\n- replace mode: old_string and new_string.")
    assert "\n  (copy it exactly, including indentation;" in doc.description


def test_every_builtin_tool_has_a_complete_docstring(tmp_path: Path) -> None:
    registry = ToolRegistry([files_toolpack, demo_pack.toolpack], tmp_path, {})
    warnings = {name: docstring_warnings(tool) for name, tool in registry.tools.items()}
    assert warnings == {name: [] for name in registry.tools}


def undocumented(a: int) -> int:
    return a


def partly(a: int, b: int, c: int = 0) -> int:
    """Partly documented.

    Args:
        a: A.
        d: Not a parameter.
    """
    return a + b + c


def variadic(a: int, *args: int, **kwargs: int) -> int:
    """Variadic, with **kwargs keys documented as if they were parameters.

    Args:
        a: A.
        scale: A key of kwargs.
    """
    return a


def args_only(a: int) -> int:
    """Args:
    a: A.
    """
    return a


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        pytest.param(
            undocumented,
            [
                "tool 'undocumented' (toolpack 'pack') has no docstring; the model sees only its signature "
                "undocumented(a: int) -> int"
            ],
            id="no-docstring",
        ),
        pytest.param(
            partly,
            [
                "tool 'partly' (toolpack 'pack') does not document parameter(s) b, c in its Args section",
                "tool 'partly' (toolpack 'pack') documents parameter(s) d that its signature does not have",
            ],
            id="missing-and-unknown",
        ),
        pytest.param(variadic, [], id="star-args-need-no-entry-and-kwargs-allow-extra-names"),
        pytest.param(
            args_only,
            [
                "tool 'args_only' (toolpack 'pack') has no summary line; the compact catalog shows the first line "
                "of the docstring"
            ],
            id="no-summary",
        ),
    ],
)
def test_docstring_warnings(function: Callable[..., Any], expected: list[str]) -> None:
    assert docstring_warnings(make_tool(function, "pack")) == expected
