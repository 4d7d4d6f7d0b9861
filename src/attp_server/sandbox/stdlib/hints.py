"""The curated `typing` a program sees: the names annotations use, bound to harmless values.

The evaluator never evaluates annotations, so these exist for ``from typing import List, Optional``
and the rare annotation evaluated as a value (``cast(List[int], x)``, ``T = TypeVar('T')``). Concrete
containers are the classes themselves (``List`` is ``list``, ``Counter`` is ``collections.Counter``),
abstract ones are ``collections.abc``'s (so ``isinstance(x, Mapping)`` works), and special forms
(``Any``, ``Optional``, ``Union``, ...) are `Hint` objects: subscriptable, combinable with ``|``,
printable, and nothing else. Never the real ``typing`` objects: ``typing.List["expr"]`` compiles its
string argument, and their attributes forward to their origins.

Imported by the worker; imports nothing from the rest of ``server`` but ``attp_server.sandbox``.
"""

from __future__ import annotations

import collections as _collections
import collections.abc as _abc
import re as _re
from typing import Any

from attp_server.sandbox.stdlib.containers import deque
from attp_server.sandbox.stdlib.namespaces import Namespace

MAX_HINT_TEXT = 200
"""Longest text a `Hint` keeps (``Union[h, h]`` in a loop would double it each time)."""


class Hint:
    """A typing special form: ``Optional[int]`` gives another `Hint`; calling one is an error, as in Python."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text if len(text) <= MAX_HINT_TEXT else text[: MAX_HINT_TEXT - 3] + "..."

    def __getitem__(self, parameters: Any) -> Hint:
        items = parameters if isinstance(parameters, tuple) else (parameters,)
        return Hint(f"{self._text}[{', '.join(_name(item) for item in items[:20])}]")

    def __or__(self, other: Any) -> Hint:
        return Hint(f"{self._text} | {_name(other)}")

    def __ror__(self, other: Any) -> Hint:
        return Hint(f"{_name(other)} | {self._text}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{self._text} is for annotations only; it cannot be called")

    def __repr__(self) -> str:
        return self._text


def _name(value: Any) -> str:
    if isinstance(value, type):
        return value.__name__
    if value is None:
        return "None"
    if isinstance(value, list):
        return "[" + ", ".join(_name(v) for v in value[:20]) + "]"
    return repr(value)[:MAX_HINT_TEXT]


def type_var(name: str, *constraints: Any, **options: Any) -> Hint:
    """``typing.TypeVar('T')``: a placeholder for generic annotations."""
    if not isinstance(name, str):
        raise TypeError("TypeVar name must be a string")
    return Hint(f"~{name[:MAX_HINT_TEXT]}")


class NewType:
    """``typing.NewType('UserId', int)``: calling it returns its argument unchanged, as in Python."""

    __slots__ = ("_name",)

    def __init__(self, name: str, tp: Any) -> None:
        self._name = str(name)[:MAX_HINT_TEXT]

    def __call__(self, value: Any) -> Any:
        return value

    def __repr__(self) -> str:
        return f"__main__.{self._name}"


def cast(typ: Any, value: Any) -> Any:
    """``typing.cast``: returns `value` unchanged."""
    return value


_CONCRETE: dict[str, Any] = {
    "List": list, "Dict": dict, "Set": set, "FrozenSet": frozenset, "Tuple": tuple, "Text": str,
    "DefaultDict": _collections.defaultdict, "OrderedDict": _collections.OrderedDict, "Counter": _collections.Counter,
    "ChainMap": _collections.ChainMap, "Deque": deque, "Pattern": _re.Pattern, "Match": _re.Match,
}  # fmt: skip

_ABSTRACT = (
    "Iterable", "Iterator", "Sequence", "MutableSequence", "Mapping", "MutableMapping", "Collection", "Container",
    "Hashable", "Sized", "Reversible", "MutableSet", "Callable", "Generator", "KeysView", "ItemsView", "ValuesView",
)  # fmt: skip

_SPECIAL = (
    "Any", "Optional", "Union", "Literal", "Final", "ClassVar", "Annotated", "NoReturn", "Never", "Self", "Type",
    "AnyStr", "TypeAlias", "Generic", "Protocol", "NamedTuple", "TypedDict", "LiteralString", "Required",
    "NotRequired", "TypeGuard", "Concatenate", "ParamSpec", "SupportsInt", "SupportsFloat", "SupportsIndex",
    "SupportsAbs", "SupportsRound",
)  # fmt: skip


def typing_namespace() -> Namespace:
    members: dict[str, Any] = dict(_CONCRETE)
    members.update({name: getattr(_abc, name) for name in _ABSTRACT})
    members["AbstractSet"] = _abc.Set
    members.update({name: Hint(f"typing.{name}") for name in _SPECIAL})
    members.update(TypeVar=type_var, NewType=NewType, cast=cast, TYPE_CHECKING=False)
    return Namespace("typing", members)
