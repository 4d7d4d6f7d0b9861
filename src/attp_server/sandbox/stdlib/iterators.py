"""The curated `itertools`, `functools` and `operator`, and `Capped`, the iterator every curated module hands out.

Lazy iterators are where a short program hides a huge amount of work: ``itertools.product(range(100),
repeat=10)`` is one call, and ``sum()``, ``max()`` or ``deque(..., maxlen=0)`` would drain it inside C,
where the evaluator's deadline is never checked. So every iterator here either has a length known to
be at most `MAX_SEQUENCE_LEN` items, or is `Capped`: past that many items it ends the run with a
message saying what to narrow. Inputs that are materialised (``product``'s pools, ``permutations``'
pool) are read with the same bound. ``accumulate`` adds with the evaluator's size-checked ``+``;
``operator``'s arithmetic is the evaluator's own size-checked operators; ``attrgetter`` and
``methodcaller`` resolve names through the attribute allowlist (the real ones would reach
``__class__``). In-place operators (``operator.iadd``, ...) are not offered: they would grow a list in
place, past the checks.

Imported by the worker; imports nothing from the rest of ``server`` but ``attp_server.sandbox``.
"""

from __future__ import annotations

import ast
import functools as _functools
import itertools as _itertools
import operator as _operator
from collections.abc import Callable, Iterable, Iterator, Sized
from typing import Any

from attp_server.sandbox.engines.python.evaluator import BINARY_OPERATORS
from attp_server.sandbox.limits import MAX_SEQUENCE_LEN, Forbidden, SizeLimitError, check_size
from attp_server.sandbox.policy import allow_attributes, get_attribute
from attp_server.sandbox.stdlib.namespaces import Namespace

CAP = MAX_SEQUENCE_LEN
"""Most items one curated iterator yields before the run ends."""


class Capped:
    """An iterator that ends the run after `CAP` items; what a program gets instead of a generator or an
    endless C iterator. It has no attributes a program can reach."""

    __slots__ = ("_left", "_source", "_what")

    def __init__(self, source: Iterable[Any], what: str) -> None:
        self._source = iter(source)
        self._left = CAP
        self._what = what

    def __iter__(self) -> Capped:
        return self

    def __next__(self) -> Any:
        if self._left <= 0:
            raise SizeLimitError(
                f"{self._what} went past {CAP:,} items, the limit per iterator; narrow its inputs, or stop "
                "early (break, itertools.islice(it, n))"
            )
        self._left -= 1
        return next(self._source)

    def __repr__(self) -> str:
        return f"<{self._what} iterator>"


def sized(value: Any) -> int | None:
    """``len(value)`` when `value` knows its length, else None; a length past `sys.maxsize` counts as too many."""
    if not isinstance(value, Sized):
        return None
    try:
        return len(value)
    except OverflowError:  # range(10**20)
        return CAP + 1


def materialize(iterable: Iterable[Any], what: str, budget: int = CAP) -> tuple[Any, ...]:
    """The items of `iterable` as a tuple, refusing more than `budget` of them (checked before, or while, reading)."""
    size = sized(iterable)
    if size is not None:
        check_size(what, size if size <= budget else CAP + 1)
        return tuple(iterable)
    items: list[Any] = []
    for item in iterable:
        items.append(item)
        if len(items) > budget:
            check_size(what, CAP + 1)
    return tuple(items)


def _capped_product(factors: Iterable[int]) -> int:
    """The product of non-negative `factors`, or ``CAP + 1`` as soon as it exceeds `CAP` (read lazily)."""
    total = 1
    for factor in factors:
        total *= factor
        if total > CAP:
            return CAP + 1
        if total == 0:
            return 0
    return total


def _capped_binomial(n: int, k: int) -> int:
    """C(n, k), or ``CAP + 1`` once it is known to exceed `CAP` (C(n, i) grows with i up to n/2: stop early)."""
    if k < 0 or k > n:
        return 0
    total = 1
    for i in range(min(k, n - k)):
        total = total * (n - i) // (i + 1)
        if total > CAP:
            return CAP + 1
    return total


def _bounded(iterator: Iterator[Any], count: int, what: str) -> Iterator[Any]:
    return iterator if count <= CAP else Capped(iterator, what)


def short(value: Any) -> str:
    """`value` for an error message: an integer past 20 digits is shown by its size, not its digits."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"<an integer of {value.bit_length():,} bits>"
    return repr(value)[:40]


def _check_r(r: Any, what: str) -> None:
    if isinstance(r, int) and r > CAP:
        check_size(f"{what} tuples of length {r:,}", r)


# ---------------------------------------------------------------- itertools


def count(start: Any = 0, step: Any = 1) -> Iterator[Any]:
    return Capped(_itertools.count(start, step), "itertools.count()")


def cycle(iterable: Iterable[Any]) -> Iterator[Any]:
    return Capped(_itertools.cycle(iterable), "itertools.cycle()")


def repeat(obj: Any, times: Any = None) -> Iterator[Any]:
    if times is None:
        return Capped(_itertools.repeat(obj), "itertools.repeat()")
    count = times if isinstance(times, int) else 0
    return _bounded(_itertools.repeat(obj, times), count, f"itertools.repeat(..., {short(times)})")


def product(*iterables: Iterable[Any], repeat: int = 1) -> Iterator[tuple[Any, ...]]:
    pools = [materialize(it, "itertools.product() input") for it in iterables]
    total = 1
    if isinstance(repeat, int) and repeat > 0:
        check_size("itertools.product() pools", sum(len(p) for p in pools) * repeat)
        once = _capped_product(len(p) for p in pools)
        total = once if once < 2 else _capped_product(once for _ in range(repeat))
    return _bounded(_itertools.product(*pools, repeat=repeat), total, "itertools.product()")


def permutations(iterable: Iterable[Any], r: int | None = None) -> Iterator[tuple[Any, ...]]:
    pool = materialize(iterable, "itertools.permutations() input")
    _check_r(r, "itertools.permutations()")
    n = len(pool)
    k = n if r is None else r
    total = _capped_product(range(n, n - k, -1)) if isinstance(k, int) and 0 <= k <= n else 0
    return _bounded(_itertools.permutations(pool, r), total, "itertools.permutations()")


def combinations(iterable: Iterable[Any], r: int) -> Iterator[tuple[Any, ...]]:
    pool = materialize(iterable, "itertools.combinations() input")
    _check_r(r, "itertools.combinations()")
    total = _capped_binomial(len(pool), r) if isinstance(r, int) else 0
    return _bounded(_itertools.combinations(pool, r), total, "itertools.combinations()")


def combinations_with_replacement(iterable: Iterable[Any], r: int) -> Iterator[tuple[Any, ...]]:
    pool = materialize(iterable, "itertools.combinations_with_replacement() input")
    _check_r(r, "itertools.combinations_with_replacement()")
    n = len(pool)
    total = 0
    if isinstance(r, int) and r >= 0:
        total = (1 if r == 0 else 0) if n == 0 else _capped_binomial(n + r - 1, r)
    what = "itertools.combinations_with_replacement()"
    return _bounded(_itertools.combinations_with_replacement(pool, r), total, what)


def accumulate(iterable: Iterable[Any], func: Callable[[Any, Any], Any] | None = None, *, initial: Any = None) -> Any:
    return _itertools.accumulate(iterable, _checked_add if func is None else func, initial=initial)


def tee(iterable: Iterable[Any], n: int = 2) -> tuple[Iterator[Any], ...]:
    if isinstance(n, int):
        check_size("itertools.tee() copies", n)
    return _itertools.tee(iterable, n)


def batched(iterable: Iterable[Any], n: int) -> Iterator[tuple[Any, ...]]:
    """Python 3.12's ``itertools.batched``: tuples of `n` items, the last one shorter."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"itertools.batched() n must be an integer, not {type(n).__name__}")
    if n < 1:
        raise ValueError("n must be at least one")
    source = iter(iterable)

    def batches() -> Iterator[tuple[Any, ...]]:
        while batch := tuple(_itertools.islice(source, n)):
            yield batch

    return Capped(batches(), "itertools.batched()")


class Chain:
    """``itertools.chain``, with ``chain.from_iterable``; unbounded inputs give a `Capped` iterator."""

    __slots__ = ()

    def __call__(self, *iterables: Iterable[Any]) -> Iterator[Any]:
        sizes = [sized(it) for it in iterables]
        if None in sizes:
            return Capped(_itertools.chain(*iterables), "itertools.chain()")
        return _bounded(_itertools.chain(*iterables), sum(s or 0 for s in sizes), "itertools.chain()")

    def from_iterable(self, iterables: Iterable[Iterable[Any]]) -> Iterator[Any]:
        if isinstance(iterables, list | tuple):
            sizes = [sized(it) for it in iterables]
            if None not in sizes:
                total = sum(s or 0 for s in sizes)
                return _bounded(_itertools.chain.from_iterable(iterables), total, "itertools.chain.from_iterable()")
        return Capped(_itertools.chain.from_iterable(iterables), "itertools.chain.from_iterable()")

    def __repr__(self) -> str:
        return "<class 'itertools.chain'>"


allow_attributes(Chain, ("from_iterable",))

_ITERTOOLS_AS_IS = (
    "islice", "starmap", "zip_longest", "compress", "dropwhile", "takewhile", "filterfalse", "groupby", "pairwise",
)  # fmt: skip
"""Iterators no longer than their inputs: handed out as they are."""


def itertools_namespace() -> Namespace:
    members: dict[str, Any] = {name: getattr(_itertools, name) for name in _ITERTOOLS_AS_IS}
    members.update(
        count=count, cycle=cycle, repeat=repeat, product=product, permutations=permutations,
        combinations=combinations, combinations_with_replacement=combinations_with_replacement,
        accumulate=accumulate, tee=tee, batched=batched, chain=Chain(),
    )  # fmt: skip
    return Namespace("itertools", members)


# ---------------------------------------------------------------- functools


def functools_namespace() -> Namespace:
    # reduce/partial/cmp_to_key/lru_cache are the real ones: they only call what the program hands them,
    # and none of their objects has an attribute the sandbox opens beyond the cache's statistics.
    return Namespace(
        "functools",
        {
            "reduce": _functools.reduce,
            "partial": _functools.partial,
            "cmp_to_key": _functools.cmp_to_key,
            "lru_cache": _functools.lru_cache,
            "cache": _functools.cache,
        },
    )


class _CacheParameters:
    """``cached.cache_parameters`` as a program gets it: callable for a copy of the dict, never the real function
    (functools' lambda, whose repr is an address and whose globals are the functools module's)."""

    __slots__ = ("_cached",)

    def __init__(self, cached: Any) -> None:
        self._cached = cached

    def __call__(self) -> dict[str, Any]:
        return dict(self._cached.cache_parameters())

    def __repr__(self) -> str:
        return "<built-in method cache_parameters of functools.lru_cache object>"


_cached = _functools.lru_cache(maxsize=None)(lambda: None)
allow_attributes(
    type(_cached), ("cache_info", "cache_clear", "cache_parameters"), wrappers={"cache_parameters": _CacheParameters}
)
allow_attributes(type(_cached.cache_info()), ("hits", "misses", "maxsize", "currsize", "count", "index"))


# ---------------------------------------------------------------- operator

_checked_add = BINARY_OPERATORS[ast.Add]


class AttrGetter:
    """``operator.attrgetter`` that reads each name through the attribute allowlist."""

    __slots__ = ("_paths",)

    def __init__(self, attr: str, *attrs: str) -> None:
        paths = []
        for name in (attr, *attrs):
            if not isinstance(name, str):
                raise TypeError("attribute name must be a string")
            path = tuple(name.split("."))
            for part in path:
                if part.startswith("_"):
                    raise Forbidden(f"attributes starting with '_' are not allowed: '.{part}'")
            paths.append(path)
        self._paths = tuple(paths)

    def __call__(self, obj: Any) -> Any:
        values = []
        for path in self._paths:
            value = obj
            for part in path:
                value = get_attribute(value, part)
            values.append(value)
        return values[0] if len(values) == 1 else tuple(values)

    def __repr__(self) -> str:
        return f"operator.attrgetter({', '.join(repr('.'.join(p)) for p in self._paths)})"


class MethodCaller:
    """``operator.methodcaller`` that finds the method through the attribute allowlist (size-checked wrappers too)."""

    __slots__ = ("_args", "_kwargs", "_name")

    def __init__(self, name: str, /, *args: Any, **kwargs: Any) -> None:
        if not isinstance(name, str):
            raise TypeError("method name must be a string")
        if name.startswith("_"):
            raise Forbidden(f"attributes starting with '_' are not allowed: '.{name}'")
        self._name, self._args, self._kwargs = name, args, kwargs

    def __call__(self, obj: Any) -> Any:
        return get_attribute(obj, self._name)(*self._args, **self._kwargs)

    def __repr__(self) -> str:
        return f"operator.methodcaller({self._name!r}, ...)"


def _concat(a: Any, b: Any) -> Any:
    if not hasattr(type(a), "__getitem__"):
        raise TypeError(f"'{type(a).__name__}' object can't be concatenated")
    return _checked_add(a, b)


_OPERATOR_AS_IS = (
    "lt", "le", "eq", "ne", "ge", "gt", "not_", "truth", "is_", "is_not", "abs", "and_", "floordiv", "index", "inv",
    "invert", "neg", "or_", "pos", "rshift", "truediv", "xor", "contains", "countOf", "indexOf", "getitem",
    "setitem", "delitem", "length_hint", "itemgetter",
)  # fmt: skip
"""Functions that build nothing bigger than their arguments."""


def operator_namespace() -> Namespace:
    members: dict[str, Any] = {name: getattr(_operator, name) for name in _OPERATOR_AS_IS}
    members.update(
        add=_checked_add,
        sub=BINARY_OPERATORS[ast.Sub],
        mul=BINARY_OPERATORS[ast.Mult],
        pow=BINARY_OPERATORS[ast.Pow],
        lshift=BINARY_OPERATORS[ast.LShift],
        mod=BINARY_OPERATORS[ast.Mod],
        concat=_concat,
        attrgetter=AttrGetter,
        methodcaller=MethodCaller,
    )
    return Namespace("operator", members)
