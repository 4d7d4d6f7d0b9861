""" "Did you mean ...?": the closest known name to a misspelt one, at a bounded cost.

`difflib.get_close_matches` compares the name with every candidate, and its full comparison costs up
to the product of the two lengths, in Python. A hostile program controls both the names it misspells
and the names it binds: 65 names of 150 characters against 65 others cost about ten seconds. Here a
suggestion examines at most `MAX_CANDIDATES` candidates (those closest in length), runs the full
comparison on at most `MAX_COMPARED` of them (the best by difflib's cheap upper bound), and suggests
nothing for names longer than `MAX_NAME_CHARS`: no tool, module or parameter name is that long.

Imported by the worker and by the server; imports nothing from the rest of ``server``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from difflib import SequenceMatcher

MAX_NAME_CHARS = 64
"""Names (and candidates) longer than this get no fuzzy match, only a case-insensitive exact one."""

MAX_CANDIDATES = 1_000
"""Candidates a suggestion looks at, the closest in length first."""

MAX_COMPARED = 20
"""Candidates a suggestion compares in full (`SequenceMatcher.ratio`), the best by `quick_ratio` first."""


def closest(name: str, candidates: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The candidate closest to `name` (typo-tolerant, case-insensitive), or None.

    The same answer as ``difflib.get_close_matches(name, candidates, n=1, cutoff=cutoff)`` on lower-cased
    names, whenever the bounds above are not reached.
    """
    key = name.lower()
    size = len(key)
    # ratio = 2 * matches / (len(a) + len(b)) <= 2 * min / (len(a) + len(b)): lengths too far apart never
    # match, and a case-insensitive equal has the same length.
    shortest, longest = size * cutoff / (2 - cutoff), size * (2 - cutoff) / max(cutoff, 1e-9)
    lowered: dict[str, str] = {}
    for candidate in candidates:
        if shortest <= len(candidate) <= longest:
            folded = candidate.lower()
            known = lowered.get(folded)
            if known is None or candidate > known:  # a case-only clash goes to the greatest spelling, every time
                lowered[folded] = candidate
    if key in lowered:
        return lowered[key]
    if not size or size > MAX_NAME_CHARS:
        return None
    near = [c for c in lowered if len(c) <= MAX_NAME_CHARS]
    if len(near) > MAX_CANDIDATES:
        near = heapq.nsmallest(MAX_CANDIDATES, near, key=lambda c: (abs(len(c) - size), c))
    matcher = SequenceMatcher()
    matcher.set_seq2(key)  # difflib caches details of the second sequence: the name, compared with each candidate
    bounds: list[tuple[float, str]] = []
    for candidate in near:
        matcher.set_seq1(candidate)
        if matcher.real_quick_ratio() >= cutoff and (bound := matcher.quick_ratio()) >= cutoff:
            bounds.append((bound, candidate))
    best: tuple[float, str] | None = None
    for _bound, candidate in heapq.nlargest(MAX_COMPARED, bounds):
        matcher.set_seq1(candidate)
        score = matcher.ratio()
        if score >= cutoff and (best is None or (score, candidate) > best):
            best = (score, candidate)
    return lowered[best[1]] if best is not None else None
