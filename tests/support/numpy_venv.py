"""attp-server with numpy installed beside it, as many users' environments have it (issue 34, item 12).

A venv of its own under ``.upstream-venvs/numpy`` in the checkout holding only numpy (pinned in
numpy-requirements.txt, one wheel from PyPI), layered over the environment running the tests: a ``.pth``
file adds that environment's site-packages (attp-server and its dependencies) as a site directory, so its
own ``.pth`` files (the editable install) work too, and the venv's numpy comes first. Built once, again when
the requirements change. Used by tests/test_numpy_beside.py and .ci/run (which builds it before the tests).
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

SUPPORT = Path(__file__).parent
NUMPY_REQUIREMENTS = SUPPORT / "numpy-requirements.txt"
NUMPY_VENV = SUPPORT.parents[1] / ".upstream-venvs" / "numpy"


def numpy_python() -> Path:
    """The Python of the venv with numpy beside attp-server, building it first when missing or out of date."""
    python = NUMPY_VENV / "bin" / "python"
    stamp = NUMPY_VENV / "requirements.txt"
    wanted = NUMPY_REQUIREMENTS.read_text() + sysconfig.get_paths()["purelib"]
    if python.is_file() and stamp.is_file() and stamp.read_text() == wanted:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(NUMPY_VENV)], check=True, timeout=120)
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", str(NUMPY_REQUIREMENTS)],
        check=False, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if installed.returncode != 0:
        raise RuntimeError(f"could not build the numpy venv: {installed.stderr[-2000:]}")
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    this = sysconfig.get_paths()["purelib"]  # attp-server and its dependencies: after the venv's own packages
    (Path(site) / "zz-attp-environment.pth").write_text(f"import site; site.addsitedir({this!r})\n")
    stamp.write_text(wanted)
    return python


if __name__ == "__main__":
    print(numpy_python())
