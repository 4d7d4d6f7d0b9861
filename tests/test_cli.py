"""The `attp` command through its real entry points: `main(argv)` in-process and the installed console script."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from harness import server_env

from attp_server.faces.cli import main

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


def test_exec_envelope_file_prints_what_the_model_reads(tmp_path: Path) -> None:
    envelope = tmp_path / "call.toml"
    envelope.write_text(ENVELOPE)
    done = attp("exec", str(envelope), "--workspace", str(tmp_path / "ws"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "status": "ok",
        "result": "HELLO",
        "hint": "read_file('out.txt') gave lines 1-1 of 1: the whole file.",  # every read says what it gave
        "tool_calls": "write_file: 1, read_file: 1",
    }


def test_exec_json_prints_the_whole_result(tmp_path: Path) -> None:
    envelope = tmp_path / "call.toml"
    envelope.write_text(ENVELOPE)
    done = attp("exec", str(envelope), "--json", "--workspace", str(tmp_path / "ws"), cwd=tmp_path)
    result = json.loads(done.stdout)
    assert (result["status"], result["result"], result["target"]) == ("ok", "HELLO", "round trip")
    assert [c["tool"] for c in result["calls"]] == ["write_file", "read_file"]
    assert result["elapsed_ms"] > 0


def test_exec_toml_result_format(tmp_path: Path) -> None:
    done = attp("exec", "--code", "__result__ = {'n': 1}", "--result-format", "toml", cwd=tmp_path)
    assert tomllib.loads(done.stdout) == {"status": "ok", "result": {"n": 1}}


def test_exec_reads_envelope_from_stdin(tmp_path: Path) -> None:
    done = attp("exec", "-", "--workspace", str(tmp_path / "ws"), stdin=ENVELOPE, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "HELLO"


PROGRAM = "words = ['b', 'a']\n__result__ = sorted(words)\n"
TAM = "<|[REQUEST_TOOL]|>\ncommand:「始」list_files「末」\n<|[END_TOOL]|>\n"


@pytest.mark.parametrize(
    ("name", "text", "extra", "result"),
    [
        pytest.param("prog.py", PROGRAM, [], ["a", "b"], id="py-is-code"),
        pytest.param("prog.star", "__result__ = [x * 2 for x in range(3)]\n", [], [0, 2, 4], id="star-is-starlark"),
        pytest.param("call.toml", ENVELOPE, [], "HELLO", id="toml-is-envelope"),
        pytest.param("prog.txt", PROGRAM, [], ["a", "b"], id="sniffed-code"),
        pytest.param("call.txt", ENVELOPE, [], "HELLO", id="sniffed-envelope"),
        pytest.param("steps.txt", TAM, [], None, id="sniffed-tam"),
        pytest.param("prog.toml", PROGRAM, ["--as", "code"], ["a", "b"], id="as-code-wins"),
        pytest.param("-", PROGRAM, [], ["a", "b"], id="stdin-code"),
        pytest.param("-", ENVELOPE, [], "HELLO", id="stdin-envelope"),
    ],
)
def test_exec_reads_a_file_by_its_extension_or_content(
    tmp_path: Path, name: str, text: str, extra: list[str], result: object
) -> None:
    """Issue 13: `attp exec prog.py` parsed a Python file as a TOML envelope (INVALID_ENVELOPE)."""
    if name != "-":
        (tmp_path / name).write_text(text, encoding="utf-8")
    done = attp("exec", name, *extra, "--workspace", str(tmp_path / "ws"), stdin=text, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(done.stdout)
    if result is not None:
        assert data["result"] == result


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        pytest.param("prog.toml", PROGRAM, "read prog.toml as an envelope (the .toml extension)", id="toml"),
        pytest.param("notes.txt", "x = [1,\n", "read notes.txt as Python code (it has no [tool_call] table)", id="txt"),
        pytest.param(
            "-", "[tool_call]\ncode = 1 +\n", "read standard input as an envelope (it has a [tool_call]", id="stdin"
        ),
    ],
)
@pytest.mark.parametrize("verb", ["exec", "check"])
def test_a_parse_failure_says_how_the_input_was_read(
    tmp_path: Path, verb: str, name: str, text: str, said: str
) -> None:
    if name != "-":
        (tmp_path / name).write_text(text, encoding="utf-8")
    done = attp(verb, name, "--workspace", str(tmp_path / "ws"), stdin=text, cwd=tmp_path)
    assert done.returncode == 1
    assert said in done.stderr
    assert "--as code / --as envelope" in done.stderr


def test_check_reads_py_files_as_code(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text("import os\n", encoding="utf-8")
    done = attp("check", "prog.py", "--workspace", str(tmp_path / "ws"), cwd=tmp_path)
    assert done.returncode == 1
    assert json.loads(done.stdout)["error"]["code"] == "IMPORT_FORBIDDEN"
    assert "read prog.py" not in done.stderr  # it parsed: nothing to explain


def test_file_and_code_together_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "prog.py").write_text("1\n", encoding="utf-8")
    assert main(["exec", str(tmp_path / "prog.py"), "--code", "2"]) == 2
    assert "not both" in capsys.readouterr().err


def test_exec_json_and_error_exit_code(tmp_path: Path) -> None:
    done = attp("exec", "--code", "reed_file('x')", "--json", "--workspace", str(tmp_path / "ws"), cwd=tmp_path)
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert data["error"]["code"] == "NAME_NOT_FOUND"
    assert data["error"]["suggested_value"] == "read_file"


def test_exec_declined_envelope_exits_1(tmp_path: Path) -> None:
    done = attp("exec", "-", stdin='[tool_call]\nstatus = "fail"\nmessage = "cannot"\n', cwd=tmp_path)
    assert done.returncode == 1
    assert json.loads(done.stdout) == {"status": "fail", "hint": "cannot"}


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


def test_serve_on_a_port_in_use_says_so_without_a_traceback(tmp_path: Path) -> None:
    """The first thing a second `attp serve --transport http` meets: the port is taken."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        args = ["--transport", "http", "--port", str(port), "--workspace", str(tmp_path / "ws")]
        done = attp("serve", *args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"attp: cannot listen on 127.0.0.1:{port}: the port is in use; stop what holds it or choose another port"
        " (--port or ATTP_PORT)"
    )


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
