"""``python -m bench.gateway --quick`` runs end to end against the real servers: its table and JSON, never its
timings or its ratio (8 files are too few for the ratio to mean anything)."""

from __future__ import annotations

from pathlib import Path

from harness import run_quick_bench


def test_gateway_bench_quick_run_counts_both_ways(tmp_path: Path) -> None:
    stdout, data = run_quick_bench("bench.gateway", tmp_path / "gateway.json")
    assert data["answer"]["files"] == 8 and data["answer"]["mentions"]  # the program found the right files
    direct, attp = data["direct"], data["attp"]
    assert 0 < direct["tool_list"] < direct["batched"] and 0 < direct["tool_list"] < direct["per_file"]
    assert attp["total"] == attp["tool_list"] + attp["result"]
    assert data["ratio"] == attp["total"] / min(direct["batched"], direct["per_file"])
    assert set(data["timing"]) == {"parallel", "sequential"}
    for label in ["(a) direct, batched", "(a) direct, per file", "(b) attp", "ratio (b)", "parallel():"]:
        assert label in stdout
    trial = data["trial"]  # issue 24: the four real servers, four tasks, both ways, checked answers
    for side in ("direct", "attp"):
        assert trial[side]["chars"] == trial[side]["tool_list_chars"] + sum(trial[side]["result_chars"].values())
        assert set(trial[side]["calls"]) == {"git", "sqlite", "time", "graph"}
    assert trial["attp"]["total_calls"] == 4 < trial["direct"]["total_calls"]
    assert "Trial (issue 24)" in stdout and "calls: 4 against" in stdout
