"""The benchmark runs end to end at tiny sizes (a smoke test: no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_quick_run_writes_every_row(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--output", str(output)],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(output.read_text())["rows"]
    for key in ("w1_ratio", "timeout_python_loop_overshoot_ms", "timeout_c_regex_overshoot_ms", "concurrent_ratio"):
        assert key in rows and key in done.stdout
