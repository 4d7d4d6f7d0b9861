"""The result object of attp_execute (SPEC §4): its schema, isError, and the lean text the model reads (JSON / TOML)."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest

from attp_server.errors import ErrorInfo
from attp_server.model.results import CallRecord, ExecutionResult, call_summary, render, structured

SPEC_FIELDS = {
    "status",
    "target",
    "result",
    "stdout",
    "truncated",
    "hint",
    "calls",
    "error",
    "elapsed_ms",
    "session",
    "pictures",
}  # fmt: skip  (pictures: SPEC §9, the cpython engine's figures; their bytes are image content)
SPEC_ERROR_FIELDS = {
    "code", "message", "line", "column", "source_line", "tool_name", "parameter_name", "received", "expected",
    "suggested_value", "solution",
}  # fmt: skip

OK = ExecutionResult(
    status="ok",
    target="count the notes",
    result={"count": 2, "names": ["a.md", "b.md"], "sizes": {"a.md": 10, "b.md": 1.5}, "empty": [], "flag": True},
    stdout="listed 2 files\n",
    calls=[
        CallRecord(tool="list_files", ok=True, ms=1.25),
        CallRecord(tool="read_file", ok=False, ms=0.5, error_code="FILE_NOT_FOUND"),
    ],
    elapsed_ms=12.5,
)
ERROR = ExecutionResult(
    status="error",
    error=ErrorInfo(
        code="NAME_NOT_FOUND",
        message="reed_file() is not a tool or function available here; did you mean read_file()?",
        line=1,
        column=0,
        source_line="reed_file('x')",
        received="reed_file",
        suggested_value="read_file",
    ),
    elapsed_ms=0.4,
)
FAIL = ExecutionResult(status="fail", target="send an email", hint="There is no email tool.")
MINIMAL = ExecutionResult(status="ok")

EXAMPLES = [
    pytest.param(OK, id="ok"),
    pytest.param(ERROR, id="error"),
    pytest.param(FAIL, id="fail"),
    pytest.param(MINIMAL, id="minimal"),
]


def toml_of(result: ExecutionResult) -> dict[str, Any]:
    return tomllib.loads(render(result, "toml"))


def json_of(result: ExecutionResult) -> dict[str, Any]:
    return json.loads(render(result, "json"))


def lean(result: ExecutionResult) -> dict[str, Any]:
    """What the text must carry: the answer, stdout, hint, error and a call summary; no defaults, no trace."""
    data = result.model_dump(mode="json")
    view = {"status": data["status"]}
    if data["status"] == "ok":
        view["result"] = data["result"]
    view.update({k: data[k] for k in ("stdout", "truncated", "hint") if data[k]})
    if data["error"]:
        view["error"] = {k: v for k, v in data["error"].items() if v is not None}
    if data["calls"]:
        view["tool_calls"] = call_summary(result.calls)
    return view


# --- the lean view, in both formats ------------------------------------------------------------


@pytest.mark.parametrize("result", EXAMPLES)
@pytest.mark.parametrize("result_format", ["json", "toml"])
def test_text_parses_back_to_the_lean_view(result: ExecutionResult, result_format: str) -> None:
    parsed = json_of(result) if result_format == "json" else toml_of(result)
    expected = lean(result)
    if result_format == "toml":  # TOML has no null: a null field is left out
        expected = {k: v for k, v in expected.items() if v is not None}
    assert parsed == expected


def test_text_leaves_out_defaults_and_the_trace() -> None:
    assert json_of(MINIMAL) == {"status": "ok", "result": None}
    parsed = json_of(OK)
    assert set(parsed) == {"status", "result", "stdout", "tool_calls"}
    for absent in ("target", "calls", "elapsed_ms", "truncated", "error", "hint"):
        assert absent not in parsed


def test_text_keeps_fields_away_from_their_defaults() -> None:
    result = ExecutionResult(status="ok", result=1, stdout="x" * 10, truncated=True, hint="cut")
    assert json_of(result) == {"status": "ok", "result": 1, "stdout": "x" * 10, "truncated": True, "hint": "cut"}


def test_error_text_leaves_out_null_error_fields() -> None:
    error = json_of(ERROR)["error"]
    assert set(error) == {"code", "message", "line", "column", "source_line", "received", "suggested_value"}
    assert "result" not in json_of(ERROR)


def test_text_starts_with_the_status() -> None:
    assert render(ERROR, "json").startswith('{"status":"error",\n')
    assert render(ERROR, "toml").startswith('status = "error"\n')


def test_json_text_is_one_field_per_line() -> None:
    text = render(OK, "json")
    assert text.startswith("{") and text.endswith("}")
    lines = text[1:-1].split(",\n")
    fields = [json.loads("{" + line + "}") for line in lines]
    assert fields == [{key: value} for key, value in lean(OK).items()]


# --- the one-line call summary -------------------------------------------------------------------


def record(tool: str, code: str | None = None) -> CallRecord:
    return CallRecord(tool=tool, ok=code is None, ms=0.5, error_code=code)


@pytest.mark.parametrize(
    ("calls", "summary"),
    [
        pytest.param([record("read_file")] * 60, "read_file: 60", id="one-tool"),
        pytest.param(
            [record("list_files"), record("read_file"), record("read_file")],
            "list_files: 1, read_file: 2",
            id="tools-in-first-call-order",
        ),
        pytest.param(
            [record("read_file"), record("read_file", "FILE_NOT_FOUND")],
            "read_file: 2 (1 failed: FILE_NOT_FOUND)",
            id="one-failure",
        ),
        pytest.param(
            [record("read_file", "FILE_NOT_FOUND")] * 2 + [record("read_file", "INVALID_ARGUMENT"), record("help")],
            "read_file: 3 (3 failed: 2 FILE_NOT_FOUND, INVALID_ARGUMENT), help: 1",
            id="several-codes",
        ),
        pytest.param([CallRecord(tool="x", ok=False, ms=1)], "x: 1 (1 failed: ERROR)", id="failure-without-code"),
    ],
)
def test_call_summary(calls: list[CallRecord], summary: str) -> None:
    assert call_summary(calls) == summary


def test_sixty_calls_and_a_short_answer_stay_short() -> None:
    """Issue 13: 60 calls and a 4-character answer came back as 3,202 characters (one TOML line per call)."""
    result = ExecutionResult(status="ok", result="done", calls=[record("read_file")] * 60, elapsed_ms=117.6)
    for result_format in ("json", "toml"):
        assert len(render(result, result_format)) <= 600  # type: ignore[arg-type]


# --- values: null is data, never an escaped string ----------------------------------------------

EXACT_IN_TOML = [
    pytest.param("plain", id="string"),
    pytest.param(42, id="int"),
    pytest.param(-(2**63), id="int64-min"),
    pytest.param(2**63 - 1, id="int64-max"),
    pytest.param(3.25, id="float"),
    pytest.param(False, id="bool"),
    pytest.param([], id="empty-list"),
    pytest.param({}, id="empty-dict"),
    pytest.param([1, "a", 2.5, True, [1], {"k": "v"}], id="mixed-list"),
    pytest.param({"": 1, "a b": {"c.d": [1, "x"]}, "ü": True, "1": 2}, id="odd-keys"),
    pytest.param({"rows": [{"x": 1}, {"x": 2}]}, id="array-of-tables"),
    pytest.param("multi\nline\ntext\n", id="multiline"),
    pytest.param("has \"\"\" and ''' quotes\n", id="triple-quotes"),
    pytest.param("tab\tnul\x00 del\x7f bell\x07\n", id="control-characters"),
    pytest.param("back\\slash\\\n", id="backslashes"),
    pytest.param("héllo ✓ 🎉 \u2028", id="unicode"),
]
NOT_IN_TOML = [
    pytest.param([1, None, 3], id="none-in-list"),
    pytest.param({"a": None}, id="none-in-dict"),
    pytest.param({"rows": [{"x": 1, "y": None}]}, id="deep-none"),
    pytest.param(2**63, id="int64-max-plus-one"),
    pytest.param(2**64, id="huge-int"),
    pytest.param(-(2**63) - 1, id="int64-min-minus-one"),
    pytest.param([1, 2**100], id="huge-int-in-list"),
    pytest.param({"n": 10**30}, id="huge-int-in-dict"),
    pytest.param("a\r\nb", id="crlf-string"),
    pytest.param({"text": "line 1\r\nline 2\r\n"}, id="crlf-in-dict"),
]


@pytest.mark.parametrize("value", [*EXACT_IN_TOML, *NOT_IN_TOML])
def test_json_text_holds_the_value_exactly(value: Any) -> None:
    assert json_of(ExecutionResult(status="ok", result=value))["result"] == value


@pytest.mark.parametrize("value", EXACT_IN_TOML)
def test_toml_text_holds_the_value_exactly(value: Any) -> None:
    assert toml_of(ExecutionResult(status="ok", result=value))["result"] == value


@pytest.mark.parametrize("value", NOT_IN_TOML)
def test_what_toml_cannot_hold_is_rendered_as_json_data(value: Any) -> None:
    """Was: `result_json = "{\"a\": null}"`, an escaped string in place of the data."""
    text = render(ExecutionResult(status="ok", result=value, stdout="s\n"), "toml")
    assert "result_json" not in text
    assert json.loads(text) == {"status": "ok", "result": value, "stdout": "s\n"}


def test_null_result_in_toml_is_left_out() -> None:
    parsed = toml_of(ExecutionResult(status="ok", result=None, hint="__result__ was never set"))
    assert parsed == {"status": "ok", "hint": "__result__ was never set"}


def test_null_result_in_json_is_null() -> None:
    assert render(ExecutionResult(status="ok"), "json") == '{"status":"ok",\n"result":null}'


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("line 1\nline 2\n", id="multiline"),
        pytest.param('quotes """ inside\n', id="triple-double-quotes"),
        pytest.param("ends with backslash \\", id="trailing-backslash"),
        pytest.param("a\r\nb", id="crlf"),
    ],
)
@pytest.mark.parametrize("field", ["stdout", "hint"])
@pytest.mark.parametrize("result_format", ["json", "toml"])
def test_text_fields_round_trip(field: str, text: str, result_format: str) -> None:
    result = ExecutionResult(status="ok", result=1, **{field: text})
    rendered = render(result, result_format)  # type: ignore[arg-type]
    parsed = tomllib.loads(rendered) if rendered.startswith("status") else json.loads(rendered)
    assert parsed[field] == text


def test_json_keeps_unicode_unescaped() -> None:
    assert "héllo ✓" in render(ExecutionResult(status="ok", result="héllo ✓"), "json")


# --- isError, model and schema -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "is_error"),
    [
        pytest.param("ok", False, id="ok"),
        pytest.param("error", True, id="error"),
        pytest.param("fail", False, id="fail"),
    ],
)
def test_is_error_exactly_for_status_error(status: str, is_error: bool) -> None:
    assert ExecutionResult(status=status).is_error is is_error  # type: ignore[arg-type]


def test_model_refuses_unknown_status_and_fields() -> None:
    with pytest.raises(ValueError, match="status"):
        ExecutionResult(status="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="extra"):
        ExecutionResult(status="ok", isError=True)  # type: ignore[call-arg]


def test_defaults() -> None:
    assert MINIMAL.model_dump() == {
        "status": "ok",
        "target": None,
        "result": None,
        "stdout": "",
        "truncated": False,
        "hint": None,
        "calls": [],
        "error": None,
        "elapsed_ms": 0.0,
        "session": None,
        "pictures": [],
    }


def test_schema_has_every_spec_field() -> None:
    schema = ExecutionResult.model_json_schema()
    assert set(schema["properties"]) == SPEC_FIELDS
    assert schema["properties"]["status"]["enum"] == ["ok", "error", "fail"]
    assert "status" in schema["required"]
    assert schema["additionalProperties"] is False


def test_schema_error_has_every_spec_field() -> None:
    defs = ExecutionResult.model_json_schema()["$defs"]
    assert set(defs["ErrorInfo"]["properties"]) == SPEC_ERROR_FIELDS
    assert set(defs["ErrorInfo"]["required"]) == {"code", "message"}


def test_schema_calls_have_tool_ok_ms_error_code() -> None:
    defs = ExecutionResult.model_json_schema()["$defs"]
    assert set(defs["CallRecord"]["properties"]) == {"tool", "ok", "ms", "error_code"}


def test_schema_is_json_serialisable() -> None:
    schema = ExecutionResult.model_json_schema()
    assert json.loads(json.dumps(schema)) == schema


# ---------------------------------------------------------------- the rendering budget (issue 12)


def test_a_large_result_is_written_as_json_even_where_toml_was_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1 MB result took about a second of the event loop in tomli_w, which is written in Python."""

    def refuse(*_args: Any, **_kwargs: Any) -> str:
        raise AssertionError("tomli_w rendered a large result")

    monkeypatch.setattr("attp_server.model.results.tomli_w.dumps", refuse)
    big = ExecutionResult(status="ok", result=[[i, "x"] for i in range(20_000)], stdout="done\n")
    assert json.loads(render(big, "toml"))["result"] == big.result
    small = ExecutionResult(status="ok", result=[1, 2], stdout="x" * 70_000)
    assert json.loads(render(small, "toml"))["stdout"] == small.stdout


def test_structured_content_is_the_whole_result() -> None:
    for result in (OK, ERROR):
        data = structured(result)
        assert data == result.model_dump(mode="json")
        assert list(data) == list(result.model_dump(mode="json"))
