"""What a handle keeps of its ``cpython`` runs: the top-level names a program leaves, as one opaque blob.

`collect` goes through the names the program bound at the top level: a module is kept by its name, a function or
class by the source of its top-level ``def`` or ``class``, anything else pickled (DataFrames included); what
cannot be kept is named with the reason. The blob is a pickle of all that, made and read only in workers: the
server stores it sealed to the handle (`attp_server.sessions.kept_state`), never reads it, and hands it back only
to a worker running the same handle's next program, where `restore` defines the kept functions and classes again
(first, so that kept instances of them unpickle), imports the kept modules and unpickles the values.

Unpickling runs whatever the pickle says, in the worker: the blob is the handle's own, sealed by the server to
that handle, and its program could run the same code anyway.
Runs in the worker. Imports nothing above `attp_server.sandbox`.
"""

from __future__ import annotations

import ast
import base64
import keyword
import pickle
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

KEPT_FILE = "<kept>"
"""The file name kept definitions are compiled under (an error inside one points at no line of the program)."""

MAX_DROPPED = 50


def public_name(name: object) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("__")


@dataclass
class Restored:
    """What `restore` put back, and what it could not (name -> why)."""

    sources: dict[str, str] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)
    kept: dict[str, Any] = field(default_factory=dict)
    """What the blob held (``sources``, ``modules``, ``values``): a run that leaves the same sends nothing back."""


def restore(blob: str, namespace: dict[str, Any]) -> Restored:
    """Put a handle's kept names into `namespace` (the program's module), the definitions first."""
    restored = Restored()
    try:
        kept = pickle.loads(base64.b64decode(blob))  # noqa: S301  (the handle's own, sealed: see the module)
    except Exception as exc:
        restored.dropped["*"] = f"the kept state could not be read ({type(exc).__name__})"
        return restored
    restored.kept = kept
    for name, module in kept.get("modules", {}).items():
        if module in sys.modules:
            namespace[name] = sys.modules[module]
    # Values first (a decorator or a base class of a kept definition may be one), then the definitions, then the
    # values that needed them (instances of a kept class).
    waiting = {name: data for name, data in kept.get("values", {}).items() if not _unpickled(name, data, namespace)}
    for name, source in kept.get("sources", []):
        try:
            exec(compile(source, KEPT_FILE, "exec"), namespace)  # noqa: S102
            restored.sources[name] = source
        except Exception as exc:
            restored.dropped[name] = f"its definition failed again ({type(exc).__name__}: {exc})"[:300]
    for name, data in waiting.items():
        try:
            namespace[name] = pickle.loads(data)  # noqa: S301
        except Exception as exc:
            restored.dropped[name] = f"it could not be unpickled ({type(exc).__name__}: {exc})"[:300]
    return restored


def _unpickled(name: str, data: bytes, namespace: dict[str, Any]) -> bool:
    try:
        namespace[name] = pickle.loads(data)  # noqa: S301
    except Exception:
        return False
    return True


def definitions(tree: ast.Module, code: str) -> dict[str, str]:
    """The source of each top-level ``def`` and ``class`` of the program (decorators included), by name; the last
    one of a name wins, as it does when the program runs."""
    lines = code.splitlines(keepends=True)
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.end_lineno is not None:
            first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
            found[node.name] = "".join(lines[first - 1 : node.end_lineno])
    return found


def collect(
    namespace: Mapping[str, Any],
    given: Mapping[str, Any],
    sources: Mapping[str, str],
    max_bytes: int,
    before: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The state a run leaves: ``{"pickle": base64, "names": [...], "dropped": [[name, why], ...]}``, or None when
    it is exactly the state `before` the run (pickled the same: nothing to send, check or store again).

    `given` holds what the run was given besides the program's own names (tools, modules, ``show``): kept only when
    the program bound the name to something else. `sources` are the definitions the program (or a kept state)
    made, by name."""
    parts: dict[str, tuple[str, Any, int]] = {}
    dropped: dict[str, str] = {}
    for name, value in list(namespace.items()):
        if not public_name(name) or (name in given and given[name] is value):
            continue
        try:
            parts[name] = _part(name, value, sources)
        except _NotKept as exc:
            dropped[name] = str(exc)
    kept: dict[str, Any] = {"sources": [], "modules": {}, "values": {}}
    size = 0
    for name, (kind, data, bytes_) in sorted(parts.items(), key=lambda item: item[1][2]):
        if size + bytes_ > max_bytes:
            dropped[name] = f"too big ({bytes_:,} bytes pickled; cpython_max_state_bytes = {max_bytes:,})"
            continue
        size += bytes_
        if kind == "sources":
            kept["sources"].append((name, data))
        else:
            kept[kind][name] = data
    order = list(sources)  # definitions run again in the order they were made
    kept["sources"].sort(key=lambda item: order.index(item[0]) if item[0] in order else len(order))
    if not dropped and before is not None and _same(kept, before):
        return None
    names = sorted([*(name for name, _ in kept["sources"]), *kept["modules"], *kept["values"]])
    blob = base64.b64encode(pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii") if names else ""
    return {
        "pickle": blob,
        "names": names,
        "dropped": [[name, why] for name, why in list(dropped.items())[:MAX_DROPPED]],
    }


def _same(kept: Mapping[str, Any], before: Mapping[str, Any]) -> bool:
    return (
        [tuple(item) for item in kept["sources"]] == [tuple(item) for item in before.get("sources", [])]
        and kept["modules"] == before.get("modules", {})
        and kept["values"] == before.get("values", {})
    )


class _NotKept(Exception):
    pass


def _part(name: str, value: Any, sources: Mapping[str, str]) -> tuple[str, Any, int]:
    """How one name is kept: ``("modules", module name)``, ``("sources", source)`` or ``("values", pickle)``."""
    if isinstance(value, types.ModuleType):
        return "modules", value.__name__, len(value.__name__)
    if _defined_here(value):
        source = sources.get(name)
        if source is None or getattr(value, "__qualname__", None) != name:
            raise _NotKept("a function or class not made by a top-level def or class of that name (a lambda?)")
        return "sources", source, len(source.encode("utf-8", "replace"))
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise _NotKept(f"it cannot be pickled ({type(exc).__name__}: {str(exc)[:120]})") from None
    return "values", data, len(data)


def _defined_here(value: Any) -> bool:
    return isinstance(value, types.FunctionType | type) and getattr(value, "__module__", None) == "__main__"
