"""The official MCP conformance suite's server scenarios against a real ``attp serve --transport http``.

    .venv/bin/python tests/conformance/run.py [--keep DIR]

Installs the pinned suite and the Node it needs (>= 22; package.json here) when they are missing or out of date,
starts ``attp serve --transport http`` on a free loopback port with a workspace of its own, and runs every server
scenario of the suite (``--suite all``) at both protocol eras this server speaks: 2026-07-28 (stateless, the SDK
2.x default) and 2025-11-25 (the initialize handshake). The suite's own ``--expected-failures`` judges each run
against expected-failures.yml: exit 0 only when every scenario outside that file passes and every entry in it still
fails. A table of every scenario follows, with the reason of each expected failure (the comment after its entry).
``--keep DIR`` keeps each check's details (``checks.json`` per scenario) there; by default they go with a
temporary folder. .ci/run runs this after the linters; a run takes about 20 s.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from harness import serving_http  # noqa: E402  (the tests' own way to start a real server)

BASELINE = HERE / "expected-failures.yml"
WIRES = ("2026-07-28", "2025-11-25")
NODE = HERE / "node_modules" / ".bin" / "node"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
ENTRY = re.compile(r"^\s*-\s*([^\s#]+)\s*(?:#\s*(.*))?$")


def install() -> None:
    """``npm ci`` here when node_modules is missing or older than the lock file (npm writes its own copy)."""
    installed = HERE / "node_modules" / ".package-lock.json"
    if installed.is_file() and installed.stat().st_mtime >= (HERE / "package-lock.json").stat().st_mtime:
        return
    print("== installing the conformance suite and Node 22 (tests/conformance/package-lock.json)", flush=True)
    subprocess.run(
        ["npm", "ci", "--prefix", str(HERE), "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
        check=True,
    )
    if not NODE.is_file():
        sys.exit(f"no Node binary in {NODE.parent}: the pinned node-linux-* packages cover x64 and arm64 Linux only")


def baseline(path: Path) -> dict[str, str]:
    """Each entry of the expected failures (``scenario`` or ``scenario:check-id``) and the reason after it."""
    entries = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if match := ENTRY.match(line):
            entries[match.group(1)] = match.group(2) or ""
    return entries


def verdicts(results: Path, expected: dict[str, str]) -> list[tuple[str, str, str]]:
    """(scenario, verdict, why) for every scenario the suite ran, from its ``checks.json`` files.

    A check fails when FAILURE or WARNING, and a check id repeated in a scenario takes its worst status, as in the
    suite's own comparison with the baseline (whose exit code is what decides; this is the table for the reader).
    """
    rows = []
    for checks_file in sorted(results.glob("server-*/checks.json")):
        scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", checks_file.parent.name)
        checks = json.loads(checks_file.read_text(encoding="utf-8"))
        failed = {c["id"]: c.get("errorMessage", "") for c in checks if c.get("status") in ("FAILURE", "WARNING")}
        passed = {c["id"] for c in checks if c.get("status") == "SUCCESS"} - failed.keys()
        excused = [check for check in failed if f"{scenario}:{check}" in expected]
        stale = [check for check in passed if f"{scenario}:{check}" in expected]
        if scenario in expected:
            verdict, why = (
                ("baselined" if failed else "STALE: it passes, remove it from the baseline"),
                expected[scenario],
            )
        elif failed.keys() - excused:
            verdict = "FAIL"
            why = "; ".join(f"{check}: {message}"[:300] for check, message in failed.items() if check not in excused)
        elif stale:
            verdict, why = "STALE: these baselined checks pass, remove them from the baseline", ", ".join(stale)
        else:
            verdict = "pass" + (
                f" ({len(passed)} check{'s' * (len(passed) != 1)})" if passed else " (informational checks only)"
            )
            verdict += f", {len(excused)} check{'s' * (len(excused) != 1)} baselined" if excused else ""
            why = "; ".join(f"{check}: {expected[f'{scenario}:{check}']}" for check in excused)
        rows.append((scenario, verdict, why))
    return rows


def run_suite(url: str, wire: str, expected_failures: Path, results: Path) -> int:
    """One run of the suite at one protocol era; prints its verdict and a line per scenario; its exit code."""
    shutil.rmtree(results, ignore_errors=True)
    command = [str(NODE), str(SUITE), "server", "--url", url, "--suite", "all", "--spec-version", wire]
    command += ["--expected-failures", str(expected_failures), "--output-dir", str(results)]
    print(f"== MCP conformance, protocol {wire}", flush=True)
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    # The suite prints each scenario's description, then its summary and the baseline's verdict: the counts
    # always, and the whole verdict when it failed (the table below says the same, scenario by scenario).
    summary = run.stdout[run.stdout.rfind("=== SUMMARY ===") :] or run.stdout[-4000:]
    totals = re.findall(r"^Total: (\d+) passed, (\d+) failed$", summary, re.M)
    if run.returncode or not totals:
        print(summary + run.stderr[-4000:])
    else:
        print(f"the suite's checks: {totals[-1][0]} passed and {totals[-1][1]} failed, each failure in the baseline")
    rows = verdicts(results, baseline(expected_failures))
    width = max((len(scenario) for scenario, _, _ in rows), default=0)
    for scenario, verdict, why in rows:
        print(f"  {scenario:<{width}}  {verdict}" + (f"  -- {why}" if why else ""))
    if run.returncode:
        print(f"== protocol {wire}: the conformance suite exited {run.returncode}: see its verdict above", flush=True)
    return run.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--keep", type=Path, help="keep each scenario's checks.json under this folder")
    parser.add_argument("--baseline", type=Path, default=BASELINE, help="the expected failures (default: %(default)s)")
    args = parser.parse_args()
    install()
    with tempfile.TemporaryDirectory(prefix="attp-conformance-") as temporary:
        folder = (args.keep or Path(temporary)).resolve()
        workspace = Path(temporary) / "workspace"
        workspace.mkdir()
        data = ["--db-path", str(Path(temporary) / "data" / "memory.sqlite3")]
        with serving_http(workspace, *data, stderr=Path(temporary) / "server.log") as served:
            codes = [run_suite(f"{served.url}/mcp", wire, args.baseline.resolve(), folder / wire) for wire in WIRES]
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
