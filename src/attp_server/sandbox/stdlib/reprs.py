"""What a program sees of an object's text: ``repr``, ``str``, ``ascii``, f-strings, ``format``, ``%``, ``print``.

Many objects a program can hold are the standard library's own (iterators, csv readers, hash objects,
bound methods, an ``lru_cache`` wrapper) or the sandbox's Python stand-ins, and their own repr shows a
memory address and an internal module path: ``<_csv.reader object at 0x7f...>``,
``<function _loads at 0x7f...>`` (issue 22). Addresses help an attacker aim at memory; module paths
describe the server. So every text the sandbox makes of a value goes through `safe_repr` / `safe_str`:

* the value's own repr, made by C at C's speed, when nothing in it looks like an address or an internal
  path (so a list of ten million numbers costs what ``repr`` costs);
* otherwise a rendering of its own: containers item by item in CPython's layout, exceptions by their
  arguments, and every other object opaquely: ``<function json.loads>``, ``<built-in method random>``,
  ``<io.StringIO object>``, ``<_csv.reader object>`` (a name the program could write, never an address).

Names come from `name_objects`: the curated modules' members and the builtins, registered when built.
"""

from __future__ import annotations

import collections
import functools
import re
import types
from collections.abc import Iterable, Mapping
from typing import Any, cast

PROGRAM_FILE = "<program>"
"""The file name of every code object compiled from a program's text (by `engines.python.evaluator`)."""

_SUSPECT = re.compile(r"0x[0-9a-fA-F]{5,}|attp_server\.")
"""What an address or an internal name looks like in a repr (a false alarm only costs the slow path)."""

_PLAIN = (type(None), bool, int, float, complex, str, bytes, bytearray, range)
"""Types whose repr holds nothing but their own value (not ``slice``: its parts may be any objects)."""
_SCALARS = frozenset({type(None), bool, int, float, str})
"""Types whose text is always safe, answered without a look at it (``str(i)`` in a loop)."""
_VIEWS: tuple[type, ...] = (type({}.keys()), type({}.values()), type({}.items()))
MAX_DEPTH = 100
"""Deeper nesting is shown as ``...`` (CPython's own repr would raise RecursionError)."""

_NAMES: dict[int, tuple[object, str]] = {}
"""id -> (the object, kept alive so that its id is not reused, and the name programs know it by)."""


def name_objects(named: Mapping[str, Any]) -> None:
    """Remember the name programs know each of these objects by (``"json.loads"``, ``"io.StringIO"``, ``"sum"``)."""
    for name, obj in named.items():
        if not isinstance(obj, _PLAIN) and id(obj) not in _NAMES:
            _NAMES[id(obj)] = (obj, name)


def name_modules(spaces: Mapping[str, Any]) -> None:
    """Remember the curated modules' members by ``module.member`` (the worker's, built once)."""
    for module, space in spaces.items():
        if module != "typing":  # its names are other modules' and the builtins' (typing.List is list)
            name_objects({f"{module}.{member}": value for member, value in space.members.items()})


def _known(obj: object) -> str | None:
    found = _NAMES.get(id(obj))
    return found[1] if found is not None and found[0] is obj else None


def safe_repr(obj: Any) -> str:
    """``repr(obj)`` as a program may see it: no address, no internal module path."""
    if obj.__class__ in _SCALARS:
        return repr(obj)
    text = repr(obj)
    if _SUSPECT.search(text) is None:
        return text
    return _render(obj, set(), 0)


def safe_str(obj: Any) -> str:
    """``str(obj)`` as a program may see it."""
    if obj.__class__ in _SCALARS:
        return str(obj)
    text = str(obj)
    if _SUSPECT.search(text) is None:
        return text
    if isinstance(obj, BaseException):
        args = obj.args
        return "" if not args else safe_str(args[0]) if len(args) == 1 else safe_repr(args)
    return _render(obj, set(), 0)


def safe_ascii(obj: Any) -> str:
    """``ascii(obj)`` as a program may see it."""
    return safe_repr(obj).encode("ascii", "backslashreplace").decode("ascii")


def safe_format(obj: Any, spec: str) -> str:
    """``format(obj, spec)``: the object's own ``__format__`` when it has one (numbers, dates), else its safe str."""
    if obj.__class__ in _SCALARS:
        return format(obj, spec)
    own: Any = type(obj).__format__
    if own is object.__format__:
        return format(safe_str(obj), spec)
    return format(obj, spec)


class Shown:
    """Stands in for an object inside ``%``-formatting: its safe str and repr, nothing else."""

    __slots__ = ("_obj",)

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __str__(self) -> str:
        return safe_str(self._obj)

    def __repr__(self) -> str:
        return safe_repr(self._obj)

    def __format__(self, spec: str) -> str:
        return safe_format(self._obj, spec)

    def __bytes__(self) -> bytes:
        """``b'%s' % uuid.uuid4()``: the object's own bytes, when it makes some (bytes themselves are not shown)."""
        own = getattr(type(self._obj), "__bytes__", None)
        if own is None:
            kind = type(self._obj).__name__
            raise TypeError(f"%b requires a bytes-like object, or an object that implements __bytes__, not '{kind}'")
        return bytes(own(self._obj))


def plain(values: Iterable[Any]) -> bool:
    """True when every one of `values` is a number, a string, a bool or None (nothing to make safe)."""
    for value in values:  # noqa: SIM110  (a plain loop: all() of a generator costs more on two items)
        if value.__class__ not in _SCALARS:
            return False
    return True


def shown(value: Any) -> Any:
    """`value`, or a `Shown` of it when its own text could show an address (a ``%`` argument)."""
    return value if isinstance(value, _PLAIN) else Shown(value)


def _render(obj: Any, seen: set[int], depth: int) -> str:
    if isinstance(obj, _PLAIN) and type(obj) in _PLAIN:
        return repr(obj)
    if depth > MAX_DEPTH:
        return "..."
    cls = type(obj)
    if isinstance(obj, list | tuple | set | frozenset | dict | collections.deque | collections.ChainMap):
        if id(obj) in seen:
            return "[...]" if isinstance(obj, list) else "{...}" if isinstance(obj, dict) else "(...)"
        seen.add(id(obj))
        try:
            return _container(obj, seen, depth + 1)
        finally:
            seen.discard(id(obj))
    if isinstance(obj, _VIEWS):
        view = cast("Iterable[Any]", obj)
        return f"{cls.__name__}([{_items(view, seen, depth + 1)}])"
    if isinstance(obj, BaseException):
        return f"{cls.__name__}({', '.join(_render(a, seen, depth + 1) for a in obj.args)})"
    if cls is slice:
        return f"slice({_items((obj.start, obj.stop, obj.step), seen, depth + 1)})"
    if isinstance(obj, functools.partial):
        parts = [_render(obj.func, seen, depth + 1), *(_render(a, seen, depth + 1) for a in obj.args)]
        parts += [f"{key}={_render(value, seen, depth + 1)}" for key, value in obj.keywords.items()]
        return f"functools.partial({', '.join(parts)})"
    text = repr(obj)
    return text if _SUSPECT.search(text) is None else _opaque(obj)


def _items(values: Iterable[Any], seen: set[int], depth: int) -> str:
    return ", ".join(_render(item, seen, depth) for item in values)


def _pairs(mapping: Any, seen: set[int], depth: int) -> str:
    return ", ".join(f"{_render(k, seen, depth)}: {_render(v, seen, depth)}" for k, v in dict.items(mapping))


def _container(obj: Any, seen: set[int], depth: int) -> str:
    cls = type(obj)
    if cls is list:
        return f"[{_items(obj, seen, depth)}]"
    if cls is tuple:
        return f"({_items(obj, seen, depth)}{',' if len(obj) == 1 else ''})"
    if isinstance(obj, tuple) and hasattr(cls, "_fields"):  # a named tuple
        named = zip(cls._fields, obj, strict=False)
        fields = ", ".join(f"{name}={_render(value, seen, depth)}" for name, value in named)
        return f"{cls.__name__}({fields})"
    if isinstance(obj, set | frozenset):
        inner = f"{{{_items(obj, seen, depth)}}}" if obj else ""
        if cls is set:
            return inner or "set()"
        return f"{cls.__name__}({inner})"
    if isinstance(obj, collections.deque):
        maxlen = f", maxlen={obj.maxlen}" if obj.maxlen is not None else ""
        return f"deque([{_items(obj, seen, depth)}]{maxlen})"
    if isinstance(obj, collections.ChainMap):
        return f"ChainMap({_items(obj.maps, seen, depth)})"
    if isinstance(obj, collections.defaultdict):
        return f"defaultdict({_render(obj.default_factory, seen, depth)}, {{{_pairs(obj, seen, depth)}}})"
    if isinstance(obj, collections.OrderedDict):
        pairs = ", ".join(f"({_render(k, seen, depth)}, {_render(v, seen, depth)})" for k, v in dict.items(obj))
        return f"OrderedDict([{pairs}])"
    if isinstance(obj, collections.Counter):
        return f"Counter({{{_pairs(obj, seen, depth)}}})"
    if isinstance(obj, dict):
        return f"{{{_pairs(obj, seen, depth)}}}"
    return f"{cls.__name__}([{_items(obj, seen, depth)}])"  # a tuple or list subclass of our own


def _opaque(obj: Any) -> str:
    """A name a program could write, never an address: ``<function json.loads>``, ``<_csv.reader object>``."""
    name = _known(obj)
    if isinstance(obj, type):
        return f"<class {name or obj.__name__!r}>"
    if name is not None and callable(obj):
        return f"<function {name}>" if "." in name else f"<built-in function {name}>"
    if name is not None:
        return f"<{name}>"
    if isinstance(obj, types.BuiltinFunctionType):  # also a method of a C object (random.random)
        owner = getattr(obj, "__self__", None)
        if owner is None or isinstance(owner, types.ModuleType):
            return f"<built-in function {obj.__name__}>"
        return f"<built-in method {obj.__name__} of {_type_name(type(owner))} object>"
    if isinstance(obj, types.MethodType):
        return f"<bound method {_type_name(type(obj.__self__))}.{obj.__func__.__name__}>"
    if isinstance(obj, types.FunctionType):
        if obj.__code__.co_filename == PROGRAM_FILE:  # a def or lambda of the program's own
            return f"<sandbox function {obj.__name__}>"
        return f"<function {obj.__name__.lstrip('_') or 'function'}>"
    if isinstance(obj, types.GeneratorType):
        return f"<generator object {obj.__name__}>"
    wrapped = getattr(obj, "__wrapped__", None) if type(obj).__name__ == "_lru_cache_wrapper" else None
    if wrapped is not None:
        return f"<functools.lru_cache of {_render(wrapped, set(), 1)}>"
    return f"<{_type_name(type(obj))} object>"


def _type_name(cls: type) -> str:
    name = _known(cls)
    if name is not None:
        return name
    module = getattr(cls, "__module__", "") or ""
    if module in ("builtins", "__main__") or module.startswith("attp_server"):
        return cls.__name__
    return f"{module}.{cls.__qualname__}"
