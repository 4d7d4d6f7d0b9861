"""attp-server with numpy installed beside it, as many users' environments have it (issue 34, item 12).

A venv of its own under ``.upstream-venvs/numpy`` in the checkout holding only numpy (pinned in
numpy-requirements.txt, one wheel from PyPI), layered over the environment running the tests: a ``.pth``
file adds that environment's site-packages (attp-server and its dependencies) as a site directory, so its
own ``.pth`` files (the editable install) work too, and the venv's numpy comes first. Built once, again when
the requirements change. Used by tests/test_numpy_beside.py and .ci/run (which builds it before the tests).
"""

from __future__ import annotations

import subprocess
import sysconfig
from pathlib import Path

from upstream_venv import built_venv

SUPPORT = Path(__file__).parent
NUMPY_REQUIREMENTS = SUPPORT / "numpy-requirements.txt"
NUMPY_VENV = SUPPORT.parents[1] / ".upstream-venvs" / "numpy"


def numpy_python() -> Path:
    """The Python of the venv with numpy beside attp-server, building it first when missing or out of date."""
    here = sysconfig.get_paths()["purelib"]  # attp-server and its dependencies: after the venv's own packages

    def layer(python: Path) -> None:
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True, timeout=60,
        ).stdout.strip()  # fmt: skip
        (Path(site) / "zz-attp-environment.pth").write_text(f"import site; site.addsitedir({here!r})\n")

    return built_venv(NUMPY_VENV, NUMPY_REQUIREMENTS, stamp=here, then=layer)


if __name__ == "__main__":
    print(numpy_python())
