"""The regular expressions of upstream JSON Schemas, matched in linear time (RE2), never by backtracking.

An upstream's ``inputSchema`` is checked against every call a program makes (``schema.check_arguments``),
and the SDK checks its results against its ``outputSchema``. jsonschema matches ``pattern``,
``patternProperties`` (and the ``additionalProperties`` / ``unevaluatedProperties`` they shape) with
Python's `re`, which backtracks: ``"^(a+)+$"`` against 40 ``a`` and a ``!`` runs for minutes, and a
running `re` cannot be interrupted, not even by a thread's deadline (issue 22: the whole server hung).

So every schema regex here is matched by RE2 (``google-re2``), whose time grows linearly with the
text, whatever the pattern: `install` makes jsonschema's keyword functions use `search` below instead
of `re.search`. A pattern RE2 cannot run (lookaround, backreferences: they need backtracking) is not
enforced by this server: `compile_validator` sends such a tool's calls unchecked (the upstream server
has the last word), and a result checked against one is taken as matching it.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable, Mapping
from typing import Any

import re2  # type: ignore[import-untyped]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a pattern RE2 refuses is reported by `unsupported`, not on stderr

_JSONSCHEMA_MODULES = ("jsonschema._keywords", "jsonschema._utils", "jsonschema._legacy_keywords")


class _Always:
    """What `search` returns for a pattern RE2 cannot run: a match (the pattern is not enforced here)."""

    def __bool__(self) -> bool:
        return True


_ALWAYS = _Always()


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error:
        return None


def unsupported(pattern: object) -> str | None:
    """Why RE2 cannot run `pattern` (a reason for the log), or None when it can."""
    if not isinstance(pattern, str):
        return f"{pattern!r} is not a string"
    if _compiled(pattern) is not None:
        return None
    try:
        re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        return str(exc.args[0] if exc.args else exc)
    return None  # pragma: no cover - compiled on the second try


def search(pattern: str, string: str, flags: int = 0) -> Any:
    """`re.search` for jsonschema: RE2's match of `pattern` in `string` (linear time), or None."""
    compiled = _compiled(pattern)
    if compiled is None:
        return _ALWAYS
    return compiled.search(string)


class _LinearRe:
    """Stands in for the `re` module in jsonschema's keyword functions (they call only ``re.search``)."""

    search = staticmethod(search)


def install() -> None:
    """Make jsonschema match schema patterns with RE2, in this process (the SDK's result checks too)."""
    for name in _JSONSCHEMA_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # a jsonschema without that module has no regex keyword there
            continue
        module.re = _LinearRe  # type: ignore[attr-defined]


def schema_patterns(schema: Any) -> Iterable[str]:
    """Every regex a JSON Schema holds: ``pattern`` values and ``patternProperties`` keys, at any depth."""
    stack = [schema]
    seen = 0
    while stack and seen < 100_000:  # a schema is the upstream's own, but its size is not ours to trust
        node = stack.pop()
        seen += 1
        if isinstance(node, Mapping):
            if isinstance(node.get("pattern"), str):
                yield node["pattern"]
            properties = node.get("patternProperties")
            if isinstance(properties, Mapping):
                yield from (str(key) for key in properties)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
