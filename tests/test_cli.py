"""The `attp` command through its real entry points: `main(argv)` in-process and the installed console script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from attp_server.cli import main
from harness import server_env

ENVELOPE = """thought = "write then read"

[tool_call]
status = "success"
target = "round trip"
code = '''
write_file("out.txt", "hello")
__result__ = read_file("out.txt").upper()
'''
"""


def attp(*args: str, stdin: str | None = None, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = shutil.which("attp") or ""
    argv = [command, *args] if command else [sys.executable, "-m", "attp_server", *args]
    return subprocess.run(
        argv, input=stdin, capture_output=True, text=True, cwd=cwd, env=server_env(), timeout=120, check=False
    )


def test_exec_envelope_file_prints_toml(tmp_path: Path) -> None:
    envelope = tmp_path / "call.toml"
    envelope.write_text(ENVELOPE)
    done = attp("exec", str(envelope), "--workspace", str(tmp_path / "ws"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = tomllib.loads(done.stdout)
    assert (result["status"], result["result"], result["target"]) == ("ok", "HELLO", "round trip")
    assert [c["tool"] for c in result["calls"]] == ["write_file", "read_file"]


def test_exec_reads_envelope_from_stdin(tmp_path: Path) -> None:
    done = attp("exec", "-", "--workspace", str(tmp_path / "ws"), stdin=ENVELOPE, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert tomllib.loads(done.stdout)["result"] == "HELLO"


def test_exec_json_and_error_exit_code(tmp_path: Path) -> None:
    done = attp("exec", "--code", "reed_file('x')", "--json", "--workspace", str(tmp_path / "ws"), cwd=tmp_path)
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert data["error"]["code"] == "NAME_NOT_FOUND"
    assert data["error"]["suggested_value"] == "read_file"


def test_exec_declined_envelope_exits_1(tmp_path: Path) -> None:
    done = attp("exec", "-", stdin='[tool_call]\nstatus = "fail"\nmessage = "cannot"\n', cwd=tmp_path)
    assert done.returncode == 1
    assert tomllib.loads(done.stdout)["status"] == "fail"


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["frobnicate"], id="unknown-command"),
        pytest.param(["exec", "--timeout-s", "soon"], id="bad-flag-type"),
        pytest.param(["serve", "--transport", "carrier-pigeon"], id="bad-choice"),
        pytest.param([], id="no-command"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "usage" in capsys.readouterr().err


def test_bad_setting_names_field_and_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "attp.toml"
    config.write_text("memory_mb = 1\n")
    assert main(["exec", "--code", "1", "--config", str(config)]) == 2
    error = capsys.readouterr().err
    assert "memory_mb" in error and str(config) in error


def test_unknown_toolpack_is_a_clear_startup_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["exec", "--code", "1", "--toolpack", "flies", "--workspace", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "unknown toolpack 'flies'" in error and "files" in error


@pytest.mark.parametrize(
    ("stdin", "code", "exit_code"),
    [
        pytest.param(ENVELOPE, None, 0, id="ok"),
        pytest.param("[tool_call]\nstatus = 'success'\ncode = 'import os'\n", None, 1, id="import"),
        pytest.param("not an envelope", None, 1, id="invalid-envelope"),
        pytest.param(None, "while True:\n    pass", 0, id="code-not-run"),
    ],
)
def test_check_validates_without_running(tmp_path: Path, stdin: str | None, code: str | None, exit_code: int) -> None:
    args = ["check", "--workspace", str(tmp_path / "ws")] + (["--code", code] if code else ["-"])
    done = attp(*args, stdin=stdin, cwd=tmp_path)
    assert done.returncode == exit_code, done.stdout + done.stderr
    assert not (tmp_path / "ws" / "out.txt").exists()


def test_tools_lists_catalog(tmp_path: Path) -> None:
    done = attp("tools", "--format", "json", "--workspace", str(tmp_path / "ws"), cwd=tmp_path)
    assert done.returncode == 0
    names = {tool["name"] for tool in json.loads(done.stdout)}
    assert {"read_file", "write_file", "edit_file", "list_files"} <= names


def test_python_dash_m_attp_server_works(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "attp_server", "--version"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and "attp-server" in done.stdout


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["tools", "--format", "atdf"], id="tools"),
        pytest.param(["prompt"], id="prompt"),
        pytest.param(["config", "n8n"], id="config"),
        pytest.param(["exec", "--code", "print('x' * 200000)"], id="exec"),
    ],
)
def test_every_verb_ends_quietly_when_its_reader_goes_away(tmp_path: Path, argv: list[str]) -> None:
    """`attp tools | head -1` used to print 'attp: [Errno 32] Broken pipe'."""
    command = shutil.which("attp")
    prefix = [command] if command else [sys.executable, "-m", "attp_server"]
    reader = subprocess.Popen(["head", "-c", "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert reader.stdin is not None
    done = subprocess.run(
        [*prefix, *argv, "--workspace", str(tmp_path / "ws"), "--log-level", "ERROR"],
        stdout=reader.stdin, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=server_env(), timeout=120,
        check=False,
    )  # fmt: skip
    reader.stdin.close()
    reader.wait(timeout=10)
    assert done.stderr == ""
    assert done.returncode in (0, 141)  # 141: the shell's status for SIGPIPE, as `yes | head -1` gives
