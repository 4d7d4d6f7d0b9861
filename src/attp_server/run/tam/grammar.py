"""The TAM grammar: markers, `parse_tam` (text to `TamStep`s), `looks_like_tam`, and errors at their source line.

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
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from attp_server.errors import ErrorCode, ErrorInfo, short_repr
from attp_server.run.envelope import EnvelopeError

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

_KEY = re.compile(r"(?<!\w)([^\W\d]\w*)[ \t]*[:：][ \t]*" + VALUE_OPEN)  # (?<!\w): linear search
_LOOSE_KEY = re.compile(r"([^\s:：「」]+?)[ \t]*[:：][ \t]*(" + VALUE_OPEN + ")?")
_SWALLOWED = re.compile(r"\n[ \t]*[^\W\d]\w*[ \t]*[:：][ \t]*" + VALUE_OPEN)
_TAM_SIGN = re.compile(
    re.escape(START_MARKER) + "|" + re.escape(END_MARKER) + r"|command\d*[ \t]*[:：][ \t]*" + VALUE_OPEN, re.IGNORECASE
)
_COMMAND = re.compile(r"command(\d*)")
_ENVELOPE_START = re.compile(r"^[ \t]*(?:thought[ \t]*=|\[tool_call\])", re.MULTILINE)


class TamError(EnvelopeError):
    """A TAM text that cannot run: INVALID_ENVELOPE (grammar), NAME_NOT_FOUND (tool), INVALID_ARGUMENT (value).

    Raised before anything runs; `info` points at the line of the TAM text.
    """


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


class Source:
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


def norm_key(key: str) -> str:
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
    source = Source(text)
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


def _check_orphan_end(source: Source, begin: int, end: int) -> None:
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


def _read_block(source: Source, start: int) -> tuple[list[_Entry], int]:
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


def _stray(source: Source, i: int, last_close: int, previous: _Entry | None) -> TamError:
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


def _block_steps(source: Source, entries: list[_Entry], start: int, block: int) -> list[TamStep]:
    def step_of(selector: _Entry, number: int | None, params: list[tuple[str, _Entry]]) -> TamStep:
        tool = selector.value.strip()
        if not tool:
            raise source.error(f"{selector.key!r} is empty: it must name a tool", selector.offset)
        seen: dict[str, _Entry] = {}
        for key, entry in params:
            if norm_key(key) in seen:
                first = source.where(seen[norm_key(key)].offset)[0]
                raise source.error(
                    f"{entry.key!r} is given twice for the same step (first at line {first}); keys ignore case "
                    "and underscores",
                    entry.offset,
                    parameter_name=entry.key,
                )
            seen[norm_key(key)] = entry
        kept = tuple(TamParam(key, e.value, *source.where(e.offset)) for key, e in params)
        return TamStep(tool, kept, *source.where(selector.offset), number, block)

    commands = [(e, m.group(1)) for e in entries if (m := _COMMAND.fullmatch(norm_key(e.key)))]
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
        if cut is None or not norm_key(name):
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


def swallow_note(step: TamStep) -> str:
    """A value holding ``key:「始」`` on a new line usually means a missing 「末」 before it."""
    for key, value, line in [("command", step.tool, step.line), *((p.key, p.value, p.line) for p in step.params)]:
        if _SWALLOWED.search("\n" + value if key == "command" else value):
            return (
                f" Note: the value of {key!r} (line {line}) contains a 'key:{VALUE_OPEN}' line; if a {VALUE_CLOSE} "
                "is missing there, that value swallowed the parameters after it."
            )
    return ""
