"""The distribution installs under names it owns: `attp_server`, `attp_server.toolpacks`, nothing generic."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"server": "attp_server", "toolpacks": "attp_server.toolpacks", "skills": "attp_server.bundled_skills"}


def _pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_folder_is_listed_for_the_build() -> None:
    """A package folder missing from pyproject's list would be left out of the wheel without a word."""
    setuptools = _pyproject()["tool"]["setuptools"]  # type: ignore[index]
    listed = set(setuptools["packages"])
    assert setuptools["package-dir"] == {name: folder for folder, name in FOLDERS.items()}
    found = set()
    for folder in ("server", "toolpacks"):
        for init in (REPO / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(REPO / folder)
            if relative.parts[:1] == ("toolpacks",):
                continue  # server/toolpacks is the type checker's link to toolpacks/, not a package of its own
            found.add(".".join([FOLDERS[folder], *relative.parts]))
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


@pytest.mark.slow
def test_the_wheel_claims_no_generic_top_level_name(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp_path), str(REPO)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("attp_server-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"attp_server", next(t for t in tops if t.endswith(".dist-info"))}
    for expected in (
        "attp_server/__init__.py",
        "attp_server/py.typed",
        "attp_server/sandbox/worker.py",
        "attp_server/toolpacks/files/tools.py",
        "attp_server/toolpacks/memory/store.py",
        "attp_server/bundled_skills/skills.json",
        "attp_server/bundled_skills/toolpack-authoring/templates/pack_template.py",
    ):
        assert expected in names
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "files = attp_server.toolpacks.files:toolpack" in entry_points
    assert "attp = attp_server.cli:cli" in entry_points
