"""``python -m bench.memory_search --quick`` runs end to end: the shape of its table and JSON, never its timings."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import run_quick_bench

pytestmark = pytest.mark.process

KINDS = ["single word", "two words", "chinese", "rare word", "common word", "no match", "short term"]


def test_memory_search_bench_quick_run_prints_and_writes_every_figure(tmp_path: Path) -> None:
    stdout, data = run_quick_bench("bench.memory_search", tmp_path / "memory_search.json")
    assert data["quick"] is True
    assert (data["pages"], data["pages_in_db"]) == (5_000, 5_002)  # the tree plus the two segment roots
    assert data["build_s"] > 0 and data["db_mb"] > 0 and data["target_ms"] == 50
    assert list(data["kinds"]) == KINDS
    for kind, row in data["kinds"].items():
        assert row["samples"] == 2 * len(row["queries"]) == 8, kind
        assert 0 < row["median_ms"] <= row["p90_ms"] <= row["max_ms"], kind
        assert kind in stdout
        for query, counts in row["queries"].items():
            assert repr(query) in stdout
            assert counts["results"] == min(10, counts["matches"]), (query, counts)  # find_page finds what is there
    assert data["kinds"]["rare word"]["queries"] == {
        q: {"results": 3, "matches": 3} for q in ["xylophone", "quokka", "zeppelin", "marzipan"]
    }
    assert all(c["matches"] == 0 for c in data["kinds"]["no match"]["queries"].values())
    assert all(c["matches"] > 1_000 for c in data["kinds"]["common word"]["queries"].values())
    indexed = [row["median_ms"] for kind, row in data["kinds"].items() if kind != "short term"]
    assert data["worst_median_ms"] == max(indexed)
    assert data["met"] == (max(indexed) < 50)
    assert ("met" if data["met"] else "MISSED") in stdout
