"""find_page's ranking: FTS5 (trigram) candidates for terms of 3+ characters, LIKE for shorter ones.

A query is split into terms at spaces; "quoted text" is one term. A page matches when it contains any
term in its name, description or detail (case-insensitive substring match). Ranking, best first:
how many of the terms the page contains; where they occur (name 3, description 2, detail 1 per term);
then FTS5's bm25 (term frequency and text length); then the oldest page first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from toolpacks.memory.store import Page, Tx

_TERM = re.compile(r'"([^"]*)"|(\S+)')
TRIGRAM = 3
CANDIDATES = 500
SNIPPET_CHARS = 160
FIELD_WEIGHTS = (("name", 3), ("description", 2), ("detail", 1))


def terms_of(query: str) -> list[str]:
    """Distinct terms in order; quotes group words, otherwise spaces separate them."""
    terms: list[str] = []
    for quoted, bare in _TERM.findall(query):
        term = (quoted or bare).strip()
        if term and term.casefold() not in {t.casefold() for t in terms}:
            terms.append(term)
    return terms


@dataclass(frozen=True)
class Hit:
    page: Page
    matched: int
    weight: int
    bm25: float
    snippet: str


def search(tx: Tx, query: str, segment_ids: Sequence[str], limit: int) -> list[Hit]:
    terms = terms_of(query)
    long_terms = [t for t in terms if len(t) >= TRIGRAM]
    candidates: dict[str, Page] = {}
    scores: dict[str, float] = {}
    if long_terms:
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in long_terms)
        for page, score in tx.search_fts(match, segment_ids, CANDIDATES):
            candidates[page.index] = page
            scores[page.index] = score
    for term in terms:
        if len(term) < TRIGRAM:
            for page in tx.search_like(term, segment_ids, CANDIDATES):
                candidates.setdefault(page.index, page)
    hits = [_score(page, terms, scores.get(page.index, 0.0)) for page in candidates.values()]
    hits = [hit for hit in hits if hit.matched]
    hits.sort(key=lambda h: (-h.matched, -h.weight, h.bm25, h.page.rowid))
    return hits[:limit]


def _fields(page: Page) -> list[tuple[str, str, int]]:
    values = {"name": page.name, "description": page.description, "detail": page.detail or ""}
    return [(field, values[field], weight) for field, weight in FIELD_WEIGHTS]


def _score(page: Page, terms: Sequence[str], bm25: float) -> Hit:
    matched = weight = 0
    best: tuple[str, int, int] | None = None
    for term in terms:
        needle = term.casefold()
        found = False
        for _field, text, field_weight in _fields(page):
            at = text.casefold().find(needle)
            if at >= 0:
                found = True
                weight += field_weight
                if best is None or field_weight < best[2]:
                    best = (text, at, field_weight)
        matched += found
    return Hit(page, matched, weight, bm25, _snippet(best, page))


def _snippet(best: tuple[str, int, int] | None, page: Page) -> str:
    """Up to SNIPPET_CHARS around a hit, from the detail text if possible, else the description, else the name."""
    if best is None:
        return page.description[:SNIPPET_CHARS]
    text, at, _weight = best
    start = max(0, at - SNIPPET_CHARS // 3)
    end = min(len(text), start + SNIPPET_CHARS)
    piece = " ".join(text[start:end].split())
    return ("..." if start else "") + piece + ("..." if end < len(text) else "")
