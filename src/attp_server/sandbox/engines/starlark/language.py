"""The Starlark engine's language as the model reads it (`Language`): the description's notes, the prompt's parts."""

from __future__ import annotations

from attp_server.sandbox.engines.language import Language, PromptParts

NOTES = (
    "Programs are Starlark (a small Python dialect): def, lambda, if/elif/else, for (no while: use "
    "for i in range(n) with break), list/dict comprehensions, f-strings; no import, class, try/except, "
    "with or yield. A failed tool call ends the run with that tool's error; call fail(message) to stop with "
    "your own. No ** operator: use pow(x, y). Available: the tools, print, json.dumps/loads (also "
    "encode/decode), math.*, sum, round, pow, format, struct, and the Starlark builtins (len, range, "
    "sorted, enumerate, zip, min, max, str, int, ...)."
)
"""What a model must know to write Starlark here: for the tool description, the prompt and ``help()``."""

LANGUAGE = Language(
    name="Starlark",
    summary="Starlark, a small Python dialect (no while, try/except, class or import; a failed tool call ends "
    "the run; nothing is kept between calls)",
    rules=(f"- {NOTES}",),
    imports=False,
    modules=("json", "math"),
    suffix=".star",
    prompt={
        "en": PromptParts(
            rules=f"- {NOTES}",
            errors='Starlark has no try/except: a failed tool call ends the run with `status = "error"` '
            "and the tool's `code`, `message`, `suggested_value` (and the other fields) under `error`. Check "
            "values first (`if key in d`, `if x != None`); call `fail(message)` to stop with your own error.",
        ),
        "zh": PromptParts(
            rules="- 程序使用Starlark（Python的一个小方言）：没有while（用 for i in range(n) 加 break）、"
            "没有import、class、try/except、with、yield，没有 ** 运算符（用 pow(x, y)）。"
            "可用：工具、print、json.dumps/loads、math.*、sum、round、pow、format、struct 以及Starlark内置函数。",
            errors='Starlark没有try/except：工具调用失败会以 `status = "error"` 结束运行，`error` 中带有'
            "该工具的 `code`、`message`、`suggested_value` 等字段。请先检查值（`if key in d`、`if x != None`）；"
            "调用 `fail(message)` 以自己的错误结束。",
        ),
    },
    solutions={
        "RUNTIME_ERROR": "Fix the code at that line; Starlark has no try/except, so check values first "
        "(e.g. `if key in d`, `if x != None`).",
        "SYNTAX_ERROR": "Write Starlark: no while (use for ... in range(n) with break), no try/except, class, "
        "import, or ** (use pow).",
    },
)
