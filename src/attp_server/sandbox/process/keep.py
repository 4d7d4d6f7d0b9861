"""What a program leaves behind for the next call of its session: plain data, and functions by their source.

The worker side of session state (`attp_server.sessions.registry` keeps it in the server between runs). After a
run, `collect` goes through the names the program bound at the top level and turns each into JSON-plus
data: plain values in a tagged form that keeps what JSON would lose (tuples, sets, non-string dict
keys, dates, compiled patterns, decimals and fractions), names of the sandbox's own objects
(``c = collections.Counter``) as references, and functions written with a top-level ``def`` as their
source. Anything else is named with the reason it was not kept. Before the next run, `restore` rebuilds the
values (only plain types come out of `decode`) and returns the functions' definitions as statements that run ahead
of the program, through the sandbox's normal checks like any other code.

Nothing here depends on how the evaluator represents a function: a function is found by its name
(``__name__``) and its ``def`` statement in the program's syntax tree.

Imported by the worker; imports nothing from the rest of ``server``.
"""

from __future__ import annotations

import ast
import base64
import datetime as dt
import decimal as _decimal
import json
import math
import re
import symtable
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from attp_server.sandbox.limits import SizeLimitError
from attp_server.sandbox.stdlib import exact
from attp_server.sandbox.stdlib.namespaces import Namespace

MAX_DEPTH = 100
"""Deepest nesting kept (results and tool arguments have the same limit)."""

FIRST_LINE = 1_000_000
"""Kept definitions are numbered from this line on, so that no error inside one points at a line of the program."""

TAGS = frozenset({"tuple", "set", "frozenset", "dict", "float", "bytes", "datetime", "date", "time", "timedelta",
                  "pattern", "decimal", "fraction", "ref"})  # fmt: skip
"""Every tag of the encoding: a JSON object is always exactly one tag, never a dict of the program's."""

_PLAIN_JSON = frozenset({str, int, float, bool, type(None)})
"""JSON values that decode to themselves."""

_TEXT_AND_WHOLE = frozenset({str, int, bool, type(None)})
"""Items that stand for themselves in JSON."""

_SIDE_EFFECTS = (ast.Call, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)
"""Nodes that would do something when a ``def`` statement is run again (in a decorator or a default value)."""


class NotKept(Exception):
    """A value that cannot be kept; the message says why, for the model."""


# ---------------------------------------------------------------- plain data <-> JSON-plus


class _Encoder:
    """Encodes one value, stopping as soon as it grows past `budget` bytes (an estimate; `measure` is exact)."""

    def __init__(self, refs: Mapping[int, str] | Callable[[], Mapping[int, str]], budget: int) -> None:
        self._refs = refs
        self.budget = budget
        self.size = 0

    @property
    def refs(self) -> Mapping[int, str]:
        if callable(self._refs):  # built on first need: most states hold no reference at all
            self._refs = self._refs()
        return self._refs

    def grow(self, size: int) -> None:
        self.size += size
        if self.size > self.budget:
            raise NotKept("too big")

    def encode(self, value: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise NotKept(f"nested more than {MAX_DEPTH} levels deep")
        cls = value.__class__
        if value is None or cls is bool:
            self.grow(5)
            return value
        if cls is int:
            self.grow(value.bit_length() // 3 + 2)
            return value
        if cls is str:
            self.grow(len(value) + 2)
            return value
        if cls is float:
            self.grow(24)
            return value if math.isfinite(value) else {"float": repr(value)}
        if cls is list:
            self.grow(len(value) + 2)
            if all(item.__class__ in _TEXT_AND_WHOLE for item in value):  # the common case, at a tenth of the cost
                self.grow(sum(len(item) if item.__class__ is str else _whole_size(item) for item in value))
                return list(value)
            return [self.encode(item, depth + 1) for item in value]
        if cls is tuple or cls is set or cls is frozenset:
            self.grow(len(value) + 12)
            return {cls.__name__: [self.encode(item, depth + 1) for item in value]}
        if cls is dict:
            self.grow(2 * len(value) + 10)
            return {"dict": [[self.encode(k, depth + 2), self.encode(v, depth + 2)] for k, v in value.items()]}
        if cls is bytes:
            self.grow(len(value) * 4 // 3 + 12)
            return {"bytes": base64.b64encode(value).decode("ascii")}
        if cls is dt.datetime or cls is dt.date or cls is dt.time:
            self.grow(48)
            if cls is not dt.date and value.tzinfo is not None and not isinstance(value.tzinfo, dt.timezone):
                raise NotKept("a date/time with a time zone other than a fixed offset")
            return {cls.__name__: value.isoformat()}
        if cls is dt.timedelta:
            self.grow(48)
            return {"timedelta": [value.days, value.seconds, value.microseconds]}
        if cls is re.Pattern:
            self.grow(len(value.pattern) + 24)
            pattern = value.pattern
            source = {"bytes": base64.b64encode(pattern).decode("ascii")} if isinstance(pattern, bytes) else pattern
            return {"pattern": [source, value.flags]}
        if cls is _decimal.Decimal:
            text = str(value)
            self.grow(len(text) + 14)
            return {"decimal": text}
        if cls is exact.Fraction:
            self.grow((value.numerator.bit_length() + value.denominator.bit_length()) // 3 + 16)
            return {"fraction": [value.numerator, value.denominator]}
        ref = self.refs.get(id(value))
        if ref is not None:
            self.grow(len(ref) + 10)
            return {"ref": ref}
        if callable(value):
            raise NotKept("a function made at run time, a lambda or one returned by another; a top-level def is kept")
        raise NotKept(f"a {_type_name(value)}, not plain data{_advice(value)}")


def _whole_size(item: int | bool | None) -> int:
    return item.bit_length() // 3 + 2 if isinstance(item, int) else 5


def encode(value: Any, refs: Mapping[int, str] | Callable[[], Mapping[int, str]], budget: int) -> Any:
    """The JSON-plus form of `value`; raises `NotKept` when it is not plain data or grows past `budget` bytes.

    `refs` (or a function that builds it) names the sandbox's own objects (`references`).
    """
    return _Encoder(refs, budget).encode(value)


def measure(encoded: Any) -> int:
    """Bytes of `encoded` as UTF-8 JSON, exactly as it crosses the pipe; raises `NotKept` if it cannot cross."""
    try:
        return len(json.dumps(encoded, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    except UnicodeEncodeError:
        raise NotKept("text with a lone surrogate, which cannot be stored") from None
    except ValueError:  # an integer past the text conversion limit
        raise NotKept("an integer too long to store as text") from None
    except RecursionError:
        raise NotKept(f"nested more than {MAX_DEPTH} levels deep") from None


def decode(data: Any, resolve: Callable[[str], Any], depth: int = 0) -> Any:
    """The value `data` (from `encode`) stands for. Only plain types come out; anything malformed raises ValueError."""
    if depth > MAX_DEPTH + 2:
        raise ValueError("nested too deeply")
    if data is None or data.__class__ in (bool, int, float, str):
        return data
    if data.__class__ is list:
        return [item if item.__class__ in _PLAIN_JSON else decode(item, resolve, depth + 1) for item in data]
    if data.__class__ is not dict or len(data) != 1:
        raise ValueError(f"not an encoded value: {type(data).__name__}")
    ((tag, body),) = data.items()
    if tag in ("tuple", "set", "frozenset"):
        items = [decode(item, resolve, depth + 1) for item in _list(body)]
        return tuple(items) if tag == "tuple" else set(items) if tag == "set" else frozenset(items)
    if tag == "dict":
        out = {}
        for pair in _list(body):
            key, value = _pair(pair)
            out[decode(key, resolve, depth + 2)] = decode(value, resolve, depth + 2)
        return out
    if tag == "float":
        if body not in ("nan", "inf", "-inf"):
            raise ValueError(f"not a float: {body!r}")
        return float(body)
    if tag == "bytes":
        return base64.b64decode(_text(body), validate=True)
    if tag in ("datetime", "date", "time"):
        kind: Any = {"datetime": dt.datetime, "date": dt.date, "time": dt.time}[tag]
        return kind.fromisoformat(_text(body))
    if tag == "timedelta":
        days, seconds, micro = (_int(part) for part in _list(body))
        return dt.timedelta(days=days, seconds=seconds, microseconds=micro)
    if tag == "pattern":
        source, flags = _pair(body)
        pattern = decode(source, resolve, depth + 1) if isinstance(source, dict) else _text(source)
        if not isinstance(pattern, str | bytes):
            raise ValueError("a pattern's source is text or bytes")
        return re.compile(pattern, _int(flags))
    if tag in ("decimal", "fraction"):
        try:  # the module's own checks: a kept number is no bigger than one a program may build
            return exact.Decimal(_text(body)) if tag == "decimal" else exact.Fraction(*(_int(n) for n in _pair(body)))
        except (SizeLimitError, _decimal.InvalidOperation, ZeroDivisionError) as exc:
            raise ValueError(f"not a {tag}: {exc}") from None
    if tag == "ref":
        return resolve(_text(body))
    raise ValueError(f"unknown tag {tag!r}")


_REF = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)?")


def check_encoded(data: Any, depth: int = 0) -> None:
    """Raise ValueError unless `data` is a well-formed `encode` result; builds nothing (the server's re-check)."""
    if depth > MAX_DEPTH + 2:
        raise ValueError("nested too deeply")
    if data is None or data.__class__ in (bool, int, float, str):
        return
    if data.__class__ is list:
        for item in data:
            if item.__class__ not in _PLAIN_JSON:
                check_encoded(item, depth + 1)
        return
    if data.__class__ is not dict or len(data) != 1:
        raise ValueError(f"not an encoded value: {type(data).__name__}")
    ((tag, body),) = data.items()
    if tag in ("tuple", "set", "frozenset"):
        for item in _list(body):
            check_encoded(item, depth + 1)
    elif tag == "dict":
        for pair in _list(body):
            for item in _pair(pair):
                check_encoded(item, depth + 2)
    elif tag == "float":
        if body not in ("nan", "inf", "-inf"):
            raise ValueError(f"not a float: {body!r}")
    elif tag in ("bytes", "datetime", "date", "time", "decimal"):
        _text(body)
    elif tag == "fraction":
        for part in _pair(body):
            _int(part)
    elif tag == "timedelta":
        if len(_list(body)) != 3:
            raise ValueError("a timedelta is [days, seconds, microseconds]")
        for part in body:
            _int(part)
    elif tag == "pattern":
        source, flags = _pair(body)
        if isinstance(source, dict):
            if set(source) != {"bytes"}:
                raise ValueError("a pattern's source is text or bytes")
            _text(source["bytes"])
        else:
            _text(source)
        _int(flags)
    elif tag == "ref":
        if not _REF.fullmatch(_text(body)):
            raise ValueError("not a reference")
    else:
        raise ValueError(f"unknown tag {tag!r}")


def _list(body: Any) -> list[Any]:
    if body.__class__ is not list:
        raise ValueError("expected a list")
    return body


def _pair(body: Any) -> tuple[Any, Any]:
    items = _list(body)
    if len(items) != 2:
        raise ValueError("expected a pair")
    return items[0], items[1]


def _text(body: Any) -> str:
    if body.__class__ is not str:
        raise ValueError("expected text")
    return body


def _int(body: Any) -> int:
    if body.__class__ is not int:
        raise ValueError("expected an integer")
    return body


def _type_name(value: Any) -> str:
    return type(value).__name__


def _advice(value: Any) -> str:
    name = _type_name(value)
    if name in ("Counter", "defaultdict", "OrderedDict"):
        return "; dict(x) is kept"
    if name == "deque":
        return "; list(x) is kept"
    if isinstance(value, BaseException):
        return "; str(e) is kept"
    return ""


# ---------------------------------------------------------------- references to the sandbox's own objects


def references(base: Mapping[str, Any]) -> dict[int, str]:
    """``id(object) -> name`` for every object the sandbox provides: builtins, tools, modules and their members."""
    refs: dict[int, str] = {}
    for name, value in base.items():
        if _plain_constant(value):
            continue
        refs.setdefault(id(value), name)
        if isinstance(value, Namespace):
            for member, item in value.members.items():
                if not member.startswith("_") and not _plain_constant(item):
                    refs.setdefault(id(item), f"{name}.{member}")
    return refs


def resolver(base: Mapping[str, Any]) -> Callable[[str], Any]:
    """Finds a reference made by `references` among this run's own objects (tools and ``random`` are per run)."""

    def resolve(ref: str) -> Any:
        name, _, member = ref.partition(".")
        value = base.get(name)
        if value is None:
            raise ValueError(f"{ref} is not available in this run")
        if not member:
            return value
        if not isinstance(value, Namespace) or member.startswith("_") or member not in value.members:
            raise ValueError(f"{ref} is not available in this run")
        return value.members[member]

    return resolve


def _plain_constant(value: Any) -> bool:
    return value is None or value.__class__ in (bool, int, float, str)


# ---------------------------------------------------------------- functions by their source


def definitions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """The ``def`` statements a program runs at its top level (also inside if/for/while/try/with), last one winning."""
    found: dict[str, ast.FunctionDef] = {}
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        statement = pending.pop(0)
        if isinstance(statement, ast.FunctionDef):
            found.pop(statement.name, None)
            found[statement.name] = statement
            continue
        blocks: Iterable[list[ast.stmt]] = ()
        if isinstance(statement, ast.If | ast.For | ast.While):
            blocks = (statement.body, statement.orelse)
        elif isinstance(statement, ast.Try):
            blocks = (statement.body, *(h.body for h in statement.handlers), statement.orelse, statement.finalbody)
        elif isinstance(statement, ast.With):
            blocks = (statement.body,)
        for block in blocks:
            pending.extend(block)
    return found


def why_not_source(node: ast.FunctionDef) -> str | None:
    """Why running this ``def`` again could do something (call a tool) beyond defining the function."""
    if node.decorator_list:
        return "decorated; a def without decorators is kept"
    defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
    if any(isinstance(n, _SIDE_EFFECTS) for d in defaults for n in ast.walk(d)):
        return "its default values call a function; constant defaults are kept"
    return None


def free_names(node: ast.FunctionDef) -> frozenset[str]:
    """The names a ``def`` reads from outside itself (the program's globals), as Python's own symbol table finds
    them: not its parameters, nor its locals, nor those of the functions and comprehensions inside it. (A
    ``def pat(s)`` does not use a global ``s``.)"""
    tables = [symtable.symtable(ast.unparse(node), "<kept>", "exec")]
    names: set[str] = set()
    while tables:
        table = tables.pop()
        if table.get_type() != "module":
            names.update(
                symbol.get_name() for symbol in table.get_symbols() if symbol.is_global() and symbol.is_referenced()
            )
        tables.extend(table.get_children())
    return frozenset(names)


# ---------------------------------------------------------------- collect and restore


@dataclass
class Collected:
    """A session's state after a run, as it crosses to the server (`as_message`)."""

    values: dict[str, Any] = field(default_factory=dict)
    functions: dict[str, str] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)
    """Name -> why it was not kept (for the result's hint)."""

    def as_message(self) -> dict[str, Any]:
        return {"values": self.values, "functions": self.functions, "dropped": list(self.dropped.items())}


def collect(
    symbols: Mapping[str, Any],
    base: Mapping[str, Any],
    tree: ast.Module,
    *,
    max_bytes: int,
    skip: frozenset[str] = frozenset(),
) -> Collected:
    """What the program left in `symbols` (the final symbol table) beyond `base` (the table it started with).

    Values are kept smallest first while they fit in `max_bytes`, so one huge value does not push out
    every other name; functions are kept by their ``def`` source unless they use a name not kept.
    """
    built: dict[int, str] = {}

    def refs() -> Mapping[int, str]:
        if not built:
            built.update(references(base))
        return built

    defs = definitions(tree)
    out = Collected()
    sizes: dict[str, tuple[int, Any]] = {}
    functions: dict[str, ast.FunctionDef] = {}
    for name, value in symbols.items():
        if name in skip or name.startswith("__") or (name in base and base[name] is value):
            continue
        node = defs.get(name)
        if node is not None and callable(value) and getattr(value, "__name__", None) == name:
            reason = why_not_source(node)
            if reason is None:
                functions[name] = node
            else:
                out.dropped[name] = reason
            continue
        try:
            encoded = encode(value, refs, max_bytes)
            sizes[name] = (measure(encoded), encoded)
        except NotKept as exc:
            out.dropped[name] = _too_big(max_bytes) if str(exc) == "too big" else str(exc)
    # Before any room is given: a def that uses a name that cannot be kept must not take a value's room.
    _drop_users(functions, out.dropped)
    sources = {name: ast.unparse(node) for name, node in functions.items()}
    room = max_bytes
    for name, source in sorted(sources.items(), key=lambda item: len(item[1])):  # defs first, smallest first
        size = len(source.encode("utf-8"))
        if size <= room:
            room -= size
        else:
            out.dropped[name] = _too_big(max_bytes, size)
            del functions[name]
    for name, (size, encoded) in sorted(sizes.items(), key=lambda item: item[1][0]):
        if size <= room:
            out.values[name] = encoded
            room -= size
        else:
            out.dropped[name] = _too_big(max_bytes, size)
    _drop_users(functions, out.dropped)  # again: of the names dropped as too big just now
    out.functions = {name: sources[name] for name in functions}
    return out


def unchanged(collected: Collected, given: object) -> bool:
    """Whether a run left exactly the state it was `given` (a ``run`` message's ``state``, or None for none) and
    dropped nothing: the same names, functions of the same source, and values of the same JSON (``1`` and ``1.0``,
    ``True`` and ``1`` differ here, though Python calls them equal)."""
    if collected.dropped:
        return False
    if given is None:
        return not collected.values and not collected.functions
    if not isinstance(given, dict):
        return False
    values, functions = given.get("values"), given.get("functions")
    if collected.functions != functions or collected.values != values:  # the cheap test first
        return False
    text = _json(collected.values)
    return text is not None and text == _json(values)


def _json(data: Any) -> str | None:
    try:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return None


def _drop_users(functions: dict[str, ast.FunctionDef], dropped: dict[str, str]) -> None:
    """Drop from `functions` each one that reads a global in `dropped` (it would fail next time), and its users."""
    free = {name: free_names(node) for name, node in functions.items()}
    changed = True
    while changed:
        changed = False
        for name in list(functions):
            missing = sorted((free[name] & set(dropped)) - {name})
            if missing:
                verb = "is" if len(missing) == 1 else "are"
                dropped[name] = f"it uses {', '.join(missing)}, which {verb} not kept"
                del functions[name]
                changed = True


def _too_big(max_bytes: int, size: int | None = None) -> str:
    what = f"{size:,} bytes" if size is not None else f"over {max_bytes:,} bytes"
    return f"too big: {what}, all kept names together get {max_bytes:,} by max_state_bytes; a file keeps it"


@dataclass
class Restored:
    """A kept state made ready for a run: values for the symbol table, ``def`` statements to run first."""

    values: dict[str, Any] = field(default_factory=dict)
    definitions: list[ast.stmt] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)


def restore(state: Mapping[str, Any], base: Mapping[str, Any]) -> Restored:
    """Rebuild a state sent by the server; a name that cannot be rebuilt is dropped with the reason."""
    out = Restored()
    resolve = resolver(base)
    values = state.get("values")
    for name, data in (values if isinstance(values, dict) else {}).items():
        try:
            out.values[str(name)] = decode(data, resolve)
        except (ValueError, TypeError, OverflowError, re.error, RecursionError) as exc:
            out.dropped[str(name)] = f"could not be restored: {exc}"
    functions = state.get("functions")
    for name, source in (functions if isinstance(functions, dict) else {}).items():
        try:
            module = ast.parse(str(source))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            out.dropped[str(name)] = "could not be restored: its source does not parse"
            continue
        body = module.body
        if len(body) != 1 or not isinstance(body[0], ast.FunctionDef) or body[0].name != name:
            out.dropped[str(name)] = "could not be restored: its source is not one def of that name"
            continue
        ast.increment_lineno(body[0], FIRST_LINE + 1000 * len(out.definitions))
        out.definitions.append(body[0])
    return out
