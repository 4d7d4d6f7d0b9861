"""A pool's fork server (server side): workers forked from one process that has already loaded what they load.

Starting a worker as a new interpreter costs about 130 ms of CPU, nearly all of it importing the sandbox and
preloading what its namespaces read from disk (`lockdown.preload`); the lockdown itself takes 4 ms. The fork
server (`worker.forks`) pays that once: it loads everything, then forks a worker for each request, and each
fork applies its own lockdown before it reads a program, exactly as a worker started from scratch does. The
fork server never runs a program and is never reachable from one: a fork closes every descriptor it inherited
but its own three pipes (stdin, stdout, stderr), and it runs in a session of its own.

Each request carries the worker's three pipe ends (SCM_RIGHTS over a SOCK_SEQPACKET socket pair); the answer is
its pid. The fork server is the workers' parent, so it reaps them and reports each exit code, which
`ForkedProcess` holds for the pool as `anyio`'s process would. When the fork server is gone (killed, crashed),
the workers it started are killed and count as killed, and the pool goes back to starting interpreters.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from contextlib import AsyncExitStack

import anyio
import anyio.abc

from attp_server.sandbox.process.lockdown import WITHOUT_NUMPY

logger = logging.getLogger(__name__)

_BOOT = WITHOUT_NUMPY + "from attp_server.sandbox.process.worker import forks; forks()"
_REPLY_BYTES = 4096


class ForkServerGone(Exception):
    """The fork server cannot start a worker (it exited, or did not answer in time)."""


class ForkedProcess:
    """A worker the fork server started, as the pool uses a process: `pid`, `returncode`, `wait`, `aclose`."""

    stderr = None
    """Its stderr is a pipe of its own, which the pool drains with `drain_fd` (not an anyio stream)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._exited = anyio.Event()

    def exited(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
        self._exited.set()

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode

    async def aclose(self) -> None:
        return None


class ForkServer:
    """One fork server process, its socket, and the workers it started that have not exited yet."""

    def __init__(self, process: anyio.abc.Process, control: socket.socket, directory: str) -> None:
        self.process = process
        self.control = control
        self.directory = directory
        self.gone = False
        self._forks: dict[int, ForkedProcess] = {}
        self._lock = anyio.Lock()
        self._answered: anyio.Event | None = None
        self._answer: ForkedProcess | None = None
        self._stack = AsyncExitStack()
        self._tasks: anyio.abc.TaskGroup | None = None

    @classmethod
    async def start(cls, arguments: list[str], environment: Mapping[str, str], directory: str) -> ForkServer:
        """Start the fork server with the workers' own arguments (``<memory_mb> [without=...]``) in `directory`
        (removed when it closes). Enter it (``async with``) to take its answers; it answers once loaded, so the
        first `fork` waits for that."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with anyio.CancelScope(shield=True):
                process = await anyio.open_process(
                    [sys.executable, "-I", "-c", _BOOT, *arguments],
                    stdin=theirs.fileno(),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    cwd=directory,
                    env=dict(environment),
                    start_new_session=True,
                )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        return cls(process, ours, directory)

    async def __aenter__(self) -> ForkServer:
        self._tasks = await self._stack.enter_async_context(anyio.create_task_group())
        self._tasks.start_soon(self._read)
        if self.process.stderr is not None:
            self._tasks.start_soon(drain_stderr, self.process.stderr, f"fork server {self.process.pid}")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close it: the workers it started that are still running are killed (the pool kills and waits for its
        own first, so that none outlives it), then the fork server ends, and is reaped."""
        self._lost()
        if self._tasks is not None:
            self._tasks.cancel_scope.cancel()
        try:
            await self._stack.aclose()  # the reader has stopped waiting on the socket: it can be closed
        finally:
            with anyio.CancelScope(shield=True):
                self.control.close()
                await self.process.wait()
                await self.process.aclose()
                shutil.rmtree(self.directory, ignore_errors=True)

    async def fork(
        self, stdio: tuple[int, int, int], directory: str, environment: Mapping[str, str], timeout_s: float
    ) -> ForkedProcess:
        """A new worker on pipe ends `stdio` (its stdin, stdout and stderr; the caller keeps and closes its
        copies), in `directory` with `environment`. Raises `ForkServerGone` when the fork server cannot: then a
        fork it may have made before failing could still hold those pipes and that folder."""
        request = json.dumps({"directory": directory, "environment": dict(environment)}).encode()
        async with self._lock:  # one request at a time: each answer is the pid for the request before it
            if self.gone:
                raise ForkServerGone("the fork server has exited")
            answered = self._answered = anyio.Event()
            self._answer = None
            try:
                while True:
                    try:
                        socket.send_fds(self.control, [request], list(stdio))
                        break
                    except BlockingIOError:
                        await anyio.wait_writable(self.control)
            except OSError as exc:
                self._lost()
                raise ForkServerGone(f"could not reach the fork server: {exc}") from exc
            with anyio.move_on_after(timeout_s):
                await answered.wait()
            if not answered.is_set():
                self._lost()
                raise ForkServerGone(f"the fork server did not answer within {timeout_s:g} s")
            return self._answered_fork()

    def _answered_fork(self) -> ForkedProcess:
        answer = self._answer
        if answer is None:
            raise ForkServerGone("the fork server is gone" if self.gone else "the fork server refused the request")
        return answer

    async def _read(self) -> None:
        """Take the fork server's answers and exit reports until it is gone."""
        try:
            while True:
                try:
                    data = self.control.recv(_REPLY_BYTES)
                except BlockingIOError:
                    await anyio.wait_readable(self.control)
                    continue
                except OSError:
                    data = b""
                if not data:
                    return
                message = json.loads(data)
                if "pid" in message:
                    pid = int(message["pid"])
                    if pid > 0:
                        self._answer = self._forks[pid] = ForkedProcess(pid)
                    if self._answered is not None:
                        self._answered.set()
                elif "exit" in message:
                    forked = self._forks.pop(int(message["exit"]), None)
                    if forked is not None:
                        forked.exited(int(message["code"]))
        finally:
            self._lost()

    def _lost(self) -> None:
        """The fork server is gone or going: kill every worker it started, and count each as killed."""
        if not self.gone:
            self.gone = True
            logger.debug("fork server %d stopped", self.process.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        forks, self._forks = self._forks, {}
        for forked in forks.values():
            kill_worker(forked.pid)
            forked.exited(-signal.SIGKILL)
        if self._answered is not None:
            self._answered.set()

    def kill_now(self) -> list[int]:
        """Kill the fork server and every worker it started at once, without the event loop (a stop signal in
        stdio mode); returns their pids, for the caller to wait until they are gone."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for pid in self._forks:
            kill_worker(pid)
        shutil.rmtree(self.directory, ignore_errors=True)
        return [self.process.pid, *self._forks]


def kill_worker(pid: int) -> None:
    """SIGKILL a worker's process group (its session), and the worker itself: a fork that has not yet made its
    own session (it does so first thing) is not in that group yet."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


STDERR_LOGGED_BYTES = 64 * 1024
"""Most of one worker's stderr the log takes (at DEBUG); the rest is read and dropped, so the pipe never fills."""


class _StderrLog:
    """What one worker writes to its stderr, logged (a fallen worker writes anything: the log escapes it) until
    `STDERR_LOGGED_BYTES`, then dropped, saying so once."""

    def __init__(self, who: str) -> None:
        self.who = who
        self.logged = 0

    def take(self, chunk: bytes) -> None:
        room = STDERR_LOGGED_BYTES - self.logged
        if room <= 0:
            return
        self.logged += len(chunk)
        text = chunk[:room].decode("utf-8", "replace").strip()
        if text:
            logger.debug("%s stderr: %s", self.who, text[:2000])
        if self.logged >= STDERR_LOGGED_BYTES:
            logger.debug("%s stderr: more than %d bytes; the rest is not logged", self.who, STDERR_LOGGED_BYTES)


async def drain_fd(fd: int, who: str) -> None:
    """Log what a forked worker writes to its stderr pipe (`fd`, non-blocking; closed here), so it never fills."""
    log = _StderrLog(who)
    try:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                await anyio.wait_readable(fd)
                continue
            except OSError:
                return
            if not chunk:
                return
            log.take(chunk)
    finally:
        os.close(fd)


async def drain_stderr(stream: anyio.abc.ByteReceiveStream, who: str) -> None:
    """Log what a worker (or the fork server, for its forks) writes to stderr: its own crashes. The pipe never
    fills, so it never blocks."""
    log = _StderrLog(who)
    try:
        async for chunk in stream:
            log.take(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
