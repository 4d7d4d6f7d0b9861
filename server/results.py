"""The result object of `attp_execute` (SPEC §4) and its TOML / JSON text renderings."""

from __future__ import annotations

import json
from typing import Any, Literal

import tomli_w
from attp_server.errors import ErrorInfo
from pydantic import BaseModel, ConfigDict, Field

Status = Literal["ok", "error", "fail"]

_INT64 = 2**63


class CallRecord(BaseModel):
    """One tool call of the run, in order."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    ok: bool
    ms: float
    error_code: str | None = None


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

    @property
    def is_error(self) -> bool:
        return self.status == "error"


def render(result: ExecutionResult, result_format: Literal["toml", "json"]) -> str:
    """The text block beside ``structuredContent``: TOML by default, JSON on request."""
    data = result.model_dump(mode="json")
    if result_format == "json":
        return json.dumps(data, ensure_ascii=False, indent=2)
    return render_toml(data)


def render_toml(data: dict[str, Any]) -> str:
    """TOML has no null: null fields are left out. A result TOML cannot hold exactly goes in ``result_json``."""
    ordered: dict[str, Any] = {}
    for key in ("status", "target", "result", "hint", "stdout", "truncated", "elapsed_ms", "error", "calls"):
        value = data.get(key)
        if value is None:
            continue
        if key == "result" and not _toml_exact(value):
            ordered["result_json"] = json.dumps(value, ensure_ascii=False)
            continue
        if key == "error":
            value = {k: v for k, v in value.items() if v is not None}
        if key == "calls":
            value = [{k: v for k, v in call.items() if v is not None} for call in value]
            if not value:
                continue
        ordered[key] = value
    # Multi-line strings read well, but TOML normalizes their \r\n; keep exact strings when \r occurs.
    return tomli_w.dumps(ordered, multiline_strings="\\r" not in json.dumps(ordered))


def _toml_exact(value: Any) -> bool:
    """Whether TOML can hold `value` without loss (no nulls, 64-bit integers, table keys only in dicts)."""
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
        return all(_toml_exact(item) for item in value.values())
    return False
