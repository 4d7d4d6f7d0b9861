"""The curated `collections`, `copy`, `heapq` and `bisect` a program sees.

``Counter``, ``defaultdict``, ``OrderedDict`` and ``ChainMap`` are the real classes, opened through
the attribute allowlist: their methods build nothing bigger than their inputs, except
``Counter.update`` (``c.update(c)`` doubles every count, and a count may be a string) and
``Counter.elements`` (``Counter(a=10**12).elements()``), which are wrapped with size checks. ``deque``
is a subclass whose ``*``, ``+`` and ``extend`` are size-checked (the evaluator's checks know only the
built-in sequences). ``namedtuple`` makes a real record class with a bounded number of fields and
registers its field names with the allowlist. ``copy`` is written here: the real ``deepcopy`` follows
``__reduce_ex__`` into any object (a tool stub, a function's interpreter); this one copies plain data
and the containers above, keeps functions, classes and namespaces as they are, and refuses the rest.

Imported by the worker; imports nothing from the rest of ``server`` but ``attp_server.sandbox``.
"""

from __future__ import annotations

import bisect as _bisect
import collections as _collections
import datetime as _dt
import heapq as _heapq
import itertools as _itertools
import re as _re
import uuid as _uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from attp_server.sandbox.limits import check_size
from attp_server.sandbox.policy import ATTRIBUTES, allow_attributes, allow_record
from attp_server.sandbox.stdlib.iterators import Capped, sized
from attp_server.sandbox.stdlib.namespaces import Namespace

_SEQUENCE_TYPES = (str, bytes, bytearray, list, tuple)


def grown(a: Any, b: Any, what: str) -> Any:
    """``a + b``, refused when both are sequences whose sum would be too long (numbers only grow by a bit)."""
    if isinstance(a, _SEQUENCE_TYPES) and isinstance(b, _SEQUENCE_TYPES):
        check_size(what, len(a) + len(b))
    return a + b


# ---------------------------------------------------------------- collections


class deque(_collections.deque[Any]):  # the name programs write
    """``collections.deque`` whose ``*``, ``+`` and ``extend`` are size-checked."""

    __slots__ = ()

    def _room(self, added: int, what: str) -> None:
        size = len(self) + added
        check_size(what, size if self.maxlen is None else min(size, self.maxlen))

    def __mul__(self, times: Any) -> deque:
        if isinstance(times, int):
            check_size("deque * n", len(self) * times)
        return super().__mul__(times)

    __rmul__ = __mul__

    def __imul__(self, times: Any) -> deque:
        if isinstance(times, int):
            self._room(len(self) * (times - 1), "deque *= n")
        return super().__imul__(times)

    def __add__(self, other: Any) -> deque:
        if isinstance(other, _collections.deque):
            check_size("deque + deque", len(self) + len(other))
        return super().__add__(other)

    def __iadd__(self, other: Any) -> deque:
        self.extend(other)
        return self

    def extend(self, iterable: Iterable[Any]) -> None:
        size = sized(iterable)
        if size is not None:
            self._room(size, "deque.extend()")
        super().extend(iterable)

    def extendleft(self, iterable: Iterable[Any]) -> None:
        size = sized(iterable)
        if size is not None:
            self._room(size, "deque.extendleft()")
        super().extendleft(iterable)


def _counter_update(counter: _collections.Counter[Any]) -> Callable[..., None]:
    def update(iterable: Any = None, /, **counts: Any) -> None:
        # Counter.update, with each sum checked: counts may be strings or lists, and c.update(c) doubles them.
        for source in (iterable, counts or None):
            if source is None:
                continue
            if isinstance(source, Mapping) and counter:
                for key, value in source.items():
                    counter[key] = grown(value, counter.get(key, 0), "Counter.update()")
            elif isinstance(source, Mapping):
                dict.update(counter, source)  # an empty Counter takes the counts as they are, as Python's does
            else:
                counter.update(source)  # counting items: each count grows by one

    return update


def _counter_elements(counter: _collections.Counter[Any]) -> Callable[[], Any]:
    def elements() -> Any:
        check_size("Counter.elements()", sum(n for n in counter.values() if isinstance(n, int) and n > 0))
        return counter.elements()

    return elements


_DICT_NAMES = ATTRIBUTES[dict]

allow_attributes(
    _collections.Counter,
    _DICT_NAMES | {"most_common", "elements", "subtract", "total"},
    wrappers={"update": _counter_update, "elements": _counter_elements},
)
allow_attributes(_collections.OrderedDict, _DICT_NAMES | {"move_to_end"}, on_class=("fromkeys",))
allow_attributes(_collections.defaultdict, _DICT_NAMES | {"default_factory"})
allow_attributes(
    _collections.ChainMap,
    ("maps", "new_child", "parents", "get", "keys", "items", "values", "copy", "pop", "popitem", "clear", "update",
     "setdefault"),
)  # fmt: skip
allow_attributes(
    deque,
    ("append", "appendleft", "clear", "copy", "count", "extend", "extendleft", "index", "insert", "maxlen", "pop",
     "popleft", "remove", "reverse", "rotate"),
)  # fmt: skip

_make_record_class: Callable[..., type[tuple[Any, ...]]] = _collections.namedtuple

MAX_FIELDS = 1000
"""Most fields a ``namedtuple`` may have (its constructor is compiled from a text naming every field)."""


def namedtuple(
    typename: str, field_names: str | Iterable[str], *, rename: bool = False, defaults: Iterable[Any] | None = None
) -> type:
    """``collections.namedtuple``: a tuple class whose items are also read by name (``p.x``)."""
    if isinstance(field_names, str):
        field_names = field_names.replace(",", " ").split()
    names = list(_itertools.islice(field_names, MAX_FIELDS + 1))
    if defaults is not None:
        defaults = list(_itertools.islice(defaults, MAX_FIELDS + 1))
    if len(names) > MAX_FIELDS:
        raise ValueError(f"namedtuple() takes at most {MAX_FIELDS:,} fields")
    if (isinstance(typename, str) and len(typename) > 200) or any(isinstance(n, str) and len(n) > 200 for n in names):
        raise ValueError("namedtuple() type and field names must be at most 200 characters")
    cls = _make_record_class(typename, names, rename=rename, defaults=defaults, module="__main__")
    allow_record(cls, cls._fields)  # type: ignore[attr-defined]
    return cls


def collections_namespace() -> Namespace:
    return Namespace(
        "collections",
        {
            "Counter": _collections.Counter,
            "defaultdict": _collections.defaultdict,
            "OrderedDict": _collections.OrderedDict,
            "ChainMap": _collections.ChainMap,
            "deque": deque,
            "namedtuple": namedtuple,
        },
    )


# ---------------------------------------------------------------- copy

_IMMUTABLE = frozenset(
    {
        type(None), bool, int, float, complex, str, bytes, range, slice, type(Ellipsis), _dt.date, _dt.datetime,
        _dt.time, _dt.timedelta, _dt.timezone, _re.Pattern, _re.Match, _uuid.UUID,
    }
)  # fmt: skip


def _kept(value: Any) -> bool:
    """Values `copy` hands back as they are: immutable scalars, and functions, classes and namespaces (as Python
    keeps functions and classes)."""
    return type(value) in _IMMUTABLE or callable(value) or type(value) is Namespace


def _cannot(what: str, value: Any) -> TypeError:
    return TypeError(f"{what} cannot copy a {type(value).__name__} value; copy the data it holds instead")


def copy(value: Any) -> Any:
    """``copy.copy``: a shallow copy of a container; immutable values and functions are returned as they are."""
    if _kept(value) or isinstance(value, tuple | frozenset):
        return value
    if isinstance(value, list | dict | set | bytearray | _collections.deque | _collections.ChainMap):
        return value.copy()
    duplicate = _COPIERS.get(type(value))
    if duplicate is not None:
        return duplicate(value)
    raise _cannot("copy.copy()", value)


def deepcopy(value: Any) -> Any:
    """``copy.deepcopy``: plain data and the curated containers, shared and self-referencing parts kept so."""
    return _DeepCopy().copy(value)


class _DeepCopy:
    def __init__(self) -> None:
        self.memo: dict[int, Any] = {}
        self.originals: list[Any] = []  # kept alive: a freed original's id could be reused by another

    def copy(self, value: Any) -> Any:
        if _kept(value):
            return value
        key = id(value)
        if key in self.memo:
            return self.memo[key]
        cls = type(value)
        if isinstance(value, tuple):
            items = [self.copy(item) for item in value]
            if key in self.memo:  # the tuple was reached again through one of its items
                return self.memo[key]
            if all(a is b for a, b in zip(items, value, strict=True)):
                return value
            result: Any = cls(*items) if hasattr(cls, "_fields") else cls(items)
        elif cls is frozenset:
            result = frozenset(self.copy(item) for item in value)
        elif isinstance(value, list | set | _collections.deque):
            result = self.remember(value, cls(maxlen=value.maxlen) if isinstance(value, _collections.deque) else cls())
            add = result.add if isinstance(result, set) else result.append
            for item in value:
                add(self.copy(item))
        elif isinstance(value, dict):
            empty = cls(value.default_factory) if isinstance(value, _collections.defaultdict) else cls()
            result = self.remember(value, empty)
            for k, v in value.items():
                result[self.copy(k)] = self.copy(v)
        elif isinstance(value, _collections.ChainMap):
            result = self.remember(value, _collections.ChainMap())
            result.maps = [self.copy(m) for m in value.maps]
        elif cls is bytearray:
            result = bytearray(value)
        elif cls in _COPIERS:
            result = _COPIERS[cls](value)
        else:
            raise _cannot("copy.deepcopy()", value)
        return self.remember(value, result)

    def remember(self, original: Any, duplicate: Any) -> Any:
        self.memo[id(original)] = duplicate
        self.originals.append(original)
        return duplicate


_COPIERS: dict[type, Callable[[Any], Any]] = {}
"""Other curated types that copy themselves (a hash object, a text buffer): registered by their modules."""


def register_copier(cls: type, duplicate: Callable[[Any], Any]) -> None:
    _COPIERS[cls] = duplicate


def copy_namespace() -> Namespace:
    return Namespace("copy", {"copy": copy, "deepcopy": deepcopy})


# ---------------------------------------------------------------- heapq and bisect


def _merge(*iterables: Iterable[Any], key: Callable[[Any], Any] | None = None, reverse: bool = False) -> Any:
    return Capped(_heapq.merge(*iterables, key=key, reverse=reverse), "heapq.merge()")


def heapq_namespace() -> Namespace:
    names = ("heappush", "heappop", "heapify", "heapreplace", "heappushpop", "nlargest", "nsmallest")
    members: dict[str, Any] = {name: getattr(_heapq, name) for name in names}
    members["merge"] = _merge
    return Namespace("heapq", members)


def bisect_namespace() -> Namespace:
    names = ("bisect", "bisect_left", "bisect_right", "insort", "insort_left", "insort_right")
    return Namespace("bisect", {name: getattr(_bisect, name) for name in names})
