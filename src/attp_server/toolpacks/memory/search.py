"""find_page's ranking: candidates from the text index for terms of 3+ characters, a scan for shorter ones.

The index is SQLite's FTS5 with trigram tokens, or pg_trgm GIN indexes on PostgreSQL; both find
pages containing a term (case-insensitive substring match), newest first.

A query is split into terms at spaces; "quoted text" is one term. A page matches when it contains any
term in its name, description or detail (case-insensitive substring match). Ranking, best first:
how many of the terms the page contains; where they occur (name 3, description 2, detail 1 per term);
then BM25 relevance (term frequency, text length, rarer terms count more); then the oldest page first.

Which pages get ranked: when at most CANDIDATES pages match, all of them, so the order is exact.
When more match (a common word in a large tree), reading every match would cost a pass over all of
them on each query, so the candidates are gathered from reads that stop early (the index is walked
newest first, up to a limit): the newest TIER matches; the newest TIER pages containing every term;
and, among the newest COLUMN_WINDOW pages with a term in the name and in the description (for the
first TIERED_TERMS terms), the TIER with the most such hits, since those rank first. The top results
then have the best ranking keys there are in all but rare cases; among equally good pages (a common
word in thousands of names) the newer ones are the ones compared. A short term (1 or 2 characters,
below the index) adds the first CANDIDATES pages containing it, found by scanning the pages table.

BM25 is computed here over the candidates' texts rather than by SQLite's ``bm25()``: that function
counts every matching row of the whole table for its term statistics on each query (about 20 ms for
a word in most of 100,000 pages), even when only a few rows are read. The formula is FTS5's, with
the same column weights (name 10, description 4, detail 1); a term's document frequency is counted
among the candidates (exact when all matches are candidates) and the page count is the highest page id
(SQLite) or the scope's page count (PostgreSQL).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from attp_server.toolpacks.memory.pages import Column, Page
from attp_server.toolpacks.memory.tree import TreeTx

_TERM = re.compile(r'"([^"]*)"|(\S+)')
TRIGRAM = 3
CANDIDATES = 500
"""Up to this many matching pages are all ranked."""
TIER = 200
"""Beyond CANDIDATES matches, pages ranked from each kind of read (more than find_page's limit of 100)."""
COLUMN_WINDOW = 2000
"""Beyond CANDIDATES matches, how many of the newest pages with a term in the name (or the description) are read."""
TIERED_TERMS = 3
"""Beyond CANDIDATES matches, the terms whose name and description hits are read."""
SNIPPET_CHARS = 160
FIELD_WEIGHTS = (("name", 3), ("description", 2), ("detail", 1))
"""Where a term occurs, for the second ranking key."""
BM25_WEIGHTS = (10.0, 4.0, 1.0)
"""FTS5 bm25() column weights for name, description, detail."""
BM25_K1 = 1.2
BM25_B = 0.75


MAX_QUERY_CHARS = 1_000
"""Longest query find_page takes: a search box, not a document."""
MAX_TERMS = 20
"""Most distinct terms in one query (each is a phrase of the FTS query and a column of the ranking)."""
CHECK_EVERY = 50
"""Candidates scored between two looks at the run's deadline."""


class SearchStopped(Exception):
    """The run that asked for the search has ended; nobody waits for the answer."""


def terms_of(query: str) -> list[str]:
    """Distinct terms in order; quotes group words, otherwise spaces separate them."""
    terms: list[str] = []
    seen: set[str] = set()
    for quoted, bare in _TERM.findall(query):
        term = (quoted or bare).strip()
        if term and term.casefold() not in seen:
            seen.add(term.casefold())
            terms.append(term)
    return terms


@dataclass(frozen=True)
class Hit:
    page: Page
    matched: int
    weight: int
    bm25: float
    """Higher is more relevant (unlike SQLite's bm25(), which is negated)."""
    snippet: str


@dataclass(frozen=True)
class _Candidate:
    rowid: int
    index: str
    fields: tuple[str, str, str]
    """name, description, detail ('' for a contents page)."""
    folded: tuple[str, str, str]


@dataclass(frozen=True)
class _Scored:
    candidate: _Candidate
    matched: int
    weight: int
    counts: tuple[tuple[int, int, int], ...]
    """Occurrences of each term in name, description, detail."""


def search(
    tx: TreeTx, query: str, segment_ids: Sequence[str], limit: int, time_left: Callable[[], float | None] = lambda: None
) -> list[Hit]:
    """The best `limit` pages for `query`; `SearchStopped` once `time_left` says the asking run has ended."""
    terms = terms_of(query)
    if not terms or not segment_ids:
        return []
    rowids = _candidate_ids(tx, terms, segment_ids)
    needles = [term.casefold() for term in terms]
    scored: list[_Scored] = []
    for count, candidate in enumerate(_fetch(tx, rowids)):
        if not count % CHECK_EVERY and time_left() == 0.0:
            raise SearchStopped
        found = _score(candidate, needles)
        if found.matched:
            scored.append(found)
    relevance = _bm25(scored, len(terms), tx.page_count())
    scored.sort(key=lambda s: (-s.matched, -s.weight, -relevance[s.candidate.rowid], s.candidate.rowid))
    hits: list[Hit] = []
    for s in scored[:limit]:
        page = tx.page(s.candidate.index)
        assert page is not None  # read in this same transaction
        hits.append(Hit(page, s.matched, s.weight, relevance[s.candidate.rowid], _snippet(s.candidate, terms)))
    return hits


# ------------------------------------------------------------------ candidates


def _candidate_ids(tx: TreeTx, terms: Sequence[str], segment_ids: Sequence[str]) -> set[int]:
    long_terms = [t for t in terms if len(t) >= TRIGRAM]
    found: set[int] = set()
    if long_terms:
        index = _Index(tx, segment_ids)
        newest = index.newest(long_terms, CANDIDATES + 1)
        if len(newest) <= CANDIDATES:
            found.update(newest)
        else:  # too many to rank them all
            found.update(newest[:TIER])
            if len(long_terms) > 1:
                found.update(index.newest(long_terms, TIER, every=True))
            found.update(_strongest(index, long_terms[:TIERED_TERMS]))
    for term in terms:
        if len(term) < TRIGRAM:
            found.update(tx.containing(term, segment_ids, CANDIDATES))
    return found


def _strongest(index: _Index, terms: Sequence[str]) -> list[int]:
    """The TIER pages with the most terms in their name and description (weighted as in the ranking),
    among the newest COLUMN_WINDOW pages with each term in the name, and in the description."""
    keys: dict[int, tuple[int, int]] = {}
    for term in terms:
        weights: dict[int, int] = {}
        for column, weight in _COLUMNS:
            for rowid in index.newest([term], COLUMN_WINDOW, column=column):
                weights[rowid] = weights.get(rowid, 0) + weight
        for rowid, weight in weights.items():
            matched, total = keys.get(rowid, (0, 0))
            keys[rowid] = (matched + 1, total + weight)
    return sorted(keys, key=lambda rowid: (*keys[rowid], rowid), reverse=True)[:TIER]


class _Index:
    """Reads of the text index, limited to the searched segments."""

    def __init__(self, tx: TreeTx, segment_ids: Sequence[str]) -> None:
        self.tx = tx
        every = {segment.id for segment in tx.segments()}
        self.segment_ids: Sequence[str] | None = None if every <= set(segment_ids) else segment_ids
        """None when all segments are searched: no need to look up each match's page for its segment."""

    def newest(
        self, terms: Sequence[str], limit: int, *, every: bool = False, column: Column | None = None
    ) -> list[int]:
        """Ids of the newest `limit` pages containing any (`every`: all) of `terms`; the index stops reading there."""
        return self.tx.newest_matching(terms, limit, every=every, column=column, segment_ids=self.segment_ids)


def _fetch(tx: TreeTx, rowids: Iterable[int]) -> list[_Candidate]:
    return [
        _Candidate(rowid, index, (name, about, detail), (name.casefold(), about.casefold(), detail.casefold()))
        for rowid, index, name, about, detail in tx.texts(sorted(rowids))
    ]


# ------------------------------------------------------------------ ranking

_NAME, _DESCRIPTION, _DETAIL = (weight for _field, weight in FIELD_WEIGHTS)
_COLUMNS: tuple[tuple[Column, int], ...] = (("name", _NAME), ("description", _DESCRIPTION))


def _score(candidate: _Candidate, needles: Sequence[str]) -> _Scored:
    """How many terms the page contains, where, and how often (`needles` are the casefolded terms)."""
    name, about, detail = candidate.folded
    matched = weight = 0
    counts: list[tuple[int, int, int]] = []
    for needle in needles:
        in_name, in_about, in_detail = name.count(needle), about.count(needle), detail.count(needle)
        counts.append((in_name, in_about, in_detail))
        if in_name or in_about or in_detail:
            matched += 1
            weight += (_NAME if in_name else 0) + (_DESCRIPTION if in_about else 0) + (_DETAIL if in_detail else 0)
    return _Scored(candidate, matched, weight, tuple(counts))


def _bm25(scored: Sequence[_Scored], term_count: int, page_count: int) -> dict[int, float]:
    """FTS5's bm25 formula (positive: higher is better), with the statistics taken from the candidates."""
    if not scored:
        return {}
    lengths = [len(s.candidate.fields[0]) + len(s.candidate.fields[1]) + len(s.candidate.fields[2]) for s in scored]
    average = max(1.0, sum(lengths) / len(lengths))
    total = max(page_count, len(scored))
    idf: list[float] = []
    for t in range(term_count):
        pages = sum(1 for s in scored if s.counts[t] != (0, 0, 0))
        idf.append(max(1e-6, math.log((total - pages + 0.5) / (pages + 0.5))))
    w_name, w_about, w_detail = BM25_WEIGHTS
    relevance: dict[int, float] = {}
    for s, length in zip(scored, lengths, strict=True):
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / average)
        score = 0.0
        for t, (in_name, in_about, in_detail) in enumerate(s.counts):
            weighted = w_name * in_name + w_about * in_about + w_detail * in_detail
            score += idf[t] * weighted * (BM25_K1 + 1) / (weighted + norm)
        relevance[s.candidate.rowid] = score
    return relevance


def _snippet(candidate: _Candidate, terms: Sequence[str]) -> str:
    """Up to SNIPPET_CHARS around the first hit of the first term found in the detail text, else the
    description, else the name."""
    best: tuple[str, int] | None = None
    best_field = len(FIELD_WEIGHTS)
    for term in terms:
        needle = term.casefold()
        for field, (text, folded) in enumerate(zip(candidate.fields, candidate.folded, strict=True)):
            at = folded.find(needle)
            if at >= 0 and (best is None or field > best_field):
                best, best_field = (text, at), field
    if best is None:
        return candidate.fields[1][:SNIPPET_CHARS]
    text, at = best
    start = max(0, at - SNIPPET_CHARS // 3)
    end = min(len(text), start + SNIPPET_CHARS)
    piece = " ".join(text[start:end].split())
    return ("..." if start else "") + piece + ("..." if end < len(text) else "")
