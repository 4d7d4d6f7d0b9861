"""The worker's recently checked programs: a program sent again skips its parse, static check and scope analysis.

Agents resend programs (a retry, a poll, the same step of a loop), and for a short program those three
passes are most of a worker's own time (for five lines with five tool calls, about half). What is
kept is only what follows from the text: the parsed tree and the scopes resolved from it, never a
value, a symbol table or a compiled closure, so no run can see what an earlier run computed. Nothing
is kept for a program that failed the check (the next run checks it again and says why again).

Entries are valid for one set of check inputs (the enabled tools, packs and modules: the owner clears
the cache when those change); the key holds the rest (the text, ``allow_imports``, a digest of the kept
names: `names_key`).
The cache is bounded in entries and in characters of source, so that its trees stay a few megabytes.
A program is never changed after it is stored: a run that prepends kept definitions builds a new tree.
"""

from __future__ import annotations

import ast
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

from attp_server.sandbox.engines.python.scopes import Scope

try:  # CPython's own digest: hashlib would load OpenSSL into every worker (about 4 MB each)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a CPython built without it
    from hashlib import blake2b

MAX_ENTRIES = 32
"""Programs kept per worker."""

MAX_PROGRAM_CHARS = 8_000
"""Longer programs are not kept: their check is a small part of their run, and their trees are large."""

MAX_TOTAL_CHARS = 32_000
"""Characters of source the kept programs may add up to (their trees are about 100 times that in bytes)."""


@dataclass(frozen=True)
class Checked:
    """A program that passed the static check: its tree and the scopes `sandbox.engines.python.scopes` resolved."""

    tree: ast.Module
    scopes: dict[ast.AST, Scope]


def names_key(names: frozenset[str]) -> bytes:
    """A 16-byte key standing for a set of names (a session's kept names), for the check inputs of an entry.

    Never the set itself: a session may keep tens of thousands of short names within max_state_bytes, and
    a copy of them kept with every program it sends took the memory of the worker that other sessions share.
    """
    return blake2b("\0".join(sorted(names)).encode("utf-8", "surrogatepass"), digest_size=16).digest()


class CheckedPrograms:
    """A least-recently-used map from (program text, check inputs) to its `Checked` tree and scopes."""

    def __init__(
        self,
        max_entries: int = MAX_ENTRIES,
        max_program_chars: int = MAX_PROGRAM_CHARS,
        max_total_chars: int = MAX_TOTAL_CHARS,
    ) -> None:
        self.max_entries = max_entries
        self.max_program_chars = max_program_chars
        self.max_total_chars = max_total_chars
        self._entries: OrderedDict[tuple[str, Hashable], Checked] = OrderedDict()
        self._chars = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, code: str, inputs: Hashable) -> Checked | None:
        key = (code, inputs)
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, code: str, inputs: Hashable, checked: Checked) -> None:
        if len(code) > self.max_program_chars or (code, inputs) in self._entries:
            return
        self._entries[(code, inputs)] = checked
        self._chars += len(code)
        while len(self._entries) > self.max_entries or self._chars > self.max_total_chars:
            (old, _), _ = self._entries.popitem(last=False)
            self._chars -= len(old)

    def clear(self) -> None:
        self._entries.clear()
        self._chars = 0
