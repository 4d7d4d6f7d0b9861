"""The result object of `attp_execute` (SPEC §4) and its TOML / JSON text renderings."""

from __future__ import annotations

import json
from typing import Any, Literal

import pydantic_core
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


LARGE_TEXT_BYTES = 65_536
"""Past this much JSON in the result and stdout, the text block is compact JSON written by pydantic-core.

TOML (tomli_w) and json's indenting encoder are written in Python: a result of 1 MB took about a
second of the server's event loop, during which no other session was answered. pydantic-core writes
the same data in milliseconds; the model reads JSON as well as TOML.
"""


def structured(result: ExecutionResult) -> dict[str, Any]:
    """``structuredContent``: the result as JSON data. The value of ``__result__`` is JSON data already
    (decoded from the worker's report), so it is passed on as it is, not copied item by item."""
    data = result.model_dump(mode="json", exclude={"result"})
    data["result"] = result.result
    return {key: data[key] for key in ExecutionResult.model_fields}


def render(result: ExecutionResult, result_format: Literal["toml", "json"], data: dict[str, Any] | None = None) -> str:
    """The text block beside ``structuredContent`` (`data`, if already built): TOML by default, JSON on request."""
    data = structured(result) if data is None else data
    if len(result.stdout) + _json_size(result.result) > LARGE_TEXT_BYTES:
        try:
            return pydantic_core.to_json(data).decode("utf-8")
        except (pydantic_core.PydanticSerializationError, UnicodeError, ValueError):
            pass  # e.g. a lone surrogate, which only Python's writers pass through
    if result_format == "json":
        return json.dumps(data, ensure_ascii=False, indent=2)
    return render_toml(data)


def _json_size(value: Any) -> int:
    """The length of `value` as compact JSON (pydantic-core: microseconds for small values)."""
    try:
        return len(pydantic_core.to_json(value))
    except (pydantic_core.PydanticSerializationError, ValueError):
        return 0


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
