"""The curated `csv`, `io`, `string`, `textwrap`, `difflib` and `tomllib` a program sees.

Text in, text out, each with the size check its amplification needs:

* ``io.StringIO`` is the only file there is: a text buffer whose writes are size-checked (a ``seek``
  past the end followed by a ``write`` would pad with millions of NULs). ``csv.writer`` and
  ``csv.DictWriter`` write only to one; ``csv.reader`` reads any iterable of lines.
* ``csv`` dialects are named by string (``'excel'``, ``'excel-tab'``, ``'unix'``): a dialect object
  would be read attribute by attribute in C, past the allowlist. The field size limit is fixed for the
  worker (every field the input can hold) because changing it would change it for the next run.
* ``string.Template`` counts what it substitutes (``'$a' * 10**6`` with a long ``a``); ``textwrap``
  bounds indents repeated on every line and tabs expanded; ``difflib``'s generators are `Capped`
  iterators, never generator objects (whose frames lead to globals).
* ``tomllib.loads`` reads a TOML text into plain data, no bigger than the text; its ``parse_float`` hook is
  left out (it would call whatever it is given on every float).

Imported by the worker; imports nothing from the rest of ``server`` but ``attp_server.sandbox``.
"""

from __future__ import annotations

import csv as _csv
import difflib as _difflib
import io as _io
import string as _string
import textwrap as _textwrap
import tomllib as _tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, cast

from attp_server.sandbox.limits import MAX_SEQUENCE_LEN, Forbidden, check_size
from attp_server.sandbox.policy import allow_attributes
from attp_server.sandbox.stdlib.containers import register_copier
from attp_server.sandbox.stdlib.iterators import Capped, sized
from attp_server.sandbox.stdlib.namespaces import Namespace

# ---------------------------------------------------------------- io


class StringIO(_io.StringIO):
    """``io.StringIO`` whose writes cannot grow it past the size limit."""

    def __init__(self, initial_value: str | None = "", newline: str | None = "\n") -> None:
        self.crlf = newline == "\r\n"  # each "\n" written becomes two characters
        if isinstance(initial_value, str) and self.crlf:
            check_size("io.StringIO()", len(initial_value) + initial_value.count("\n"))
        super().__init__(initial_value, newline)

    def write(self, text: str) -> int:
        if isinstance(text, str):
            grown = len(text) + (text.count("\n") if self.crlf else 0)
            check_size("io.StringIO.write()", self.tell() + grown)
        return super().write(text)  # writelines() comes here too, line by line


def _copy_buffer(buffer: StringIO) -> StringIO:
    duplicate = StringIO(buffer.getvalue())
    duplicate.seek(buffer.tell())
    return duplicate


register_copier(StringIO, _copy_buffer)
allow_attributes(
    StringIO,
    ("getvalue", "read", "readline", "readlines", "write", "writelines", "seek", "tell", "truncate", "close", "closed",
     "readable", "writable", "seekable"),
)  # fmt: skip


def io_namespace() -> Namespace:
    return Namespace("io", {"StringIO": StringIO})


# ---------------------------------------------------------------- csv

FIELD_SIZE_LIMIT = MAX_SEQUENCE_LEN
"""The worker's csv field size limit: every field a text the sandbox can hold may contain."""


def _dialect(dialect: Any, what: str) -> str:
    if not isinstance(dialect, str):
        raise TypeError(f"{what} dialect must be a name: {', '.join(repr(d) for d in _csv.list_dialects())}")
    return dialect


def _require_buffer(target: Any, what: str) -> None:
    if not isinstance(target, StringIO):
        raise TypeError(
            f"{what} writes to an io.StringIO in the sandbox, not a {type(target).__name__}: "
            "out = io.StringIO(); w = csv.writer(out); w.writerow([...]); text = out.getvalue()"
        )


def _fixed_field_limit() -> None:
    # Process-wide, so set in the worker when a program first reads CSV, never changed by a program.
    if _csv.field_size_limit() != FIELD_SIZE_LIMIT:
        _csv.field_size_limit(FIELD_SIZE_LIMIT)


def reader(lines: Iterable[str], dialect: str = "excel", **options: Any) -> Any:
    """``csv.reader`` over an iterable of lines: a list, ``text.splitlines()`` or an ``io.StringIO``."""
    _fixed_field_limit()
    return _csv.reader(lines, _dialect(dialect, "csv.reader()"), **options)


def writer(target: StringIO, dialect: str = "excel", **options: Any) -> Any:
    """``csv.writer`` into an ``io.StringIO``."""
    _require_buffer(target, "csv.writer()")
    return _csv.writer(target, _dialect(dialect, "csv.writer()"), **options)


class DictReader(_csv.DictReader):  # type: ignore[type-arg]
    """``csv.DictReader`` whose dialect is named by string."""

    def __init__(self, f: Iterable[str], fieldnames: Sequence[str] | None = None, restkey: Any = None,
                 restval: Any = None, dialect: str = "excel", *args: Any, **options: Any) -> None:  # fmt: skip
        _fixed_field_limit()
        super().__init__(f, fieldnames, restkey, restval, _dialect(dialect, "csv.DictReader()"), *args, **options)


class DictWriter(_csv.DictWriter):  # type: ignore[type-arg]
    """``csv.DictWriter`` into an ``io.StringIO``, its dialect named by string."""

    def __init__(self, f: StringIO, fieldnames: Sequence[str], restval: Any = "",
                 extrasaction: Literal["raise", "ignore"] = "raise",
                 dialect: str = "excel", *args: Any, **options: Any) -> None:  # fmt: skip
        _require_buffer(f, "csv.DictWriter()")
        super().__init__(f, fieldnames, restval, extrasaction, _dialect(dialect, "csv.DictWriter()"), *args, **options)


def field_size_limit(*new_limit: Any) -> int:
    """The longest field a reader accepts; fixed in the sandbox."""
    if new_limit:
        raise Forbidden(
            f"csv.field_size_limit() cannot be changed in the sandbox; fields of up to {FIELD_SIZE_LIMIT:,} "
            "characters are read already"
        )
    return FIELD_SIZE_LIMIT


allow_attributes(type(_csv.reader([])), ("line_num",))
allow_attributes(type(_csv.writer(StringIO())), ("writerow", "writerows"))
allow_attributes(DictReader, ("fieldnames", "line_num", "restkey", "restval"))
allow_attributes(DictWriter, ("fieldnames", "restval", "extrasaction", "writeheader", "writerow", "writerows"))


def csv_namespace() -> Namespace:
    members: dict[str, Any] = {
        "reader": reader,
        "writer": writer,
        "DictReader": DictReader,
        "DictWriter": DictWriter,
        "field_size_limit": field_size_limit,
        "list_dialects": _csv.list_dialects,
        "Error": _csv.Error,
    }
    for name in ("QUOTE_ALL", "QUOTE_MINIMAL", "QUOTE_NONE", "QUOTE_NONNUMERIC"):
        members[name] = getattr(_csv, name)
    return Namespace("csv", members)


# ---------------------------------------------------------------- string


class _Counted:
    """The mapping a `Template` substitutes from, adding up the length of what it hands out."""

    def __init__(self, mapping: Any, keywords: Mapping[str, Any]) -> None:
        self.mapping, self.keywords, self.total = mapping, keywords, 0

    def __getitem__(self, key: str) -> Any:
        text = str(self.keywords[key] if key in self.keywords else self.mapping[key])
        self.total += len(text)
        check_size("string.Template substitution", self.total)
        return text


_NO_MAPPING: dict[str, Any] = {}


class Template(_string.Template):
    """``string.Template`` that stops before a substitution grows past the size limit."""

    def substitute(self, mapping: Any = _NO_MAPPING, /, **keywords: Any) -> str:
        return super().substitute(cast(Mapping[str, object], _Counted(mapping, keywords)))

    def safe_substitute(self, mapping: Any = _NO_MAPPING, /, **keywords: Any) -> str:
        return super().safe_substitute(cast(Mapping[str, object], _Counted(mapping, keywords)))


allow_attributes(Template, ("template", "substitute", "safe_substitute", "get_identifiers", "is_valid"))


def capwords(text: str, sep: str | None = None) -> str:
    return _string.capwords(text, sep)


_STRING_CONSTANTS = (
    "ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits", "hexdigits", "octdigits", "punctuation",
    "printable", "whitespace",
)  # fmt: skip


def string_namespace() -> Namespace:
    members: dict[str, Any] = {name: getattr(_string, name) for name in _STRING_CONSTANTS}
    members.update(capwords=capwords, Template=Template)
    return Namespace("string", members)


# ---------------------------------------------------------------- textwrap


class TextWrapper(_textwrap.TextWrapper):
    """``textwrap.TextWrapper`` that refuses indents or tab stops that would multiply the text's size."""

    def wrap(self, text: str) -> list[str]:
        if isinstance(text, str):
            if self.expand_tabs and "\t" in text and isinstance(self.tabsize, int):
                check_size("textwrap (tabs expanded)", len(text) * max(1, self.tabsize))
            indent = max(len(str(self.initial_indent)), len(str(self.subsequent_indent)))
            if indent:  # worst case: one character of text per line, each line indented
                check_size("textwrap (indented lines)", len(text) + (len(text) + 1) * indent)
        return super().wrap(text)


_WRAPPER_OPTIONS = (
    "width", "initial_indent", "subsequent_indent", "expand_tabs", "replace_whitespace", "fix_sentence_endings",
    "break_long_words", "drop_whitespace", "break_on_hyphens", "tabsize", "max_lines", "placeholder",
)  # fmt: skip
allow_attributes(TextWrapper, ("wrap", "fill", *_WRAPPER_OPTIONS))


def wrap(text: str, width: int = 70, **options: Any) -> list[str]:
    return TextWrapper(width=width, **options).wrap(text)


def fill(text: str, width: int = 70, **options: Any) -> str:
    return TextWrapper(width=width, **options).fill(text)


def shorten(text: str, width: int, **options: Any) -> str:
    wrapper = TextWrapper(width=width, max_lines=1, **options)
    return wrapper.fill(" ".join(text.strip().split()))


def indent(text: str, prefix: str, predicate: Callable[[str], Any] | None = None) -> str:
    if isinstance(text, str) and isinstance(prefix, str) and prefix:
        check_size("textwrap.indent()", len(text) + len(text.splitlines()) * len(prefix))
    return _textwrap.indent(text, prefix, predicate)


def textwrap_namespace() -> Namespace:
    return Namespace(
        "textwrap",
        {"wrap": wrap, "fill": fill, "shorten": shorten, "dedent": _textwrap.dedent, "indent": indent,
         "TextWrapper": TextWrapper},
    )  # fmt: skip


# ---------------------------------------------------------------- difflib


def _check_lineterm(a: Sequence[Any], b: Sequence[Any], lineterm: Any) -> None:
    # Each hunk header ends with `lineterm`, and there can be a hunk per line.
    if isinstance(lineterm, str) and len(lineterm) > 1:
        check_size("a diff's line terminators", ((sized(a) or 0) + (sized(b) or 0) + 3) * len(lineterm))


def _checked_diff(name: str) -> Callable[..., Any]:
    make = getattr(_difflib, name)

    def diff(  # noqa: PLR0917  (Python's signature)
        a: Sequence[str], b: Sequence[str], fromfile: str = "", tofile: str = "", fromfiledate: str = "",
        tofiledate: str = "", n: int = 3, lineterm: str = "\n",
    ) -> Any:  # fmt: skip
        _check_lineterm(a, b, lineterm)
        return Capped(make(a, b, fromfile, tofile, fromfiledate, tofiledate, n, lineterm), f"difflib.{name}()")

    diff.__name__ = name
    return diff


def ndiff(a: Sequence[str], b: Sequence[str], *args: Any, **options: Any) -> Any:
    return Capped(_difflib.ndiff(a, b, *args, **options), "difflib.ndiff()")


def restore(delta: Iterable[str], which: int) -> Any:
    return Capped(_difflib.restore(delta, which), "difflib.restore()")


def _grouped_opcodes(matcher: _difflib.SequenceMatcher[Any]) -> Callable[..., Any]:
    def get_grouped_opcodes(n: int = 3) -> Any:
        return Capped(matcher.get_grouped_opcodes(n), "SequenceMatcher.get_grouped_opcodes()")

    return get_grouped_opcodes


def _compare(differ: _difflib.Differ) -> Callable[..., Any]:
    def compare(a: Sequence[str], b: Sequence[str]) -> Any:
        return Capped(differ.compare(a, b), "Differ.compare()")

    return compare


allow_attributes(
    _difflib.SequenceMatcher,
    ("set_seqs", "set_seq1", "set_seq2", "find_longest_match", "get_matching_blocks", "get_opcodes",
     "get_grouped_opcodes", "ratio", "quick_ratio", "real_quick_ratio", "a", "b"),
    wrappers={"get_grouped_opcodes": _grouped_opcodes},
)  # fmt: skip
allow_attributes(_difflib.Differ, ("compare",), wrappers={"compare": _compare})
allow_attributes(_difflib.Match, ("a", "b", "size", "count", "index"))


def difflib_namespace() -> Namespace:
    return Namespace(
        "difflib",
        {
            "SequenceMatcher": _difflib.SequenceMatcher,
            "Differ": _difflib.Differ,
            "get_close_matches": _difflib.get_close_matches,
            "unified_diff": _checked_diff("unified_diff"),
            "context_diff": _checked_diff("context_diff"),
            "ndiff": ndiff,
            "restore": restore,
            "IS_LINE_JUNK": _difflib.IS_LINE_JUNK,
            "IS_CHARACTER_JUNK": _difflib.IS_CHARACTER_JUNK,
        },
    )


# ---------------------------------------------------------------- tomllib


def _toml_loads(text: object) -> dict[str, Any]:
    """A TOML document as a dict (tables as dicts, arrays as lists, dates and times as datetime values)."""
    if not isinstance(text, str):
        hint = " (decode bytes first: data.decode())" if isinstance(text, bytes | bytearray) else ""
        raise TypeError(f"tomllib.loads() takes a str, not {type(text).__name__}{hint}")
    return _tomllib.loads(text)


def tomllib_namespace() -> Namespace:
    return Namespace("tomllib", {"loads": _toml_loads, "TOMLDecodeError": _tomllib.TOMLDecodeError})
