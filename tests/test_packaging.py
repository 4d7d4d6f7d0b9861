"""The distribution installs under names it owns: `attp_server`, `attp_server.toolpacks`, nothing generic."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


def test_the_tree_is_the_installed_package() -> None:
    """One name for each thing: no folder mapping, no symlink, no hand-kept package list."""
    setuptools = _pyproject()["tool"]["setuptools"]  # type: ignore[index]
    assert "package-dir" not in setuptools
    assert setuptools["packages"] == {"find": {"where": ["src"]}}
    assert [p.name for p in SRC.iterdir() if not p.name.endswith(".egg-info")] == ["attp_server"]
    tracked = subprocess.run(["git", "ls-files", "-s"], cwd=REPO, capture_output=True, text=True, check=False).stdout
    assert [line for line in tracked.splitlines() if line.startswith("120000")] == []  # no symbolic link


def _pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


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
        "attp_server/sandbox/process/worker.py",
        "attp_server/toolpacks/files/tools.py",
        "attp_server/toolpacks/memory/store.py",
        "attp_server/bundled_skills/skills.json",
        "attp_server/bundled_skills/toolpack-authoring/templates/pack_template.py",
    ):
        assert expected in names
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "files = attp_server.toolpacks.files:toolpack" in entry_points
    assert "attp = attp_server.faces.cli:cli" in entry_points
