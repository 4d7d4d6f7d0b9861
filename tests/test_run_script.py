"""tests/run, the README's test command, finds the Debian packages the tests use and says how it installs the missing
ones; pointed at folders of its own (TESTS_RUN_SEARCH_PATH), so nothing on this machine is removed or installed."""

from __future__ import annotations

import os
import pwd
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
SCRIPT = ROOT / "tests" / "run"
EVERY_PROGRAM = ("postgres", "initdb", "haproxy", "nginx", "git")


def run(
    search: Path, *args: str, as_user: str | None = None, venv: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "TESTS_RUN_SEARCH_PATH": str(search), "TESTS_RUN_VENV": str(venv or search / "v")}
    prefix = []
    if as_user is not None:
        user = pwd.getpwnam(as_user)
        prefix = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--"]
    return subprocess.run(
        [*prefix, "bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def programs(folder: Path, *names: str) -> Path:
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    return folder


def test_with_every_program_found_nothing_is_missing(tmp_path: Path) -> None:
    checked = run(programs(tmp_path / "bin", *EVERY_PROGRAM), "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "every Debian package the tests use is installed" in checked.stdout


@pytest.mark.parametrize(
    ("present", "missing"),
    [
        pytest.param((), "postgresql haproxy nginx git", id="none"),
        pytest.param(("postgres", "haproxy", "git"), "postgresql nginx", id="postgres-without-initdb-and-no-nginx"),
        pytest.param(("postgres", "initdb", "nginx", "git"), "haproxy", id="no-haproxy"),
    ],
)
def test_the_missing_packages_are_named_with_the_command_that_installs_them(
    tmp_path: Path, present: tuple[str, ...], missing: str
) -> None:
    checked = run(programs(tmp_path / "bin", *present), "--check")
    assert checked.returncode == 1
    assert f"missing Debian packages: {missing}\n" in checked.stdout
    if os.geteuid() == 0:
        assert f"apt-get install -y --no-install-recommends {missing}\n" in checked.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the script as another user")
def test_a_user_who_cannot_install_is_told_the_command_and_nothing_else_happens() -> None:
    if any(not folder.stat().st_mode & 0o001 for folder in [ROOT, *ROOT.parents]):
        pytest.skip("the checkout is closed to other users")
    with tempfile.TemporaryDirectory() as temporary:  # pytest's tmp_path is closed to other users
        folder = Path(temporary)
        folder.chmod(0o755)
        venv = folder / "venv"
        ran = run(programs(folder / "bin", "postgres", "initdb", "git"), as_user="nobody", venv=venv)
        assert ran.returncode == 2, ran.stdout + ran.stderr
        assert "sudo apt-get install -y --no-install-recommends haproxy nginx\n" in ran.stderr
        assert not venv.exists()
