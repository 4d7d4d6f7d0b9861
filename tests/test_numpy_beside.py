"""Issue 34, item 12: with numpy installed beside attp-server (as many users' environments have it), asteval's import
pulled it into every worker, numpy's BLAS started a second thread there, and the lockdown refused every run ("the
worker runs 2 threads"). Through a real ``attp`` in a venv that has numpy: programs run, the walls hold, and numpy
takes none of a program's memory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness import server_env
from numpy_venv import numpy_python


def attp(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "attp_server", *args],
        capture_output=True, text=True, cwd=cwd, env=server_env(), timeout=120, check=False,
    )  # fmt: skip


def test_the_default_engine_works_with_numpy_installed_beside_it(tmp_path: Path) -> None:
    python = numpy_python()
    # The trap is set: numpy is importable there, and asteval imported as it is would load it.
    found = subprocess.run(
        [str(python), "-c", "import asteval.astutils as a, numpy; print(a.HAS_NUMPY, numpy.__version__)"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert found.stdout.split() == ["True", "2.4.6"], found.stderr
    done = attp(python, "exec", "--json", "--code", "__result__ = sum(x * x for x in range(10))", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["result"] == 285
    # numpy is not in the worker: the smallest memory_mb still holds a million-item list, as it does without numpy.
    big = attp(python, "exec", "--memory-mb", "64", "--code", "x = [0] * 10**6\n__result__ = len(x)", cwd=tmp_path)
    assert big.returncode == 0, big.stdout + big.stderr
    doctor = attp(python, "doctor", "--json", cwd=tmp_path)
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 0, doctor.stdout[-2000:] + doctor.stderr
    assert "threads" not in json.dumps(report), report
