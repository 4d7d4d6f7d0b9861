"""TAM (SPEC §8, seed 003): the block grammar, value round trips, coercion, tool ids, translation, real runs."""

from __future__ import annotations

import ast
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import demo_pack
import pytest
from harness import make_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from attp_server.errors import ErrorInfo
from attp_server.run.checks import check_program
from attp_server.run.envelope import EnvelopeError
from attp_server.run.runtime import ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime
from attp_server.run.tam import (
    END_MARKER,
    START_MARKER,
    VALUE_CLOSE,
    CoercionError,
    TamError,
    TamProgram,
    coerce_value,
    looks_like_tam,
    parse_tam,
    tam_program,
    translate_tam,
)
from attp_server.toolpack import Toolpack, ToolRegistry, load_toolpack

# --- a pack with typed parameters, and one whose names clash with the program's own variables -------------------


class Point(BaseModel):
    x: int
    y: int


def typed_echo(
    count: int,
    ratio: float,
    flag: bool,
    tags: list[str],
    weights: dict[str, int],
    mode: Literal["fast", "slow"] = "fast",
    limit: int | None = None,
    note: str | None = None,
    point: Point | None = None,
) -> dict[str, object]:
    """Return the arguments exactly as the tool received them."""
    return {
        "count": count,
        "ratio": ratio,
        "flag": flag,
        "tags": tags,
        "weights": weights,
        "mode": mode,
        "limit": limit,
        "note": note,
        "point": point,
    }


def tag(name: str, **extra: str) -> dict[str, str]:
    """Return the name and any extra keyword arguments."""
    return {"name": name, **extra}


def span(start: int = 0, stop: int = 3, /, step: int = 1) -> list[int]:
    """A tool with positional-only parameters."""
    return list(range(start, stop, step))


def tam_steps() -> str:
    """A tool whose name is the program's first choice for its step list."""
    return "tool, not variable"


def tam_value(text: str) -> str:
    """A tool whose name is the program's first choice for a step's value."""
    return text.upper()


TYPED = Toolpack(name="typed", description="Typed test tools.", tools=[typed_echo, tag, span])
CLASH = Toolpack(name="clash", description="Names the TAM program would like to use.", tools=[tam_steps, tam_value])


def make_registry(workspace: Path) -> ToolRegistry:
    packs = [load_toolpack("files"), demo_pack.toolpack, TYPED, CLASH]
    return ToolRegistry(packs, workspace, {})


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> ToolRegistry:
    return make_registry(tmp_path_factory.mktemp("tam-ws"))


@pytest.fixture
async def tam_runtime(workspace: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(make_settings(workspace), registry=make_registry(workspace)) as runtime:
        yield runtime


async def run_tam(runtime: Runtime, text: str) -> tuple[dict[str, Any], TamProgram]:
    program = translate_tam(text, runtime.registry)
    result = await runtime.execute(ExecuteRequest(code=program.code))
    return result.model_dump(mode="json"), program


def block(*lines: str) -> str:
    return "\n".join([START_MARKER, *lines, END_MARKER])


def tam_error(text: str, registry: ToolRegistry | None = None) -> ErrorInfo:
    with pytest.raises(TamError) as caught:
        if registry is None:
            parse_tam(text)
        else:
            translate_tam(text, registry)
    assert isinstance(caught.value, EnvelopeError)  # the runtime's envelope handling catches it as is
    return caught.value.info


# --- the seed's examples, adapted to the files pack --------------------------------------------------------------

SEED_SINGLE = """好的，我将使用 edit_file 工具来修改文件。

<|[REQUEST_TOOL]|>
command:「始」edit_file「末」
path:「始」src/main.js「末」
old_string:「始」console.log("old message");「末」
new_string:「始」console.log("new message");「末」
<|[END_TOOL]|>
"""

SEED_CHAIN = """<|[REQUEST_TOOL]|>
# 步骤 1: 创建文件
command1:「始」files.write_file「末」
filePath1:「始」logs/today.log「末」
content1:「始」任务开始...「末」

# 步骤 2: 追加日志
command2:「始」EditFile「末」
File_Path2:「始」logs/today.log「末」
OLD_STRING2:「始」任务开始...「末」
newString2:「始」任务开始...\\n添加新记录。
多行。
「末」
<|[END_TOOL]|>
"""
# The seed's keys say filePath; ours say path. Keys ignore case and underscores, not spelling:
SEED_CHAIN_OURS = SEED_CHAIN.replace("filePath1", "path1").replace("File_Path2", "Path_2")


def test_seed_single_call_parses() -> None:
    [step] = parse_tam(SEED_SINGLE)
    assert step.tool == "edit_file"
    assert (step.line, step.column, step.number, step.block) == (4, 1, None, 1)
    assert step.arguments() == {
        "path": "src/main.js",
        "old_string": 'console.log("old message");',
        "new_string": 'console.log("new message");',
    }
    assert [p.line for p in step.params] == [5, 6, 7]


def test_seed_chain_parses_in_order_with_comments_and_verbatim_values() -> None:
    first, second = parse_tam(SEED_CHAIN)
    assert (first.tool, first.number, first.line) == ("files.write_file", 1, 3)
    assert first.arguments() == {"filePath": "logs/today.log", "content": "任务开始..."}
    assert (second.tool, second.number, second.line) == ("EditFile", 2, 8)
    assert second.arguments() == {
        "File_Path": "logs/today.log",
        "OLD_STRING": "任务开始...",
        # No escaping: the seed's "\n" is a backslash and an n; the real line breaks stay too.
        "newString": "任务开始...\\n添加新记录。\n多行。\n",
    }


def test_seed_chain_translates_to_calls_of_our_tools(registry: ToolRegistry) -> None:
    program = translate_tam(SEED_CHAIN_OURS, registry)
    assert called(program.code) == [
        ("write_file", {"path": "logs/today.log", "content": "任务开始..."}),
        (
            "edit_file",
            {
                "path": "logs/today.log",
                "old_string": "任务开始...",
                "new_string": "任务开始...\\n添加新记录。\n多行。\n",
            },
        ),
    ]
    assert [(s.step, s.tool, s.line) for s in program.steps] == [(1, "write_file", 3), (2, "edit_file", 8)]


def test_seed_chain_with_the_seeds_own_key_names_is_refused_with_a_suggestion(registry: ToolRegistry) -> None:
    info = tam_error(SEED_CHAIN, registry)
    assert info.code == "INVALID_ARGUMENT"
    assert (info.line, info.parameter_name, info.suggested_value) == (4, "filePath", "path")
    assert info.source_line == "filePath1:「始」logs/today.log「末」"
    assert "write_file(path: str, content: str)" in (info.expected or "")


# --- the grammar ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(block("command:「始」read_file「末」"), [("read_file", {})], id="no-parameters"),
        pytest.param(
            "prose <|[REQUEST_TOOL]|>command:「始」add「末」a:「始」1「末」 b：「始」2「末」<|[END_TOOL]|> more prose",
            [("add", {"a": "1", "b": "2"})],
            id="one-line-and-fullwidth-colon",
        ),
        pytest.param(
            block("  COMMAND :\t「始」 add 「末」   # the tool", "\ta :「始」1「末」"),
            [("add", {"a": "1"})],
            id="indent-spaces-comments-case",
        ),
        pytest.param(
            block("command:「始」bash「末」", "command:「始」ls -la「末」"),
            [("bash", {"command": "ls -la"})],
            id="second-command-is-a-parameter",
        ),
        pytest.param(
            block("command2:「始」b「末」", "x2:「始」2「末」", "command1:「始」a「末」", "x1:「始」1「末」"),
            [("a", {"x": "1"}), ("b", {"x": "2"})],
            id="numeric-order-not-text-order",
        ),
        pytest.param(
            block("command1:「始」a「末」", "command10:「始」b「末」", "command2:「始」c「末」"),
            [("a", {}), ("c", {}), ("b", {})],
            id="numbers-not-strings",
        ),
        pytest.param(
            block("command1:「始」a「末」", "line21:「始」x「末」", "x01:「始」z「末」"),
            [("a", {"line2": "x", "x": "z"})],
            id="longest-suffix-that-names-a-command",
        ),
        pytest.param(
            block("command1:「始」a「末」", "line2_1:「始」x「末」", "path_1_:「始」y「末」"),
            [("a", {"line2_": "x", "path_": "y"})],
            id="underscores-around-the-number",
        ),
        pytest.param(
            block("command1:「始」a「末」", "command21:「始」b「末」", "line21:「始」x「末」"),
            [("a", {}), ("b", {"line": "x"})],
            id="suffix-21-when-command21-exists",
        ),
        pytest.param(
            block("command_1:「始」bash「末」", "Command_1:「始」echo 1「末」", "timeout_1:「始」5「末」"),
            [("bash", {"Command_": "echo 1", "timeout_": "5"})],
            id="chain-command-parameter",
        ),
        pytest.param(
            f"{block('command:「始」a「末」')}\nthen\n{block('command1:「始」b「末」', 'command2:「始」c「末」')}",
            [("a", {}), ("b", {}), ("c", {})],
            id="several-blocks-in-text-order",
        ),
        pytest.param(
            block("command:「始」a「末」", "v:「始」「末」", "w:「始」\n「末」"),
            [("a", {"v": "", "w": "\n"})],
            id="empty-values",
        ),
        pytest.param(
            "text before <|[END_TOOL]|> with no parameters\n" + block("command:「始」a「末」") + "\n<|[END_TOOL]|>",
            [("a", {})],
            id="stray-end-marker-in-prose",
        ),
        pytest.param(
            block("command:「始」a「末」", "v:「始」<|[END_TOOL]|>\n<|[REQUEST_TOOL]|>\nw:「始」「末」"),
            [("a", {"v": "<|[END_TOOL]|>\n<|[REQUEST_TOOL]|>\nw:「始」"})],
            id="markers-inside-a-value",
        ),
        pytest.param(
            block("command:「始」a「末」", "v:「始」x\r\ny「末」").replace("\n", "\r\n"),
            [("a", {"v": "x\r\r\ny"})],
            id="crlf-kept-verbatim",
        ),
    ],
)
def test_grammar(text: str, expected: list[tuple[str, dict[str, str]]]) -> None:
    assert [(s.tool, s.arguments()) for s in parse_tam(text)] == expected


def test_lines_and_columns_count_the_whole_text() -> None:
    text = "line one\nline two\n" + block("command:「始」a「末」", "   v:「始」1\n2「末」 w:「始」3「末」")
    [step] = parse_tam(text)
    assert (step.line, step.column) == (4, 1)
    assert [(p.key, p.line, p.column) for p in step.params] == [("v", 5, 4), ("w", 6, 6)]


def test_steps_are_numbered_across_blocks(registry: ToolRegistry) -> None:
    text = (
        block("command:「始」records「末」")
        + "\n\n"
        + block("command3:「始」add「末」", "a3:「始」1「末」", "b3:「始」2「末」")
    )
    program = translate_tam(text, registry)
    assert [(s.step, s.tool) for s in program.steps] == [(1, "records"), (2, "add")]
    assert [s.block for s in parse_tam(text)] == [1, 2]


GRAMMAR_ERRORS = [
    pytest.param("just prose, no block", 1, "no TAM block", id="no-block"),
    pytest.param(
        block("command:「始」read_file「末」", "path:「始」notes.md"), 3, "has no closing 「末」", id="missing-close"
    ),
    pytest.param(
        "intro\n<|[REQUEST_TOOL]|>\ncommand:「始」read_file「末」\npath:「始」a「末」\n",
        2,
        "has no <|[END_TOOL]|>",
        id="missing-end",
    ),
    pytest.param(
        "<|[REQUEST_TOOL]|>\ncommand:「始」a「末」\n<|[REQUEST_TOOL]|>\ncommand:「始」b「末」\n<|[END_TOOL]|>",
        3,
        "before the block of line 1 ended",
        id="start-inside-block",
    ),
    pytest.param(
        block("command1:「始」a「末」", "path1:「始」x「末」", "path3:「始」y「末」"),
        4,
        "'path3' belongs to step 3, but the block has no command3",
        id="numbered-parameter-without-its-command",
    ),
    pytest.param(
        block("command1:「始」a「末」", "path:「始」x「末」"), 3, "'path' has no step number", id="unnumbered-in-chain"
    ),
    pytest.param(
        block("command:「始」a「末」", "command2:「始」b「末」"),
        2,
        "mixes 'command' with numbered",
        id="mixed-numbering",
    ),
    pytest.param(block("path:「始」x「末」"), 1, "has no command", id="no-command"),
    pytest.param(block(), 1, "has no command", id="empty-block"),
    pytest.param(block("command:「始」  「末」"), 2, "'command' is empty", id="empty-command"),
    pytest.param(block("command:「始」a「末」", "path: notes.md"), 3, "'path' is not wrapped", id="unwrapped-value"),
    pytest.param(block("command:「始」a「末」", "file-path:「始」x「末」"), 3, "not a valid key", id="bad-key"),
    pytest.param(block("command:「始」a「末」", "I will now read it."), 3, "unexpected text", id="prose-inside"),
    pytest.param(block("command:「始」a「末」", "<|[END]|>"), 3, "unknown marker", id="bad-marker"),
    pytest.param(
        block("command:「始」a「末」", "path:「始」x「末」", "PATH:「始」y「末」"), 4, "given twice", id="duplicate-key"
    ),
    pytest.param(
        block("command:「始」a「末」", "text:「始」the end marker 「末」 inside「末」"),
        3,
        "no value can contain 「末」 itself",
        id="close-marker-inside-a-value",
    ),
    pytest.param(
        block("command1:「始」a「末」") + "\n\ncommand2:「始」b「末」\n<|[END_TOOL]|>",
        5,
        "have no <|[REQUEST_TOOL]|> before them",
        id="block-missing-its-start",
    ),
    pytest.param(
        block("command:「始」a「末」", "k" * 101 + ":「始」x「末」"), 3, "a key of 101 characters", id="huge-key"
    ),
]


@pytest.mark.parametrize(("text", "line", "fragment"), GRAMMAR_ERRORS)
def test_grammar_errors_point_at_the_line(text: str, line: int, fragment: str) -> None:
    info = tam_error(text)
    assert info.code == "INVALID_ENVELOPE"
    assert fragment in info.message
    assert info.line == line
    assert info.column is not None
    assert info.source_line == text.splitlines()[line - 1].rstrip()
    assert info.solution and START_MARKER in info.solution


def test_a_value_cannot_hold_the_close_marker_and_the_error_says_so() -> None:
    info = tam_error(block("command:「始」write_file「末」", "content:「始」a「末」b「末」"))
    assert "send the call as Python code" in info.message
    assert info.received == "'b「末」'"


def test_missing_close_inside_a_chain_swallows_the_next_parameter_and_the_error_says_so(registry: ToolRegistry) -> None:
    text = block("command:「始」write_file「末」", "path:「始」a.txt", "content:「始」hello「末」")
    [step] = parse_tam(text)
    assert step.arguments() == {"path": "a.txt\ncontent:「始」hello"}  # verbatim: the grammar cannot know
    info = tam_error(text, registry)
    assert info.code == "INVALID_ARGUMENT"
    assert info.parameter_name == "content"
    assert "the value of 'path' (line 3)" in info.message
    assert "swallowed" in info.message


# --- values survive parsing unchanged ---------------------------------------------------------------------------

FRAGMENTS = [
    "「", "」", "「始」", "始」", "「末", "末」", "始", "末", "<|", "|>", "<|[", "]|>", START_MARKER, END_MARKER,
    '"', "'", '"""', "'''", "\\", "\\n", "\\u0041", "\n", "\r\n", "\r", "\t", " ", "#", ":", "：", "command:",
    "path1:「始」x", "\x00", "\u2028", "\ufeff", "😀", "{", "}", "[", "]", "${x}", "%s", "{0}",
]  # fmt: skip
VALUES = (
    st.lists(st.one_of(st.text(), st.sampled_from(FRAGMENTS)), max_size=12)
    .map("".join)
    .filter(lambda value: VALUE_CLOSE not in value)
)
KEY_STYLES = st.sampled_from(["{k}{n}", "{K}{n}", "{k}_{n}", "_{k}{n}", "{k}_{n}_"])


@given(values=st.lists(VALUES, min_size=1, max_size=4), styles=st.lists(KEY_STYLES, min_size=4, max_size=4))
def test_any_value_text_survives_parsing(values: list[str], styles: list[str]) -> None:
    lines = []
    for n, value in enumerate(values, start=1):
        key = styles[n - 1].format(k="text", K="TeXt", n=n)
        lines += [f"command{n}:「始」slow_echo「末」", f"{key}:「始」{value}「末」"]
    steps = parse_tam("Some prose first.\n" + block(*lines) + "\nAnd after.")
    assert [s.tool for s in steps] == ["slow_echo"] * len(values)
    assert [next(iter(s.arguments().values())) for s in steps] == values


@given(value=VALUES, prose=st.text().filter(lambda t: "<|[" not in t))
def test_any_value_survives_in_a_single_call_between_any_prose(value: str, prose: str) -> None:
    [step] = parse_tam(prose + block("command:「始」slow_echo「末」", f"text:「始」{value}「末」") + prose)
    assert step.arguments() == {"text": value}


def called(code: str) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls of a translated program (every ``tam_value = tool(...)``), with their literal arguments."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for node in ast.parse(code).body:
        # One `if failed: <record skipped> else: try: value = tool(...)` per step.
        if isinstance(node, ast.If) and node.orelse and isinstance(node.orelse[0], ast.Try):
            call = node.orelse[0].body[0].value  # type: ignore[attr-defined]
            assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            calls.append((call.func.id, {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}))
    return calls


@given(values=st.lists(VALUES, min_size=1, max_size=3))
def test_any_value_survives_translation_as_a_python_literal(registry: ToolRegistry, values: list[str]) -> None:
    lines = [
        line
        for n, v in enumerate(values, 1)
        for line in (f"command{n}:「始」write_file「末」", f"path{n}:「始」a「末」", f"content{n}:「始」{v}「末」")
    ]
    code = tam_program(block(*lines), registry)
    assert called(code) == [("write_file", {"path": "a", "content": v}) for v in values]


@pytest.mark.anyio
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(VALUES, min_size=1, max_size=3))
async def test_any_value_survives_a_real_run(tam_runtime: Runtime, values: list[str]) -> None:
    lines = [
        line
        for n, v in enumerate(values, 1)
        for line in (f"command{n}:「始」slow_echo「末」", f"text{n}:「始」{v}「末」")
    ]
    result, _ = await run_tam(tam_runtime, block(*lines))
    assert result["status"] == "ok", result["error"]
    assert [s["result"] for s in result["result"]["steps"]] == values


# --- coercion ---------------------------------------------------------------------------------------------------

COERCIONS = [
    pytest.param(str, "  two words\n", "  two words\n", id="str-verbatim"),
    pytest.param(str, "null", "null", id="str-null-is-text"),
    pytest.param(int, " 42 ", 42, id="int"),
    pytest.param(int, "-7", -7, id="int-negative"),
    pytest.param(int, "+3", 3, id="int-plus"),
    pytest.param(int, "1_000", 1000, id="int-underscores"),
    pytest.param(float, "2.5", 2.5, id="float"),
    pytest.param(float, "-1e-3", -0.001, id="float-exponent"),
    pytest.param(float, "3", 3.0, id="float-from-int-text"),
    pytest.param(float, ".5", 0.5, id="float-leading-dot"),
    pytest.param(bool, "true", True, id="bool-true"),
    pytest.param(bool, " False ", False, id="bool-false"),
    pytest.param(bool, "YES", True, id="bool-yes"),
    pytest.param(bool, "off", False, id="bool-off"),
    pytest.param(bool, "1", True, id="bool-1"),
    pytest.param(list[str], '["a", "b"]', ["a", "b"], id="list-json"),
    pytest.param(list[int], " [1, 2]\n", [1, 2], id="list-json-whitespace"),
    pytest.param(tuple[int, int], "[1, 2]", [1, 2], id="tuple-as-array"),
    pytest.param(set[str], '["a"]', ["a"], id="set-as-array"),
    pytest.param(dict[str, Any], '{"a": {"b": [1, null, true]}}', {"a": {"b": [1, None, True]}}, id="dict-json"),
    pytest.param(Point, '{"x": 1, "y": 2}', {"x": 1, "y": 2}, id="model-as-object"),
    pytest.param(Literal["fast", "slow"], "slow", "slow", id="literal"),
    pytest.param(Literal["fast", "slow"], " slow\n", "slow", id="literal-stripped"),
    pytest.param(Literal[1, 2], "2", 2, id="literal-int"),
    pytest.param(int | None, "null", None, id="optional-int-null"),
    pytest.param(int | None, "None", None, id="optional-int-none"),
    pytest.param(int | None, "5", 5, id="optional-int-value"),
    pytest.param(str | None, "None", "None", id="optional-str-stays-text"),
    pytest.param(int | str, "12", "12", id="union-with-str-stays-text"),
    pytest.param(list[str] | str, '["a"]', ["a"], id="union-with-str-and-list-reads-json"),
    pytest.param(list[str] | str, "[not json", "[not json", id="union-with-str-falls-back-to-text"),
    pytest.param(int | float, "2.5", 2.5, id="union-tries-members-in-order"),
    pytest.param(list[int] | None, "[1]", [1], id="optional-list"),
    pytest.param(Any, "plain text", "plain text", id="any-text"),
    pytest.param(Any, '{"a": 1}', {"a": 1}, id="any-json-object"),
    pytest.param(Any, "[1, oops]", "[1, oops]", id="any-bad-json-stays-text"),
    pytest.param(Any, "42", "42", id="any-number-stays-text"),
    pytest.param(Path, "a/b.txt", "a/b.txt", id="other-class-gets-text"),
]


@pytest.mark.parametrize(("annotation", "text", "expected"), COERCIONS)
def test_coercion(annotation: Any, text: str, expected: Any) -> None:
    value = coerce_value(text, annotation)
    assert value == expected
    assert type(value) is type(expected)


COERCION_ERRORS = [
    pytest.param(int, "4.5", "an integer such as 42", id="int-from-float"),
    pytest.param(int, "forty", "an integer such as 42", id="int-from-word"),
    pytest.param(int, "   ", "leave the parameter out", id="int-empty"),
    pytest.param(int, "١٢", "an integer such as 42", id="int-non-ascii-digits"),
    pytest.param(int, "9" * 5000, "an integer such as 42", id="int-too-many-digits"),
    pytest.param(float, "nan", "a number such as 2.5", id="float-nan"),
    pytest.param(float, "inf", "a number such as 2.5", id="float-inf"),
    pytest.param(float, "1e999", "a number such as 2.5", id="float-overflow"),
    pytest.param(bool, "maybe", "true or false", id="bool-word"),
    pytest.param(list[str], "a, b", "not valid JSON", id="list-not-json"),
    pytest.param(list[str], '{"a": 1}', "a JSON dict where a JSON array", id="list-got-object"),
    pytest.param(dict[str, int], "[1]", "a JSON list where a JSON object", id="dict-got-array"),
    pytest.param(list[float], "[NaN]", "NaN is not a finite number", id="json-nan"),
    pytest.param(list[float], "[1e999]", "not a finite number", id="json-overflow"),
    pytest.param(list[int], "[" * 100_000, "not usable JSON", id="json-too-deep"),
    pytest.param(Literal["fast", "slow"], "medium", "one of 'fast', 'slow'", id="literal"),
    pytest.param(int | None, "x", "an integer such as 42 or null", id="optional-int"),
]


@pytest.mark.parametrize(("annotation", "text", "fragment"), COERCION_ERRORS)
def test_coercion_errors(annotation: Any, text: str, fragment: str) -> None:
    with pytest.raises(CoercionError) as caught:
        coerce_value(text, annotation)
    assert fragment in f"{caught.value.expected} {caught.value.reason}"


@pytest.mark.parametrize(
    ("text", "parameter", "line", "fragment"),
    [
        pytest.param(block("command:「始」read_file「末」", "path:「始」a「末」", "max_lines:「始」ten「末」"), "max_lines", 4, "must be an integer", id="int"),
        pytest.param(block("command:「始」list_files「末」", "recursive:「始」sure「末」"), "recursive", 3, "must be true or false", id="bool"),
        pytest.param(block("command:「始」read_file「末」"), "path", 2, "read_file() needs 'path'", id="missing"),
        pytest.param(block("command:「始」add「末」", "a:「始」1「末」", "c:「始」2「末」"), "c", 4, "has no parameter 'c'", id="unknown"),
        pytest.param(
            block("command:「始」typed_echo「末」", "count:「始」1「末」", "ratio:「始」1「末」", "flag:「始」1「末」", "tags:「始」[1]「末」", "weights:「始」{}「末」"),
            "tags", 6, "argument 'tags' is invalid", id="validated-like-the-runtime",
        ),
        pytest.param(
            block("command:「始」typed_echo「末」", "count:「始」1「末」", "ratio:「始」1「末」", "flag:「始」1「末」", "tags:「始」[]「末」", "weights:「始」{}「末」", "mode:「始」medium「末」"),
            "mode", 8, "must be one of 'fast', 'slow'", id="literal",
        ),
    ],
)  # fmt: skip
def test_argument_errors_name_the_parameter_and_line(
    registry: ToolRegistry, text: str, parameter: str, line: int, fragment: str
) -> None:
    info = tam_error(text, registry)
    assert info.code == "INVALID_ARGUMENT"
    assert fragment in info.message
    assert (info.parameter_name, info.line) == (parameter, line)
    assert info.source_line == text.splitlines()[line - 1]
    assert info.tool_name and info.tool_name in (info.solution or "")


def test_coercion_error_reports_what_was_received_and_expected(registry: ToolRegistry) -> None:
    info = tam_error(block("command:「始」add「末」", "a:「始」4.5「末」", "b:「始」1「末」"), registry)
    assert (info.received, info.expected) == ("'4.5'", "an integer such as 42")


def test_typed_values_reach_the_program_as_typed_literals(registry: ToolRegistry) -> None:
    text = block(
        "command:「始」typed_echo「末」",
        "count:「始」 3 「末」",
        "Ratio:「始」0.25「末」",
        "FLAG:「始」yes「末」",
        'tags:「始」["a", "「b」"]「末」',
        'weights:「始」{"x": 1}「末」',
        "mode:「始」slow「末」",
        "limit:「始」null「末」",
        "note:「始」null「末」",
        'point:「始」{"x": 1, "y": 2}「末」',
    )
    assert called(tam_program(text, registry)) == [
        (
            "typed_echo",
            {
                "count": 3,
                "ratio": 0.25,
                "flag": True,
                "tags": ["a", "「b」"],
                "weights": {"x": 1},
                "mode": "slow",
                "limit": None,
                "note": "null",
                "point": {"x": 1, "y": 2},
            },
        )
    ]


def test_extra_keys_go_to_a_var_keyword_parameter_as_text(registry: ToolRegistry) -> None:
    text = block("command:「始」tag「末」", "name:「始」n「末」", "colour:「始」 red「末」")
    assert called(tam_program(text, registry)) == [("tag", {"name": "n", "colour": " red"})]


def test_positional_only_parameters_are_passed_by_position(registry: ToolRegistry) -> None:
    code = tam_program(
        block("command:「始」span「末」", "step:「始」2「末」", "Start:「始」1「末」", "stop:「始」9「末」"), registry
    )
    assert "span(1, 9, step=2)" in code
    info = tam_error(block("command:「始」span「末」", "stop:「始」9「末」"), registry)
    assert (info.code, info.message) == ("INVALID_ARGUMENT", "span() needs 'start' before the later parameters")


def test_more_steps_than_tool_calls_are_refused_before_anything_runs(registry: ToolRegistry) -> None:
    text = block(*(f"command{n}:「始」records「末」" for n in range(1, 5)))
    assert len(translate_tam(text, registry, max_steps=4).steps) == 4
    with pytest.raises(TamError) as caught:
        translate_tam(text, registry, max_steps=3)
    info = caught.value.info
    assert (info.code, info.line, info.source_line) == ("TOOL_CALL_LIMIT", 5, "command4:「始」records「末」")
    assert info.message == "the TAM text has 4 steps; at most 3 tool calls may run in one call"


def test_regression_long_word_runs_parse_in_linear_time() -> None:
    """A key search that backtracked over every start of a long word made 50,000 letters take ~45 s."""
    started = time.perf_counter()
    for text in ("a" * 200_000 + "\n" + END_MARKER, block("command:「始」a「末」", "v" * 200_000)):
        with pytest.raises(TamError):
            parse_tam(text)
    with pytest.raises(CoercionError):
        coerce_value("1" * 200_000 + "x", float)
    assert time.perf_counter() - started < 5


# --- tool ids ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "resolved"),
    [
        pytest.param("read_file", "read_file", id="exact"),
        pytest.param("  read_file \n", "read_file", id="whitespace"),
        pytest.param("files:read_file", "read_file", id="pack-colon"),
        pytest.param("files.read_file", "read_file", id="pack-dot"),
        pytest.param("Files.ReadFile", "read_file", id="pack-and-tool-case-underscore"),
        pytest.param("ReadFile", "read_file", id="camel-case"),
        pytest.param("READ_FILE", "read_file", id="upper-case"),
        pytest.param("file_reader", "read_file", id="alias"),
        pytest.param("files:FileReader", "read_file", id="pack-and-alias"),
        pytest.param("demo:records", "records", id="other-pack"),
        pytest.param("help", "help", id="sandbox-help"),
    ],
)
def test_tool_ids_resolve(registry: ToolRegistry, written: str, resolved: str) -> None:
    text = block(f"command:「始」{written}「末」", "path:「始」a「末」" if resolved == "read_file" else "")
    [step] = translate_tam(text, registry).steps
    assert step.tool == resolved


@pytest.mark.parametrize(
    ("written", "fragment", "suggested"),
    [
        pytest.param("reed_file", "no tool 'reed_file'; did you mean read_file?", "read_file", id="typo"),
        pytest.param("FileOperator.WriteFile", "no toolpack 'FileOperator'", "write_file", id="foreign-pack"),
        pytest.param("files:add", "toolpack 'files' has no tool 'add'", "add", id="wrong-pack"),
        pytest.param("files:reed_file", "toolpack 'files' has no tool 'reed_file'", "read_file", id="pack-and-typo"),
        pytest.param("zzzzzz", "no tool 'zzzzzz'", None, id="nothing-close"),
    ],
)
def test_unknown_tool_ids_are_name_not_found_with_a_suggestion(
    registry: ToolRegistry, written: str, fragment: str, suggested: str | None
) -> None:
    text = "Let me do it.\n\n" + block(
        "command1:「始」add「末」", "a1:「始」1「末」", "b1:「始」1「末」", f"command2:「始」{written}「末」"
    )
    info = tam_error(text, registry)
    assert info.code == "NAME_NOT_FOUND"
    assert fragment in info.message
    assert info.suggested_value == suggested
    assert (info.line, info.source_line) == (7, f"command2:「始」{written}「末」")
    assert info.received == repr(written)
    assert "read_file" in (info.solution or "")


def test_a_normalized_id_that_matches_two_tools_is_ambiguous(tmp_path: Path) -> None:
    def read_file2() -> str:
        return ""

    def readfile_2() -> str:
        return ""

    twins = ToolRegistry([Toolpack(name="twins", description="d", tools=[read_file2, readfile_2])], tmp_path, {})
    info = tam_error(block("command:「始」ReadFile2「末」"), twins)
    assert info.code == "NAME_NOT_FOUND"
    assert "matches several tools" in info.message
    assert [s.tool for s in translate_tam(block("command:「始」readfile_2「末」"), twins).steps] == ["readfile_2"]


# --- the program ------------------------------------------------------------------------------------------------


def test_program_obeys_the_sandbox_rules(registry: ToolRegistry) -> None:
    code = tam_program(SEED_CHAIN_OURS, registry)
    assert check_program(code, registry.known_names()) is None
    names = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}
    assert not [n for n in names if n.startswith("_") and n != "__result__"]


def test_program_variables_never_shadow_tools(registry: ToolRegistry) -> None:
    code = tam_program(block("command:「始」tam_steps「末」"), registry)
    assert re.search(r"^tam_steps2 = \[\]$", code, re.MULTILINE)
    assert "tam_value2 = tam_steps()" in code


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("<|[REQUEST_TOOL]|>", id="start"),
        pytest.param("Sure.\n<|[END_TOOL]|>", id="end-only"),
        pytest.param("Command2:「始」read_file「末」", id="keys-without-markers"),
        pytest.param("I'll call it:\n```\n" + block("command:「始」a「末」") + "\n```", id="fenced"),
    ],
)
def test_looks_like_tam(text: str) -> None:
    assert looks_like_tam(text)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            '[tool_call]\nstatus = "success"\ncode = """\nx = "<|[REQUEST_TOOL]|>"\n"""', id="envelope-mentions-tam"
        ),
        pytest.param('thought = "use <|[REQUEST_TOOL]|>"\n[tool_call]\nstatus = "fail"\nmessage = "m"', id="thought"),
        pytest.param('__result__ = read_file("a")', id="code"),
        pytest.param("command: read_file", id="unwrapped"),
        pytest.param('[tool_call]\nstatus = "fail"\nmessage = "x"\n' + block(), id="envelope-first-then-a-block"),
    ],
)
def test_does_not_look_like_tam(text: str) -> None:
    assert not looks_like_tam(text)


# --- real runs through the worker pool --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_seed_single_call_runs(tam_runtime: Runtime, workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "main.js").write_text('function f() {\n  console.log("old message");\n}\n')
    result, _ = await run_tam(tam_runtime, SEED_SINGLE)
    assert result["status"] == "ok"
    assert result["result"] == {
        "ok": True,
        "steps": [
            {
                "step": 1,
                "tool": "edit_file",
                "ok": True,
                "result": {
                    "path": "src/main.js",
                    "mode": "replace",
                    "lines_before": 3,
                    "lines_after": 3,
                    "replacements": 1,
                },
            }
        ],
    }
    assert (workspace / "src" / "main.js").read_text() == 'function f() {\n  console.log("new message");\n}\n'
    assert [(c["tool"], c["ok"]) for c in result["calls"]] == [("edit_file", True)]


@pytest.mark.anyio
async def test_seed_chain_runs_in_order(tam_runtime: Runtime, workspace: Path) -> None:
    result, _ = await run_tam(tam_runtime, SEED_CHAIN_OURS)
    assert result["status"] == "ok"
    assert [(s["step"], s["tool"], s["ok"]) for s in result["result"]["steps"]] == [
        (1, "write_file", True),
        (2, "edit_file", True),
    ]
    data = (workspace / "logs" / "today.log").read_bytes().decode()
    assert data == "任务开始...\\n添加新记录。\n多行。\n"


@pytest.mark.anyio
async def test_a_chain_stops_at_the_first_failure(tam_runtime: Runtime, workspace: Path) -> None:
    text = block(
        "command1:「始」write_file「末」",
        "path1:「始」a.txt「末」",
        "content1:「始」one「末」",
        "command2:「始」edit_file「末」",
        "path2:「始」a.txt「末」",
        "old_string2:「始」two「末」",
        "new_string2:「始」three「末」",
        "command3:「始」write_file「末」",
        "path3:「始」b.txt「末」",
        "content3:「始」never「末」",
    )
    result, program = await run_tam(tam_runtime, text)
    assert result["status"] == "ok"
    assert result["result"]["ok"] is False
    assert result["result"]["failed_step"] == 2
    one, two, three = result["result"]["steps"]
    assert one["ok"] is True
    assert two == {
        "step": 2,
        "tool": "edit_file",
        "ok": False,
        "error": {
            "code": "OLD_STRING_NOT_FOUND",
            "message": "old_string occurs 0 times in 'a.txt'.",
            "tool_name": "edit_file",
            "parameter_name": "old_string",
            "solution": two["error"]["solution"],
        },
    }
    assert three == {"step": 3, "tool": "write_file", "ok": False, "skipped": True}
    assert (workspace / "a.txt").read_text() == "one"
    assert not (workspace / "b.txt").exists()
    assert [(c["tool"], c["error_code"]) for c in result["calls"]] == [
        ("write_file", None),
        ("edit_file", "OLD_STRING_NOT_FOUND"),
    ]
    error = program.failure(result["result"])
    assert error is not None
    assert error.code == "OLD_STRING_NOT_FOUND"
    assert error.message == "step 2 of 3 (edit_file) failed: old_string occurs 0 times in 'a.txt'."
    assert (error.line, error.source_line, error.parameter_name) == (7, "old_string2:「始」two「末」", "old_string")
    assert error.solution and "Step 1 (write_file) already ran" in error.solution
    assert "together with the steps after it" in error.solution


@pytest.mark.anyio
async def test_a_tools_own_error_fields_pass_through(tam_runtime: Runtime) -> None:
    result, program = await run_tam(tam_runtime, block("command:「始」refuse「末」", "code:「始」NO_WAY「末」"))
    [step] = result["result"]["steps"]
    assert step["error"] == {
        "code": "NO_WAY",
        "message": "refused on purpose with NO_WAY",
        "tool_name": "refuse",
        "suggested_value": "something else",
        "solution": "do not",
    }
    error = program.failure(result["result"])
    assert error is not None
    assert (error.code, error.message, error.line, error.suggested_value) == (
        "NO_WAY",
        "refused on purpose with NO_WAY",
        2,
        "something else",
    )
    assert error.solution == "do not."


@pytest.mark.anyio
async def test_an_unexpected_tool_failure_is_a_failed_step(tam_runtime: Runtime) -> None:
    result, program = await run_tam(tam_runtime, block("command:「始」crash「末」"))
    [step] = result["result"]["steps"]
    assert step["error"]["code"] == "TOOL_ERROR"
    assert "the tool broke" in step["error"]["message"]
    assert program.failure({"ok": True, "steps": []}) is None


@pytest.mark.anyio
async def test_typed_values_arrive_typed(tam_runtime: Runtime) -> None:
    text = (
        "First the sum, then the list.\n"
        + block(
            "command1:「始」demo.add「末」",
            "a1:「始」 2 「末」",
            "b1:「始」40「末」",
            "command2:「始」records「末」",
            "n2:「始」2「末」",
        )
        + "\nAnd:\n"
        + block(
            "command:「始」typed_echo「末」",
            "count:「始」3「末」",
            "ratio:「始」2.5「末」",
            "flag:「始」off「末」",
            'tags:「始」["x"]「末」',
            'weights:「始」{"k": 2}「末」',
            'point:「始」{"x": 1, "y": 2}「末」',
        )
    )
    result, _ = await run_tam(tam_runtime, text)
    assert result["status"] == "ok"
    steps = result["result"]["steps"]
    assert steps[0] == {"step": 1, "tool": "add", "ok": True, "result": 42}
    assert steps[1]["result"] == [{"id": 0, "name": "item-0", "score": 0.0}, {"id": 1, "name": "item-1", "score": 1.5}]
    assert steps[2]["result"] == {
        "count": 3,
        "ratio": 2.5,
        "flag": False,
        "tags": ["x"],
        "weights": {"k": 2},
        "mode": "fast",
        "limit": None,
        "note": None,
        "point": {"x": 1, "y": 2},
    }


NASTY = [
    "",
    "\n",
    "line one\r\nline two\rthree\n",
    "quotes ' \" ''' \"\"\" and backslashes \\ \\\\ \\n \\x00 \\u1234",
    "markers <|[REQUEST_TOOL]|> <|[END_TOOL]|> 「始」 「 」 <| |> # not a comment",
    "command1:「始」read_file\npath1:「始」x",
    "unicode: 中文 😀 \u2028 \u200b e\u0301",
    "{x} {0} %s %(a)s ${HOME} `rm -rf /`",
    "\t  leading and trailing spaces  \t",
]


@pytest.mark.anyio
async def test_hard_strings_reach_the_file_exactly(tam_runtime: Runtime, workspace: Path) -> None:
    lines = []
    for n, value in enumerate(NASTY, start=1):
        lines += [
            f"command{n}:「始」write_file「末」",
            f"path{n}:「始」f{n}.txt「末」",
            f"content{n}:「始」{value}「末」",
        ]
    result, _ = await run_tam(tam_runtime, block(*lines))
    assert result["status"] == "ok", result["error"]
    assert result["result"]["ok"] is True
    for n, value in enumerate(NASTY, start=1):
        assert (workspace / f"f{n}.txt").read_bytes() == value.encode()


@pytest.mark.anyio
async def test_help_is_a_command_too(tam_runtime: Runtime) -> None:
    result, _ = await run_tam(tam_runtime, block("command:「始」help「末」", "name:「始」read_file「末」"))
    [step] = result["result"]["steps"]
    assert step["ok"] is True
    assert "read_file(path: str" in step["result"]


@pytest.mark.anyio
async def test_variable_names_that_shadow_tools_are_avoided_in_a_real_run(tam_runtime: Runtime) -> None:
    text = block("command1:「始」tam_steps「末」", "command2:「始」tam_value「末」", "text2:「始」ok「末」")
    result, _ = await run_tam(tam_runtime, text)
    assert [s["result"] for s in result["result"]["steps"]] == ["tool, not variable", "OK"]


@pytest.mark.anyio
async def test_limits_are_the_same_as_for_code(workspace: Path) -> None:
    settings_ = make_settings(workspace, max_tool_calls=2)
    async with open_runtime(settings_, registry=make_registry(workspace)) as runtime:
        text = block(*(f"command{n}:「始」records「末」" for n in (1, 2, 3)))
        result, program = await run_tam(runtime, text)
    assert result["status"] == "error"
    assert result["error"]["code"] == "TOOL_CALL_LIMIT"
    assert len(result["calls"]) == 2  # the worker stops the third call before it reaches the server
    moved = program.relocate(ErrorInfo.model_validate(result["error"]))
    assert (moved.line, moved.source_line, moved.tool_name) == (4, "command3:「始」records「末」", "records")
    assert moved.message.startswith("step 3 (records): ")


def test_relocate_clears_positions_outside_any_step(registry: ToolRegistry) -> None:
    program = translate_tam(block("command:「始」records「末」"), registry)
    info = ErrorInfo(code="TIMEOUT", message="too slow", line=1, column=1, source_line="def tam_record(error):")
    assert program.relocate(info) == ErrorInfo(code="TIMEOUT", message="too slow")
