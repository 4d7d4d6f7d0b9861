"""The shell toolpack, called directly and through the runtime: output, exit codes, timeouts, environment, limits."""

from __future__ import annotations

import os
import re._constants as sre_constants
import re._parser as sre_parse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness import run_code, running
from pydantic import ValidationError

from attp_server.run.startup import open_runtime
from attp_server.settings import Settings
from attp_server.toolpack import ToolError, ToolpackContext, ToolRegistry, load_toolpack
from attp_server.toolpacks.shell import DEFAULT_DENY_PATTERNS, ShellOptions, toolpack

Bash = Callable[..., dict[str, Any]]


def make_bash(workspace: Path, **options: Any) -> Bash:
    assert toolpack.build is not None
    (bash,) = toolpack.build(ToolpackContext(workspace=workspace, options=ShellOptions(**options)))
    return bash


@pytest.fixture
def bash(workspace: Path) -> Bash:
    return make_bash(workspace)


def raises_code(code: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> ToolError:
    with pytest.raises(ToolError) as info:
        call(*args, **kwargs)
    assert info.value.code == code, info.value.message
    return info.value


def is_alive(pid: int) -> bool:
    """A process counts as alive until it is gone or a zombie (killed, waiting for its parent to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def wait_dead(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not is_alive(pid):
            return True
        time.sleep(0.02)
    return False


# --- the pack itself -------------------------------------------------------------------------


def test_pack_is_opt_in_and_loads_by_entry_point(workspace: Path) -> None:
    assert "shell" not in Settings().toolpacks
    pack = load_toolpack("shell")
    assert pack is toolpack
    assert pack.open_world is True
    assert pack.read_only is False
    registry = ToolRegistry([pack], workspace, {"shell": {"max_timeout": 30}})
    tool = registry.resolve("bash")
    assert tool is not None
    assert tool.pack == "shell"
    assert tool.signature_text() == "bash(command: str, timeout: int = 120) -> dict[str, int | str | bool]"
    assert {"Args:", "Returns:", "Raises:", "Example:"} <= set(tool.doc.split())


def test_build_creates_missing_workspace(tmp_path: Path) -> None:
    bash = make_bash(tmp_path / "deep" / "ws")
    assert (tmp_path / "deep" / "ws").is_dir()
    assert bash("pwd")["stdout"] == f"{(tmp_path / 'deep' / 'ws').resolve()}\n"


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"max_timeot": 5}, id="unknown-key"),
        pytest.param({"max_timeout": 0}, id="zero-timeout"),
        pytest.param({"max_output_bytes": 0}, id="zero-output"),
        pytest.param({"deny_patterns": ["("]}, id="bad-regex"),
        pytest.param({"env_passthrough": ["NOT A NAME"]}, id="bad-env-name"),
    ],
)
def test_options_are_validated(options: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ShellOptions.model_validate(options)


# --- running commands ----------------------------------------------------------------------------


def test_echo(bash: Bash) -> None:
    assert bash("echo hi") == {"exit_code": 0, "stdout": "hi\n", "stderr": "", "timed_out": False, "truncated": False}


@pytest.mark.parametrize(
    ("command", "code"),
    [
        pytest.param("true", 0, id="true"),
        pytest.param("false", 1, id="false"),
        pytest.param("exit 3", 3, id="exit-3"),
        pytest.param("exit 255", 255, id="exit-255"),
        pytest.param("no-such-command-xyz", 127, id="not-found"),
        pytest.param("kill -9 $$", 137, id="sigkill"),
        pytest.param("kill -TERM $$", 143, id="sigterm"),
    ],
)
def test_exit_codes(bash: Bash, command: str, code: int) -> None:
    result = bash(command)
    assert result["exit_code"] == code
    assert result["timed_out"] is False


def test_stderr_is_captured_apart(bash: Bash) -> None:
    result = bash("echo out; echo oops >&2; exit 2")
    assert (result["stdout"], result["stderr"], result["exit_code"]) == ("out\n", "oops\n", 2)


def test_cwd_is_the_workspace(bash: Bash, workspace: Path) -> None:
    assert bash("pwd")["stdout"] == f"{workspace.resolve()}\n"
    bash("mkdir -p sub && echo data > sub/file.txt")
    assert (workspace / "sub" / "file.txt").read_text() == "data\n"


def test_workspace_recreated_if_deleted(bash: Bash, workspace: Path) -> None:
    workspace.rmdir()
    assert bash("echo ok")["stdout"] == "ok\n"
    assert workspace.is_dir()


def test_stdin_is_empty(bash: Bash) -> None:
    started = time.monotonic()
    result = bash("cat; read line; echo status=$?", timeout=10)
    assert result["stdout"] == "status=1\n"
    assert time.monotonic() - started < 5


def test_output_is_utf8_with_replacement(bash: Bash) -> None:
    assert bash("printf 'h\\xc3\\xa9 \\xff\\n'")["stdout"] == "hé \ufffd\n"


def _nested_unbounded_repeats(pattern: str) -> list[str]:
    """Repetitions without an upper bound of a group that itself holds one: the shape of super-linear search."""
    found: list[str] = []

    def walk(items: Any, inside_unbounded: bool) -> None:
        for op, value in items:
            if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT):
                _low, high, sub = value
                unbounded = high == sre_constants.MAXREPEAT
                if unbounded and inside_unbounded:
                    found.append(f"{op}{value[:2]}")
                walk(sub, inside_unbounded or (unbounded and _repeats_a_group(sub)))
            elif op == sre_constants.SUBPATTERN:
                walk(value[-1], inside_unbounded)
            elif op == sre_constants.BRANCH:
                for branch in value[1]:
                    walk(branch, inside_unbounded)
            elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT, sre_constants.ATOMIC_GROUP):
                walk(value[-1] if isinstance(value, tuple) else value, inside_unbounded)

    walk(sre_parse.parse(pattern), False)
    return found


def _repeats_a_group(sub: Any) -> bool:
    return any(op in (sre_constants.SUBPATTERN, sre_constants.BRANCH) for op, _ in sub) or len(sub) > 1


@pytest.mark.parametrize("pattern", [pytest.param(p, id=f"pattern-{i}") for i, p in enumerate(DEFAULT_DENY_PATTERNS)])
def test_default_deny_patterns_search_in_linear_time(pattern: str) -> None:
    """Issue 12's tool review: `(?:-\\S*\\s+)*` searched a 100 kB command of '-rm ' words for 18 s, holding the
    server's interpreter. No default pattern repeats, without bound, a group that repeats without bound."""
    assert _nested_unbounded_repeats(pattern) == []


# --- timeouts and process cleanup -------------------------------------------------------------


def test_timeout_kills_children_and_grandchildren(bash: Bash, workspace: Path) -> None:
    started = time.monotonic()
    result = bash("sleep 300 & echo $! > pid; (sleep 300 & echo $! > pid2; wait) & sleep 300", timeout=1)
    elapsed = time.monotonic() - started
    assert result["timed_out"] is True
    assert result["exit_code"] == 137
    assert elapsed < 5
    for name in ("pid", "pid2"):
        pid = int((workspace / name).read_text())
        assert wait_dead(pid), f"{name} {pid} survived the timeout"


def test_timeout_keeps_output_so_far(bash: Bash) -> None:
    result = bash("echo started; sleep 300", timeout=1)
    assert result["timed_out"] is True
    assert result["stdout"] == "started\n"


def test_background_jobs_end_with_the_command(bash: Bash, workspace: Path) -> None:
    started = time.monotonic()
    result = bash("sleep 300 & echo $! > pid; echo done")
    assert time.monotonic() - started < 5
    assert result == {"exit_code": 0, "stdout": "done\n", "stderr": "", "timed_out": False, "truncated": False}
    assert wait_dead(int((workspace / "pid").read_text()))


def test_command_that_closes_its_pipes_is_still_waited_for(bash: Bash) -> None:
    result = bash("exec >&- 2>&-; sleep 0.3; exit 4", timeout=10)
    assert (result["exit_code"], result["timed_out"]) == (4, False)


@pytest.mark.parametrize(
    ("timeout", "suggested"),
    [
        pytest.param(0, "1", id="zero"),
        pytest.param(-5, "1", id="negative"),
        pytest.param(601, "600", id="over-limit"),
    ],
)
def test_invalid_timeout(bash: Bash, timeout: int, suggested: str) -> None:
    error = raises_code("INVALID_TIMEOUT", bash, "echo hi", timeout=timeout)
    assert error.parameter_name == "timeout"
    assert error.suggested_value == suggested


def test_timeout_limit_is_configurable(workspace: Path) -> None:
    bash = make_bash(workspace, max_timeout=5)
    assert raises_code("INVALID_TIMEOUT", bash, "echo hi", timeout=6).suggested_value == "5"
    assert bash("echo hi", timeout=5)["stdout"] == "hi\n"
    assert bash("echo hi")["stdout"] == "hi\n"  # the default 120 s shrinks to the limit


# --- environment ----------------------------------------------------------------------------


def test_environment_is_scrubbed(bash: Bash, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTP_AUTH_TOKEN", "secret-token-value")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other-secret")
    output = bash("env")["stdout"]
    assert "secret" not in output
    assert "ATTP_" not in output
    assert "OPENAI_API_KEY" not in output
    lines = set(output.splitlines())
    assert {
        "PATH=/usr/local/bin:/usr/bin:/bin",
        f"HOME={workspace.resolve()}",
        "LANG=C.UTF-8",
        "TERM=dumb",
    } <= lines


def test_env_passthrough(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SETTING", "hello world")
    monkeypatch.setenv("ATTP_AUTH_TOKEN", "secret")
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    bash = make_bash(workspace, env_passthrough=["MY_SETTING", "NOT_SET_ANYWHERE"])
    result = bash('echo "$MY_SETTING"; echo "${NOT_SET_ANYWHERE-unset}"; env')
    assert result["stdout"].startswith("hello world\nunset\n")
    assert "secret" not in result["stdout"]


# --- deny patterns ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("rm -rf /", id="rm-root"),
        pytest.param("rm -rf /*", id="rm-root-glob"),
        pytest.param("rm -fr ~", id="rm-home"),
        pytest.param("cd /tmp && sudo rm -r -f -- / ", id="rm-root-sudo"),
        pytest.param("rm -rf --no-preserve-root /", id="no-preserve-root"),
        pytest.param("mkfs.ext4 /dev/sda1", id="mkfs"),
        pytest.param("dd if=/dev/zero of=/dev/sda bs=1M", id="dd-disk"),
        pytest.param(":(){ :|:& };:", id="fork-bomb"),
        pytest.param("bomb() { bomb | bomb & }; bomb", id="named-fork-bomb"),
        pytest.param("shutdown -h now", id="shutdown"),
        pytest.param("sudo reboot", id="sudo-reboot"),
        pytest.param("echo bye; poweroff", id="poweroff-after"),
        pytest.param("ls\nhalt", id="halt-on-second-line"),
        pytest.param("systemctl reboot", id="systemctl"),
    ],
)
def test_default_deny_patterns(bash: Bash, command: str) -> None:
    error = raises_code("COMMAND_DENIED", bash, command)
    assert error.parameter_name == "command"
    assert any(repr(pattern) in error.message for pattern in DEFAULT_DENY_PATTERNS), error.message


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("mkdir -p build && rm -rf build/", id="rm-subfolder"),
        pytest.param("mkdir -p tmp && rm -rf ./tmp", id="rm-dot-subfolder"),
        pytest.param("echo shutdown reboot", id="words-as-arguments"),
        pytest.param("echo 'reboot' > notes.txt; grep -c reboot notes.txt", id="grep-word"),
        pytest.param("ls / > /dev/null", id="list-root"),
        pytest.param("f() { echo hi; }; f", id="function"),
        pytest.param("dd if=/dev/zero of=out.bin bs=1 count=4 2>/dev/null", id="dd-file"),
    ],
)
def test_harmless_commands_pass_the_defaults(bash: Bash, command: str) -> None:
    assert bash(command)["exit_code"] == 0


def test_deny_patterns_are_configurable(workspace: Path) -> None:
    bash = make_bash(workspace, deny_patterns=[r"\bcurl\b"])
    error = raises_code("COMMAND_DENIED", bash, "curl https://example.com")
    assert r"'\\bcurl\\b'" in error.message
    assert bash("echo fine")["stdout"] == "fine\n"


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("", id="empty"),
        pytest.param("   \n\t", id="blank"),
        pytest.param("echo a\x00b", id="nul"),
        pytest.param("echo " + "x" * 100_001, id="too-long"),
    ],
)
def test_invalid_command(bash: Bash, command: str) -> None:
    assert raises_code("INVALID_ARGUMENT", bash, command).parameter_name == "command"


# --- output limits ----------------------------------------------------------------------------


def test_output_flood_is_capped(bash: Bash) -> None:
    result = bash("yes | head -c 5000000")
    assert result["exit_code"] == 0
    assert result["truncated"] is True
    assert len(result["stdout"]) == 1_000_000
    assert result["stdout"].startswith("y\ny\n")


@pytest.mark.parametrize(
    ("command", "stream"),
    [
        pytest.param("head -c 100000 /dev/zero | tr '\\0' o", "stdout", id="stdout"),
        pytest.param("head -c 100000 /dev/zero | tr '\\0' e >&2", "stderr", id="stderr"),
    ],
)
def test_output_cap_is_configurable_per_stream(workspace: Path, command: str, stream: str) -> None:
    result = make_bash(workspace, max_output_bytes=1000)(command)
    assert result["truncated"] is True
    assert len(result[stream]) == 1000


def test_output_at_the_cap_is_not_truncated(workspace: Path) -> None:
    result = make_bash(workspace, max_output_bytes=10)("printf 0123456789")
    assert (result["stdout"], result["truncated"]) == ("0123456789", False)


def test_cap_does_not_split_a_character(workspace: Path) -> None:
    result = make_bash(workspace, max_output_bytes=3)("printf 'aéé'")
    assert (result["stdout"], result["truncated"]) == ("aé", True)


def test_endless_flood_ends_at_the_timeout(bash: Bash) -> None:
    started = time.monotonic()
    result = bash("yes", timeout=1)
    assert time.monotonic() - started < 5
    assert (result["timed_out"], result["truncated"], len(result["stdout"])) == (True, True, 1_000_000)


# --- through the real runtime ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_bash_through_the_runtime(workspace: Path) -> None:
    async with running(workspace, toolpacks=["files", "shell"]) as runtime:
        result = await run_code(runtime, '__result__ = bash("echo hi")["stdout"]')
        assert result["status"] == "ok", result
        assert result["result"] == "hi\n"
        denied = await run_code(runtime, 'bash("rm -rf /")')
        assert denied["status"] == "error"
        assert denied["error"]["code"] == "COMMAND_DENIED"


@pytest.mark.anyio
async def test_command_ends_with_its_program_not_at_its_own_timeout(workspace: Path) -> None:
    """Issue 12: a command outliving its run kept a tool thread (and itself) for up to its 120 s timeout."""
    async with running(workspace, toolpacks=["files", "shell"], timeout_s=1.0) as runtime:
        result = await run_code(runtime, '__result__ = bash("sleep 300 & echo $! > pid; sleep 300")["timed_out"]')
        assert result["result"] is True or result["error"]["code"] == "TIMEOUT", result  # killed at the time limit
        assert wait_dead(int((workspace / "pid").read_text()), within=10), "the command outlived its program"
        assert runtime.tools.stats()["abandoned"] == 0


def test_pid_helper_sees_live_processes() -> None:
    assert is_alive(os.getpid())


@pytest.mark.anyio
async def test_shell_is_off_by_default(workspace: Path) -> None:
    settings = Settings(workspace=workspace)
    assert "shell" not in settings.toolpacks
    async with open_runtime(settings) as runtime:
        assert "bash" not in runtime.registry.callable_names()
        result = await run_code(runtime, 'bash("echo hi")')
    assert result["status"] == "error"
    assert result["error"]["code"] == "NAME_NOT_FOUND"
