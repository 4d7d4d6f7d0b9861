"""The result object of `attp_execute` (SPEC §4) and the text the model reads beside it.

Two views of one run. ``structuredContent`` is the whole `ExecutionResult` (every tool call with its
time, ``elapsed_ms``, ``target``). The text block is what most models read, so it is lean: the
status, the answer, stdout, the hint, the error, and ONE line summing up the tool calls; fields at
their defaults are left out. JSON by default (measured cheaper than TOML on typical results, and
n8n's MCP Client node parses it into an object: see docs/programs.md "Result text"); TOML on request.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Literal

import pydantic_core
import tomli_w
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from attp_server.errors import ErrorInfo

Status = Literal["ok", "error", "fail"]
TextFormat = Literal["toml", "json"]

_INT64 = 2**63


class CallRecord(BaseModel):
    """One tool call of the run, in order."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    ok: bool
    ms: float
    error_code: str | None = None


class Picture(BaseModel):
    """A picture the program showed (a matplotlib figure): the client gets its bytes as image content after the
    text; the result object says only what it is."""

    model_config = ConfigDict(extra="forbid")

    mime_type: Literal["image/png"] = "image/png"
    bytes: int = Field(description="Size of the image.")
    data: SkipJsonSchema[str] = Field("", exclude=True, repr=False)
    """The image, base64: rendered as MCP image content, never in the structured result or the text."""


class ExecutionResult(BaseModel):
    """What `attp_execute` returns. ``isError`` is set exactly when ``status == "error"``."""

    model_config = ConfigDict(extra="forbid")

    status: Status = Field(description='"ok", "error" (see error), or "fail" (the envelope declined the task)')
    target: str | None = Field(None, description="What the call was for, echoed from the request.")
    result: Any = Field(None, description="The value of __result__ (or of the last expression), as JSON.")
    stdout: str = Field("", description="Captured print() output.")
    truncated: bool = Field(False, description="True when stdout was cut at max_output_bytes.")
    hint: str | None = Field(None, description="Advice about the result, or the message of a declined envelope.")
    calls: list[CallRecord] = Field(default_factory=list, description="Every tool call of the run, in order.")
    error: ErrorInfo | None = Field(None, description="What went wrong, when status is error.")
    elapsed_ms: float = Field(0.0, description="Wall-clock time of the whole call.")
    session: str | None = Field(
        None, description="The session handle: pass it back as session to keep this call's variables and functions."
    )
    pictures: list[Picture] = Field(
        default_factory=list, description="Pictures the program showed; each follows the text as image content."
    )

    @property
    def is_error(self) -> bool:
        return self.status == "error"


def render(result: ExecutionResult, result_format: TextFormat) -> str:
    """The text block beside ``structuredContent``: the lean view, as JSON or TOML.

    The one place the text's format is chosen. TOML has no null: in TOML a null field is left out,
    and a view holding a value TOML cannot carry exactly (a null inside the result, an integer past
    64 bits, a carriage return) is written as JSON instead, never as an escaped string.
    """
    view = lean_view(result)
    if result_format == "toml" and not _large(result):
        fields = {key: value for key, value in view.items() if value is not None}
        if _toml_exact(fields):
            return tomli_w.dumps(fields, multiline_strings=True)
    return render_json(view)


LARGE_TEXT_BYTES = 65_536
"""Past this much JSON in the result and stdout, the text is JSON even where TOML was asked for.

tomli_w is written in Python: a result of 1 MB took about a second of the server's event loop, during
which no other session was answered. JSON is written by C code in milliseconds; the model reads it as well.
"""


def _large(result: ExecutionResult) -> bool:
    if len(result.stdout) > LARGE_TEXT_BYTES:
        return True
    try:
        return len(pydantic_core.to_json(result.result)) + len(result.stdout) > LARGE_TEXT_BYTES
    except (pydantic_core.PydanticSerializationError, ValueError):  # e.g. a lone surrogate: measured the slow way
        return len(json.dumps(result.result, ensure_ascii=False)) + len(result.stdout) > LARGE_TEXT_BYTES


def structured(result: ExecutionResult) -> dict[str, Any]:
    """``structuredContent``: the whole result as JSON data. The value of ``__result__`` is JSON data already
    (decoded from the worker's report), so it is passed on as it is, not copied item by item."""
    data = result.model_dump(mode="json", exclude={"result"})
    data["result"] = result.result
    return {key: data[key] for key in ExecutionResult.model_fields}


def lean_view(result: ExecutionResult) -> dict[str, Any]:
    """What the model needs from a run, in reading order; defaults (empty stdout, no calls, ...) left out."""
    view: dict[str, Any] = {"status": result.status}
    if result.status == "ok":
        view["result"] = result.result
    if result.stdout:
        view["stdout"] = result.stdout
    if result.truncated:
        view["truncated"] = True
    if result.hint is not None:
        view["hint"] = result.hint
    if result.error is not None:
        view["error"] = result.error.model_dump(mode="json", exclude_none=True)
    if result.calls:
        view["tool_calls"] = call_summary(result.calls)
    if result.session is not None:
        view["session"] = result.session
    if result.pictures:
        view["pictures"] = [f"{picture.mime_type}, {picture.bytes:,} bytes" for picture in result.pictures]
    return view


def call_summary(calls: list[CallRecord]) -> str:
    """One line for the whole trace: ``read_file: 60 (2 failed: FILE_NOT_FOUND), write_file: 1``."""
    counts = Counter(call.tool for call in calls)
    failures: dict[str, Counter[str]] = {}
    for call in calls:
        if not call.ok:
            failures.setdefault(call.tool, Counter())[call.error_code or "ERROR"] += 1
    parts = []
    for tool, count in counts.items():
        part = f"{tool}: {count}"
        failed = failures.get(tool)
        if failed:
            codes = ", ".join(code if n == 1 else f"{n} {code}" for code, n in failed.items())
            part += f" ({failed.total()} failed: {codes})"
        parts.append(part)
    return ", ".join(parts)


def render_json(view: dict[str, Any]) -> str:
    """One JSON object, a top-level field per line, values compact (the cheapest form that still reads well)."""
    lines = [
        f"{json.dumps(key)}:{json.dumps(value, ensure_ascii=False, separators=(',', ':'))}"
        for key, value in view.items()
    ]
    return "{" + ",\n".join(lines) + "}"


def _toml_exact(value: Any) -> bool:
    """Whether TOML can hold `value` without loss (no nulls, 64-bit integers, no carriage returns)."""
    if value is None:
        return False
    if isinstance(value, bool | float):
        return True
    if isinstance(value, str):
        return "\r" not in value
    if isinstance(value, int):
        return -_INT64 <= value < _INT64
    if isinstance(value, list):
        return all(_toml_exact(item) for item in value)
    if isinstance(value, dict):
        return all("\r" not in key and _toml_exact(item) for key, item in value.items())
    return False
