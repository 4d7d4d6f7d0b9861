"""What a program may write and what it may touch: the static scan and the attribute allowlist.

The static scan refuses, before anything runs, the syntax the sandbox does not offer (imports,
``_`` names, classes, ``with``, ...). The attribute allowlist decides, for every ``obj.name`` at run
time, whether that name is reachable: only on plain value types, only public names, and some
methods are swapped for size-checked versions. Everything not listed is refused: an allowlist,
not a blocklist. asteval's published lists of unsafe attribute names are a second opinion on that
allowlist: no name on them can be allowed (`unsafe_by_asteval`).

Imported by the worker and by the server's static check; imports nothing from the rest of ``server``.
"""

from __future__ import annotations

import _string as _string_impl  # type: ignore[import-not-found]
import ast
import datetime as _dt
import difflib
import json as _json
import re as _re
import statistics as _statistics
import string as _string
import sys
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from attp_server.sandbox.advice import attribute_advice, name_advice
from attp_server.sandbox.limits import MAX_INT_BITS, MAX_SEQUENCE_LEN, Forbidden, SizeLimitError
from attp_server.sandbox.stdlib.namespaces import MODULE_NAMES, Namespace, check_format_spec, check_substitution
from attp_server.sandbox.stdlib.reprs import safe_ascii, safe_format, safe_repr, safe_str

Loaded = TypeVar("Loaded")


def without_numpy(load: Callable[[], Loaded]) -> Loaded:
    """`load()`, an import of asteval, while numpy cannot be imported.

    asteval imports numpy when it is installed (and numpy_financial), to offer its functions; the sandbox wants
    only asteval's lists and its `Interpreter`, and in a worker numpy would cost tens of megabytes of every
    program's ``memory_mb`` and start its BLAS threads (the lockdown binds one thread). ``sys.modules["numpy"] =
    None`` makes that import fail meanwhile (the documented way to make an import raise); a numpy imported before,
    or after, is untouched.
    """
    blocked = [name for name in ("numpy", "numpy_financial") if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        return load()
    finally:
        for name in blocked:
            del sys.modules[name]


def _asteval_lists() -> tuple[frozenset[str], dict[type, tuple[str, ...]]]:
    from asteval import astutils

    return frozenset(astutils.UNSAFE_ATTRS), dict(astutils.UNSAFE_ATTRS_DTYPES)


UNSAFE_ATTRS, UNSAFE_ATTRS_DTYPES = without_numpy(_asteval_lists)


FORBIDDEN_NAMES = frozenset(
    {
        "open", "eval", "exec", "compile", "getattr", "setattr", "delattr", "hasattr", "globals", "locals",
        "vars", "dir", "type", "object", "input", "breakpoint", "memoryview", "super", "classmethod",
        "staticmethod", "property", "exit", "quit", "__import__", "__builtins__",
    }
)  # fmt: skip

RESULT_NAME = "__result__"
MAIN_NAME = "__name__"
"""Readable (never assignable): it is ``"__main__"``, so ``if __name__ == "__main__":`` runs its block."""


def refused_name(name: str, *, store: bool) -> bool:
    """True for a name no program may use: '__' names, except __result__ and reading __name__."""
    return name.startswith("__") and name != RESULT_NAME and (store or name != MAIN_NAME)


@dataclass(frozen=True)
class Violation:
    """A construct the sandbox refuses, found before the run."""

    code: str  # FORBIDDEN or IMPORT_FORBIDDEN
    message: str
    line: int | None
    column: int | None
    name: str | None = None


_UNSUPPORTED: dict[type[ast.AST], str] = {
    ast.ClassDef: "class definitions are not available; use dicts and functions",
    ast.AsyncFunctionDef: "async functions are not available; tools are called synchronously",
    ast.AsyncFor: "'async for' is not available",
    ast.AsyncWith: "'async with' is not available",
    ast.Await: "'await' is not available; call tools directly, they return their result",
    ast.Yield: "generators ('yield') are not available; build and return a list",
    ast.YieldFrom: "generators ('yield from') are not available; build and return a list",
    ast.With: "'with' blocks are not available; files are read and written with tools",
    ast.Match: "'match' statements are not available; use if/elif",
    ast.TryStar: "'except*' is not available; use except",
}


def nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of `tree`, breadth first, like ``list(ast.walk(tree))`` at a third of the cost, less the
    load/store contexts and operators (``ast.Load``, ``ast.Add``, ...), which no check reads as nodes."""
    found = [tree]
    append, fields_of = found.append, _WALKED_FIELDS.get
    for node in found:  # the list grows while it is read: a walk without a generator per node
        fields = fields_of(node.__class__)
        if fields is None:
            fields = _WALKED_FIELDS[node.__class__] = tuple(f for f in node._fields if f not in _NOT_WALKED)
        for name in fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        append(item)
            elif isinstance(value, ast.AST):
                append(value)
    return found


_NOT_WALKED = frozenset({
    "ctx", "op", "ops", "id", "attr", "arg", "kind", "type_comment", "level", "module", "asname", "is_async",
    "conversion", "simple",
})  # fmt: skip
"""Fields that hold a context, an operator or plain text, never a node a check reads."""

_WALKED_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: ()}
"""Node class -> the fields `nodes` reads (filled as classes are met)."""


_PLAIN = frozenset({
    ast.Constant, ast.Call, ast.keyword, ast.Subscript, ast.BinOp, ast.Compare, ast.Expr, ast.Assign, ast.List,
    ast.Dict, ast.comprehension, ast.ListComp, ast.Tuple, ast.If, ast.For, ast.Return, ast.Module, ast.arguments,
    ast.arg, ast.AugAssign, ast.UnaryOp, ast.BoolOp, ast.IfExp, ast.JoinedStr, ast.FormattedValue, ast.Set,
    ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Slice, ast.Starred, ast.While, ast.Pass, ast.Break,
    ast.Continue,
})  # fmt: skip
"""Node classes `scan` has nothing to say about, skipped before its chain of checks (the common ones)."""


def bound_names(tree: ast.AST | list[ast.AST]) -> set[str]:
    """Every name the program itself binds anywhere (assignments, defs, parameters, loop targets).

    `tree` may be the `nodes` of a tree already walked.
    """
    names: set[str] = set()
    for node in tree if isinstance(tree, list) else nodes(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.alias) and node.name != "*":
            names.add(node.asname or node.name.split(".")[0])
    return names


def scan(
    tree: ast.AST,
    walked: list[ast.AST] | None = None,
    *,
    modules: Collection[str] = MODULE_NAMES,
    allow_imports: bool = True,
) -> list[Violation]:
    """Return every construct of `tree` that the sandbox refuses, in source order (`walked`: its `nodes`).

    `modules` are the modules the run has (what ``import`` may name); `allow_imports` False refuses
    every import statement, as the seed's strict dialect does.
    """
    walked = nodes(tree) if walked is None else walked
    found: list[Violation] = []
    builtins: list[ast.Name] = []  # forbidden builtins read: refused unless the program binds that name itself

    def add(code: str, node: ast.AST, message: str, name: str | None = None) -> None:
        found.append(Violation(code, message, getattr(node, "lineno", None), getattr(node, "col_offset", None), name))

    for node in walked:
        if node.__class__ in _PLAIN:
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            problem = _import_problem(node, modules, allow_imports)
            if problem is not None:
                add("IMPORT_FORBIDDEN", node, *problem)
        elif isinstance(node, ast.Name):
            loaded = isinstance(node.ctx, ast.Load)
            if refused_name(node.id, store=not loaded):
                add("FORBIDDEN", node, name_advice(node.id), node.id)
            elif loaded and node.id in FORBIDDEN_NAMES:
                builtins.append(node)
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                add("FORBIDDEN", node, attribute_advice(node.attr), node.attr)
            elif isinstance(node.ctx, ast.Store | ast.Del):
                add("FORBIDDEN", node, f"assigning or deleting attributes is not allowed ('.{node.attr}')", node.attr)
        elif isinstance(node, ast.FunctionDef):
            if refused_name(node.name, store=True):
                add("FORBIDDEN", node, name_advice(node.name), node.name)
            for arg in [
                *node.args.posonlyargs,
                *node.args.args,
                *node.args.kwonlyargs,
                node.args.vararg,
                node.args.kwarg,
            ]:
                if arg is not None and refused_name(arg.arg, store=True):
                    add("FORBIDDEN", arg, name_advice(arg.arg), arg.arg)
        elif isinstance(node, ast.Lambda):
            for arg in [
                *node.args.posonlyargs,
                *node.args.args,
                *node.args.kwonlyargs,
                node.args.vararg,
                node.args.kwarg,
            ]:
                if arg is not None and refused_name(arg.arg, store=True):
                    add("FORBIDDEN", arg, name_advice(arg.arg), arg.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name and refused_name(node.name, store=True):
            add("FORBIDDEN", node, name_advice(node.name), node.name)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for name in node.names:
                if refused_name(name, store=True):
                    add("FORBIDDEN", node, name_advice(name), name)
        elif type(node) in _UNSUPPORTED:
            add("FORBIDDEN", node, _UNSUPPORTED[type(node)])
    if builtins:  # rare: only then is the walk for the names the program binds worth its cost
        bound = bound_names(walked)
        for read in builtins:
            if read.id not in bound:
                add("FORBIDDEN", read, name_advice(read.id), read.id)
    found.sort(key=lambda v: (v.line or 0, v.column or 0))
    return found


def _import_problem(
    node: ast.Import | ast.ImportFrom, modules: Collection[str], allow_imports: bool
) -> tuple[str, str] | None:
    """(message, module) when `node` imports something the run cannot have, else None."""
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else ["." * node.level + (node.module or "")]
    available = ", ".join(modules)
    if not allow_imports:
        preloaded = [m for m in names if m.split(".")[0] in modules]
        hint = (
            f" {', '.join(preloaded)} is already available without import: delete the import line." if preloaded else ""
        )
        return (
            f"import statements are not allowed on this server (found import of {', '.join(names)}).{hint} "
            f"Pre-injected modules: {available}; tools are called directly by name.",
            names[0],
        )
    if names == ["__future__"]:
        return None
    for name in names:
        if name.startswith("."):
            return (
                f"relative imports are not available in the sandbox (found {name!r}). Available modules: {available}.",
                name,
            )
        if name not in modules:
            close = difflib.get_close_matches(name.split(".")[0].lstrip("."), list(modules), n=1)
            hint = f" Did you mean {close[0]}?" if close else ""
            return (
                f"module {name!r} is not available in the sandbox.{hint} Available modules: {available} (already "
                "loaded: use them by name, no import needed); tools are called directly by name.",
                name,
            )
    return None


# ---------------------------------------------------------------- attribute allowlist


def _public(cls: type, *, without: Iterable[str] = ()) -> frozenset[str]:
    return frozenset(n for n in dir(cls) if not n.startswith("_")) - frozenset(without)


_TEXT = (str, bytes, bytearray)
"""What a size check measures in characters or bytes (memoryview is not reachable: no builtin or method makes one)."""


def _check_len(size: int, what: str) -> None:
    if size > MAX_SEQUENCE_LEN:
        raise SizeLimitError(f"{what} would build {size:,} items; the limit is {MAX_SEQUENCE_LEN:,}")


def _padded(method_name: str) -> Callable[[Any], Callable[..., Any]]:
    def wrap(obj: Any) -> Callable[..., Any]:
        method = getattr(obj, method_name)

        def padded(width: Any, *rest: Any) -> Any:
            if isinstance(width, int):
                _check_len(width, f"{method_name}({width})")
            return method(width, *rest)

        return padded

    return wrap


def _join(obj: Any) -> Callable[..., Any]:
    def join(iterable: Iterable[Any]) -> Any:
        items = list(iterable)
        total = len(obj) * max(0, len(items) - 1) + sum(len(i) for i in items if isinstance(i, _TEXT))
        _check_len(total, "join()")
        return obj.join(items)

    return join


def _replace(obj: Any) -> Callable[..., Any]:
    def replace(old: Any, new: Any, count: int = -1) -> Any:
        if isinstance(old, _TEXT) and isinstance(new, _TEXT) and len(new) > len(old):
            hits = obj.count(old) if old else len(obj) + 1
            if count >= 0:
                hits = min(hits, count)
            _check_len(len(obj) + hits * (len(new) - len(old)), "replace()")
        return obj.replace(old, new, count)

    return replace


def _expandtabs(obj: Any) -> Callable[..., Any]:
    def expandtabs(tabsize: int = 8) -> Any:
        if isinstance(tabsize, int):
            _check_len(len(obj) * max(1, tabsize), "expandtabs()")
        return obj.expandtabs(tabsize)

    return expandtabs


def _to_bytes(obj: int) -> Callable[..., bytes]:
    def to_bytes(length: int = 1, byteorder: Any = "big", *, signed: bool = False) -> bytes:
        _check_len(length, "int.to_bytes()")
        return obj.to_bytes(length, byteorder, signed=signed)

    return to_bytes


def _from_bytes(obj: Any) -> Callable[..., Any]:
    """``int.from_bytes`` (on the class or an instance) that refuses an integer over `MAX_INT_BITS`."""
    kind: Any = obj if isinstance(obj, type) else type(obj)

    def from_bytes(data: Any, byteorder: Any = "big", *, signed: bool = False) -> Any:
        if not isinstance(data, bytes | bytearray | list | tuple):
            data = list(data)  # the sandbox's iterators stop at MAX_SEQUENCE_LEN items
        if len(data) * 8 > MAX_INT_BITS:
            raise SizeLimitError(
                f"int.from_bytes() of {len(data):,} bytes would build an integer over {MAX_INT_BITS:,} bits"
            )
        return kind.from_bytes(data, byteorder, signed=signed)

    return from_bytes


class SafeFormatter(_string.Formatter):
    """`str.format` whose field lookups go through the allowlist and whose specs are size-checked."""

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        first, rest = _formatter_field_name_split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attr, key in rest:
            obj = get_attribute(obj, key) if is_attr else obj[key]
        return obj, first

    def format_field(self, value: Any, format_spec: str) -> Any:
        check_format_spec(format_spec)
        return safe_format(value, format_spec)

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        conversions = {"s": safe_str, "r": safe_repr, "a": safe_ascii}
        if conversion in conversions:
            return conversions[conversion](value)
        return super().convert_field(value, conversion)


def _formatter_field_name_split(field_name: str) -> tuple[Any, Iterator[tuple[bool, Any]]]:
    return _string_impl.formatter_field_name_split(field_name)  # type: ignore[no-any-return]


_FORMATTER = SafeFormatter()


def _format(obj: str) -> Callable[..., str]:
    def format_(*args: Any, **kwargs: Any) -> str:
        return _FORMATTER.vformat(obj, args, kwargs)

    return format_


def _format_map(obj: str) -> Callable[..., str]:
    def format_map(mapping: Any) -> str:
        return _FORMATTER.vformat(obj, (), mapping)

    return format_map


def _translate(obj: Any) -> Callable[..., Any]:
    def translate(table: Any, *rest: Any) -> Any:
        if isinstance(table, dict):
            longest = max((len(v) for v in table.values() if isinstance(v, _TEXT)), default=1)
            _check_len(len(obj) * max(1, longest), "translate()")
        return obj.translate(table, *rest)

    return translate


def _strftime(obj: Any) -> Callable[..., str]:
    def strftime(fmt: str) -> str:
        if isinstance(fmt, str) and len(fmt) > 1000:
            raise SizeLimitError(f"a strftime format of {len(fmt):,} characters is too long; the limit is 1,000")
        return str(obj.strftime(fmt))

    return strftime


def _pattern_sub(name: str) -> Callable[[Any], Callable[..., Any]]:
    def wrap(pattern: Any) -> Callable[..., Any]:
        def sub(repl: Any, string: Any, count: int = 0) -> Any:
            return getattr(pattern, name)(check_substitution(pattern, repl, string, count), string, count=count)

        return sub

    return wrap


_TEXT_WRAPPERS: dict[str, Callable[[Any], Callable[..., Any]]] = {
    "translate": _translate,
    "ljust": _padded("ljust"),
    "rjust": _padded("rjust"),
    "center": _padded("center"),
    "zfill": _padded("zfill"),
    "join": _join,
    "replace": _replace,
    "expandtabs": _expandtabs,
}

_WRAPPERS: dict[type, dict[str, Callable[[Any], Callable[..., Any]]]] = {
    str: {**_TEXT_WRAPPERS, "format": _format, "format_map": _format_map},
    bytes: _TEXT_WRAPPERS,
    bytearray: _TEXT_WRAPPERS,
    int: {"to_bytes": _to_bytes, "from_bytes": _from_bytes},
    bool: {"to_bytes": _to_bytes, "from_bytes": _from_bytes},
    _dt.date: {"strftime": _strftime},
    _dt.datetime: {"strftime": _strftime},
    _dt.time: {"strftime": _strftime},
    _re.Pattern: {"sub": _pattern_sub("sub"), "subn": _pattern_sub("subn")},
}

_VIEW_EXCLUDE = ("mapping",)

ATTRIBUTES: dict[type, frozenset[str]] = {
    str: _public(str),
    bytes: _public(bytes),
    bytearray: _public(bytearray),
    int: _public(int),
    bool: _public(bool),
    float: _public(float),
    complex: _public(complex),
    list: _public(list),
    tuple: _public(tuple),
    dict: _public(dict),
    set: _public(set),
    frozenset: _public(frozenset),
    type({}.keys()): _public(type({}.keys()), without=_VIEW_EXCLUDE),
    type({}.values()): _public(type({}.values()), without=_VIEW_EXCLUDE),
    type({}.items()): _public(type({}.items()), without=_VIEW_EXCLUDE),
    range: _public(range),
    slice: _public(slice),
    _dt.date: _public(_dt.date),
    _dt.datetime: _public(_dt.datetime),
    _dt.time: _public(_dt.time),
    _dt.timedelta: _public(_dt.timedelta),
    _dt.timezone: _public(_dt.timezone),
    _re.Pattern: _public(_re.Pattern, without=("scanner",)),
    _re.Match: _public(_re.Match),
    _statistics.LinearRegression: frozenset({"slope", "intercept", "count", "index"}),
}

# Attributes reachable on the classes themselves (``datetime.datetime.now``, ``str.lower``): the
# instance allowlist minus every wrapped name (an unbound ``str.format`` would skip the wrapper),
# plus alternate constructors.
_CLASS_WRAPPERS: dict[type, dict[str, Callable[[Any], Callable[..., Any]]]] = {int: {"from_bytes": _from_bytes}}
"""Checked stand-ins for class attributes (``int.from_bytes(...)``), given the class."""

CLASS_ATTRIBUTES: dict[type, frozenset[str]] = {
    cls: (names - frozenset(_WRAPPERS.get(cls, {}))) | frozenset(_CLASS_WRAPPERS.get(cls, {}))
    for cls, names in ATTRIBUTES.items()
    if cls in (str, bytes, int, float, list, tuple, dict, set, frozenset, _dt.date, _dt.datetime, _dt.time,
               _dt.timedelta, _dt.timezone)
}  # fmt: skip

EXCEPTION_ATTRIBUTES: dict[type, frozenset[str]] = {
    _re.error: frozenset({"args", "msg", "pattern", "pos", "lineno", "colno"}),
    _json.JSONDecodeError: frozenset({"args", "msg", "doc", "pos", "lineno", "colno"}),
    UnicodeDecodeError: frozenset({"args", "encoding", "reason", "start", "end"}),
    UnicodeEncodeError: frozenset({"args", "encoding", "reason", "start", "end"}),
}


def unsafe_by_asteval(cls: type, names: Iterable[str], *, wrapped: Collection[str] = ()) -> list[str]:
    """The `names` that asteval's published lists call unsafe on `cls`, except those a `wrapped` stand-in replaces.

    asteval keeps ``UNSAFE_ATTRS`` (unsafe on any object: ``mro``, ``gi_frame``, ``f_locals``, ``func_globals``,
    the dunders) and ``UNSAFE_ATTRS_DTYPES`` (unsafe on one type: ``str.format``, ``str.format_map``) current with
    its security advisories. The allowlist here is built independently; this second opinion keeps every one
    of those names off it, unless a checked stand-in replaces the method (``str.format`` resolves its fields
    through this allowlist). An unbound method on a class skips its stand-in, so class tables pass no `wrapped`.
    """
    unsafe = set(UNSAFE_ATTRS)
    for dtype, listed in UNSAFE_ATTRS_DTYPES.items():
        if issubclass(cls, dtype):
            unsafe.update(listed)
    return sorted(name for name in names if name in unsafe and name not in wrapped)


def _refuse_unsafe(cls: type, names: Iterable[str], *, wrapped: Collection[str] = ()) -> None:
    unsafe = unsafe_by_asteval(cls, names, wrapped=wrapped)
    if unsafe:
        raise ValueError(f"asteval lists {unsafe} as unsafe on {cls.__name__}: they cannot be allowed in the sandbox")


for _cls, _names in ATTRIBUTES.items():
    _refuse_unsafe(_cls, _names, wrapped=_WRAPPERS.get(_cls, {}))
for _cls, _names in CLASS_ATTRIBUTES.items():
    _refuse_unsafe(_cls, _names)
for _cls, _names in EXCEPTION_ATTRIBUTES.items():
    _refuse_unsafe(_cls, _names)


def register_exception(cls: type[BaseException], names: Iterable[str]) -> None:
    """Allow `names` (plus ``args``) on instances of an exception class the sandbox defines."""
    _refuse_unsafe(cls, names)
    EXCEPTION_ATTRIBUTES[cls] = frozenset({"args", *names})


Wrapper = Callable[[Any], Callable[..., Any]]
"""Given the object, the size-checked stand-in for one of its methods."""


def allow_attributes(
    cls: type, names: Iterable[str], *, wrappers: Mapping[str, Wrapper] | None = None, on_class: Iterable[str] = ()
) -> None:
    """Open `names` on instances of `cls`, a type a curated module hands out (``Counter``, ``deque``, a hash object).

    `wrappers` swap some of those methods for size-checked versions; `on_class` names what is
    reachable on the class itself (``OrderedDict.fromkeys``), never a wrapped name (it would skip the wrapper).
    """
    allowed = frozenset(names)
    private = sorted(name for name in allowed | frozenset(on_class) if name.startswith("_"))
    if private:
        raise ValueError(f"private names cannot be allowed on {cls.__name__}: {private}")
    _refuse_unsafe(cls, allowed, wrapped=wrappers or {})
    _refuse_unsafe(cls, on_class)
    ATTRIBUTES[cls] = allowed
    if wrappers:
        _WRAPPERS[cls] = dict(wrappers)
    if on_class:
        CLASS_ATTRIBUTES[cls] = frozenset(on_class) - frozenset(wrappers or {})


_RECORDS: weakref.WeakKeyDictionary[type, frozenset[str]] = weakref.WeakKeyDictionary()
"""Record classes a program made with ``collections.namedtuple``: their field names, weakly held (a class a run
made must not outlive the run in this table)."""


def allow_record(cls: type, fields: Iterable[str]) -> None:
    """Open the fields (and ``count``/``index``) on instances of a ``namedtuple`` class made during a run."""
    _RECORDS[cls] = frozenset({"count", "index", *fields})


def _describe(obj: Any) -> str:
    if isinstance(obj, type):
        return f"class {obj.__name__}"
    return f"a {type(obj).__name__} value"


def get_attribute(obj: Any, name: str) -> Any:
    """``obj.name`` for a program, or raise: `Forbidden` past the allowlist, AttributeError if absent."""
    if name.startswith("_"):
        raise Forbidden(attribute_advice(name))
    cls = type(obj)
    if cls is Namespace:
        try:
            return obj.members[name]
        except KeyError:
            raise AttributeError(_missing_member(obj, name)) from None
    allowed = ATTRIBUTES.get(cls)
    if allowed is None:
        if cls is type and obj in CLASS_ATTRIBUTES:
            allowed = CLASS_ATTRIBUTES[obj]
        elif isinstance(obj, BaseException):
            allowed = EXCEPTION_ATTRIBUTES.get(cls, frozenset({"args"}))
        elif cls in _RECORDS:
            allowed = _RECORDS[cls]
        else:
            raise Forbidden(f"attribute '.{name}' of {_describe(obj)} is not available in the sandbox")
    if name not in allowed:
        if cls is not type and hasattr(cls, name):
            raise Forbidden(f"'{cls.__name__}.{name}' is not available in the sandbox")
        raise AttributeError(f"{_describe(obj)} has no attribute {name!r}")
    wrapper = (_CLASS_WRAPPERS.get(obj, {}) if cls is type else _WRAPPERS.get(cls, {})).get(name)
    if wrapper is not None:
        return wrapper(obj)
    return getattr(obj, name)


def plain_attribute(cls: type, name: str) -> bool:
    """True when `get_attribute` of `name` on any instance of `cls` is exactly ``getattr(obj, name)``.

    The evaluator remembers such answers per class and call site instead of asking again.
    """
    allowed = ATTRIBUTES.get(cls)
    return allowed is not None and name in allowed and name not in _WRAPPERS.get(cls, {})


def _missing_member(space: Namespace, name: str) -> str:
    close = difflib.get_close_matches(name, list(space.members), n=1)
    hint = f"; did you mean {space.name}.{close[0]}?" if close else ""
    return f"{space.name} has no member {name!r}{hint}"
