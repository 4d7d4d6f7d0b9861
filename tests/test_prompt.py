"""The ATTP system prompt (attp://prompt, attp_system_prompt) in both languages: tools, code rules, errors, reply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from attp_server.model.catalog import Catalog
from attp_server.run.startup import build_registry
from attp_server.settings import Settings


def prompt(tmp_path: Path, language: str = "en", **overrides: Any) -> str:
    settings = Settings(workspace=tmp_path / "ws", db_path=tmp_path / "memory.sqlite3", workers=0, **overrides)
    return Catalog(build_registry(settings), settings).prompt(language)


SECTIONS = {
    "en": ("## Available tools", "## Code rules", "## Tool errors", "## The reply", "## Output template"),
    "zh": ("## 可用工具", "## 代码规则", "## 工具错误", "## 返回结果", "## 输出模板"),
}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_prompt_states_code_rules_tool_errors_and_the_reply(tmp_path: Path, language: str) -> None:
    """Issue 13: seed 000's prompt said nothing of the code rules, the result shape or ToolError's fields."""
    text = prompt(tmp_path, language)
    for section in SECTIONS[language]:
        assert section in text, section
    assert "def read_file(path: str, max_lines: int = 1000, offset: int = 0) -> str:" in text
    assert "math, json, datetime, re, random, statistics" in text
    for needle in ("except ToolError as e:", "e.code", "e.message", "e.suggested_value", "e.parameter_name"):
        assert needle in text, needle
    for field in ("`status`", "`result`", "`stdout`", "`hint`", "`error`", "`suggested_value`", "`tool_calls`"):
        assert field in text, field
    assert "{{" not in text


@pytest.mark.parametrize(
    ("language", "needles"),
    [
        pytest.param("en", ["Not available: other modules, class", "attributes starting with _",
                            "Limits per call: 10 s, 200 tool calls"], id="en"),
        pytest.param("zh", ["不可用：其他模块、class", "以 _ 开头的属性", "每次调用的限制：10 秒，200 次工具调用"], id="zh"),
    ],
)  # fmt: skip
def test_prompt_names_what_is_refused_and_the_limits(tmp_path: Path, language: str, needles: list[str]) -> None:
    text = prompt(tmp_path, language)
    for needle in needles:
        assert needle in text


@pytest.mark.parametrize("language", ["en", "zh"])
def test_prompt_says_whether_anything_reaches_the_network(tmp_path: Path, language: str) -> None:
    assert "bash" not in prompt(tmp_path, language).split("## Output template")[-1].split("## 输出模板")[-1]
    with_shell = prompt(tmp_path, language, toolpacks=["files", "shell"])
    assert with_shell.rstrip().splitlines()[-1 if language == "en" else -2].endswith(("bash.", "bash"))


@pytest.mark.parametrize("language", ["en", "zh"])
def test_starlark_prompt_has_no_try(tmp_path: Path, language: str) -> None:
    text = prompt(tmp_path, language, engine="starlark")
    assert "except ToolError" not in text
    assert "fail(message)" in text
    assert "json, math" in text


def test_prompt_describes_toml_replies_when_chosen(tmp_path: Path) -> None:
    assert "answered with a TOML document" in prompt(tmp_path, result_format="toml")
    assert "answered with a JSON object" in prompt(tmp_path)
