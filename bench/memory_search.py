"""``python -m bench.memory_search``: how fast ``find_page`` answers over a large memory page tree.

Builds a page tree of ``--pages`` pages (default 100,000) in a fresh database through the memory
pack's own store (``Store.open`` and ``Tx.insert_page``, so the schema, the page counters and the
FTS index are exactly what the pack writes), checks that the result is one the pack accepts, then
times ``find_page`` called the way the server calls it (``Tool.bind`` then the tool function) for
several kinds of query. Prints medians and 90th percentiles per kind and writes
``bench/memory_search.json``. The target: every kind's median under 50 ms at 100,000 pages, except
terms of one or two characters, which are below the trigram index (find_page scans the pages for them).

The tree has three levels under ``usr-0``: topics, subtopics, and notes (detail pages) whose text
is drawn from a Zipf-distributed vocabulary, about one page in seven written in Chinese.

``--quick`` builds 5,000 pages and samples less: a smoke test of the output, its figures mean little.
``--db PATH`` keeps the database at PATH and reuses it on the next run (if it holds as many pages);
delete it after changing how this script writes pages.

``python -m bench`` runs it as its ``memory`` section (``memory(report, quick)``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attp_server.toolpack import ToolRegistry
from attp_server.toolpacks.memory import MemoryOptions, Store, toolpack
from attp_server.toolpacks.memory.search import TRIGRAM, terms_of
from bench.report import Report

RESULTS = Path(__file__).parent / "memory_search.json"
TARGET_MS = 50.0
SEED = 20_240_601
QUICK_PAGES = 5_000
SECTION_QUICK_PAGES = 1_000
"""The ``memory`` section of ``python -m bench --quick``: a smoke test of its rows (this module's own ``--quick``,
which checks the tree's counts and the queries' matches, builds `QUICK_PAGES`)."""
BUILD_CACHE_KIB = 131_072
FULL_PAGES = 100_000
QUICK_REPEATS, FULL_REPEATS = 2, 15
"""Timed rounds over all queries."""


def _words(text: str) -> list[str]:
    return text.split()


# The most frequent words of the notes: each is in most pages (the "common word" queries).
COMMON = ["the", "and", "for", "with", "project", "team", "update", "notes", "review", "plan"]
TOPICAL = _words(
    "deploy database invoice customer budget release schedule feature design server client report "
    "contract migration backup password network storage payment refund shipping travel hotel flight "
    "kubernetes docker python typescript frontend backend testing pipeline monitoring latency incident "
    "postmortem roadmap quarter hiring interview onboarding vacation expense receipt vendor supplier "
    "warehouse inventory pricing discount campaign newsletter analytics dashboard metric alert oncall "
    "rotation handover architecture proposal decision tradeoff benchmark profile cache index query "
    "schema table column partition replica failover cluster region throughput capacity quota "
    "license compliance audit security token certificate encryption firewall gateway proxy"
)
"""Topic words, spread over ranks 40 to about 900 of the vocabulary: each in roughly 1% to 15% of pages."""
FILLER_WORDS = 20_000
SYLLABLES = [c + v for c in "bcdfghklmnprstvw" for v in "aeiou"] + ["an", "er", "in", "on", "ul", "or", "es"]
"""Made-up words for the long tail; no q, x, y or z, so they never contain a rare or no-match query."""
CHINESE = _words(
    "工具 调用 协议 数据库 迁移 会议 记录 项目 计划 预算 客户 发票 部署 服务器 测试 发布 需求 设计 "
    "文档 报告 用户 反馈 性能 优化 安全 审计 合同 供应商 库存 财务 旅行 酒店 航班 招聘 面试 入职 "
    "周报 复盘 事故 监控 告警 值班 架构 方案 决策 缓存 索引 查询 分区 副本 集群"
)
RARE = ["xylophone", "quokka", "zeppelin", "marzipan", "kumquat"]
"""Each planted in exactly three pages."""

QUERIES: dict[str, list[str]] = {
    "single word": ["deploy", "invoice", "kubernetes", "warehouse"],
    "two words": ["deploy database", "invoice customer", "budget quarter", "backup failover"],
    "chinese": ["数据库迁移", "工具调用", "会议记录", "性能优化"],
    "rare word": ["xylophone", "quokka", "zeppelin", "marzipan"],
    "common word": ["project", "team", "update", "notes"],
    "no match": ["flibbertigibbet", "qwzxqv", "不存在的词语", "zzyzx quux"],
    "short term": ["工具", "qa", "会议", "db"],
}
"""Query kinds, four queries each."""
UNINDEXED = {"short term"}
"""Kinds outside the target: terms under 3 characters are below the trigram index, so find_page scans the pages."""


@dataclass(frozen=True)
class Shape:
    topics: int
    subtopics: int
    notes: int

    @classmethod
    def for_pages(cls, pages: int) -> Shape:
        """Topics and subtopics in proportion; detail pages fill the rest (total exactly `pages`)."""
        topics = max(2, round((pages / 10) ** 0.5))
        subtopics = 10 if pages >= 10_000 else 5
        notes = pages - topics - topics * subtopics
        if notes < 1:
            raise SystemExit(f"--pages {pages} is too few for a three-level tree")
        return cls(topics, subtopics, notes)

    @property
    def pages(self) -> int:
        return self.topics + self.topics * self.subtopics + self.notes


class Writer:
    """Deterministic text: a Zipf-distributed vocabulary (as in real prose), Chinese on about one page in seven."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        filler: list[str] = []
        seen = set(COMMON) | set(TOPICAL)
        while len(filler) < FILLER_WORDS:
            word = "".join(self.rng.choices(SYLLABLES, k=self.rng.randint(2, 4)))
            if word not in seen:
                seen.add(word)
                filler.append(word)
        self.words = COMMON + filler
        for n, word in enumerate(TOPICAL):
            self.words.insert(40 + 8 * n, word)
        self.cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(self.words))))
        self.han_cumulative = list(itertools.accumulate(1 / (rank + 1) ** 0.7 for rank in range(len(CHINESE))))

    def english(self, count: int) -> str:
        return " ".join(self.rng.choices(self.words, cum_weights=self.cumulative, k=count))

    def chinese(self, count: int) -> str:
        return "".join(self.rng.choices(CHINESE, cum_weights=self.han_cumulative, k=count)) + "。"

    def note(self, serial: int) -> tuple[str, str, str]:
        """name, description, detail of one detail page."""
        if self.rng.random() < 1 / 7:
            name = self.chinese(2)
            description = self.chinese(6)
            detail = "\n".join(self.chinese(self.rng.randint(12, 30)) for _ in range(self.rng.randint(1, 4)))
        else:
            name = self.english(3).capitalize()
            description = self.english(self.rng.randint(6, 14))
            lines = [self.english(self.rng.randint(8, 20)) + "." for _ in range(self.rng.randint(2, 6))]
            detail = "\n".join(lines)
        return name, description, f"{detail}\nRef #{serial}."


def build(path: Path, shape: Shape) -> float:
    """Create the tree through the pack's store, in batches of one transaction each; returns seconds."""
    started = time.perf_counter()
    store = Store(path)
    store.open(MemoryOptions().segments)
    writer = Writer(SEED)
    folders: list[str] = []
    with store.transaction(write=True) as tx:
        for t in range(shape.topics):
            topic = tx.insert_page(
                "usr", "contents", f"Topic {t}: {writer.english(2)}", writer.english(8), None, "usr-0"
            )
            for s in range(shape.subtopics):
                sub = writer.english(2)
                folders.append(
                    tx.insert_page("usr", "contents", f"{sub} {t}.{s}", writer.english(8), None, topic.index).index
                )
    rare_at = {writer.rng.randrange(shape.notes): word for word in RARE for _ in range(3)}
    while len(rare_at) < 3 * len(RARE):  # a collision: place the missing ones elsewhere
        word = next(w for w in RARE if list(rare_at.values()).count(w) < 3)
        rare_at.setdefault(writer.rng.randrange(shape.notes), word)
    batch = 20_000
    for first in range(0, shape.notes, batch):
        with store.transaction(write=True) as tx:
            tx.conn.execute(f"PRAGMA cache_size = -{BUILD_CACHE_KIB}")  # this connection only: a faster build
            for serial in range(first, min(first + batch, shape.notes)):
                name, description, detail = writer.note(serial)
                if serial in rare_at:
                    detail += f" Remember the {rare_at[serial]}."
                tx.insert_page("usr", "detail", name, description, detail, folders[serial % len(folders)])
    store.close()
    return time.perf_counter() - started


def check(path: Path, shape: Shape) -> int:
    """The database is one the pack accepts: the expected pages, a sound FTS index, dense sibling lists."""
    conn = sqlite3.connect(path)  # the integrity check is an INSERT in form, so not read-only
    try:
        conn.execute("INSERT INTO page_fts(page_fts, rank) VALUES ('integrity-check', 1)")
        usr = conn.execute("SELECT count(*) FROM pages WHERE segment_id = 'usr' AND parent IS NOT NULL").fetchone()[0]
        next_page = conn.execute("SELECT next_page FROM segments WHERE id = 'usr'").fetchone()[0]
        gaps = conn.execute(
            "SELECT count(*) FROM (SELECT parent, count(*) AS n, max(position) AS top FROM pages"
            " WHERE parent IS NOT NULL GROUP BY parent) WHERE top != n - 1"
        ).fetchone()[0]
        indexed = conn.execute("SELECT count(*) FROM page_fts").fetchone()[0]
        total = conn.execute("SELECT count(*) FROM pages").fetchone()[0]
    finally:
        conn.close()
    if (usr, next_page, gaps, indexed) != (shape.pages, shape.pages + 1, 0, total):
        raise SystemExit(
            f"{path}: not the expected tree (usr pages {usr}, next_page {next_page}, sibling gaps {gaps}, "
            f"indexed {indexed} of {total}); delete it and run again"
        )
    return int(total)


def find_page(path: Path) -> Callable[..., list[dict[str, Any]]]:
    """The real tool, loaded as the server loads it, called as the server calls it (bind, then call)."""
    registry = ToolRegistry([toolpack], path.parent, {"memory": {}}, db_path=path)
    tool = registry.resolve("find_page")
    assert tool is not None

    def call(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        bound = tool.bind(args, kwargs)
        assert isinstance(bound, dict), bound
        result: list[dict[str, Any]] = tool.function(**bound)
        return result

    return call


def matches(path: Path, query: str) -> int:
    """How many pages contain a term of `query`, counted by plain SQL (independently of find_page)."""
    terms = terms_of(query)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        found: set[int] = set()
        long_terms = ['"' + t.replace('"', '""') + '"' for t in terms if len(t) >= TRIGRAM]
        if long_terms:
            rows = conn.execute("SELECT rowid FROM page_fts WHERE page_fts MATCH ?", (" OR ".join(long_terms),))
            found.update(row[0] for row in rows)
        for term in (t for t in terms if len(t) < TRIGRAM):
            rows = conn.execute(
                "SELECT id FROM pages WHERE instr(lower(name || ' ' || description || ' ' || coalesce(detail, '')), ?)",
                (term.lower(),),
            )
            found.update(row[0] for row in rows)
    finally:
        conn.close()
    return len(found)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(path: Path, repeats: int) -> dict[str, dict[str, Any]]:
    """Every query once to warm up, then `repeats` rounds over all queries in turn (drift hits all alike)."""
    call = find_page(path)
    hits = {query: len(call(query)) for queries in QUERIES.values() for query in queries}
    samples: dict[str, list[float]] = {kind: [] for kind in QUERIES}
    for _ in range(repeats):
        for kind, queries in QUERIES.items():
            for query in queries:
                started = time.perf_counter()
                call(query)
                samples[kind].append((time.perf_counter() - started) * 1000)
    return {
        kind: {
            "queries": {query: {"results": hits[query], "matches": matches(path, query)} for query in QUERIES[kind]},
            "samples": len(samples[kind]),
            "median_ms": round(statistics.median(samples[kind]), 3),
            "p90_ms": round(percentile(samples[kind], 0.9), 3),
            "max_ms": round(max(samples[kind]), 3),
        }
        for kind in QUERIES
    }


@contextmanager
def database(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.parent.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix="attp-memory-bench-") as tmp:
        yield Path(tmp) / "memory.sqlite3"


def run(pages: int, quick: bool, repeats: int, keep: Path | None) -> dict[str, Any]:
    shape = Shape.for_pages(pages)
    with database(keep) as path:
        built = None if path.exists() else round(build(path, shape), 2)
        total = check(path, shape)
        kinds = measure(path, repeats)
        size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    medians = [kinds[kind]["median_ms"] for kind in QUERIES if kind not in UNINDEXED]
    return {
        "quick": quick,
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()},
        "sqlite": sqlite3.sqlite_version,
        "pages": shape.pages,
        "pages_in_db": total,
        "shape": {"topics": shape.topics, "subtopics_per_topic": shape.subtopics, "notes": shape.notes},
        "build_s": built,
        "db_mb": round(size / 1e6, 1),
        "repeats": repeats,
        "target_ms": TARGET_MS,
        "kinds": kinds,
        "worst_median_ms": max(medians),
        "met": max(medians) < TARGET_MS,
    }


def table(data: dict[str, Any]) -> str:
    built = f"built in {data['build_s']} s" if data["build_s"] is not None else "reused"
    lines = [
        f"find_page over {data['pages_in_db']:,} pages ({data['db_mb']} MB, {built}; SQLite {data['sqlite']})",
        f"  {'query kind':<12}  {'median ms':>10}  {'p90 ms':>9}  {'max ms':>9}  {'n':>4}  queries (pages matching)",
    ]
    for kind, row in data["kinds"].items():
        queries = ", ".join(f"{q!r} ({n['matches']:,})" for q, n in row["queries"].items())
        lines.append(
            f"  {kind:<12}  {row['median_ms']:>10.2f}  {row['p90_ms']:>9.2f}  {row['max_ms']:>9.2f}"
            f"  {row['samples']:>4}  {queries}"
        )
    verdict = "met" if data["met"] else "MISSED"
    excepted = ", ".join(sorted(UNINDEXED))
    lines.append(f"target: every median under {data['target_ms']:g} ms ({excepted} excepted): {verdict}")
    return "\n".join(lines)


def memory(report: Report, quick: bool) -> None:
    """The ``memory`` section of ``python -m bench``: each kind's median, the indexed kinds against the target."""
    data = run(SECTION_QUICK_PAGES if quick else FULL_PAGES, quick, QUICK_REPEATS if quick else FULL_REPEATS, None)
    for kind, row in data["kinds"].items():
        target = None if kind in UNINDEXED else f"< {TARGET_MS:g}"
        report.add("memory", f"find_page.{kind.replace(' ', '_')}_median_ms", row["median_ms"], "ms", target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory_search", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pages", type=int, help=f"pages in the tree (default {FULL_PAGES:,}; --quick {QUICK_PAGES:,})"
    )
    parser.add_argument("--quick", action="store_true", help="a small tree and few samples: a smoke test")
    repeats_help = f"timed rounds over all queries (default {FULL_REPEATS}; --quick {QUICK_REPEATS})"
    parser.add_argument("--repeats", type=int, help=repeats_help)
    parser.add_argument("--output", type=Path, default=RESULTS, help="where to write the JSON (default: %(default)s)")
    parser.add_argument("--db", type=Path, help="keep the database here and reuse it when it exists")
    args = parser.parse_args(argv)
    pages = args.pages or (QUICK_PAGES if args.quick else FULL_PAGES)
    repeats = args.repeats or (QUICK_REPEATS if args.quick else FULL_REPEATS)
    data = run(pages, args.quick, repeats, args.db)
    print(table(data))
    args.output.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
