"""The curated `math`, `json`, `datetime`, `re`, `random` and `statistics` a program sees, and its builtins.

None of these is a module object. Each is a `Namespace`: a read-only bag of chosen functions,
classes and constants. Nothing here leads to the interpreter, the file system or the process:
a real module would leak its own imports (``json.codecs`` reaches ``builtins``), so only members
are copied, never the module. Functions that can build huge values are wrapped with size checks.

This module is imported by the worker; it imports nothing from the rest of ``server``.
"""

from __future__ import annotations

import datetime as _dt
import json as _json
import math as _math
import random as _random
import re as _re
import statistics as _statistics
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from attp_server.sandbox.limits import MAX_FORMAT_WIDTH, MAX_INT_BITS, MAX_SEQUENCE_LEN, SizeLimitError
from attp_server.sandbox.stdlib.reprs import name_objects, safe_ascii, safe_format, safe_repr


class Namespace:
    """A read-only, module-like bag of names. Attribute access goes through the evaluator's policy."""

    __slots__ = ("members", "name")
    name: str
    members: dict[str, Any]

    def __init__(self, name: str, members: Mapping[str, Any]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "members", dict(members))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"{self.name} is read-only")

    def __getattr__(self, name: str) -> Any:
        """A member as an attribute, for an engine that reads attributes itself (asteval); the python engine's
        policy reads `members` (and refuses every name starting with ``_`` first)."""
        try:
            return object.__getattribute__(self, "members")[name]
        except KeyError:
            raise AttributeError(f"{object.__getattribute__(self, 'name')} has no member {name!r}") from None

    def __repr__(self) -> str:
        return f"<namespace {self.name}>"


def _check_size(what: str, size: int) -> None:
    if size > MAX_SEQUENCE_LEN:
        raise SizeLimitError(f"{what} would have {size:,} items; the limit is {MAX_SEQUENCE_LEN:,}")


# ---------------------------------------------------------------- math


def _factorial(n: int) -> int:
    if isinstance(n, int) and n > 20_000:
        raise SizeLimitError(f"math.factorial({n}) is too large; the limit is n <= 20000")
    return _math.factorial(n)


def _comb(n: int, k: int) -> int:
    if isinstance(n, int) and n > 100_000:
        raise SizeLimitError(f"math.comb({n}, ...) is too large; the limit is n <= 100000")
    return _math.comb(n, k)


def _perm(n: int, k: int | None = None) -> int:
    if isinstance(n, int) and n > 20_000:
        raise SizeLimitError(f"math.perm({n}, ...) is too large; the limit is n <= 20000")
    return _math.perm(n, k)


def _prod(iterable: Iterable[Any], *, start: Any = 1) -> Any:
    total = start
    for item in iterable:
        total = total * item
        if isinstance(total, int) and total.bit_length() > MAX_INT_BITS:
            raise SizeLimitError(f"math.prod() result exceeds {MAX_INT_BITS:,} bits")
        if isinstance(total, str | bytes | bytearray | list | tuple):
            _check_size("math.prod()", len(total))
    return total


def _isqrt(n: int) -> int:
    return _math.isqrt(n)


_MATH_WRAPPED: dict[str, Callable[..., Any]] = {
    "factorial": _factorial,
    "comb": _comb,
    "perm": _perm,
    "prod": _prod,
    "isqrt": _isqrt,
}


def _math_namespace() -> Namespace:
    members: dict[str, Any] = {}
    for name in dir(_math):
        if name.startswith("_"):
            continue
        members[name] = _MATH_WRAPPED.get(name, getattr(_math, name))
    return Namespace("math", members)


# ---------------------------------------------------------------- json

_JSON_DUMPS_OPTIONS = frozenset({"indent", "sort_keys", "ensure_ascii", "separators", "default", "allow_nan"})


def _dumps(obj: Any, **options: Any) -> str:
    unknown = set(options) - _JSON_DUMPS_OPTIONS
    if unknown:
        raise TypeError(
            f"json.dumps() got unsupported option(s) {sorted(unknown)}; allowed: {sorted(_JSON_DUMPS_OPTIONS)}"
        )
    separators = options.get("separators")
    if isinstance(separators, tuple | list) and any(isinstance(x, str) and len(x) > 16 for x in separators):
        raise ValueError("json.dumps(separators=...) items must be at most 16 characters")
    indent = options.get("indent")
    if (isinstance(indent, int) and indent > 16) or (isinstance(indent, str) and len(indent) > 16):
        raise ValueError("json.dumps(indent=...) must be at most 16")
    options.setdefault("ensure_ascii", False)
    return _json.dumps(obj, **options)


def _loads(text: str | bytes) -> Any:
    return _json.loads(text)


def _json_namespace() -> Namespace:
    return Namespace(
        "json",
        {"loads": _loads, "dumps": _dumps, "JSONDecodeError": _json.JSONDecodeError},
    )


# ---------------------------------------------------------------- datetime


def _now(tz: _dt.tzinfo | None = None) -> _dt.datetime:
    return _dt.datetime.now(tz)


def _today() -> _dt.date:
    return _dt.date.today()


def _parse(text: str) -> _dt.datetime | _dt.date | _dt.time:
    """Parse an ISO 8601 date, datetime or time ('2024-05-01', '2024-05-01T12:30:00Z', '12:30')."""
    if not isinstance(text, str):
        raise TypeError(f"datetime.parse() takes an ISO 8601 string, not {type(text).__name__}")
    value = text.strip()
    for parser in (_dt.date.fromisoformat, _dt.datetime.fromisoformat, _dt.time.fromisoformat):
        try:
            return parser(value)
        except ValueError:
            continue
    raise ValueError(f"datetime.parse() could not read {text!r} as ISO 8601 (e.g. '2024-05-01T12:30:00+00:00')")


def _datetime_namespace() -> Namespace:
    return Namespace(
        "datetime",
        {
            "datetime": _dt.datetime,
            "date": _dt.date,
            "time": _dt.time,
            "timedelta": _dt.timedelta,
            "timezone": _dt.timezone,
            "UTC": _dt.UTC,
            "MINYEAR": _dt.MINYEAR,
            "MAXYEAR": _dt.MAXYEAR,
            "now": _now,
            "today": _today,
            "parse": _parse,
        },
    )


# ---------------------------------------------------------------- re

_RE_FUNCTIONS = ("compile", "search", "match", "fullmatch", "split", "findall", "finditer", "sub", "subn", "escape")
_RE_FLAGS = ("IGNORECASE", "I", "MULTILINE", "M", "DOTALL", "S", "VERBOSE", "X", "ASCII", "A", "NOFLAG")


_TEXT_REFERENCE = _re.compile(r"\\(?:\d|g<)")
_BYTES_REFERENCE = _re.compile(rb"\\(?:\d|g<)")
"""A group reference in a replacement template (``\\1``, ``\\g<name>``): what a match found, repeated."""


def check_substitution(pattern: Any, repl: Any, string: Any, count: int = 0, flags: int = 0) -> Any:
    """The replacement to hand ``re`` for a ``sub``/``subn`` that never builds more than the size limit.

    Text is bounded before anything runs: the result is at most the string, plus the template for each match,
    plus the string again for each group reference in it (the matches do not overlap). Past the limit, a template
    without references is refused; one with references, and a function, are wrapped to count what each match
    adds as it comes, stopping the run once the result would pass the limit."""
    if not isinstance(string, str | bytes | bytearray):
        return repl  # re refuses it itself
    if callable(repl):
        return _counted(repl, len(string))
    if not isinstance(repl, str | bytes | bytearray) or not repl:
        return repl
    found = _TEXT_REFERENCE.findall(repl) if isinstance(repl, str) else _BYTES_REFERENCE.findall(repl)
    references = len(found)
    if len(repl) * (len(string) + 1) + references * len(string) <= MAX_SEQUENCE_LEN:
        return repl
    compiled = pattern if isinstance(pattern, _re.Pattern) else _re.compile(pattern, flags)
    matches = 0
    for _ in compiled.finditer(string):
        matches += 1
        if count and matches >= count:
            break
    if len(string) * (1 + references) + matches * len(repl) <= MAX_SEQUENCE_LEN:
        return repl
    if references:
        return _counted(lambda match: match.expand(repl), len(string))
    _check_size("re.sub()", len(string) + matches * len(repl))
    return repl


def _counted(replace: Callable[[Any], Any], start: int) -> Callable[[Any], Any]:
    """`replace` (called once per match), adding up the length of the result as the replacements come."""
    size = start

    def replacement(match: Any) -> Any:
        nonlocal size
        value = replace(match)
        if isinstance(value, str | bytes | bytearray):
            size += len(value) - (match.end() - match.start())
            _check_size("re.sub()", size)
        return value

    return replacement


def _sub(pattern: Any, repl: Any, string: Any, count: int = 0, flags: int = 0) -> Any:
    return _re.sub(pattern, check_substitution(pattern, repl, string, count, flags), string, count=count, flags=flags)


def _subn(pattern: Any, repl: Any, string: Any, count: int = 0, flags: int = 0) -> Any:
    return _re.subn(pattern, check_substitution(pattern, repl, string, count, flags), string, count=count, flags=flags)


def _re_namespace() -> Namespace:
    members: dict[str, Any] = {name: getattr(_re, name) for name in _RE_FUNCTIONS}
    members.update(sub=_sub, subn=_subn)
    members.update({name: getattr(_re, name) for name in _RE_FLAGS if hasattr(_re, name)})
    members["error"] = _re.error
    return Namespace("re", members)


# ---------------------------------------------------------------- random


MAX_SEED_CHARS = 10_000
"""Longest str, bytes or digits of a seed given to random.Random(seed) or seed()."""


def random_namespace(rng: _random.Random, name: str = "random") -> Namespace:
    """A `random` namespace over one private generator (one per run, seeded from the OS).

    ``random.Random(seed)`` makes another such namespace over a generator of its own, seeded as asked:
    what models write for reproducible sampling (``rng = random.Random(42); rng.sample(xs, 3)``).
    """

    def getrandbits(k: int) -> int:
        if k > MAX_INT_BITS:
            raise SizeLimitError(f"random.getrandbits({k}) exceeds {MAX_INT_BITS:,} bits")
        return rng.getrandbits(k)

    def randbytes(n: int) -> bytes:
        _check_size("random.randbytes()", n)
        return rng.randbytes(n)

    def sample(population: Any, k: int, *, counts: Any = None) -> list[Any]:
        _check_size("random.sample()", k)
        return rng.sample(population, k, counts=counts)

    def choices(population: Any, weights: Any = None, *, cum_weights: Any = None, k: int = 1) -> list[Any]:
        _check_size("random.choices()", k)
        return rng.choices(population, weights, cum_weights=cum_weights, k=k)

    members: dict[str, Any] = {
        name: getattr(rng, name)
        for name in (
            "random", "uniform", "randint", "randrange", "choice", "shuffle", "gauss", "normalvariate",
            "lognormvariate", "expovariate", "vonmisesvariate", "gammavariate", "betavariate",
            "paretovariate", "weibullvariate", "triangular",
        )
    }  # fmt: skip

    def seed(a: Any = None, version: int = 2) -> None:
        _check_seed(a)
        rng.seed(a, version)

    def make_random(x: Any = None) -> Namespace:
        _check_seed(x)
        return random_namespace(_random.Random(x), "Random")

    members.update(getrandbits=getrandbits, randbytes=randbytes, sample=sample, choices=choices, seed=seed)
    if name == "random":
        members["Random"] = make_random
    return Namespace(name, members)


def _check_seed(seed: Any) -> None:
    """A seed of plain data (None, int, float, str, bytes) of bounded size."""
    if seed is not None and not isinstance(seed, int | float | str | bytes | bytearray):
        raise TypeError(f"a random seed must be None, an int, a float, a str or bytes, not {type(seed).__name__}")
    if isinstance(seed, int) and seed.bit_length() > MAX_INT_BITS:
        raise SizeLimitError(f"a random seed exceeds {MAX_INT_BITS:,} bits")
    if isinstance(seed, str | bytes | bytearray) and len(seed) > MAX_SEED_CHARS:
        raise SizeLimitError(f"a random seed of {len(seed):,} characters exceeds {MAX_SEED_CHARS:,}")


# ---------------------------------------------------------------- statistics

_STATISTICS_FUNCTIONS = (
    "mean", "fmean", "geometric_mean", "harmonic_mean", "median", "median_low", "median_high",
    "median_grouped", "mode", "multimode", "pstdev", "pvariance", "stdev", "variance", "quantiles",
    "correlation", "covariance", "linear_regression",
)  # fmt: skip


def _statistics_namespace() -> Namespace:
    members: dict[str, Any] = {name: getattr(_statistics, name) for name in _STATISTICS_FUNCTIONS}
    members["StatisticsError"] = _statistics.StatisticsError
    return Namespace("statistics", members)


# ---------------------------------------------------------------- builtins


def _bytes(source: Any = b"", *args: Any) -> bytes:
    if isinstance(source, int):
        _check_size("bytes()", source)
    return bytes(source, *args)


def _bytearray(source: Any = b"", *args: Any) -> bytearray:
    if isinstance(source, int):
        _check_size("bytearray()", source)
    return bytearray(source, *args)


def _pow(base: Any, exp: Any, mod: Any = None) -> Any:
    if mod is None and isinstance(base, int) and isinstance(exp, int):
        check_power(base, exp)
    return pow(base, exp, mod)


def check_power(base: int, exp: int) -> None:
    """Refuse ``base ** exp`` when the result would exceed the integer size limit."""
    if exp > 0 and abs(base) > 1 and exp * max(1, abs(base).bit_length() - 1) > MAX_INT_BITS:
        raise SizeLimitError(f"{_named(base)} ** {_named(exp)} would exceed {MAX_INT_BITS:,} bits")


def _named(number: int) -> str:
    """`number` as an error message shows it: its digits, or its size when they are too many to show."""
    return str(number) if number.bit_length() <= 64 else f"(an integer of {number.bit_length():,} bits)"


def _digits(name: str, convert: Callable[[Any], str]) -> Callable[[Any], str]:
    """``bin``/``hex``/``oct``, refusing an integer over `MAX_INT_BITS` (its text would be as long)."""

    def digits(number: Any) -> str:
        if isinstance(number, int) and number.bit_length() > MAX_INT_BITS:
            raise SizeLimitError(f"{name}() of an integer over {MAX_INT_BITS:,} bits is not available")
        return convert(number)

    digits.__name__ = digits.__qualname__ = name
    return digits


def _sum(iterable: Any, /, start: Any = 0) -> Any:
    """``sum``, refusing a total over `MAX_INT_BITS` (each term may be near the limit)."""
    total = sum(iterable, start)
    if isinstance(total, int) and total.bit_length() > MAX_INT_BITS:
        raise SizeLimitError(f"sum() would build an integer over {MAX_INT_BITS:,} bits")
    return total


def _format(value: Any, spec: str = "") -> str:
    check_format_spec(spec)
    return safe_format(value, spec)


_SPEC_NUMBERS = _re.compile(r"(\d+)")


def check_format_spec(spec: object) -> None:
    """Refuse format specs whose width or precision would build a huge string (CVE-2025-24359 class)."""
    if not isinstance(spec, str):
        return
    if len(spec) > 1000:
        raise SizeLimitError(f"a format spec of {len(spec):,} characters is too long; the limit is 1,000")
    for digits in _SPEC_NUMBERS.findall(spec):
        if len(digits) > 6 or int(digits) > MAX_FORMAT_WIDTH:
            raise SizeLimitError(f"format width/precision {digits} exceeds {MAX_FORMAT_WIDTH:,}")


SAFE_BUILTIN_FUNCTIONS: dict[str, Any] = {
    "abs": abs, "all": all, "any": any, "ascii": safe_ascii, "bin": _digits("bin", bin), "bool": bool,
    "bytearray": _bytearray, "bytes": _bytes, "callable": callable, "chr": chr, "complex": complex, "dict": dict,
    "divmod": divmod, "enumerate": enumerate, "filter": filter, "float": float, "format": _format,
    "frozenset": frozenset, "hash": hash, "hex": _digits("hex", hex), "int": int, "isinstance": isinstance,
    "iter": iter, "len": len, "list": list, "map": map, "max": max, "min": min, "next": next,
    "oct": _digits("oct", oct), "ord": ord, "pow": _pow, "range": range, "repr": safe_repr, "reversed": reversed,
    "round": round, "set": set, "slice": slice, "sorted": sorted, "str": str, "sum": _sum, "tuple": tuple, "zip": zip,
}  # fmt: skip

name_objects(SAFE_BUILTIN_FUNCTIONS)  # `repr(sum)` is <function sum>, not the stand-in's address

SAFE_EXCEPTIONS: dict[str, type[Exception]] = {
    cls.__name__: cls
    for cls in (
        Exception, ArithmeticError, AssertionError, AttributeError, IndexError, KeyError, LookupError,
        NameError, NotImplementedError, OverflowError, RecursionError, RuntimeError, StopIteration,
        TypeError, UnicodeError, UnicodeDecodeError, UnicodeEncodeError, ValueError, ZeroDivisionError,
    )
}  # fmt: skip

MODULE_NAMES = (
    "math", "json", "datetime", "re", "random", "statistics", "decimal", "fractions", "collections", "itertools",
    "functools", "operator", "csv", "io", "string", "textwrap", "copy", "heapq", "bisect", "base64", "hashlib",
    "difflib", "uuid", "tomllib", "typing",
)  # fmt: skip
"""Every curated module, in the order descriptions list them (``attp_server.sandbox.stdlib.modules`` builds them all;
the ``modules`` setting picks which a run gets). The first six are seed 000's."""


def static_namespaces() -> dict[str, Namespace]:
    """The namespaces that hold no per-run state (all but `random`). Built once per worker."""
    return {
        "math": _math_namespace(),
        "json": _json_namespace(),
        "datetime": _datetime_namespace(),
        "re": _re_namespace(),
        "statistics": _statistics_namespace(),
    }
