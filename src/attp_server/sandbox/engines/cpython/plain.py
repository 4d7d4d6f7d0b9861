"""Data as JSON: numpy's and pandas' values turned into the plain values a result and a tool argument are made of.

``__result__ = df["amount"].mean()`` is a ``numpy.float64``; ``__result__ = totals`` a pandas Series. `plain`
turns them (and what they hold) into ``float``, ``dict`` and ``list``, so that the result's usual conversion
(`attp_server.sandbox.process.jsonify.to_json`) takes them: a DataFrame becomes a list of records (its index as
columns when it is not the default one), a Series a dict by index (a list when its index is the default one),
an array a list, a timestamp its ISO text, a missing value None. Anything else is left as it is, for `to_json`
to take or to refuse with its own message.

Runs in the worker. Imports nothing above `attp_server.sandbox` (numpy and pandas only when a value is theirs).
"""

from __future__ import annotations

import datetime as dt
import decimal
import fractions
import sys
from typing import Any

MAX_DEPTH = 100


class TooLarge(Exception):
    """A table or array far larger than what the result may hold; the message says what to return instead."""


def plain(value: Any, max_bytes: int, depth: int = 0) -> Any:
    """`value` with every numpy and pandas value in it made plain (see the module's docstring)."""
    if depth > MAX_DEPTH:
        return value
    kind = type(value)
    if value is None or kind in (str, int, float, bool):
        return value
    if kind in (list, tuple):
        return [plain(item, max_bytes, depth + 1) for item in value]
    if kind is dict:
        return {
            _key(plain(key, max_bytes, depth + 1)): plain(item, max_bytes, depth + 1) for key, item in value.items()
        }
    if kind in (set, frozenset):
        return [plain(item, max_bytes, depth + 1) for item in value]
    if isinstance(value, decimal.Decimal | fractions.Fraction):
        return float(value)
    module = kind.__module__.partition(".")[0]
    if module == "numpy":
        return _numpy(value, max_bytes, depth)
    if module == "pandas":
        return _pandas(value, max_bytes, depth)
    if isinstance(value, dt.datetime | dt.date | dt.time) and kind not in (dt.datetime, dt.date, dt.time):
        return value.isoformat()
    return value


def _key(key: Any) -> Any:
    return key if key is None or type(key) in (str, int, float, bool) else str(key)


def _numpy(value: Any, max_bytes: int, depth: int) -> Any:
    numpy = sys.modules["numpy"]
    if isinstance(value, numpy.ndarray):
        _fits(value.size, 1, max_bytes, "a numpy array", f"shape {value.shape}")
        return plain(value.tolist(), max_bytes, depth + 1)
    if isinstance(value, numpy.datetime64 | numpy.timedelta64):
        return None if numpy.isnat(value) else str(value)
    if isinstance(value, numpy.generic):
        return plain(value.item(), max_bytes, depth + 1)
    return value


def _pandas(value: Any, max_bytes: int, depth: int) -> Any:
    pandas = sys.modules["pandas"]
    if isinstance(value, pandas.DataFrame):
        rows, columns = value.shape
        _fits(rows, max(columns, 1), max_bytes, "a DataFrame", f"{rows:,} rows x {columns} columns")
        if not _default_index(value.index):
            try:
                value = value.reset_index()
            except ValueError:  # an index named like a column: keep the rows by index instead
                return plain(value.to_dict("index"), max_bytes, depth + 1)
        return plain(value.to_dict("records"), max_bytes, depth + 1)
    if isinstance(value, pandas.Series):
        _fits(len(value), 1, max_bytes, "a Series", f"{len(value):,} items")
        items = value.tolist() if _default_index(value.index) else value.to_dict()
        return plain(items, max_bytes, depth + 1)
    if isinstance(value, pandas.Index):
        return plain(value.tolist(), max_bytes, depth + 1)
    if value is pandas.NaT or value is pandas.NA:
        return None
    if isinstance(value, pandas.Timestamp):
        return value.isoformat()
    if isinstance(value, pandas.Timedelta):
        return value.total_seconds()
    if isinstance(value, pandas.Categorical):
        return plain(list(value), max_bytes, depth + 1)
    if isinstance(value, pandas.Period | pandas.Interval):
        return str(value)
    return value


def _default_index(index: Any) -> bool:
    pandas = sys.modules["pandas"]
    return isinstance(index, pandas.RangeIndex) and index.start == 0 and index.step == 1 and index.name is None


def _fits(rows: int, columns: int, max_bytes: int, what: str, shape: str) -> None:
    """Refuse at once a table whose JSON could not fit `max_bytes` (at least 2 bytes a cell: a digit, a comma)."""
    if rows * columns * 2 > max_bytes:
        raise TooLarge(
            f"__result__ is {what} of {shape}, too large for max_result_bytes = {max_bytes:,}: return a summary or "
            "a slice, e.g. df.head(20), df.describe() or the aggregates you need"
        )
