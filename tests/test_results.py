"""The result object of attp_execute (SPEC §4): its schema, isError, and the TOML / JSON text renderings."""

from __future__ import annotations

import json
import tomllib
from typing import Any, Literal

import pytest
from attp_server.errors import ErrorInfo
from attp_server.results import CallRecord, ExecutionResult, render, render_toml, structured

SPEC_FIELDS = {"status", "target", "result", "stdout", "truncated", "hint", "calls", "error", "elapsed_ms"}
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


def toml_result_value(parsed: dict[str, Any]) -> Any:
    """The result as the TOML text carries it: `result`, or `result_json` when TOML cannot hold it."""
    assert not ("result" in parsed and "result_json" in parsed)
    return json.loads(parsed["result_json"]) if "result_json" in parsed else parsed["result"]


def without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


# --- TOML rendering ------------------------------------------------------------------------------


@pytest.mark.parametrize("result", EXAMPLES)
def test_toml_parses_back_to_the_dump_without_nulls(result: ExecutionResult) -> None:
    expected = without_nulls(result.model_dump(mode="json"))
    if not expected["calls"]:
        del expected["calls"]
    assert toml_of(result) == expected


def test_toml_omits_null_fields() -> None:
    parsed = toml_of(MINIMAL)
    assert set(parsed) == {"status", "stdout", "truncated", "elapsed_ms"}
    error = toml_of(ERROR)["error"]
    assert set(error) == {"code", "message", "line", "column", "source_line", "received", "suggested_value"}


def test_toml_call_without_error_code_omits_it() -> None:
    calls = toml_of(OK)["calls"]
    assert calls == [
        {"tool": "list_files", "ok": True, "ms": 1.25},
        {"tool": "read_file", "ok": False, "ms": 0.5, "error_code": "FILE_NOT_FOUND"},
    ]


def test_toml_starts_with_the_status() -> None:
    assert render(ERROR, "toml").startswith('status = "error"\n')


def test_render_toml_takes_the_json_dump() -> None:
    assert render_toml(OK.model_dump(mode="json")) == render(OK, "toml")


@pytest.mark.parametrize(
    "value",
    [
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
    ],
)
def test_toml_result_holds_the_value_exactly(value: Any) -> None:
    parsed = toml_of(ExecutionResult(status="ok", result=value))
    assert "result_json" not in parsed
    assert parsed["result"] == value


@pytest.mark.parametrize(
    "value",
    [
        pytest.param([1, None, 3], id="none-in-list"),
        pytest.param({"a": None}, id="none-in-dict"),
        pytest.param({"rows": [{"x": 1, "y": None}]}, id="deep-none"),
        pytest.param(2**63, id="int64-max-plus-one"),
        pytest.param(2**64, id="huge-int"),
        pytest.param(-(2**63) - 1, id="int64-min-minus-one"),
        pytest.param([1, 2**100], id="huge-int-in-list"),
        pytest.param({"n": 10**30}, id="huge-int-in-dict"),
    ],
)
def test_result_toml_cannot_hold_goes_to_result_json(value: Any) -> None:
    parsed = toml_of(ExecutionResult(status="ok", result=value))
    assert "result" not in parsed
    assert json.loads(parsed["result_json"]) == value


def test_null_result_is_left_out() -> None:
    parsed = toml_of(ExecutionResult(status="ok", result=None, hint="__result__ was never set"))
    assert "result" not in parsed
    assert "result_json" not in parsed
    assert parsed["hint"] == "__result__ was never set"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("line 1\nline 2\n", id="multiline"),
        pytest.param('quotes """ inside\n', id="triple-double-quotes"),
        pytest.param("ends with backslash \\", id="trailing-backslash"),
        pytest.param("", id="empty"),
    ],
)
@pytest.mark.parametrize("field", ["stdout", "hint", "target"])
def test_toml_text_fields_round_trip(field: str, text: str) -> None:
    parsed = toml_of(ExecutionResult(status="ok", **{field: text}))
    assert parsed[field] == text


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("a\r\nb", id="crlf-string"),
        pytest.param({"text": "line 1\r\nline 2\r\n"}, id="crlf-in-dict"),
    ],
)
def test_toml_result_keeps_crlf(value: Any) -> None:
    assert toml_result_value(toml_of(ExecutionResult(status="ok", result=value))) == value


# --- JSON rendering ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "result",
    [
        *EXAMPLES,
        pytest.param(ExecutionResult(status="ok", result=[1, None, 2**64]), id="nulls-and-huge-int"),
        pytest.param(ExecutionResult(status="ok", result="héllo ✓", stdout="a\r\nb"), id="unicode-crlf"),
    ],
)
def test_json_round_trips_to_the_dump(result: ExecutionResult) -> None:
    assert json.loads(render(result, "json")) == result.model_dump(mode="json")


def test_json_keeps_nulls_and_unicode() -> None:
    text = render(ExecutionResult(status="ok", result="héllo"), "json")
    assert '"target": null' in text
    assert "héllo" in text


def test_json_result_is_validated_back_into_the_model() -> None:
    assert ExecutionResult.model_validate_json(render(OK, "json")) == OK


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


@pytest.mark.parametrize("result_format", ["toml", "json"])
def test_a_large_result_is_written_by_pydantic_core_not_by_a_python_writer(
    result_format: Literal["toml", "json"], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1 MB result took about a second of the event loop in tomli_w (or json's indenting encoder)."""

    def refuse(*_args: Any, **_kwargs: Any) -> str:
        raise AssertionError("a Python-level writer rendered a large result")

    monkeypatch.setattr("attp_server.results.tomli_w.dumps", refuse)
    monkeypatch.setattr("attp_server.results.json.dumps", refuse)
    big = ExecutionResult(status="ok", result=[[i, "x"] for i in range(20_000)], stdout="done\n")
    text = render(big, result_format)
    assert json.loads(text) == big.model_dump(mode="json")


def test_structured_content_is_the_whole_result() -> None:
    for result in (OK, ERROR):
        data = structured(result)
        assert data == result.model_dump(mode="json")
        assert list(data) == list(result.model_dump(mode="json"))


def test_small_results_keep_their_format() -> None:
    assert tomllib.loads(render(OK, "toml"))["result"] == OK.result
    assert render(OK, "json").startswith("{\n  ")
