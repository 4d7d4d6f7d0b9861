"""``mcp-server-sqlite`` in a venv of its own: it needs ``mcp<2``, and attp-server runs on mcp 2.

Built once from sqlite-requirements.txt (pinned) under ``.upstream-venvs/sqlite`` in the checkout, and
again when the requirements change (a copy of them in the venv says what it holds). Used by the
gateway trial test, ``python -m bench.gateway`` and .ci/run (which builds it before the tests). `built_venv`
builds any such venv (numpy_venv.py's too).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

SUPPORT = Path(__file__).parent
SQLITE_REQUIREMENTS = SUPPORT / "sqlite-requirements.txt"
SQLITE_VENV = SUPPORT.parents[1] / ".upstream-venvs" / "sqlite"


def sqlite_command() -> Path:
    """The ``mcp-server-sqlite`` command, building its venv first when it is missing or out of date."""
    built_venv(SQLITE_VENV, SQLITE_REQUIREMENTS)
    command = SQLITE_VENV / "bin" / "mcp-server-sqlite"
    if not command.is_file():
        raise RuntimeError(f"the mcp-server-sqlite venv has no {command}")
    return command


def built_venv(
    folder: Path, requirements: Path, *, stamp: str = "", then: Callable[[Path], None] | None = None
) -> Path:
    """The Python of a venv at `folder` holding `requirements` (pinned), built when missing or when they (or
    `stamp`, whatever else it depends on) changed; `then(python)` finishes it before it is marked built."""
    python = folder / "bin" / "python"
    marker = folder / "requirements.txt"
    wanted = requirements.read_text() + stamp
    if python.is_file() and marker.is_file() and marker.read_text() == wanted:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True, timeout=120)
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", str(requirements)],
        check=False, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if installed.returncode != 0:
        raise RuntimeError(f"could not build the venv {folder}: {installed.stderr[-2000:]}")
    if then is not None:
        then(python)
    marker.write_text(wanted)
    return python


if __name__ == "__main__":
    print(sqlite_command())
