"""The ``asteval`` engine's language as the model reads it (`Language`): the description's rules, the prompt's parts.

Every sentence here is measured: `tests/test_asteval_engine.py` runs what it says works and what it says is
not part of the language.
"""

from __future__ import annotations

from attp_server.sandbox.engines.language import Language, PromptParts

FEATURES = (
    "- Python as asteval's interpreter runs it: def, lambda, if/for/while (with else), try/except/else/finally, "
    "list/dict/set comprehensions, f-strings, with, del, assert."
)
LACKS = (
    "- Not part of it: class, generator expressions (write sum([x for x in xs])), yield, global/nonlocal, "
    "*unpacking, {**d}, :=, match, decorators, keyword-only parameters, str.format (use f-strings), "
    "except (A, B) (one class per clause), a bare raise, raise ... from; nor open, eval, exec, getattr, type, "
    "dir or other modules."
)
SCOPES = (
    "- A function sees the module's names as they are when it is called; its own assignments are dropped when it "
    "returns (return the value, or change a list or dict), and a function returned by another does not keep "
    "that function's names."
)
TOOL_ERROR = (
    "- A failed tool call raises ToolError with e.code (e.g. FILE_NOT_FOUND), e.message, e.suggested_value, "
    "e.parameter_name, e.solution; uncaught, it ends the run with that error. except matches Python's built-in "
    "exception classes by name, so `except ToolError` catches every error; a raise written directly in a try "
    "block is not caught by its except; finally does not run after a return or an error in its try."
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

asteval matches `except` clauses by the name of Python's built-in exception classes: `except ToolError` \
catches every error, so read `e.code` before relying on it; a `raise` written directly in a `try` block is not \
caught by its `except`, and `finally` does not run after a `return` or an error in its `try`. An uncaught \
`ToolError` ends the run with `status = "error"` and the same fields under `error`."""

ERRORS_ZH = """工具调用失败时会抛出 `ToolError`。可以捕获它继续执行，也可以让它结束本次运行：

```python
try:
    text = tool1("notes.md")
except ToolError as e:
    # e.code：错误码，例如 "FILE_NOT_FOUND"；e.message：说明；
    # e.suggested_value：建议改用的值（或 None）；另有 e.parameter_name、e.tool_name、e.solution
    text = ""
```

asteval 按Python内置异常类的名称匹配 `except` 子句：`except ToolError` 会捕获所有错误，请先检查 `e.code`；\
直接写在 `try` 块中的 `raise` 不会被其 `except` 捕获；`try` 中 `return` 或出错后 `finally` 不会执行。\
未捕获的 `ToolError` 会以 `status = "error"` 结束运行，`error` 中带有相同的字段。"""

LANGUAGE = Language(
    name="Python",
    summary="asteval's interpreter: Python without class, generator expressions, global/nonlocal, closures or "
    "str.format; `except ToolError` catches every error",
    rules=(FEATURES, LACKS, SCOPES, TOOL_ERROR, PARALLEL),
    prompt={
        "en": PromptParts(rules="\n".join((FEATURES, LACKS, SCOPES)), errors=ERRORS_EN),
        "zh": PromptParts(
            rules="- 由asteval解释器运行的Python：def、lambda、if/for/while（含else）、try/except/else/finally、"
            "列表/字典/集合推导式、f-string、with、del、assert。\n"
            "- 不支持：class、生成器表达式（改写为 sum([x for x in xs])）、yield、global/nonlocal、*解包、{**d}、:=、"
            "match、装饰器、仅限关键字参数、str.format（用f-string）、except (A, B)（每个子句一个类）、单独的raise、"
            "raise ... from；也没有open、eval、exec、getattr、type、dir或其他模块。\n"
            "- 函数在被调用时看到模块中当时的名称；函数内部的赋值在返回时被丢弃（请返回值，或修改列表、字典），"
            "函数返回的内部函数不保留外层函数的名称。",
            errors=ERRORS_ZH,
        ),
    },
    solutions={
        "FORBIDDEN": "Rewrite that line in the Python asteval runs (the message says what to write instead).",
    },
)
