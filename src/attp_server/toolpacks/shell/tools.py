"""The ``bash`` tool. Its docstring is what the model reads, so it is written for it."""

from __future__ import annotations

import os
import re
from pathlib import Path

from attp_server.errors import short_repr
from attp_server.toolpack import ToolError, ToolFunction, current_call
from attp_server.toolpacks.shell.options import ShellOptions
from attp_server.toolpacks.shell.process import run_capped

BASH = "/bin/bash"
DEFAULT_TIMEOUT = 120
MAX_COMMAND_BYTES = 100_000
"""Longer commands belong in a script file (the kernel refuses single arguments past 128 KiB anyway)."""
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"

BashResult = dict[str, int | str | bool]


class ShellTools:
    """The tool, bound to one workspace and the pack's options."""

    def __init__(self, workspace: Path, options: ShellOptions) -> None:
        self.workspace = workspace
        self.options = options
        self.deny = [(pattern, re.compile(pattern, re.MULTILINE)) for pattern in options.deny_patterns]

    def tools(self) -> list[ToolFunction]:
        return [self.bash]

    def environment(self) -> dict[str, str]:
        """A scrubbed environment: a fixed base plus only the variables the operator passes through."""
        env = {"PATH": BASE_PATH, "HOME": str(self.workspace), "LANG": "C.UTF-8", "TERM": "dumb"}
        for name in self.options.env_passthrough:
            value = os.environ.get(name)
            if value is not None:
                env[name] = value
        return env

    def bash(self, command: str, timeout: int = DEFAULT_TIMEOUT) -> BashResult:
        """Run a bash command in the workspace folder and return its exit code and output.

        Each call is a fresh, non-interactive `bash -c` with the workspace as its working folder
        (and as HOME); nothing carries over between calls except the files it writes. stdin is
        empty, so commands that wait for input end at once. Background jobs (`cmd &`) are killed
        when the command finishes. The environment is minimal (PATH, HOME, LANG, TERM): no
        tokens or keys of the server are visible. Obviously destructive commands (`rm -rf /`,
        `mkfs`, `shutdown`, ...) are refused.

        Args:
            command: The bash command line, e.g. "ls -la" or "python3 script.py > out.txt 2>&1".
                Several commands may be joined with ';', '&&' or newlines.
            timeout: Seconds to wait before the command and everything it started are killed,
                from 1 to the server's limit (600 unless configured). Default 120 (or the limit,
                if that is lower). The command is also killed when your whole program reaches
                its own time limit; keep long-running commands within it.

        Returns:
            {"exit_code": int, "stdout": str, "stderr": str, "timed_out": bool, "truncated": bool}.
            exit_code is the command's status as bash's $? reports it: 0 means success; 128 + N
            means killed by signal N (137 after a timeout). timed_out is True if the timeout
            stopped it. Each of stdout and stderr keeps at most the first 1 MB (configurable);
            truncated is True if more was produced and cut off. Output is decoded as UTF-8;
            invalid bytes become U+FFFD. A failing command is not an error: check exit_code.

        Raises:
            ToolError: COMMAND_DENIED (the command matches a deny pattern, which the message
                names), INVALID_TIMEOUT (timeout outside 1..limit; suggested_value holds a valid
                one), INVALID_ARGUMENT (empty command, NUL byte, or over 100000 bytes).

        Example:
            r = bash("python3 -m pytest -q tests/", timeout=60)
            if r["exit_code"] != 0:
                print(r["stdout"][-2000:], r["stderr"][-2000:])
            count = int(bash("grep -c ERROR logs/app.log")["stdout"].strip() or 0)
        """
        self._check_command(command)
        seconds: float = self._check_timeout(timeout)
        left = current_call().remaining()
        if left is not None:  # past its program's time limit nobody waits for the command: it is killed there
            seconds = min(seconds, left)
        self.workspace.mkdir(parents=True, exist_ok=True)
        done = run_capped(
            [BASH, "-c", command],
            cwd=self.workspace,
            env=self.environment(),
            timeout=seconds,
            max_bytes=self.options.max_output_bytes,
        )
        return {
            "exit_code": done.exit_code,
            "stdout": done.stdout,
            "stderr": done.stderr,
            "timed_out": done.timed_out,
            "truncated": done.truncated,
        }

    def _check_command(self, command: str) -> None:
        problem = None
        if not command.strip():
            problem = "the command is empty"
        elif "\x00" in command:
            problem = "the command contains a NUL byte"
        elif len(command.encode("utf-8", "surrogatepass")) > MAX_COMMAND_BYTES:
            problem = f"the command is longer than {MAX_COMMAND_BYTES} bytes"
        if problem is not None:
            raise ToolError(
                "INVALID_ARGUMENT",
                f"bash(): {problem}.",
                parameter_name="command",
                received=short_repr(command),
                expected=f"a non-empty bash command line of at most {MAX_COMMAND_BYTES} bytes",
                solution="For long scripts, write them to a file with write_file and run bash('bash script.sh').",
            )
        for pattern, compiled in self.deny:
            match = compiled.search(command)
            if match is not None:
                raise ToolError(
                    "COMMAND_DENIED",
                    f"bash(): the command is refused because {match.group(0)!r} matches the deny pattern {pattern!r}.",
                    parameter_name="command",
                    received=short_repr(command),
                    expected="a command that matches none of the server's deny patterns",
                    solution="Do not retry it in another spelling; limit the command to files inside the workspace.",
                )

    def _check_timeout(self, timeout: int) -> int:
        limit = self.options.max_timeout
        if timeout == DEFAULT_TIMEOUT:
            return min(timeout, limit)
        if 1 <= timeout <= limit:
            return timeout
        raise ToolError(
            "INVALID_TIMEOUT",
            f"bash(): timeout must be from 1 to {limit} seconds, got {timeout}.",
            parameter_name="timeout",
            received=str(timeout),
            expected=f"an integer number of seconds from 1 to {limit}",
            suggested_value=str(min(max(timeout, 1), limit)),
        )
