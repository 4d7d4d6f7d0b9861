"""Turn sandbox values into plain JSON data: results leaving the worker and tool arguments alike.

Only plain data crosses the boundary, so no rich object (a frame, a function, a path) ever leaves
or enters. Datetimes become ISO strings, timedeltas seconds, tuples and sets lists; anything else is
refused with the exact place it sits (``__result__['rows'][3]``). The curated modules' data types
turn into what they hold: ``Counter``/``OrderedDict``/``defaultdict``/``ChainMap`` into objects,
``deque`` and named tuples into arrays, a ``UUID`` into its string.

Imported by the worker; imports nothing from the rest of ``server``.
"""

from __future__ import annotations

import collections
import datetime as dt
import math
import uuid
from collections.abc import Iterator
from typing import Any

MAX_DEPTH = 100


class NotJSON(Exception):
    """A value has no JSON form; the message says where it is and what to do."""


def to_json(value: Any, where: str = "__result__", depth: int = 0) -> Any:
    """Return a JSON-compatible copy of `value` or raise `NotJSON` naming the offending place."""
    if depth > MAX_DEPTH:
        raise NotJSON(f"{where} is nested more than {MAX_DEPTH} levels deep (a structure that contains itself?)")
    cls = type(value)
    if value is None or cls is str or cls is bool or cls is int:
        return value
    if cls is float:
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if cls is list or cls is tuple:
        return [to_json(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    if cls is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out[_key(key, where)] = to_json(item, f"{where}[{key!r}]", depth + 1)
        return out
    if cls is set or cls is frozenset:
        items = [to_json(item, f"{where}{{...}}", depth + 1) for item in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if cls in (dt.datetime, dt.date, dt.time):
        return value.isoformat()
    if cls is dt.timedelta:
        return value.total_seconds()
    if cls in (type({}.keys()), type({}.values()), type({}.items()), range):
        return [to_json(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    if isinstance(value, dict):  # Counter, OrderedDict, defaultdict
        return to_json(dict(value.items()), where, depth)
    if isinstance(value, collections.ChainMap):
        # Each map's own items, the first map winning: never ``chainmap[key]``, which would call a defaultdict's
        # factory (program code) after the program has ended.
        return to_json(_merged(value, where), where, depth)
    if isinstance(value, tuple | collections.deque):  # named tuples, deque
        return to_json(list(value), where, depth)
    if cls is uuid.UUID:
        return str(value)
    raise NotJSON(f"{where} is {_describe(value)}, which has no JSON form; {_advice(value)}")


def _merged(chain: collections.ChainMap[Any, Any], where: str, depth: int = 0) -> dict[Any, Any]:
    """The items of `chain`'s maps, the first map winning, read without calling anything of the program."""
    if depth > MAX_DEPTH:
        raise NotJSON(f"{where} is a ChainMap nested more than {MAX_DEPTH} levels deep")
    merged: dict[Any, Any] = {}
    for mapping in reversed(chain.maps):
        if isinstance(mapping, collections.ChainMap):
            merged.update(_merged(mapping, where, depth + 1))
        elif isinstance(mapping, dict):
            merged.update(dict.items(mapping))
        else:  # ChainMap(math)
            raise NotJSON(f"{where} is a ChainMap of {_describe(mapping)}; its maps must be dicts")
    return merged


def _key(key: Any, where: str) -> str:
    if type(key) is str:
        return key
    if key is None or type(key) in (int, float, bool):
        return str(key) if key is not None else "null"
    raise NotJSON(f"{where} has a key {_describe(key)}; JSON object keys must be strings, numbers or booleans")


def _describe(value: Any) -> str:
    if isinstance(value, Iterator) and not hasattr(type(value), "getvalue"):
        return "an iterator"
    name = type(value).__name__
    return f"a {name} value" if name[0] not in "aeiou" else f"an {name} value"


def _advice(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return "decode it first, e.g. value.decode('utf-8')"
    if type(value).__name__ == "Match":
        return "return m.group(0) or m.groups() instead"
    if callable(value):
        return "call it and return what it gives, or return its name as a string"
    if hasattr(type(value), "getvalue"):
        return "return value.getvalue()"
    if hasattr(type(value), "hexdigest"):
        return "return value.hexdigest()"
    if isinstance(value, Iterator):
        return "turn it into a list first, e.g. list(value)"
    return "convert it first, e.g. str(value), or pick its fields into a dict"
