"""TAM (SPEC §8, seed 003): ``<|[REQUEST_TOOL]|>`` blocks, parsed and translated into a sandbox program.

    <|[REQUEST_TOOL]|>
    command1:「始」write_file「末」
    path1:「始」notes.md「末」
    content1:「始」first line
    second line「末」
    command2:「始」read_file「末」
    path2:「始」notes.md「末」
    <|[END_TOOL]|>

Grammar (positions are 1-based lines and columns of the whole text):

* Blocks run from ``<|[REQUEST_TOOL]|>`` to ``<|[END_TOOL]|>``; text around and between blocks is
  ignored. Inside a block, between parameters, only whitespace, ``# comment`` lines (or a ``#`` comment
  after a value) and the end marker may appear.
* A parameter is ``key:「始」value「末」``: ``key`` is an identifier, the colon may be ``:`` or ``：``,
  spaces or tabs may sit around it. The value is every character after ``「始」`` up to the next
  ``「末」``, newlines included, with no escaping and no trimming. Markers (``<|[END_TOOL]|>``,
  ``「始」``), brackets, quotes and backslashes inside a value are plain text. A value can never
  contain ``「末」`` itself: the first one always ends it (send such text as Python code instead).
* Keys are case- and underscore-insensitive (``filePath`` = ``file_path``). ``command`` selects the
  tool of a single call. A chain numbers its keys instead: ``command1``, ``path1``, ``command2`` … and
  its steps run in numeric order, stopping at the first failure. A key's step is the longest trailing
  run of its digits that is the number of a ``commandN`` of the block, so ``line21`` is ``line`` of step
  21 when ``command21`` exists, else ``line2`` of step 1 (``line2_1`` says the latter explicitly). A
  block is either a single call or a chain. A second ``command`` key of the same step is the tool's
  own parameter named ``command`` (the shell pack's ``bash``).
* Several blocks run one after another, in the order they appear; ``steps`` count across all of them.

Translation resolves tool ids (exact name or alias, ``pack:tool``, ``pack.tool``, then a unique case-
and underscore-insensitive match), coerces each value to its parameter's annotation (`coerce_value`),
validates the call exactly as the runtime will, and emits a Python program for the ordinary sandbox
path, so limits, worker, trace (``calls``) and result shape are those of any program. Its result:

    {"ok": true, "steps": [{"step": 1, "tool": "write_file", "ok": true, "result": {...}}, ...]}
    {"ok": false, "failed_step": 2, "steps": [
        {"step": 1, "tool": "write_file", "ok": true, "result": {...}},
        {"step": 2, "tool": "edit_file", "ok": false, "error": {"code": ..., "message": ..., ...}},
        {"step": 3, "tool": "read_file", "ok": false, "skipped": true}]}

A failed step does not fail the program (its record is data), so the run's ``result`` keeps what
the earlier steps did; `TamProgram.failure` turns it into the run's ``error`` at the step's TAM line,
and `TamProgram.relocate` moves any other run error (a limit, a timeout) there too.
"""

from __future__ import annotations

import bisect
import collections.abc
import dataclasses
import inspect
import json
import keyword
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from server.envelope import EnvelopeError
from server.errors import ErrorCode, ErrorInfo, short_repr, suggest
from server.toolpacks import RESERVED_NAMES, ToolRegistry

START_MARKER = "<|[REQUEST_TOOL]|>"
END_MARKER = "<|[END_TOOL]|>"
VALUE_OPEN = "「始」"
VALUE_CLOSE = "「末」"

MINIMAL_TAM = f"""{START_MARKER}
command:{VALUE_OPEN}read_file{VALUE_CLOSE}
path:{VALUE_OPEN}notes.md{VALUE_CLOSE}
{END_MARKER}"""

CHAIN_TAM = f"""{START_MARKER}
command1:{VALUE_OPEN}write_file{VALUE_CLOSE}
path1:{VALUE_OPEN}notes.md{VALUE_CLOSE}
content1:{VALUE_OPEN}hello{VALUE_CLOSE}
command2:{VALUE_OPEN}read_file{VALUE_CLOSE}
path2:{VALUE_OPEN}notes.md{VALUE_CLOSE}
{END_MARKER}"""

MAX_KEY_CHARS = 100

META_SIGNATURES = {
    name: inspect.Signature(
        [inspect.Parameter(arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=str | None)]
    )
    for name, arg in (("help", "name"), ("tools", "query"))
}
"""The sandbox's own ``help``/``tools``, callable as TAM commands too."""

_KEY = re.compile(r"(?<!\w)([^\W\d]\w*)[ \t]*[:：][ \t]*" + VALUE_OPEN)  # (?<!\w): linear search
_LOOSE_KEY = re.compile(r"([^\s:：「」]+?)[ \t]*[:：][ \t]*(" + VALUE_OPEN + ")?")
_SWALLOWED = re.compile(r"\n[ \t]*[^\W\d]\w*[ \t]*[:：][ \t]*" + VALUE_OPEN)
_TAM_SIGN = re.compile(
    re.escape(START_MARKER) + "|" + re.escape(END_MARKER) + r"|command\d*[ \t]*[:：][ \t]*" + VALUE_OPEN, re.IGNORECASE
)
_COMMAND = re.compile(r"command(\d*)")
_ENVELOPE_START = re.compile(r"^[ \t]*(?:thought[ \t]*=|\[tool_call\])", re.MULTILINE)
_INT = re.compile(r"[+-]?\d+(?:_\d+)*", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_BOOLS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}
_NULLS = frozenset({"null", "none"})


class TamError(EnvelopeError):
    """A TAM text that cannot run: INVALID_ENVELOPE (grammar), NAME_NOT_FOUND (tool), INVALID_ARGUMENT (value).

    Raised before anything runs; `info` points at the line of the TAM text.
    """


class CoercionError(ValueError):
    """A value's text does not fit its parameter's type; `expected` says what would."""

    def __init__(self, expected: str, reason: str = "") -> None:
        super().__init__(reason or expected)
        self.expected = expected
        self.reason = reason


@dataclass(frozen=True)
class TamParam:
    """One ``key:「始」value「末」`` of a step."""

    key: str
    """As written, without a chain's step number (``filePath`` for ``filePath2``)."""
    value: str
    """Verbatim: everything between 「始」 and 「末」."""
    line: int
    column: int


@dataclass(frozen=True)
class TamStep:
    """One tool call of a TAM text, in run order."""

    tool: str
    """The tool id as written (whitespace around it removed)."""
    params: tuple[TamParam, ...]
    line: int
    """Where its ``command`` key is."""
    column: int
    number: int | None
    """N of ``commandN``; None for the ``command`` of a single call."""
    block: int
    """Which block (1-based) it came from."""

    def arguments(self) -> dict[str, str]:
        return {p.key: p.value for p in self.params}


@dataclass(frozen=True)
class PlannedStep:
    """A resolved step of a translated program, with where it was written."""

    step: int
    tool: str
    line: int
    column: int
    source_line: str
    program_lines: range
    parameters: tuple[tuple[str, int, int, str], ...] = ()
    """(parameter name, line, column, source line) of each value given."""

    def position(self, parameter: str | None) -> tuple[int, int, str]:
        """Where `parameter`'s value was written, else where the step's command is."""
        found = (at[1:] for at in self.parameters if at[0] == parameter)
        return next(found, (self.line, self.column, self.source_line))


class _Source:
    """The TAM text with fast offset -> (line, column) and the error builder."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0, *(m.end() for m in re.finditer("\n", text))]

    def where(self, offset: int) -> tuple[int, int]:
        index = bisect.bisect_right(self.starts, offset) - 1
        return index + 1, offset - self.starts[index] + 1

    def line_text(self, line: int) -> str:
        end = self.starts[line] - 1 if line < len(self.starts) else len(self.text)
        return self.text[self.starts[line - 1] : end].rstrip()

    def error(
        self,
        message: str,
        position: int | tuple[int, int],
        *,
        code: str = ErrorCode.INVALID_ENVELOPE,
        example: str | None = MINIMAL_TAM,
        solution: str | None = None,
        **fields: str | None,
    ) -> TamError:
        line, column = self.where(position) if isinstance(position, int) else position
        if solution is None and example is not None:
            solution = f"Send TAM blocks shaped like this:\n{example}"
        return TamError(
            ErrorInfo(
                code=code,
                message=message,
                line=line,
                column=column,
                source_line=self.line_text(line),
                solution=solution,
                **fields,
            )
        )


def _norm(key: str) -> str:
    return key.replace("_", "").casefold()


def looks_like_tam(text: str) -> bool:
    """Whether `text` is meant as TAM: a TAM marker or ``command:「始」`` before any ATTP envelope start.

    An ATTP envelope (``thought =`` or ``[tool_call]`` at a line start) that comes first wins, so an
    envelope whose code merely mentions TAM stays an envelope.
    """
    sign = _TAM_SIGN.search(text)
    return sign is not None and _ENVELOPE_START.search(text, 0, sign.start()) is None


# ---------------------------------------------------------------- parsing


@dataclass(frozen=True)
class _Entry:
    key: str
    value: str
    offset: int


def parse_tam(text: str) -> list[TamStep]:
    """Every step of every block of `text`, in run order; `TamError` (INVALID_ENVELOPE) at the faulty line."""
    source = _Source(text)
    steps: list[TamStep] = []
    position, block = 0, 0
    while True:
        start = text.find(START_MARKER, position)
        _check_orphan_end(source, position, len(text) if start < 0 else start)
        if start < 0:
            break
        block += 1
        entries, position = _read_block(source, start)
        steps.extend(_block_steps(source, entries, start, block))
    if not steps:
        raise source.error(
            f"no TAM block was found: a call starts with {START_MARKER} and ends with {END_MARKER}",
            0,
            parameter_name="envelope",
            received=short_repr(text[:80]),
            expected=f"{START_MARKER} ... {END_MARKER}",
        )
    return steps


def _check_orphan_end(source: _Source, begin: int, end: int) -> None:
    """An end marker after parameters but with no start marker before them: a block whose start is missing."""
    orphan = source.text.find(END_MARKER, begin, end)
    first = _KEY.search(source.text, begin, orphan) if orphan >= 0 else None
    if first is not None:
        raise source.error(
            f"the parameters from here to the {END_MARKER} of line {source.where(orphan)[0]} have no "
            f"{START_MARKER} before them, so they belong to no block and would be ignored",
            first.start(),
            expected=f"{START_MARKER} on the line before",
        )


def _read_block(source: _Source, start: int) -> tuple[list[_Entry], int]:
    text, entries = source.text, list[_Entry]()
    i = start + len(START_MARKER)
    last_close = -1
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            line = source.where(start)[0]
            raise source.error(
                f"the TAM block that starts at line {line} has no {END_MARKER}",
                start,
                expected=f"{END_MARKER} after the block's last parameter",
            )
        if text.startswith(END_MARKER, i):
            return entries, i + len(END_MARKER)
        if text.startswith(START_MARKER, i):
            line = source.where(start)[0]
            raise source.error(
                f"a new {START_MARKER} starts before the block of line {line} ended; close that block "
                f"with {END_MARKER} first",
                i,
                expected=END_MARKER,
            )
        if text[i] == "#":
            eol = text.find("\n", i)
            i = len(text) if eol < 0 else eol
            continue
        match = _KEY.match(text, i)
        if match is None:
            raise _stray(source, i, last_close, entries[-1] if entries else None)
        if len(match.group(1)) > MAX_KEY_CHARS:
            raise source.error(
                f"a key of {len(match.group(1)):,} characters; keys are parameter names", i, expected="a short key"
            )
        close = text.find(VALUE_CLOSE, match.end())
        if close < 0:
            raise source.error(
                f"the value of {match.group(1)!r} has no closing {VALUE_CLOSE}",
                i,
                parameter_name=match.group(1),
                expected=f"{match.group(1)}:{VALUE_OPEN}value{VALUE_CLOSE}",
            )
        entries.append(_Entry(match.group(1), text[match.end() : close], i))
        i = last_close = close + len(VALUE_CLOSE)


def _stray(source: _Source, i: int, last_close: int, previous: _Entry | None) -> TamError:
    text = source.text
    eol = text.find("\n", i)
    snippet = text[i : len(text) if eol < 0 else eol].strip()
    allowed = f"Between parameters only key:{VALUE_OPEN}value{VALUE_CLOSE}, # comments and {END_MARKER} may appear"
    loose = _LOOSE_KEY.match(text, i)
    if previous is not None and "\n" not in text[last_close:i]:
        message = (
            f"unexpected text right after the {VALUE_CLOSE} that ends {previous.key!r} "
            f"(line {source.where(previous.offset)[0]}). A value ends at the first {VALUE_CLOSE}, so no value "
            f"can contain {VALUE_CLOSE} itself; if this text belongs to the value, send the call as Python code "
            "(the code field) instead. Otherwise start each parameter on its own line."
        )
    elif loose is not None and loose.group(2) is None:
        key = loose.group(1)
        message = f"the value of {key!r} is not wrapped: write {key}:{VALUE_OPEN}value{VALUE_CLOSE}"
    elif loose is not None:
        message = f"{loose.group(1)!r} is not a valid key: keys are letters, digits and underscores. {allowed}."
    elif text.startswith("<|", i):
        message = f"unknown marker inside a TAM block; the block ends with {END_MARKER}. {allowed}."
    else:
        message = f"unexpected text inside a TAM block. {allowed}."
    return source.error(
        message, i, received=short_repr(snippet), expected=f"key:{VALUE_OPEN}value{VALUE_CLOSE} or {END_MARKER}"
    )


def _block_steps(source: _Source, entries: list[_Entry], start: int, block: int) -> list[TamStep]:
    def step_of(selector: _Entry, number: int | None, params: list[tuple[str, _Entry]]) -> TamStep:
        tool = selector.value.strip()
        if not tool:
            raise source.error(f"{selector.key!r} is empty: it must name a tool", selector.offset)
        seen: dict[str, _Entry] = {}
        for key, entry in params:
            if _norm(key) in seen:
                first = source.where(seen[_norm(key)].offset)[0]
                raise source.error(
                    f"{entry.key!r} is given twice for the same step (first at line {first}); keys ignore case "
                    "and underscores",
                    entry.offset,
                    parameter_name=entry.key,
                )
            seen[_norm(key)] = entry
        kept = tuple(TamParam(key, e.value, *source.where(e.offset)) for key, e in params)
        return TamStep(tool, kept, *source.where(selector.offset), number, block)

    commands = [(e, m.group(1)) for e in entries if (m := _COMMAND.fullmatch(_norm(e.key)))]
    if not commands:
        keys = ", ".join(e.key for e in entries) or "nothing"
        raise source.error(
            f"this TAM block has no command naming the tool (it has {keys})",
            start,
            expected=f"command:{VALUE_OPEN}tool name{VALUE_CLOSE}",
        )
    plain = [e for e, digits in commands if not digits]
    numbered = [(e, int(digits)) for e, digits in commands if digits]
    if not numbered:
        selector = plain[0]
        return [step_of(selector, None, [(e.key, e) for e in entries if e is not selector])]
    if plain:
        raise source.error(
            f"this block mixes {plain[0].key!r} with numbered {numbered[0][0].key!r}: a block is either one call "
            "(command, path, ...) or a chain (command1, path1, command2, ...)",
            plain[0].offset,
            parameter_name=plain[0].key,
            example=CHAIN_TAM,
        )
    selectors: dict[int, _Entry] = {}
    for entry, number in numbered:
        selectors.setdefault(number, entry)
    params: dict[int, list[tuple[str, _Entry]]] = {n: [] for n in selectors}
    chosen = {id(e) for e in selectors.values()}
    for entry in entries:
        if id(entry) in chosen:
            continue
        key = entry.key.rstrip("_")
        digits = re.search(r"\d+$", key)
        if digits is None:
            raise source.error(
                f"{entry.key!r} has no step number; in a chain every key ends with the number of its command "
                f"({entry.key}1, {entry.key}2, ...)",
                entry.offset,
                parameter_name=entry.key,
                example=CHAIN_TAM,
            )
        run = digits.group()
        cut = next((k for k in range(len(run)) if int(run[k:]) in selectors), None)
        name = key[: digits.start() + (cut or 0)]
        if cut is None or not _norm(name):
            number = int(run)
            raise source.error(
                f"{entry.key!r} belongs to step {number}, but the block has no command{number}"
                if cut is None
                else f"{entry.key!r} is not a parameter name",
                entry.offset,
                parameter_name=entry.key,
                expected=f"one of the block's steps: {', '.join(f'command{n}' for n in sorted(selectors))}",
                example=CHAIN_TAM,
            )
        params[int(run[cut:])].append((name, entry))
    return [step_of(selectors[n], n, params[n]) for n in sorted(selectors)]


# ---------------------------------------------------------------- coercion


def _unwrap(annotation: Any) -> Any:
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif hasattr(annotation, "__supertype__"):  # typing.NewType
            annotation = annotation.__supertype__
        else:
            return annotation


def _kind(annotation: Any) -> str:
    """One of: str, any, none, bool, int, float, array, object, literal, union."""
    annotation = _unwrap(annotation)
    if annotation in (inspect.Parameter.empty, Any, object):
        return "any"
    if annotation is None or annotation is type(None):
        return "none"
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "literal"
    if origin is typing.Union or origin is types.UnionType:
        return "union"
    cls = origin or annotation
    if not isinstance(cls, type):
        return "any"
    checks: tuple[tuple[str, tuple[type, ...]], ...] = (
        ("str", (str,)),
        ("any", (bytes, bytearray)),
        ("bool", (bool,)),
        ("int", (int,)),
        ("float", (float,)),
        ("object", (BaseModel, collections.abc.Mapping)),
        ("array", (collections.abc.Sequence, collections.abc.Set)),
    )
    for kind, bases in checks:
        if issubclass(cls, bases):
            return kind
    return "object" if typing.is_typeddict(cls) or dataclasses.is_dataclass(cls) else "any"


def describe(annotation: Any) -> str:
    """What a TAM value for `annotation` must look like, for error messages."""
    kind = _kind(annotation)
    args = typing.get_args(_unwrap(annotation))
    if kind == "union":
        return " or ".join(dict.fromkeys(describe(member) for member in args))
    if kind == "literal":
        return "one of " + ", ".join(repr(v) for v in args)
    return {
        "str": "text",
        "any": "text, or a JSON array/object",
        "none": "null",
        "bool": "true or false",
        "int": "an integer such as 42",
        "float": "a number such as 2.5",
        "array": 'a JSON array such as ["a", "b"]',
        "object": 'a JSON object such as {"key": "value"}',
    }[kind]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def _json(text: str, want: str, expected: str) -> Any:
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise CoercionError(expected, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise CoercionError(expected, f"not usable JSON: {exc}") from None
    if (want == "array") != isinstance(value, list) or (want == "object") != isinstance(value, dict):
        raise CoercionError(expected, f"a JSON {type(value).__name__} where {expected} was expected")
    return value


def _json_shape(text: str) -> str | None:
    stripped = text.strip()
    return {"[": "array", "{": "object"}.get(stripped[:1]) if stripped[-1:] in "]}" else None


def coerce_value(text: str, annotation: Any) -> Any:
    """The JSON-safe value a parameter annotated `annotation` receives from TAM value `text`.

    ``str`` (and a union with ``str``): the text, verbatim. ``int``: ``42``, ``-7``, ``1_000``.
    ``float``: ``2.5``, ``1e-3``, ``3`` (finite only). ``bool``: true/false, yes/no, on/off, 1/0 (any
    case). ``None`` in a union without ``str``: ``null`` or ``none``. ``Literal``: one of its values.
    Lists, tuples, sets, dicts, models, TypedDicts: JSON text of an array or object. No annotation,
    ``Any`` and other classes: JSON text of an array or object, else the text verbatim. Only ``str``
    keeps surrounding whitespace; every other kind is read from the stripped text. Element types and
    constraints are checked afterwards by the tool's own validation.

    Raises:
        CoercionError: the text does not fit; `expected` describes what would.
    """
    kind = _kind(annotation)
    expected = describe(annotation)
    if kind == "str":
        return text
    if kind == "any":
        shape = _json_shape(text)
        if shape is not None:
            try:
                return _json(text, shape, expected)
            except CoercionError:
                return text
        return text
    if kind == "union":
        return _coerce_union(text, typing.get_args(_unwrap(annotation)), expected)
    stripped = text.strip()
    if kind in ("array", "object"):
        return _json(stripped, kind, expected)
    if kind == "literal":
        for choice in typing.get_args(_unwrap(annotation)):
            if isinstance(choice, str) and choice in (text, stripped):
                return choice
            if not isinstance(choice, str) and choice is not None:
                try:
                    if coerce_value(stripped, type(choice)) == choice:
                        return choice
                except CoercionError:
                    continue
        raise CoercionError(expected)
    if not stripped:
        raise CoercionError(expected, "the value is empty; leave the parameter out to use its default")
    if kind == "none":
        if stripped.casefold() in _NULLS:
            return None
    elif kind == "bool":
        if stripped.casefold() in _BOOLS:
            return _BOOLS[stripped.casefold()]
    elif kind == "int":
        if _INT.fullmatch(stripped):
            try:
                return int(stripped)
            except ValueError as exc:  # more digits than Python converts
                raise CoercionError(expected, str(exc)) from None
    elif _FLOAT.fullmatch(stripped) and math.isfinite(value := float(stripped)):
        return value
    raise CoercionError(expected)


def _coerce_union(text: str, members: tuple[Any, ...], expected: str) -> Any:
    kinds = [_kind(member) for member in members]
    if "str" in kinds:
        shape = _json_shape(text)
        if shape in kinds:
            try:
                return _json(text, shape, expected)
            except CoercionError:
                pass
        return text
    if "none" in kinds and text.strip().casefold() in _NULLS:
        return None
    reasons = []
    for member, kind in zip(members, kinds, strict=True):
        if kind == "none":
            continue
        try:
            return coerce_value(text, member)
        except CoercionError as exc:
            if exc.reason:
                reasons.append(exc.reason)
    raise CoercionError(expected, "; ".join(reasons))


# ---------------------------------------------------------------- translation


@dataclass(frozen=True)
class _Call:
    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    positions: dict[str, tuple[int, int]]

    def expression(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.name}({', '.join(parts)})"


@dataclass(frozen=True)
class TamProgram:
    """A TAM text translated for the sandbox: the program, and where each of its steps was written."""

    code: str
    steps: tuple[PlannedStep, ...]

    def step_at(self, program_line: int | None) -> PlannedStep | None:
        """The step whose code holds `program_line` of `code`."""
        return next((s for s in self.steps if program_line in s.program_lines), None)

    def failure(self, result: Any) -> ErrorInfo | None:
        """The run's error when a step failed (`result` is the run's result), pointing at that step's TAM line."""
        if not isinstance(result, dict) or result.get("ok") is not False:
            return None
        number, records = result.get("failed_step"), result.get("steps")
        if not isinstance(number, int) or not 1 <= number <= len(self.steps) or not isinstance(records, list):
            return None
        record = next((r for r in records if isinstance(r, dict) and r.get("step") == number), {})
        error = record.get("error")
        if not isinstance(error, dict):
            return None
        planned = self.steps[number - 1]
        ran = self.steps[: number - 1]
        advice = [str(error["solution"]).rstrip(".") + "."] if error.get("solution") else []
        if ran:
            listed = ", ".join(f"{s.step} ({s.tool})" for s in ran)
            advice.append(
                f"Step {listed} already ran; its effects stay."
                if len(ran) == 1
                else f"Steps {listed} already ran; their effects stay."
            )
        if len(self.steps) > 1:
            rest = " together with the steps after it, which did not run" if number < len(self.steps) else ""
            advice.append(f"Fix step {number} and send it again{rest}.")
        prefix = f"step {number} of {len(self.steps)} ({planned.tool}) failed: " if len(self.steps) > 1 else ""
        fields = {k: str(error[k]) for k in ("parameter_name", "suggested_value") if error.get(k) is not None}
        line, column, source_line = planned.position(fields.get("parameter_name"))
        return ErrorInfo(
            code=str(error.get("code") or ErrorCode.TOOL_ERROR),
            message=prefix + str(error.get("message", "")),
            line=line,
            column=column,
            source_line=source_line,
            tool_name=str(error.get("tool_name") or planned.tool),
            solution=" ".join(advice) or None,
            **fields,
        )

    def relocate(self, info: ErrorInfo) -> ErrorInfo:
        """`info` of the run (a limit, a timeout) with its position moved from the program to the TAM text."""
        planned = self.step_at(info.line)
        if planned is None:
            return info.model_copy(update={"line": None, "column": None, "source_line": None})
        return info.model_copy(
            update={
                "message": f"step {planned.step} ({planned.tool}): {info.message}",
                "line": planned.line,
                "column": planned.column,
                "source_line": planned.source_line,
                "tool_name": info.tool_name or planned.tool,
            }
        )


def tam_program(text: str, registry: ToolRegistry) -> str:
    """The sandbox program for the TAM blocks in `text` (see `translate_tam`)."""
    return translate_tam(text, registry).code


def translate_tam(text: str, registry: ToolRegistry, *, max_steps: int | None = None) -> TamProgram:
    """Parse, resolve every tool, coerce and validate every value, and emit the program. Nothing runs.

    `max_steps` (the ``max_tool_calls`` setting) refuses a text with more steps up front, rather
    than running the first ones and stopping with TOOL_CALL_LIMIT halfway.

    Raises:
        TamError: INVALID_ENVELOPE, NAME_NOT_FOUND, INVALID_ARGUMENT or TOOL_CALL_LIMIT, at the line of
            the TAM text.
    """
    source = _Source(text)
    steps = parse_tam(text)
    if max_steps is not None and len(steps) > max_steps:
        over = steps[max_steps]
        raise source.error(
            f"the TAM text has {len(steps)} steps; at most {max_steps} tool calls may run in one call",
            (over.line, over.column),
            code=ErrorCode.TOOL_CALL_LIMIT,
            example=None,
            received=f"{len(steps)} steps",
            expected=f"at most {max_steps} steps",
            solution=f"Send the first {max_steps} steps now and the rest in a later call.",
        )
    calls = [_plan(source, step, registry) for step in steps]
    taken = {*registry.callable_names(), *registry.packs, *META_SIGNATURES, *RESERVED_NAMES}
    return _emit(source, steps, calls, taken)


def _swallow_note(step: TamStep) -> str:
    """A value holding ``key:「始」`` on a new line usually means a missing 「末」 before it."""
    for key, value, line in [("command", step.tool, step.line), *((p.key, p.value, p.line) for p in step.params)]:
        if _SWALLOWED.search("\n" + value if key == "command" else value):
            return (
                f" Note: the value of {key!r} (line {line}) contains a 'key:{VALUE_OPEN}' line; if a {VALUE_CLOSE} "
                "is missing there, that value swallowed the parameters after it."
            )
    return ""


def _resolve(source: _Source, step: TamStep, registry: ToolRegistry) -> tuple[str, inspect.Signature, Any]:
    """(name to call, signature, Tool or None for help/tools) of the step's tool id."""
    written = step.tool
    names = [*registry.callable_names(), *META_SIGNATURES]

    def found(name: str) -> tuple[str, inspect.Signature, Any]:
        tool = registry.resolve(name)
        return (name, META_SIGNATURES[name], None) if tool is None else (tool.name, tool.signature, tool)

    def match(wanted: str, pool: list[str]) -> str | None:
        if wanted in pool:
            return wanted
        hits = {n for n in pool if _norm(n) == _norm(wanted)}
        targets = {getattr(registry.resolve(n), "name", n) for n in hits}
        if len(targets) > 1:
            raise not_found(f"{written!r} matches several tools ({', '.join(sorted(hits))}); write the exact name")
        return min(hits) if hits else None

    def not_found(message: str, suggestion: str | None = None) -> TamError:
        catalog = ", ".join(sorted(registry.tools)[:40])
        return source.error(
            message + (f"; did you mean {suggestion}?" if suggestion else "") + _swallow_note(step),
            (step.line, step.column),
            code=ErrorCode.NAME_NOT_FOUND,
            example=None,
            parameter_name="command",
            received=short_repr(written),
            suggested_value=suggestion,
            solution=f"Name a tool as read_file, files:read_file or files.read_file. The tools: {catalog}.",
        )

    qualified = re.fullmatch(r"([^:.]+)[:.]([^:.]+)", written)
    if written not in names and qualified is not None:
        pack_written, tool_written = (part.strip() for part in qualified.groups())
        pack = match(pack_written, list(registry.packs))
        if pack is None:
            hint = match(tool_written, names) or _suggest(tool_written, names)
            raise not_found(f"no toolpack {pack_written!r} (toolpacks: {', '.join(registry.packs)})", hint)
        member = match(tool_written, registry.namespaces()[pack])
        if member is None:
            raise not_found(f"toolpack {pack!r} has no tool {tool_written!r}", _suggest(tool_written, names))
        return found(member)
    name = match(written, names)
    if name is None:
        raise not_found(f"no tool {written!r}", _suggest(written, names))
    return found(name)


def _suggest(written: str, names: list[str]) -> str | None:
    tail = re.split(r"[:.]", written)[-1].strip()
    for probe in (written, tail):
        if hit := suggest(probe, names):
            return hit
    normal = {_norm(n): n for n in names}
    hit = suggest(_norm(tail), normal)
    return normal[hit] if hit else None


def _plan(source: _Source, step: TamStep, registry: ToolRegistry) -> _Call:
    name, signature, tool = _resolve(source, step, registry)
    shown = tool.signature_text() if tool is not None else f"{name}{signature}"
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    regular = {p.name: p for p in signature.parameters.values() if p.kind not in variadic}
    takes_extra = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())

    def invalid(message: str, position: tuple[int, int], **fields: str | None) -> TamError:
        return source.error(
            message,
            position,
            code=ErrorCode.INVALID_ARGUMENT,
            example=None,
            tool_name=name,
            solution=f"Give the parameters of {shown}, each as key:{VALUE_OPEN}value{VALUE_CLOSE}.",
            **fields,
        )

    values: dict[str, Any] = {}
    lines: dict[str, tuple[int, int]] = {}
    for param in step.params:
        target = regular.get(param.key)
        if target is None:
            candidates = [p for p in regular.values() if _norm(p.name) == _norm(param.key)]
            target = candidates[0] if len(candidates) == 1 else None
        if target is None:
            if takes_extra and param.key.isidentifier() and not keyword.iskeyword(param.key) and param.key[0] != "_":
                values[param.key] = param.value
                continue
            normal = {_norm(p): p for p in regular}
            guess = suggest(param.key, regular) or normal.get(suggest(_norm(param.key), normal) or "")
            raise invalid(
                f"{name}() has no parameter {param.key!r}" + (f"; did you mean {guess!r}?" if guess else "")
                + _swallow_note(step),
                (param.line, param.column),
                parameter_name=param.key,
                expected=shown,
                suggested_value=guess,
            )  # fmt: skip
        try:
            values[target.name] = coerce_value(param.value, target.annotation)
        except CoercionError as exc:
            reason = f" ({exc.reason})" if exc.reason else ""
            raise invalid(
                f"{name}(): {param.key!r} must be {exc.expected}{reason}",
                (param.line, param.column),
                parameter_name=target.name,
                received=short_repr(param.value),
                expected=exc.expected,
            ) from None
        lines[target.name] = (param.line, param.column)
    missing = [p.name for p in regular.values() if p.default is inspect.Parameter.empty and p.name not in values]
    if missing:
        raise invalid(
            f"{name}() needs {', '.join(repr(m) for m in missing)}" + _swallow_note(step),
            (step.line, step.column),
            parameter_name=missing[0],
            expected=shown,
        )
    args: list[Any] = []
    for p in regular.values():
        if p.kind is inspect.Parameter.POSITIONAL_ONLY and p.name in values:
            args.append(values.pop(p.name))
        elif p.kind is inspect.Parameter.POSITIONAL_ONLY and any(
            q.kind is inspect.Parameter.POSITIONAL_ONLY and q.name in values for q in regular.values()
        ):
            raise invalid(f"{name}() needs {p.name!r} before the later parameters", (step.line, step.column))
    if tool is not None:
        bound = tool.bind(args, values)
        if isinstance(bound, ErrorInfo):
            line, column = lines.get(bound.parameter_name or "", (step.line, step.column))
            raise TamError(
                bound.model_copy(update={"line": line, "column": column, "source_line": source.line_text(line)})
            )
    return _Call(name, tuple(args), values, lines)


class _Fresh:
    """Program variable names that shadow no tool, pack or sandbox built-in."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = set(taken)

    def __call__(self, base: str) -> str:
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}{n}"
        self.taken.add(name)
        return name


def _emit(source: _Source, steps: list[TamStep], calls: list[_Call], taken: set[str]) -> TamProgram:
    fresh = _Fresh(taken)
    log, failed, value, caught, record = (fresh(f"tam_{n}") for n in ("steps", "failed", "value", "error", "record"))
    fields = ("code", "message", "tool_name", "parameter_name", "suggested_value", "solution")
    lines = [
        f"def {record}(error):",
        "    info = {" + ", ".join(f"{f!r}: error.{f}" for f in fields) + "}",
        "    return {key: info[key] for key in info if info[key] is not None}",
        f"{log} = []",
        f"{failed} = 0",
    ]
    planned = []
    for number, (step, call) in enumerate(zip(steps, calls, strict=True), start=1):
        head = f"'step': {number}, 'tool': {call.name!r}"
        first = len(lines) + 1
        lines += [
            f"# step {number}: {call.name} (TAM line {step.line})",
            f"if {failed}:",
            f"    {log}.append({{{head}, 'ok': False, 'skipped': True}})",
            "else:",
            "    try:",
            f"        {value} = {call.expression()}",
            f"        {log}.append({{{head}, 'ok': True, 'result': {value}}})",
            f"    except ToolError as {caught}:",
            f"        {failed} = {number}",
            f"        {log}.append({{{head}, 'ok': False, 'error': {record}({caught})}})",
        ]
        where = (step.line, step.column, source.line_text(step.line))
        given = tuple((name, *at, source.line_text(at[0])) for name, at in call.positions.items())
        planned.append(PlannedStep(number, call.name, *where, range(first, len(lines) + 1), given))
    lines += [
        f"if {failed}:",
        f"    __result__ = {{'ok': False, 'failed_step': {failed}, 'steps': {log}}}",
        "else:",
        f"    __result__ = {{'ok': True, 'steps': {log}}}",
    ]
    return TamProgram("\n".join(lines) + "\n", tuple(planned))
