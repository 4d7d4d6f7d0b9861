"""The benchmark runs end to end at tiny sizes: a smoke test of its table and JSON, never of its timings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import run_quick_bench

from bench.breakdown import breakdown
from bench.engine_passes import QUICK
from bench.engine_passes import main as engine_passes
from bench.gateway import table as gateway_table

pytestmark = pytest.mark.process

REQUIRED = [
    "w1.runtime_ms", "w1.exec_ms", "w1.runtime_vs_exec", "w1.runtime_vs_pipe", "w1.runtime_vs_evaluator",
    "w2.runtime_vs_exec", "w3.runtime_vs_exec",
    *(f"c{i}.{figure}" for i in range(1, 6) for figure in ("runtime_ms", "exec_ms", "runtime_vs_exec", "evaluator_vs_exec")),
    "worker_rss_start_mb", "worker_rss_after_mb",
    "stdio.attp_execute_w1_ms", "stdio.noop_ms", "stdio.ratio", "http.ratio",
    "timeout_python_loop_overshoot_ms", "timeout_c_regex_overshoot_ms",
    "worker_start_walls_ms", "worker_start_no_walls_ms", "worker_start_new_interpreter_ms",
    "worker_start_forked_vs_new_interpreter", "w1_walls_ms", "w1_no_walls_ms", "w1_walls_vs_none", "getpid_walls_ns", "getpid_no_walls_ns",
    "owners.w1_same_ms", "owners.w1_new_ms", "owners.w1_turns_ms", "owners.new_vs_same", "owners.burst_new_vs_one",
    "concurrent_python_loop_ratio", "concurrent_c_regex_ratio",
    "throughput_1_clients", "throughput_4_clients", "throughput_16_clients",
    "errors_16_clients", "server_rss_before_mb", "server_rss_growth_pct", "cold_start_to_initialize_ms",
    "find_page.single_word_median_ms", "find_page.short_term_median_ms",
    "attp_over_direct", "parallel_5x0.5s_s", "direct_batched_chars", "attp_chars",
    "sessions.w1_without_session_ms", "sessions.w1_keeping_its_variables_ms", "sessions.1mib_vs_none",
    "load.normal_p50_ms", "load.normal_p99_ms", "load.normal_errors", "load.idle_after_s", "load.cpu_2s_after_pct",
    "load.server_threads_max",
    "store.w1_no_state_ms", "store.w1_sqlite_ms", "store.sqlite_ops_ms",
    "replicas.1_replica_throughput", "replicas.3_replicas_throughput", "replicas.3_vs_1",
    "c1.cpython_vs_exec", "groupby.cpython_vs_exec", "startup.cpython_ms", "startup.at_rest_cpython_ms",
    "c2.own_cpu_cpython_vs_exec", "fork_server_rss_mb", "groupby_run_peak_virtual_mb", "humaneval_passed",
    "telemetry.http_w1_no_sdk_ms", "telemetry.http_everything_vs_none", "telemetry.runtime_everything_vs_none",
]  # fmt: skip
"""Figures every run has; smolagents, Monty and Starlark rows appear only where those are installed."""


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """One ``python -m bench --quick``: every section at tiny sizes, each starting real servers (replicas:
    PostgreSQL, HAProxy; gateway: the real upstream servers)."""
    return run_quick_bench("bench", tmp_path_factory.mktemp("bench") / "results.json")


@pytest.mark.timeout(400)
def test_bench_quick_run_prints_and_writes_every_figure(quick_run: tuple[str, dict[str, Any]]) -> None:
    stdout, data = quick_run
    assert data["quick"] is True
    rows = data["rows"]
    missing = [key for key in REQUIRED if key not in rows]
    assert not missing, missing
    for key, value in rows.items():
        assert key in stdout
        assert key in data["units"]
        if (
            key.startswith("errors_")
            or key.endswith(("_errors", "_after_pct", "_after_s", "_cpu_pct"))
            or "_growth_" in key
        ):
            # may be zero (or, for memory, negative)
            assert value >= 0 or "_growth_" in key, (key, value)
        elif "_net_vs_" in key:
            pass  # a difference of two single samples in a quick run: may come out below zero on a busy machine
        else:
            assert value > 0, (key, value)
    assert set(data["targets"]) <= set(rows)
    assert set(data["met"]) == set(data["targets"])
    assert {key for keys in data["sections"].values() for key in keys} == set(rows)


@pytest.mark.timeout(400)
def test_the_gateway_section_counts_both_ways(quick_run: tuple[str, dict[str, Any]]) -> None:
    """The gateway section (``python -m bench.gateway`` alone) against the real servers: what each side read and
    the trial, never their timings or the ratio (8 files are too few for the ratio to mean anything)."""
    data = quick_run[1]["details"]["gateway"]
    assert data["answer"]["files"] == 8 and data["answer"]["mentions"]  # the program found the right files
    direct, attp = data["direct"], data["attp"]
    assert 0 < direct["tool_list"] < direct["batched"] and 0 < direct["tool_list"] < direct["per_file"]
    assert attp["total"] == attp["tool_list"] + attp["result"]
    assert data["ratio"] == attp["total"] / min(direct["batched"], direct["per_file"])
    assert set(data["timing"]) == {"parallel", "sequential"}
    table = gateway_table(data)  # what ``python -m bench.gateway`` prints
    for label in ["(a) direct, batched", "(a) direct, per file", "(b) attp", "ratio (b)", "parallel():"]:
        assert label in table
    trial = data["trial"]  # issue 24: the four real servers, four tasks, both ways, checked answers
    for side in ("direct", "attp"):
        assert trial[side]["chars"] == trial[side]["tool_list_chars"] + sum(trial[side]["result_chars"].values())
        assert set(trial[side]["calls"]) == {"git", "sqlite", "time", "graph"}
    assert trial["attp"]["total_calls"] == 4 < trial["direct"]["total_calls"]
    assert "Trial (issue 24)" in table and "calls: 4 against" in table


def test_breakdown_runs_and_reports_each_piece() -> None:
    """``python -m bench.breakdown`` at a few rounds: its figures exist and are positive, never their values."""
    figures = anyio.run(breakdown, 3)
    assert set(figures) == {
        "stdio_noop_ms", "stdio_shape_ms", "stdio_attp_w1_ms", "stdio_shape_vs_noop", "stdio_attp_vs_noop",
        "w1_runtime_execute_ms", "w1_runtime_execute_threaded_ms", "trivial_runtime_execute_ms",
        "w1_server_cpu_per_run_ms",
    }  # fmt: skip
    assert all(value > 0 for value in figures.values())


def test_gaps_times_the_same_call_after_each_gap() -> None:
    """``python -m bench.gaps`` at a few calls: a figure for each gap and for the bare pipe, never their values."""
    from bench.gaps import GAPS, gaps

    figures = anyio.run(gaps, 2)
    assert {f"kept_worker_{name}_ms" for name in GAPS} < set(figures)
    assert {"pipe_round_trip_back_to_back_ms", "pipe_round_trip_after_50ms_sleep_ms"} < set(figures)
    assert all(value > 0 for value in figures.values())


def test_result_text_counts_every_rendering_of_every_program(tmp_path: Path) -> None:
    """``python -m bench.result_text``: the programs run as meant, and the 60-call one stays within issue 13's target."""
    from bench.result_text import PROGRAMS, RENDERINGS, main

    assert main(["--output", str(tmp_path / "result_text.json")]) == 0
    data = json.loads((tmp_path / "result_text.json").read_text())
    assert set(data["programs"]) == set(PROGRAMS)
    errors = {name for name, row in data["programs"].items() if row["status"] != "ok"}
    assert errors == {"runtime error", "tool error uncaught"}
    assert data["programs"]["60 calls, 4-char answer"]["calls"] == 60
    assert data["programs"]["60 calls, 4-char answer"]["json"]["chars"] <= 600
    for row in data["programs"].values():
        assert set(RENDERINGS) <= set(row)
    assert data["total"]["json"]["chars"] < data["total"]["before"]["chars"]


def test_profile_names_the_functions_a_workload_spends_its_time_in() -> None:
    """``python -m bench.profile`` runs a call-heavy program under cProfile, warm: the program's own function leads."""
    from bench.profile import profile

    text = profile("c2", rows=5)
    assert "function calls" in text and "<program>:1(fib)" in text


def test_engine_passes_counts_each_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m bench.engine_passes --quick`: a row per engine, every program's outcome in the JSON."""
    assert (
        engine_passes(
            ["--quick", "--engines", "python,asteval", "--only", "corpus", "--json", str(tmp_path / "e.json")]
        )
        == 0
    )
    assert "| python | 4 of 4 |" in capsys.readouterr().out
    report = json.loads((tmp_path / "e.json").read_text(encoding="utf-8"))
    assert set(report["corpus"]) == {"python", "asteval"}
    assert all(len(outcomes) == QUICK for outcomes in report["corpus"].values())
