"""The ``python`` engine's language as the model reads it (`Language`): the description's rules, the prompt's parts."""

from __future__ import annotations

from attp_server.sandbox.engines.language import Language, PromptParts

REFUSED = (
    "other modules, class, with, yield, open, eval, exec, getattr, type, dir, globals, names starting with __ "
    "(but __result__), attributes starting with _"
)
"""What a Python program cannot use, as the description and both prompts say it."""

TOOL_ERROR = (
    "- A failed tool call raises ToolError; catch it with `except ToolError as e:` and read e.code "
    "(e.g. FILE_NOT_FOUND), e.message, e.suggested_value, e.parameter_name, e.solution. Uncaught, it "
    "ends the run with that error."
)
PARALLEL = "- parallel(tool, [kwargs, ...]) runs one tool over many argument dicts at once; results in order."

ERRORS_EN = """A failed tool call raises `ToolError`. Catch it to carry on, or let it end the run:

```python
try:
    text = tool1("notes.md")
except ToolError as e:
    # e.code: what failed, e.g. "FILE_NOT_FOUND"; e.message: the explanation;
    # e.suggested_value: a value to try instead (or None); also e.parameter_name, e.tool_name, e.solution
    text = ""
```

An uncaught `ToolError` ends the run with `status = "error"` and the same fields under `error`."""

ERRORS_ZH = """工具调用失败时会抛出 `ToolError`。可以捕获它继续执行，也可以让它结束本次运行：

```python
try:
    text = tool1("notes.md")
except ToolError as e:
    # e.code：错误码，例如 "FILE_NOT_FOUND"；e.message：说明；
    # e.suggested_value：建议改用的值（或 None）；另有 e.parameter_name、e.tool_name、e.solution
    text = ""
```

未捕获的 `ToolError` 会以 `status = "error"` 结束运行，`error` 中带有相同的字段。"""

LANGUAGE = Language(
    name="Python",
    summary="the project's own evaluator: Python without class, with or yield",
    rules=(TOOL_ERROR, f"- Not available: {REFUSED}.", PARALLEL),
    prompt={
        "en": PromptParts(
            rules="- Python as usual: functions, lambdas, comprehensions, try/except, f-strings, "
            f"sorted(..., key=...), str and dict methods.\n- Not available: {REFUSED}.",
            errors=ERRORS_EN,
        ),
        "zh": PromptParts(
            rules="- 常规Python写法：函数、lambda、推导式、try/except、f-string、sorted(..., key=...)、"
            "str和dict的方法。\n- 不可用：其他模块、class、with、yield、open、eval、exec、getattr、type、dir、globals、"
            "以 __ 开头的名称（__result__ 除外）、以 _ 开头的属性。",
            errors=ERRORS_ZH,
        ),
    },
)
