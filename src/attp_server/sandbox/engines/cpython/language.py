"""The ``cpython`` engine's language as the model reads it (`Language`): the description's rules, the prompt's parts.

Which packages are there (and their versions) is the server's to say, from the ``cpython_packages`` setting: the
catalog adds that line (`attp_server.model.catalog.package_line`).
"""

from __future__ import annotations

from attp_server.sandbox.engines.language import Language, PromptParts
from attp_server.sandbox.engines.python.language import ERRORS_EN, ERRORS_ZH, PARALLEL, TOOL_ERROR

LANGUAGE_RULE = (
    "- Programs are real CPython: the whole language (classes, dataclasses, with, generators, async/await), the "
    "standard library modules that need no files, network or processes, and the packages listed below: import "
    "what you use. No network, subprocess or threads."
)
FILES = (
    '- Workspace files open as usual, by a path relative to the workspace: open("notes.txt"), '
    'pd.read_csv("sales.csv"), pd.read_excel(...), df.to_parquet("out.parquet"), fig.savefig("chart.png"); each '
    "open goes through the files pack (tool_calls counts it as files.file_info, files.read_bytes or files.write_bytes)."
)
PICTURES = (
    "- show(fig) (or plt.show(), or a figure left open) sends a matplotlib chart to the user as a PNG image with "
    "the result. __result__ may be a DataFrame, Series or numpy value: it comes back as plain data (a DataFrame "
    "as row records)."
)
LANGUAGE = Language(
    name="Python",
    summary="real CPython behind the walls, with the data stack (numpy, pandas, matplotlib), workspace files by "
    "open() and charts by show(fig)",
    rules=(LANGUAGE_RULE, FILES, PICTURES, TOOL_ERROR, PARALLEL),
    prompt={
        "en": PromptParts(rules="\n".join((LANGUAGE_RULE, FILES, PICTURES)), errors=ERRORS_EN),
        "zh": PromptParts(
            rules="- 程序是真正的CPython：完整的语言（class、dataclass、with、生成器、async/await）、"
            "无需文件、网络或进程的标准库模块，以及下列软件包：用到什么就import什么。没有网络、子进程或线程。\n"
            '- 工作区文件照常打开，路径相对于工作区：open("notes.txt")、pd.read_csv("sales.csv")、'
            'df.to_parquet("out.parquet")、fig.savefig("chart.png")。\n'
            "- show(fig)（或 plt.show()，或结束时仍打开的图）把matplotlib图表作为PNG图片随结果发给用户。",
            errors=ERRORS_ZH,
        ),
    },
)
