"""``mcp-server-sqlite`` in a venv of its own: it needs ``mcp<2``, and attp-server runs on mcp 2.

Built once from sqlite-requirements.txt (pinned) under ``.upstream-venvs/sqlite`` in the checkout, and
again when the requirements change (a copy of them in the venv says what it holds). Used by the
gateway trial test, ``python -m bench.gateway`` and .ci/run (which builds it before the tests).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SUPPORT = Path(__file__).parent
SQLITE_REQUIREMENTS = SUPPORT / "sqlite-requirements.txt"
SQLITE_VENV = SUPPORT.parents[1] / ".upstream-venvs" / "sqlite"


def sqlite_command() -> Path:
    """The ``mcp-server-sqlite`` command, building its venv first when it is missing or out of date."""
    command = SQLITE_VENV / "bin" / "mcp-server-sqlite"
    stamp = SQLITE_VENV / "requirements.txt"
    wanted = SQLITE_REQUIREMENTS.read_text()
    if command.is_file() and stamp.is_file() and stamp.read_text() == wanted:
        return command
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(SQLITE_VENV)], check=True, timeout=120)
    pip = [str(SQLITE_VENV / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
    installed = subprocess.run(
        [*pip, "-r", str(SQLITE_REQUIREMENTS)], check=False, capture_output=True, text=True, timeout=300
    )
    if installed.returncode != 0 or not command.is_file():
        raise RuntimeError(f"could not build the mcp-server-sqlite venv: {installed.stderr[-2000:]}")
    stamp.write_text(wanted)
    return command


if __name__ == "__main__":
    print(sqlite_command())
