"""Coercion of a verbatim TAM value to its parameter's annotation (`coerce_value`), and `describe` for errors."""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import json
import math
import re
import types
import typing
from typing import Any, Literal

from pydantic import BaseModel

_INT = re.compile(r"[+-]?\d+(?:_\d+)*", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_BOOLS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}
_NULLS = frozenset({"null", "none"})


class CoercionError(ValueError):
    """A value's text does not fit its parameter's type; `expected` says what would."""

    def __init__(self, expected: str, reason: str = "") -> None:
        super().__init__(reason or expected)
        self.expected = expected
        self.reason = reason


def _unwrap(annotation: Any) -> Any:
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif hasattr(annotation, "__supertype__"):  # typing.NewType
            annotation = annotation.__supertype__
        else:
            return annotation


def _kind(annotation: Any) -> str:
    """One of: str, any, none, bool, int, float, array, object, literal, union."""
    annotation = _unwrap(annotation)
    if annotation in (inspect.Parameter.empty, Any, object):
        return "any"
    if annotation is None or annotation is type(None):
        return "none"
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "literal"
    if origin is typing.Union or origin is types.UnionType:
        return "union"
    cls = origin or annotation
    if not isinstance(cls, type):
        return "any"
    checks: tuple[tuple[str, tuple[type, ...]], ...] = (
        ("str", (str,)),
        ("any", (bytes, bytearray)),
        ("bool", (bool,)),
        ("int", (int,)),
        ("float", (float,)),
        ("object", (BaseModel, collections.abc.Mapping)),
        ("array", (collections.abc.Sequence, collections.abc.Set)),
    )
    for kind, bases in checks:
        if issubclass(cls, bases):
            return kind
    return "object" if typing.is_typeddict(cls) or dataclasses.is_dataclass(cls) else "any"


def describe(annotation: Any) -> str:
    """What a TAM value for `annotation` must look like, for error messages."""
    kind = _kind(annotation)
    args = typing.get_args(_unwrap(annotation))
    if kind == "union":
        return " or ".join(dict.fromkeys(describe(member) for member in args))
    if kind == "literal":
        return "one of " + ", ".join(repr(v) for v in args)
    return {
        "str": "text",
        "any": "text, or a JSON array/object",
        "none": "null",
        "bool": "true or false",
        "int": "an integer such as 42",
        "float": "a number such as 2.5",
        "array": 'a JSON array such as ["a", "b"]',
        "object": 'a JSON object such as {"key": "value"}',
    }[kind]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def _json(text: str, want: str, expected: str) -> Any:
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise CoercionError(expected, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise CoercionError(expected, f"not usable JSON: {exc}") from None
    if (want == "array") != isinstance(value, list) or (want == "object") != isinstance(value, dict):
        raise CoercionError(expected, f"a JSON {type(value).__name__} where {expected} was expected")
    return value


def _json_shape(text: str) -> str | None:
    stripped = text.strip()
    return {"[": "array", "{": "object"}.get(stripped[:1]) if stripped[-1:] in "]}" else None


def coerce_value(text: str, annotation: Any) -> Any:
    """The JSON-safe value a parameter annotated `annotation` receives from TAM value `text`.

    ``str`` (and a union with ``str``): the text, verbatim. ``int``: ``42``, ``-7``, ``1_000``.
    ``float``: ``2.5``, ``1e-3``, ``3`` (finite only). ``bool``: true/false, yes/no, on/off, 1/0 (any
    case). ``None`` in a union without ``str``: ``null`` or ``none``. ``Literal``: one of its values.
    Lists, tuples, sets, dicts, models, TypedDicts: JSON text of an array or object. No annotation,
    ``Any`` and other classes: JSON text of an array or object, else the text verbatim. Only ``str``
    keeps surrounding whitespace; every other kind is read from the stripped text. Element types and
    constraints are checked afterwards by the tool's own validation.

    Raises:
        CoercionError: the text does not fit; `expected` describes what would.
    """
    kind = _kind(annotation)
    expected = describe(annotation)
    if kind == "str":
        return text
    if kind == "any":
        shape = _json_shape(text)
        if shape is not None:
            try:
                return _json(text, shape, expected)
            except CoercionError:
                return text
        return text
    if kind == "union":
        return _coerce_union(text, typing.get_args(_unwrap(annotation)), expected)
    stripped = text.strip()
    if kind in ("array", "object"):
        return _json(stripped, kind, expected)
    if kind == "literal":
        for choice in typing.get_args(_unwrap(annotation)):
            if isinstance(choice, str) and choice in (text, stripped):
                return choice
            if not isinstance(choice, str) and choice is not None:
                try:
                    if coerce_value(stripped, type(choice)) == choice:
                        return choice
                except CoercionError:
                    continue
        raise CoercionError(expected)
    if not stripped:
        raise CoercionError(expected, "the value is empty; leave the parameter out to use its default")
    if kind == "none":
        if stripped.casefold() in _NULLS:
            return None
    elif kind == "bool":
        if stripped.casefold() in _BOOLS:
            return _BOOLS[stripped.casefold()]
    elif kind == "int":
        if _INT.fullmatch(stripped):
            try:
                return int(stripped)
            except ValueError as exc:  # more digits than Python converts
                raise CoercionError(expected, str(exc)) from None
    elif _FLOAT.fullmatch(stripped) and math.isfinite(value := float(stripped)):
        return value
    raise CoercionError(expected)


def _coerce_union(text: str, members: tuple[Any, ...], expected: str) -> Any:
    kinds = [_kind(member) for member in members]
    if "str" in kinds:
        shape = _json_shape(text)
        if shape in kinds:
            try:
                return _json(text, shape, expected)
            except CoercionError:
                pass
        return text
    if "none" in kinds and text.strip().casefold() in _NULLS:
        return None
    reasons = []
    for member, kind in zip(members, kinds, strict=True):
        if kind == "none":
            continue
        try:
            return coerce_value(text, member)
        except CoercionError as exc:
            if exc.reason:
                reasons.append(exc.reason)
    raise CoercionError(expected, "; ".join(reasons))
