"""Run one command in its own session with a deadline, capped output, and no survivors.

The command runs as the leader of a new session (so of a new process group). The group is killed with
SIGKILL when the command finishes or its deadline passes, whichever comes first, so background jobs and
grandchildren never outlive the call. The kill is sent while the leader is still unreaped (a zombie at
worst), so its id cannot have been reused by an unrelated process.

Both pipes are read incrementally as data arrives; past the cap the bytes are read and dropped, so a
flood neither blocks the command on a full pipe nor grows the server's memory.
"""

from __future__ import annotations

import codecs
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

READ_CHUNK = 64 * 1024
POLL_S = 0.05
"""How often the exit is polled where pidfds are not available."""
DRAIN_GRACE_S = 1.0
"""After the group is killed, how long to wait for the pipes to close (a process that left the
group with setsid may hold them open forever)."""


@dataclass(frozen=True)
class Completed:
    exit_code: int
    """As a shell reports ``$?``: the exit status, or 128 + N when killed by signal N."""
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool


class _Capture:
    """The first ``limit`` bytes of a stream; the rest is counted as truncation and dropped."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.truncated = False

    def feed(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if len(chunk) > room:
            self.truncated = True
            chunk = chunk[: max(room, 0)]
        self.data += chunk

    def text(self) -> str:
        """UTF-8 with invalid bytes replaced; a character cut in half by the cap is dropped."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return decoder.decode(bytes(self.data), final=not self.truncated)


def run_capped(argv: list[str], *, cwd: Path, env: Mapping[str, str], timeout: float, max_bytes: int) -> Completed:
    """Run ``argv`` with stdin from /dev/null; return its exit code and at most ``max_bytes`` per stream."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdout is not None and process.stderr is not None
    captures = {process.stdout.fileno(): _Capture(max_bytes), process.stderr.fileno(): _Capture(max_bytes)}
    timed_out = False
    try:
        with selectors.DefaultSelector() as selector, _exit_watch(process.pid) as exit_fd:
            for fd in captures:
                selector.register(fd, selectors.EVENT_READ)
            if exit_fd is not None:
                selector.register(exit_fd, selectors.EVENT_READ)
            timed_out = not _pump(selector, captures, process.pid, exit_fd, time.monotonic() + timeout)
            _kill_group(process.pid)
            if exit_fd is not None:
                selector.unregister(exit_fd)
            _drain(selector, captures, time.monotonic() + DRAIN_GRACE_S)
    finally:
        _kill_group(process.pid)
        process.wait()
        process.stdout.close()
        process.stderr.close()
    out, err = captures.values()
    code = process.returncode
    return Completed(
        exit_code=code if code >= 0 else 128 - code,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        truncated=out.truncated or err.truncated,
    )


def _pump(
    selector: selectors.BaseSelector, captures: dict[int, _Capture], pid: int, exit_fd: int | None, deadline: float
) -> bool:
    """Read output until the leader exits (True) or the deadline passes (False). Does not reap it."""
    while not _has_exited(pid):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        wait = remaining if exit_fd is not None else min(remaining, POLL_S)
        if len(selector.get_map()) == 0:
            time.sleep(wait)
            continue
        for key, _ in selector.select(wait):
            if key.fd != exit_fd:
                _read(selector, captures, key.fd)
    return True


def _drain(selector: selectors.BaseSelector, captures: dict[int, _Capture], deadline: float) -> None:
    """Read what is left in the pipes until they close or the grace period ends."""
    while len(selector.get_map()) > 0:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        for key, _ in selector.select(remaining):
            _read(selector, captures, key.fd)


def _read(selector: selectors.BaseSelector, captures: dict[int, _Capture], fd: int) -> None:
    chunk = os.read(fd, READ_CHUNK)
    if chunk:
        captures[fd].feed(chunk)
    else:
        selector.unregister(fd)


def _has_exited(pid: int) -> bool:
    """True once the process has ended, leaving it unreaped (WNOWAIT) so its pid stays reserved."""
    try:
        result = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # already reaped elsewhere: certainly ended
        return True
    return result is not None and result.si_pid == pid


@contextmanager
def _exit_watch(pid: int) -> Iterator[int | None]:
    """A pidfd that becomes readable when the process exits, or None where Linux pidfds are missing."""
    fd: int | None = None
    if hasattr(os, "pidfd_open"):
        with suppress(OSError):
            fd = os.pidfd_open(pid)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def _kill_group(pid: int) -> None:
    """SIGKILL the command's whole process group (its pid is the group id: it leads a new session)."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
