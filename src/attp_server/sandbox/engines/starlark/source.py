"""A Starlark program on its way to starlark-rust, and starlark-rust's error reports on their way back.

Before parsing: f-strings become ``"...".format(...)`` calls (starlark-rust's own f-strings take bare
names only, and models write ``f"{page['name']}: {score:.1f}"``), keeping every line where it was;
and trees too deep for starlark-rust's recursive compiler (it overflows the native stack near a
thousand levels) are refused. Parse errors become `SyntaxError` / `ImportForbidden` with the
model's line and column. `message` and `location` read starlark-rust's multi-line reports.

Imports ``starlark`` only inside `Source.parse` and `dialect`, so it loads without the extra.
Imports nothing from the rest of ``server`` outside the sandbox.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from typing import TYPE_CHECKING

from attp_server.sandbox.limits import Abort

if TYPE_CHECKING:
    import starlark

PROGRAM_FILE = "program.star"
EXTRA = "attp-server[starlark]"
INSTALL = f"pip install '{EXTRA}'"
MAX_NESTING = 200
"""Deepest syntax tree accepted (programs rarely pass 30; starlark-rust's compiler crashes near 1,000)."""


class ImportForbidden(Abort):
    code = "IMPORT_FORBIDDEN"


class EngineUnavailable(Abort):
    code = "INVALID_ARGUMENT"


def missing_extra_message() -> str:
    return f"engine 'starlark' needs the optional extra starlark-pyo3: install it with {INSTALL}"


def dialect() -> starlark.Dialect:
    """Python habits that Starlark allows: top-level for/if, def, lambda, f-strings; never load()."""
    try:
        import starlark
    except ImportError:
        raise EngineUnavailable(missing_extra_message()) from None
    chosen = starlark.Dialect.extended()
    chosen.enable_f_strings = True  # only bare names reach it: `rewrite_fstrings` handles the rest
    chosen.enable_load = False
    chosen.enable_top_level_stmt = True
    return chosen


_ADVICE = {
    "while": "Starlark has no while loop: use for i in range(n): ... with break.",
    "try": "Starlark has no try/except: a failed tool call ends the run with its error.",
    "except": "Starlark has no try/except: a failed tool call ends the run with its error.",
    "raise": "Starlark has no raise: call fail('message') to stop with an error.",
    "class": "Starlark has no classes: use dicts, or struct(field=value).",
    "with": "Starlark has no with statement.",
    "yield": "Starlark has no generators: build a list instead.",
}


class Source:
    """One program: the text starlark-rust gets, the lines that text changed, the line of a final expression."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.text, self.rewritten = rewrite_fstrings(code)
        self.last_expression_line: int | None = None

    def parse(self, chosen: starlark.Dialect) -> starlark.AstModule:
        """Parse, or raise `SyntaxError` / `ImportForbidden` placed where the model wrote the problem."""
        self._check_python_view()
        try:
            import starlark
        except ImportError:
            raise EngineUnavailable(missing_extra_message()) from None
        try:
            return starlark.parse(PROGRAM_FILE, self.text, chosen)
        except starlark.StarlarkError as exc:
            raise self._syntax_error(str(exc)) from None

    def line(self, number: int | None) -> str | None:
        """The model's own line `number` (1-based), or None."""
        lines = self.code.splitlines()
        return lines[number - 1] if number is not None and 0 < number <= len(lines) else None

    def where(self, text: str) -> tuple[int | None, int | None]:
        """The 1-based line and column of a starlark-rust report; no column on lines that were rewritten."""
        line, column = location(text)
        return line, None if line in self.rewritten else column

    def _check_python_view(self) -> None:
        """Refuse trees too deep for starlark-rust's compiler; find the line of a final expression."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escapes warn in Python, not in Starlark
                tree = ast.parse(self.text)
        except (RecursionError, MemoryError):
            raise _too_deep() from None
        except SyntaxError as exc:
            if "too many nested" in str(exc.msg) or "too many levels" in str(exc.msg):
                raise _too_deep() from None
            return  # not Python syntax: starlark-rust has the last word
        except ValueError:
            return
        stack: list[tuple[ast.AST, int]] = [(tree, 1)]
        while stack:
            node, depth = stack.pop()
            if depth > MAX_NESTING:
                raise _too_deep()
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            self.last_expression_line = tree.body[-1].lineno

    def _syntax_error(self, text: str) -> BaseException:
        problem = message(text).removeprefix("Parse error: ")
        line, column = self.where(text)
        word = re.search(r"reserved keyword `(\w+)`", problem)
        if (word and word.group(1) in ("import", "from")) or "`load` is not allowed" in problem:
            error: BaseException = ImportForbidden(
                "import and load are not available in Starlark: the tools, json and math are already there by name"
            )
            error.attp_line = (line, None if column is None else column - 1)  # type: ignore[attr-defined]
            return error
        advice = _ADVICE.get(word.group(1), "") if word else ""
        if "unexpected symbol '**'" in problem:
            advice = "Starlark has no ** operator: use pow(x, y)."
        elif re.search(r"unexpected symbol ',' here, expected one of \"?:", problem):
            advice = "Starlark has no sets: write a list [a, b], or a dict {a: True, b: True}."
        syntax = SyntaxError(f"invalid Starlark syntax: {problem}" + (f". {advice}" if advice else ""))
        syntax.lineno, syntax.offset = line, column
        return syntax


def _too_deep() -> SyntaxError:
    return SyntaxError("the program is nested too deeply; use fewer nested brackets, calls and lambdas")


# ---------------------------------------------------------------- f-strings

_FSTRING_PREFIX = re.compile(r"([rRfF]{1,2})('''|\"\"\"|'|\")", re.ASCII)
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+ splits f-strings into tokens
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


def rewrite_fstrings(source: str) -> tuple[str, frozenset[int]]:
    """Rewrite each f-string as ``"...".format(...)``, keeping every line where it was.

    Returns the new source and the lines that changed (columns reported there are not the model's).
    Anything that does not tokenize is left alone for starlark-rust to report.
    """
    if not re.search(r"[fF][rR]?['\"]|[rR][fF]['\"]", source):
        return source, frozenset()
    lines = io.StringIO(source).readlines()  # the same line breaks as tokenize's
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return source, frozenset()
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    spans: list[tuple[tuple[int, int], tuple[int, int]]] = []
    depth, begin = 0, (0, 0)
    for token in tokens:
        if _FSTRING_START is not None and token.type == _FSTRING_START:
            depth, begin = depth + 1, begin if depth else token.start
        elif _FSTRING_END is not None and token.type == _FSTRING_END:
            depth -= 1
            if depth == 0:
                spans.append((begin, token.end))
        elif depth == 0 and token.type == tokenize.STRING:
            prefix = _FSTRING_PREFIX.match(token.string)
            if prefix is not None and "f" in prefix.group(1).lower():
                spans.append((token.start, token.end))
    out: list[str] = []
    changed: set[int] = set()
    position = 0
    for (row, col), (end_row, end_col) in spans:
        start, end = starts[row - 1] + col, starts[end_row - 1] + end_col
        replacement = _format_call(source[start:end])
        if replacement is None:
            continue
        out += [source[position:start], replacement]
        position = end
        changed.update(range(row, end_row + 1))
    out.append(source[position:])
    return "".join(out), frozenset(changed)


def _format_call(literal: str) -> str | None:
    """``f"a {x!r:>5} b"`` -> ``"a {} b".format(_attp_format(repr((x)), ">5"))``; None if malformed."""
    match = _FSTRING_PREFIX.match(literal)
    if match is None:
        return None
    prefix, quote = match.groups()
    body = literal[match.end() : len(literal) - len(quote)]
    template: list[str] = []
    values: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char in "{}" and body.startswith(char * 2, i):
            template.append(char * 2)
            i += 2
        elif char == "}":
            return None
        elif char == "{":
            field = _replacement_field(body, i + 1)
            if field is None:
                return None
            i, expression, conversion, spec = field
            stripped = expression.rstrip()
            if stripped.endswith("=") and not stripped.endswith(("==", "!=", "<=", ">=")):
                template.append(expression.replace("{", "{{").replace("}", "}}"))  # f"{x=}" shows "x=" first
                expression = stripped[:-1]
                conversion = conversion or ("r" if spec is None else None)
            value = f"({expression})"
            if conversion:
                value = f"{'str' if conversion == 's' else 'repr'}({value})"
            if spec:
                spec_value = _format_call("f" + quote + spec + quote) if "{" in spec else quote + spec + quote
                if spec_value is None:
                    return None
                value = f"_attp_format({value}, {spec_value})"
            template.append("{}")
            values.append(value)
        else:
            template.append(char)
            i += 1
    plain = prefix.replace("f", "").replace("F", "")
    return f"{plain}{quote}{''.join(template)}{quote}.format({', '.join(values)})"


def _replacement_field(body: str, i: int) -> tuple[int, str, str | None, str | None] | None:
    """Scan ``expr[!c][:spec]}`` from `i`; return (index after ``}``, expr, conversion, spec)."""
    start, depth, quote = i, 0, ""
    while i < len(body):
        char = body[i]
        if quote:
            if char == "\\":
                i += 1
            elif body.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif char in "'\"":
            quote = char * 3 if body.startswith(char * 3, i) else char
            i += len(quote) - 1
        elif char in "([{":
            depth += 1
        elif char in ")]}" and depth:
            depth -= 1
        elif char == "}" or (char == ":" and not depth) or (char == "!" and not depth and body[i + 1 : i + 2] != "="):
            break
        i += 1
    if i >= len(body) or not body[start:i].strip():
        return None
    expression, conversion, spec = body[start:i], None, None
    if body[i] == "!":
        conversion, i = body[i + 1 : i + 2], i + 2
        if conversion not in ("r", "s", "a") or i >= len(body) or body[i] not in ":}":
            return None
    if body[i] == ":":
        spec_start, nested = i + 1, 0
        i += 1
        while i < len(body) and (body[i] != "}" or nested):
            nested += {"{": 1, "}": -1}.get(body[i], 0)
            i += 1
        if i >= len(body):
            return None
        spec = body[spec_start:i]
    return i + 1, expression, conversion, spec


# ---------------------------------------------------------------- reading starlark-rust's reports

_ERROR_LINE = re.compile(r"^error: (.*?)(?=\n *--> |\Z)", re.MULTILINE | re.DOTALL)
_ARROW = re.compile(r"^ *--> (.*):(\d+):(\d+)$", re.MULTILINE)
_EXPECTED = re.compile(r"(expected one of )(.*)$", re.DOTALL)
MAX_ALTERNATIVES = 6
_FRAME = re.compile(r"^  \* (.*):(\d+), in ", re.MULTILINE)


def message(text: str) -> str:
    """The last ``error: ...`` paragraph of a starlark-rust report, without the source excerpt."""
    found = _ERROR_LINE.findall(text)
    return _EXPECTED.sub(_fewer_alternatives, str(found[-1] if found else text).strip())


def _fewer_alternatives(match: re.Match[str]) -> str:
    """Parse errors list every token the grammar allows (often 50): keep the first few."""
    alternatives = re.findall(r'"(?:[^"\\]|\\.)*"', match.group(2))
    if len(alternatives) <= MAX_ALTERNATIVES:
        return match.group(0)
    rest = len(alternatives) - MAX_ALTERNATIVES
    return f"{match.group(1)}{', '.join(alternatives[:MAX_ALTERNATIVES])}, ... ({rest} more)"


INT32_MAX = 2**31 - 1
_INT32_RANGE = f"from -2**31 to 2**31 - 1 ({INT32_MAX:,})"
_UNPACK_INT = re.compile(r"^Error unpacking value for parameter `(\w+)` of type `[^`]*\bint\b[^`]*`?$")
_TOO_BIG = re.compile(r"^Integer value is too big to fit in i32: (-?\d+)$")
_POSITIONAL = re.compile(r"parameter `a(\d+)`")
_PROGRAM_FUNCTION = re.compile(re.escape(PROGRAM_FILE) + r"\.(\w+)")
_EXPLAINED: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"^Immutable$"),
        "this value cannot be changed: Starlark strings and tuples are immutable; build a new one instead "
        "(e.g. s[:i] + 'x' + s[i + 1:], or list(t) then tuple(...))",
    ),
    (
        re.compile(r"^Object of type `list` has no attribute `sort`$"),
        "Starlark lists have no sort() method: write x = sorted(x) (it takes key= and reverse=)",
    ),
    (
        re.compile(r"^Object of type `dict` has no attribute `(?P<name>\w+)`$"),
        'a dict has no attribute {name}: read the key with d["{name}"] or d.get("{name}")',
    ),
    (
        re.compile(r"^Operation `\.(?P<name>\w+)=` not supported on type `dict`$"),
        'cannot set attribute {name} on a dict: write d["{name}"] = value',
    ),
    (
        re.compile(r"^Operation `\(iter\)` not supported on type `string`$"),
        "a string cannot be looped over in Starlark: loop over s.elems() (its characters), s.split(...) or "
        "s.splitlines()",
    ),
    (
        re.compile(r"^Operation `\(iter\)` not supported on type `(?P<kind>\w+)`$"),
        "a value of type {kind} cannot be looped over: for, list(), enumerate() and zip() take a list, tuple, "
        "dict or range(n)",
    ),
]
"""starlark-rust messages that do not say what to do, and what to say instead (the common mistakes)."""

MISSING_NAMES = {
    "set": "Starlark has no set: use a dict (seen[x] = True, then x in seen) or a list",
    "frozenset": "Starlark has no frozenset: use a dict (seen[x] = True, then x in seen) or a list",
    "isinstance": 'Starlark has no isinstance: compare type(x) == "int" (type() returns the name of the type)',
    "divmod": "Starlark has no divmod: use a // b and a % b",
    "iter": "Starlark has no iterators: loop with for, or index a list",
    "next": "Starlark has no iterators: loop with for, or index a list",
    "open": "a program has no file access: use the file tools (for example read_file)",
    "Exception": "Starlark has no exceptions: call fail(message) to stop with an error",
    "ValueError": "Starlark has no exceptions: call fail(message) to stop with an error",
    "KeyError": "Starlark has no exceptions: check first with `if key in d`",
    "ToolError": "Starlark has no try/except: a failed tool call ends the run with the tool's error",
}
"""Python names models reach for that Starlark lacks, with what to write instead."""


def explain(problem: str, source_line: str | None = None) -> str:
    """starlark-rust's message `problem`, made one a model can act on where it is opaque."""
    unpack = _UNPACK_INT.match(problem)
    if unpack is not None:
        if source_line is not None and re.search(r"\brange\s*\(", source_line):
            return (
                f"range() takes integers {_INT32_RANGE} in Starlark; this range goes past that: loop over fewer "
                "numbers, or split the work into chunks"
            )
        parameter = _POSITIONAL.sub(lambda m: f"argument {m.group(1)}", f"parameter `{unpack.group(1)}`")
        return f"{parameter} takes an integer {_INT32_RANGE} in Starlark; this one is outside that range"
    too_big = _TOO_BIG.match(problem)
    if too_big is not None:
        return (
            f"{int(too_big.group(1)):,} is too big here: Starlark indexes, slice bounds and repeat counts are "
            f"integers {_INT32_RANGE}"
        )
    for pattern, advice in _EXPLAINED:
        found = pattern.match(problem)
        if found is not None:
            return advice.format(**found.groupdict())
    problem = _POSITIONAL.sub(lambda m: f"argument {m.group(1)}", problem)
    return _PROGRAM_FUNCTION.sub(lambda m: f"{m.group(1)}()", problem)


def location(text: str) -> tuple[int | None, int | None]:
    """Where in the program a report points: its ``-->`` span, else the deepest program frame."""
    for file, line, column in reversed(_ARROW.findall(text)):
        if file == PROGRAM_FILE:
            return int(line), int(column)
    frames = [int(line) for file, line in _FRAME.findall(text) if file == PROGRAM_FILE]
    return (frames[-1], None) if frames else (None, None)


def has_location(text: str) -> bool:
    return _ARROW.search(text) is not None
