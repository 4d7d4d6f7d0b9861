"""The ATTP TOML envelope (seed 000): lenient extraction, validation, and errors that show the fix.

    thought = \"\"\"1. ... 2. ...\"\"\"

    [tool_call]
    status = "success"          # or "fail", with `message` instead of `code`
    target = "what this call is for"
    code = '''
    __result__ = read_file("notes.md")
    '''

Models are sloppy: the envelope may sit in a ```` ```toml ```` fence or between prose. Unless
``envelope_strict`` is set, the first TOML document in the text that has a ``[tool_call]`` table wins.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from typing import Any

from attp_server.errors import ErrorCode, ErrorInfo, short_repr

MINIMAL_ENVELOPE = """[tool_call]
status = "success"
target = "what this call is for"
code = '''
__result__ = tools()
'''"""

FAIL_ENVELOPE = """[tool_call]
status = "fail"
message = "why the task cannot be done, and what to do instead\""""

_FENCE = re.compile(r"```[ \t]*(?:toml|TOML)?[ \t]*\n(.*?)```", re.DOTALL)
_START = re.compile(r"^[ \t]*(?:thought[ \t]*=|\[tool_call\])", re.MULTILINE)
_TABLE = re.compile(r"^[ \t]*\[[ \t]*tool_call[ \t]*\]", re.MULTILINE)
_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")
MAX_SUFFIX_TRIES = 200
MAX_PARSED_CHARS = 200_000
"""Characters the search for the longest complete cut may parse in all (some 0.1 s of the server's CPU): each
try parses its whole cut, and a document left open to its end fails every one of them."""


@dataclass(frozen=True)
class Program:
    """An envelope that asks to run code."""

    code: str
    target: str | None = None
    thought: str | None = None
    engine: str | None = None
    """``tool_call.engine``: the engine the envelope asks for (None: the call's argument, else the default)."""


@dataclass(frozen=True)
class Declined:
    """An envelope with ``status = "fail"``: the model says it cannot do the task. Nothing runs."""

    message: str
    target: str | None = None
    thought: str | None = None


class EnvelopeError(Exception):
    """The text is not a usable envelope; `info` says what was wrong and shows a corrected one."""

    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(info.message)
        self.info = info


def _invalid(
    message: str,
    *,
    field: str | None = None,
    received: Any = None,
    expected: str | None = None,
    example: str = MINIMAL_ENVELOPE,
    line: int | None = None,
    column: int | None = None,
) -> EnvelopeError:
    return EnvelopeError(
        ErrorInfo(
            code=ErrorCode.INVALID_ENVELOPE,
            message=message,
            parameter_name=field,
            received=None if received is None else short_repr(received),
            expected=expected,
            line=line,
            column=column,
            solution=f"Send an envelope shaped like this:\n{example}",
        )
    )


def _start_line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset)


def _complete(document: dict[str, Any]) -> bool:
    call = document.get("tool_call")
    return isinstance(call, dict) and ("code" in call or "message" in call)


def _toml(text: str) -> dict[str, Any]:
    """`tomllib.loads`, with nesting too deep for its recursive parser reported as a TOML error."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError("arrays or inline tables are nested too deeply") from None


def _load(text: str, strict: bool, example: str) -> dict[str, Any]:
    """The envelope document: the whole text, else a fenced block, else the longest prose cut that is complete."""
    try:
        return _toml(text)
    except tomllib.TOMLDecodeError as exc:
        error, line_offset = exc, 0
    if not strict:
        for match in _FENCE.finditer(text):
            try:
                document = _toml(match.group(1))
            except tomllib.TOMLDecodeError as exc:
                error, line_offset = exc, _start_line(text, match.start(1))
                continue
            if "tool_call" in document:
                return document
        start = _START.search(text)
        if start is not None:
            tail = text[start.start() :]
            lines = tail.splitlines(keepends=True)
            try:
                return _toml(tail)
            except tomllib.TOMLDecodeError as exc:
                error, line_offset = exc, _start_line(text, start.start())
            # Prose after the envelope: the longest leading cut that is a complete envelope.
            budget = MAX_PARSED_CHARS
            for end in range(len(lines) - 1, 0, -1)[:MAX_SUFFIX_TRIES]:
                cut = "".join(lines[:end])
                budget -= len(cut)
                if budget < 0:
                    break
                try:
                    document = _toml(cut)
                except tomllib.TOMLDecodeError:
                    continue
                if _complete(document):
                    return document
    position = _TOML_POSITION.search(str(error))
    line, column = (int(position.group(1)) + line_offset, int(position.group(2))) if position else (None, None)
    advice = ""
    if text.count("'''") > 2:
        advice = ' If your code itself contains \'\'\', wrap it in """ ... """ instead (and escape backslashes).'
    raise _invalid(
        f"the envelope is not valid TOML: {error}.{advice}",
        field="envelope",
        received=text[:80],
        expected="a TOML document with a [tool_call] table",
        line=line,
        column=column,
        example=example,
    )


def looks_like_envelope(text: str) -> bool:
    """Whether `text` is meant as an ATTP envelope rather than bare code: it has a ``[tool_call]`` table line."""
    return _TABLE.search(text) is not None


def parse_envelope(text: str, *, strict: bool = False) -> Program | Declined:
    """Read an envelope; raise `EnvelopeError` with a precise, fixable message when it is not usable."""
    thought_line = 'thought = """1. ... 2. ... 3. ... 4. ..."""\n\n' if strict else ""
    example, fail_example = thought_line + MINIMAL_ENVELOPE, thought_line + FAIL_ENVELOPE
    if not text.strip():
        raise _invalid(
            "the envelope is empty", field="envelope", received="", expected="an ATTP TOML envelope", example=example
        )
    document = _load(text, strict, example)
    if "tool_call" not in document and not strict:
        raise _invalid(
            "no [tool_call] table was found in the envelope",
            field="tool_call",
            received=text[:80],
            expected="a [tool_call] table with status, target and code",
            example=example,
        )
    call = document.get("tool_call")
    if not isinstance(call, dict):
        raise _invalid(
            "the envelope has no [tool_call] table" if call is None else "tool_call must be a table",
            field="tool_call",
            received=call,
            expected="a [tool_call] table",
            example=example,
        )
    thought = document.get("thought")
    if thought is not None and not isinstance(thought, str):
        raise _invalid(
            "thought must be a string", field="thought", received=thought, expected="a string", example=example
        )
    if strict and not thought:
        raise _invalid(
            "envelope_strict is on: the envelope needs a thought",
            field="thought",
            expected='thought = """1. ... 2. ... 3. ... 4. ..."""',
            example='thought = """1. ... 2. ... 3. ... 4. ..."""\n\n' + MINIMAL_ENVELOPE,
        )
    target = call.get("target")
    if target is not None and not isinstance(target, str):
        raise _invalid(
            "tool_call.target must be a string",
            field="tool_call.target",
            received=target,
            expected="a string",
            example=example,
        )
    status = call.get("status")
    normalized = status.strip().lower() if isinstance(status, str) else status
    if normalized == "success":
        code = call.get("code")
        if not isinstance(code, str) or not code.strip():
            raise _invalid(
                'status = "success" needs the program in tool_call.code',
                field="tool_call.code",
                received=code,
                expected="a non-empty string of Python code",
                example=example,
            )
        engine = call.get("engine")
        if engine is not None and not isinstance(engine, str):
            raise _invalid(
                "tool_call.engine must be a string naming an engine",
                field="tool_call.engine",
                received=engine,
                expected='an engine\'s name, e.g. "python"',
                example=example,
            )
        return Program(code=code, target=target, thought=thought, engine=engine)
    if normalized == "fail":
        message = call.get("message")
        if not isinstance(message, str) or not message.strip():
            raise _invalid(
                'status = "fail" needs tool_call.message saying why',
                field="tool_call.message",
                received=message,
                expected="a non-empty string",
                example=fail_example,
            )
        return Declined(message=message, target=target, thought=thought)
    raise _invalid(
        'tool_call.status must be "success" or "fail"' + (" (it is missing)" if status is None else ""),
        field="tool_call.status",
        received=status,
        expected='"success" or "fail"',
        example=example,
    )
