"""The worker's cache of checked programs (`attp_server.sandbox.process.checked`): bounded, least recently used first out.

What it must never do (carry a session's kept definitions into another session's run, or let a program
skip a check its inputs have changed for) is tested through a real worker in test_sessions.py.
"""

from __future__ import annotations

import ast

from attp_server.sandbox.engines.python.scopes import analyze
from attp_server.sandbox.process.checked import Checked, CheckedPrograms


def checked(code: str) -> Checked:
    tree = ast.parse(code)
    return Checked(tree, analyze(tree))


def test_a_program_is_found_only_with_the_same_check_inputs() -> None:
    cache = CheckedPrograms()
    entry = checked("x = 1")
    cache.put("x = 1", (True, frozenset()), entry)
    assert cache.get("x = 1", (True, frozenset())) is entry
    assert cache.get("x = 1", (False, frozenset())) is None
    assert cache.get("x = 1", (True, frozenset({"helper"}))) is None
    assert cache.get("x = 2", (True, frozenset())) is None


def test_the_least_recently_used_program_goes_first() -> None:
    cache = CheckedPrograms(max_entries=2)
    for code in ("a = 1", "b = 2"):
        cache.put(code, (), checked(code))
    assert cache.get("a = 1", ()) is not None  # now "b = 2" is the least recently used
    cache.put("c = 3", (), checked("c = 3"))
    assert len(cache) == 2
    assert cache.get("b = 2", ()) is None
    assert cache.get("a = 1", ()) is not None and cache.get("c = 3", ()) is not None


def test_the_source_kept_stays_under_its_bound() -> None:
    cache = CheckedPrograms(max_entries=100, max_program_chars=50, max_total_chars=100)
    long = "x = '" + "y" * 60 + "'"
    cache.put(long, (), checked(long))
    assert len(cache) == 0  # over the per-program bound: never kept
    programs = [f"v{i} = '{'z' * 30}'" for i in range(5)]  # 39 characters each
    for code in programs:
        cache.put(code, (), checked(code))
    assert len(cache) == 2  # 2 x 39 <= 100 < 3 x 39
    assert [cache.get(code, ()) is not None for code in programs] == [False, False, False, True, True]
    cache.clear()
    assert len(cache) == 0 and cache.get(programs[-1], ()) is None
