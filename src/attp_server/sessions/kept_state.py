"""The variables and functions a session keeps between calls, checked again when they come back from a worker.

A worker reports what its program left (`attp_server.sandbox.process.keep`); a worker is sandboxed, not
trusted, so `accept` re-checks every part before the server keeps it: names are public identifiers,
values are well-formed JSON-plus data, each function is exactly one plain ``def`` of its name that
the sandbox's policy accepts, and the whole fits in `max_state_bytes`. What is not kept, by the
worker or here, is named in the result's hint (`hint`), never silently lost.
"""

from __future__ import annotations

import ast
import base64
import functools
import hashlib
import hmac
import json
import keyword
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from attp_server import pyast
from attp_server.sandbox.policy import scan
from attp_server.sandbox.process import keep
from attp_server.sandbox.process.protocol import text_of

logger = logging.getLogger(__name__)

MAX_DROPPED = 50
"""Most names a worker's report may say were not kept."""
HINT_NAMES = 10
"""Most of them the hint names (the rest are counted)."""


@dataclass(frozen=True)
class KeptState:
    """A session's kept names: values in JSON-plus form, functions by their ``def`` source (the ``python`` engine);
    or a ``cpython`` engine's pickle, opaque, with the names it holds and its seal (`seal`)."""

    values: Mapping[str, Any] = field(default_factory=dict)
    functions: Mapping[str, str] = field(default_factory=dict)
    size: int = 0
    """Bytes of the whole, as JSON (of a pickle, its bytes): what `max_state_bytes` (`cpython_max_state_bytes`)
    bounds."""
    pickle: str = ""
    """A ``cpython`` run's kept names, pickled by the worker (base64); never read in the server."""
    pickled: tuple[str, ...] = ()
    """The names `pickle` holds, as the worker said."""
    seal: str = ""
    """`seal` of `pickle` for the handle it belongs to: checked before the pickle goes to a worker."""

    def names(self) -> frozenset[str]:
        return frozenset([*self.values, *self.functions, *self.pickled])

    def message(self) -> dict[str, Any]:
        """The state as a ``run`` message carries it to the worker (a pickle only once its seal is checked)."""
        if self.pickle:
            return {"pickle": self.pickle}
        return {"values": dict(self.values), "functions": dict(self.functions)}

    def stored(self) -> dict[str, Any]:
        """The state as the store keeps it."""
        if self.pickle:
            return {"pickle": self.pickle, "names": list(self.pickled), "seal": self.seal}
        return self.message()

    @classmethod
    def from_stored(cls, data: Mapping[str, Any], size: int) -> KeptState | None:
        """The state `stored` wrote (None: not that shape)."""
        if isinstance(data.get("pickle"), str):
            names, seal = data.get("names"), data.get("seal")
            if not isinstance(names, list) or not isinstance(seal, str):
                return None
            return cls(size=size, pickle=data["pickle"], pickled=tuple(map(str, names)), seal=seal)
        values, functions = data.get("values"), data.get("functions")
        if not isinstance(values, dict) or not isinstance(functions, dict):
            return None
        return cls(values=values, functions=functions, size=size)


def seal(key: bytes, handle_key: str, pickle: str) -> str:
    """The seal of a kept pickle: an HMAC, with the server's secret, of the handle's keyed digest and the pickle.
    A pickle moved to another handle's row, or changed, no longer matches it."""
    return hmac.new(key, handle_key.encode() + b"\0" + pickle.encode("ascii", "replace"), hashlib.sha256).hexdigest()


def sealed(kept: KeptState, key: bytes, handle_key: str) -> bool:
    """Whether `kept`'s pickle is the one the server sealed for this handle."""
    return bool(kept.pickle) and hmac.compare_digest(kept.seal, seal(key, handle_key, kept.pickle))


MAX_PICKLED_NAMES = 10_000
"""Most names a worker may say its pickle holds."""


def accept_pickle(raw: object, *, max_bytes: int, key: bytes, handle_key: str) -> Accepted | None:
    """Check a ``cpython`` worker's report of what its program left (the pickle is only measured: the server never
    unpickles what a worker sent) and seal it to the handle; None if the report is not even the right shape."""
    if not isinstance(raw, dict):
        return None
    blob, names, dropped_raw = raw.get("pickle"), raw.get("names"), raw.get("dropped")
    if not isinstance(blob, str) or not isinstance(names, list) or not isinstance(dropped_raw, list):
        logger.warning("a worker reported a malformed kept pickle; it was not kept")
        return None
    dropped = _dropped(dropped_raw)
    kept_names = [name for name in names[:MAX_PICKLED_NAMES] if public_name(name) and len(name) <= 200]
    if not blob or not kept_names:
        return Accepted(KeptState(), dropped)
    try:
        size = len(base64.b64decode(blob, validate=True)) if len(blob) <= (max_bytes + 2) * 4 // 3 + 4 else None
    except ValueError:
        logger.warning("a worker reported a kept pickle that is not base64; it was not kept")
        return None
    if size is None or size > max_bytes:
        reason = f"too big (more than cpython_max_state_bytes = {max_bytes:,} bytes pickled)"
        return Accepted(KeptState(), {**dict.fromkeys(kept_names, reason), **dropped})
    state = KeptState(size=size, pickle=blob, pickled=tuple(kept_names), seal=seal(key, handle_key, blob))
    return Accepted(state, dropped)


def _dropped(items: list[Any]) -> dict[str, str]:
    dropped: dict[str, str] = {}
    for item in items[:MAX_DROPPED]:
        if isinstance(item, list) and len(item) == 2 and public_name(item[0]):
            dropped[item[0]] = text_of(item[1], 300)
    return dropped


@dataclass
class Accepted:
    state: KeptState
    dropped: dict[str, str]
    """Name -> why it is not kept."""


def public_name(name: object) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("__")


def accept(raw: object, *, max_bytes: int) -> Accepted | None:
    """Check a worker's report of the state its program left; None if the report is not even the right shape."""
    if not isinstance(raw, dict):
        return None
    values, functions, dropped_raw = raw.get("values"), raw.get("functions"), raw.get("dropped")
    if not isinstance(values, dict) or not isinstance(functions, dict) or not isinstance(dropped_raw, list):
        logger.warning("a worker reported a malformed session state; it was not kept")
        return None
    dropped = _dropped(dropped_raw)
    sizes: dict[str, tuple[int, Any]] = {}
    for name, data in values.items():
        if not public_name(name):
            continue
        try:
            keep.check_encoded(data)
            sizes[name] = (keep.measure(data), data)
        except (ValueError, keep.NotKept, RecursionError) as exc:
            logger.warning("a worker reported a malformed kept value: %s", text_of(exc, 200))
            dropped[name] = "it could not be stored"
    sources: dict[str, str] = {}
    size = 0
    named = [(name, source) for name, source in functions.items() if public_name(name)]
    for name, source in sorted(named, key=lambda item: len(item[1]) if isinstance(item[1], str) else 0):
        bytes_ = len(source.encode("utf-8", "replace")) if isinstance(source, str) else 0
        if size + bytes_ > max_bytes:  # defs count against the cap like values (smallest first), unparsed
            dropped[name] = f"too big ({bytes_:,} bytes; max_state_bytes = {max_bytes:,})"
            continue
        problem = _check_function(name, source)
        if problem is None:
            sources[name] = source
            size += bytes_
        else:
            dropped[name] = problem
    kept: dict[str, Any] = {}
    for name, (bytes_, data) in sorted(sizes.items(), key=lambda item: item[1][0]):
        if size + bytes_ <= max_bytes:
            kept[name] = data
            size += bytes_
        else:
            dropped.setdefault(name, f"too big ({bytes_:,} bytes; max_state_bytes = {max_bytes:,})")
    return Accepted(KeptState(values=kept, functions=sources, size=size), dropped)


def _check_function(name: str, source: object) -> str | None:
    """Why `source` is not a ``def`` the server keeps (None when it is one)."""
    if not isinstance(source, str) or len(source) > keep.FIRST_LINE:
        return "its source could not be stored"
    try:
        module = pyast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "its source could not be stored"
    if len(module.body) != 1 or not isinstance(module.body[0], ast.FunctionDef) or module.body[0].name != name:
        return "its source could not be stored"
    reason = keep.why_not_source(module.body[0])
    if reason is not None:
        return reason
    if scan(module):
        return "its source is not allowed in the sandbox"
    return None


def same(one: KeptState | None, other: KeptState | None) -> bool:
    """Whether two states keep the same names with the same sources and the same values, as JSON (``1`` and ``1.0``
    are not the same value here, though Python calls them equal)."""
    if one is None or other is None:
        return one is other
    if one.size != other.size or one.functions != other.functions or one.values != other.values:
        return False
    if one.pickle or other.pickle:
        return one.pickle == other.pickle and one.pickled == other.pickled
    return _text(one.values) == _text(other.values)


def _text(values: Mapping[str, Any]) -> str:
    return json.dumps(values, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


UNSEALED = (
    "The variables kept from this session's earlier calls were dropped: the stored state did not carry this "
    "server's seal for this session (it was changed, or written by another server)."
)
STOPPED = "The run was stopped before it finished: the variables kept from earlier calls are as they were."


@dataclass(frozen=True)
class Sealing:
    """What seals a ``cpython`` run's pickle to its handle: the server's key for it, and the handle's keyed digest."""

    key: bytes
    handle_key: str


async def after_run(
    kept: KeptState | None, done: Mapping[str, Any], max_bytes: int, sealing: Sealing | None = None
) -> tuple[KeptState | None, str | None]:
    """The session's state after a run (from the worker's ``done`` report), and the hint naming what was not kept.
    With `sealing`, the report is a ``cpython`` worker's pickle.

    The state is `kept` itself when the run left it as it was: nothing needs writing then."""
    if "state" not in done:  # the worker was killed: it reported nothing
        return kept, STOPPED if kept is not None else None
    if done["state"] is None:  # the program did not get to run, was stopped midway, or left the state unchanged
        return kept, None
    return await anyio.to_thread.run_sync(functools.partial(_after, kept, done["state"], max_bytes, sealing))


def _after(
    kept: KeptState | None, raw: object, max_bytes: int, sealing: Sealing | None
) -> tuple[KeptState | None, str | None]:
    if sealing is not None:
        accepted = accept_pickle(raw, max_bytes=max_bytes, key=sealing.key, handle_key=sealing.handle_key)
    else:
        accepted = accept(raw, max_bytes=max_bytes)
    if accepted is None:
        return kept, None
    state = accepted.state if accepted.state.names() else None
    return (kept if same(state, kept) else state), hint(accepted.dropped)


def hint(dropped: Mapping[str, str]) -> str | None:
    """The hint naming what the next call will not find, or None when everything was kept.

    One line, a few words a name: it comes with every reply of a program that leaves such names, needed or not.
    """
    if not dropped:
        return None
    items = list(dropped.items())
    parts = [f"{name} ({reason})" for name, reason in items[:HINT_NAMES]]
    more = f"; and {len(items) - HINT_NAMES} more" if len(items) > HINT_NAMES else ""
    return "Not kept for the next call: " + "; ".join(parts) + more
