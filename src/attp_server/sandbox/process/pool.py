"""Pre-started worker processes, the wall clock, kills and refills (the server side of the sandbox).

`WorkerPool.run(job, on_call, owner=...)` takes an idle worker (or starts one), sends it the program, answers
its tool calls through `on_call`, and returns its ``done`` message, each message checked on the way in
(`inbound`). Past the deadline, on cancellation, or when the worker breaks the protocol, the worker's whole
process group is killed and reaped; a worker that was killed, crashed or hit a limit is never reused. Each run
holds its own worker, so concurrent runs never share one.

Whether a worker serves again is the pool's decision, never the worker's: a worker is bound to the `owner` of the
first run it served (whose programs it has seen, and may have been taken over by) and serves no run of another
owner, and the pool counts its runs itself (`MAX_RUNS_PER_WORKER`); a worker's ``retire`` can only make it retire
sooner. Idle workers are the fresh ones (never ran a program: any owner's) and the kept ones (an owner's, at most
`max_workers` of them, the least recently used killed first).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, cast

import anyio
import anyio.abc

from attp_server.sandbox.engines import ENGINES
from attp_server.sandbox.process import inbound
from attp_server.sandbox.process.forkserver import (
    ForkedProcess,
    ForkServer,
    ForkServerGone,
    drain_fd,
    drain_stderr,
    kill_worker,
)
from attp_server.sandbox.process.lockdown import CONTAINMENT, ONE_THREAD, WITHOUT_NUMPY
from attp_server.sandbox.process.protocol import (
    MAX_CALL_BYTES,
    MAX_OUTPUT_BYTES,
    MAX_READY_BYTES,
    MAX_RUNS_PER_WORKER,
    DoneMessage,
    ErrorReport,
    Message,
    ProbeMessage,
    ProtocolError,
    ReplyMessage,
    RunMessage,
    ToolReply,
    done_bytes,
    encode,
)

logger = logging.getLogger(__name__)

KILL_GRACE_S = 0.1
"""How long past its own deadline a worker may take to report TIMEOUT before it is killed."""

LONG_RUN_S = 0.5
LONG_RUN_NICE = 19
"""A run still going after LONG_RUN_S drops to the lowest CPU priority, so that on a busy CPU short runs (most
calls) go first and runaways share what is left. Its worker retires afterwards: raising a priority back
needs a privilege the server may not have."""

_BOOT = WITHOUT_NUMPY + "from attp_server.sandbox.process.worker import main; main()"
"""The worker's whole program: the installed package (a wheel, or an editable checkout) is importable as is."""

_DIRECTORY_PREFIX = "attp-worker-"
"""Each worker's private directory is ``<tmp>/attp-worker-<server pid>-<random>``."""

_READ_SIZE = 64 * 1024
"""Most bytes one read takes from a worker's pipe: what a pipe holds, and small enough not to be mmap'ed."""

CallHandler = Callable[[str, list[Any], dict[str, Any]], Awaitable[ToolReply]]
"""Runs one tool call for a worker; returns ``{"ok": True, "value": ...}`` or ``{"ok": False, "error": {...}}``."""


@dataclass(frozen=True)
class Job:
    """One program to run, with everything the worker needs to know about tools and limits."""

    code: str
    tools: list[str]
    namespaces: dict[str, list[str]]
    timeout_s: float
    max_output_bytes: int
    max_result_bytes: int
    max_tool_calls: int
    capture_print: bool = True
    engine: str = "python"
    allow_imports: bool = True
    unavailable: dict[str, str] = field(default_factory=dict)
    """Packs whose tools cannot be called now (an upstream server that is down) -> why: the static check says so."""
    state: dict[str, Any] | None = None
    """A session's kept state to restore before the program runs (`attp_server.sandbox.process.keep`)."""
    keep: bool = False
    """Report the state the program leaves (``done["state"]``), at most `max_state_bytes` of it."""
    max_state_bytes: int = 0
    modules: list[str] | None = None
    """The curated modules the program may use; None: all of them."""
    warm_up: bool = False
    """The server's own `WARM_UP` program, before the worker serves anybody (it may serve one run after it)."""

    def message(self) -> RunMessage:
        message: RunMessage = {
            "op": "run",
            "engine": self.engine,
            "code": self.code,
            "tools": self.tools,
            "namespaces": self.namespaces,
            "allow_imports": self.allow_imports,
            "unavailable": self.unavailable,
            "limits": {
                "timeout_s": self.timeout_s,
                "max_output_bytes": self.max_output_bytes,
                "max_result_bytes": self.max_result_bytes,
                "max_tool_calls": self.max_tool_calls,
                "capture_print": self.capture_print,
                "max_state_bytes": self.max_state_bytes,
            },
        }
        if self.modules is not None:
            message["modules"] = self.modules
        if self.keep:
            message["keep"] = True
        if self.state is not None:
            message["state"] = self.state
        if self.warm_up:
            message["warm_up"] = True
        return message


class PauseRefused(Exception):
    """The run may not wait for a person now (its owner has as many runs waiting as it may): nobody is asked."""


class Slot(Protocol):
    """A run's place among the runs in flight, which it gives back while it waits for a person."""

    async def give_back(self) -> None:
        """Give the place back; raises `PauseRefused` (having changed nothing) when the run may not wait."""

    async def take_back(self) -> None:
        """Take a place again before the run goes on (waiting for one, ahead of runs not started yet)."""


class RunClock:
    """The wall clock of one run, which stops while the server waits for a person (`paused`).

    Holds the pool's cancel scope for the run: a pause lifts its deadline and puts it back, moved by
    the length of the pause, when the last of the overlapping pauses ends. The worker is told of
    each pause with the tool's reply, and moves its own deadline the same way. While paused the run also
    holds none of its `slots` (the runtime's admission, the pool's own): a person's time is not a run slot's,
    so runs waiting for answers never keep other callers out. Taking them back after the answer counts as
    paused too (it is the server's wait, not the program's).
    """

    def __init__(self, scope: anyio.CancelScope, slots: Sequence[Slot] = ()) -> None:
        self._scope = scope
        self._slots = slots
        self._waiting = 0
        self._since = 0.0
        self._left = 0.0
        self._unreported = 0.0
        self.paused_total = 0.0
        """Seconds the clock has been stopped so far in this run."""

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """Wait for a person inside; raises `PauseRefused` on entry when the run may not wait now."""
        if self._waiting == 0:
            given: list[Slot] = []
            try:
                for slot in self._slots:
                    await slot.give_back()
                    given.append(slot)
            except PauseRefused:
                for slot in given:  # (only the first may refuse; this keeps the rule if that changes)
                    await slot.take_back()
                raise
            self._since = anyio.current_time()
            self._left = self._scope.deadline - self._since
            self._scope.deadline = math.inf
        self._waiting += 1
        try:
            yield
        finally:
            self._waiting -= 1
            if self._waiting == 0:
                try:
                    for slot in self._slots:
                        await slot.take_back()
                finally:
                    now = anyio.current_time()
                    self._unreported += now - self._since
                    self.paused_total += now - self._since
                    self._scope.deadline = now + self._left

    def take_paused(self) -> float:
        """Seconds paused since the last call (what to tell the worker with the next reply)."""
        paused, self._unreported = self._unreported, 0.0
        return paused


class _PoolSlot:
    """The pool's own count of runs in flight (`max_workers`), as a `Slot`."""

    def __init__(self, semaphore: anyio.Semaphore) -> None:
        self.semaphore = semaphore
        self.held = False

    async def take_back(self) -> None:
        await self.semaphore.acquire()
        self.held = True

    async def give_back(self) -> None:
        self.release()

    def release(self) -> None:
        if self.held:
            self.held = False
            self.semaphore.release()


_CLOCK: contextvars.ContextVar[RunClock | None] = contextvars.ContextVar("attp_run_clock", default=None)


def run_clock() -> RunClock | None:
    """The clock of the run whose tool call is being served, or None outside a run."""
    return _CLOCK.get()


class WorkerStartError(Exception):
    """A worker process could not be started or did not say ``ready``."""


class ContainmentMissing(WorkerStartError):
    """A worker could not apply a containment layer and ``containment = "required"``: no program may run."""


Containment = Literal["required", "best-effort"]


def missing_layers(report: dict[str, Any]) -> dict[str, str]:
    """The containment layers a worker's lockdown report says did not take effect, and why."""
    reasons = report.get("missing")
    reasons = reasons if isinstance(reasons, dict) else {}
    return {layer: str(reasons.get(layer, "not reported")) for layer in CONTAINMENT if not report.get(layer)}


NOT_CONTAINED = (
    "Do not retry: no program runs on this server until its operator fixes the sandbox or changes the containment "
    "setting. Tell the user what the message says."
)


def refusal(missing: dict[str, str]) -> str:
    """What a run is told when the server refuses to run programs without a containment layer."""
    layers = "; ".join(f"{layer}: {why}" for layer, why in missing.items())
    names = " and ".join(missing)
    return (
        f"this server runs no programs: its sandbox could not apply the {names} containment "
        f"layer{'s' if len(missing) > 1 else ''} on this machine ({layers}), and its setting "
        'containment = "required" refuses to run programs without them. Tell the server\'s operator: '
        '`attp doctor` shows what holds here; containment = "best-effort" runs programs anyway, with a warning.'
    )


@dataclass(eq=False)
class WorkerProcess:
    """One worker: its process, the two ends of its protocol pipes, and its private directory.

    The pipes are plain non-blocking file descriptors read and written directly, waiting on the event
    loop only when the other side is not ready: a message round trip costs about 10 µs, against about
    75 µs through anyio's process streams (several layers of asyncio transports and buffers).
    """

    process: anyio.abc.Process | ForkedProcess
    to_worker: int
    from_worker: int
    directory: str
    lockdown: dict[str, Any] = field(default_factory=dict)
    owner: str | None = None
    """Whose runs it serves: the owner of the first run it served (None: none yet, a fresh worker)."""
    runs: int = 0
    """Runs it was handed, counted here."""
    killed: bool = False
    closed: bool = False
    """Reaped by the event loop, pipes closed, directory removed (`kill_now` kills without reaping this way)."""
    demoted: bool = False
    _buffer: bytearray = field(default_factory=bytearray)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def send(self, message: Message) -> None:
        data = memoryview(encode(message))
        while data:
            try:
                written = os.write(self.to_worker, data)
            except BlockingIOError:
                await anyio.wait_writable(self.to_worker)
                continue
            except OSError as exc:  # BrokenPipeError: the worker is gone
                raise anyio.BrokenResourceError(str(exc)) from exc
            data = data[written:]

    async def receive(self, limits: Mapping[str, int]) -> dict[str, Any]:
        """The next message, of one of the kinds `limits` names, read no further than its kind's longest line and
        checked as JSON (`inbound`); raises `inbound.Refused` otherwise."""
        buffer = self._buffer
        scanned, kind, limit = 0, None, max(limits.values())
        while (end := buffer.find(b"\n", scanned)) < 0:
            scanned = len(buffer)
            if kind is None and scanned >= inbound.KIND_BYTES:
                kind = inbound.kind_of(buffer, limits)
                limit = limits[kind]
            if scanned > limit:
                raise inbound.too_long(kind or "unknown", limit)
            try:
                chunk = os.read(self.from_worker, _READ_SIZE)
            except BlockingIOError:
                await anyio.wait_readable(self.from_worker)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError(str(exc)) from exc
            if not chunk:
                raise anyio.EndOfStream
            buffer += chunk
        line = bytes(buffer[:end])
        del buffer[: end + 1]
        kind = kind or inbound.kind_of(line, limits)
        if len(line) > limits[kind]:
            raise inbound.too_long(kind, limits[kind])
        return inbound.decode(kind, line)

    async def kill(self) -> None:
        """Kill the whole process group and reap it, even while the caller is being cancelled. A worker that
        `WorkerPool.kill_now` killed is still reaped here, so that the event loop learns it exited."""
        if self.closed:
            return
        self.closed = True
        with anyio.CancelScope(shield=True):
            if not self.killed:
                self.killed = True
                if self.process.returncode is None:  # (an exited worker's pid may already be another process's)
                    kill_worker(self.pid)
            for fd in (self.to_worker, self.from_worker):  # first: a worker the kill missed reads EOF and ends
                with contextlib.suppress(OSError):
                    os.close(fd)
            await self.process.wait()
            await self.process.aclose()
            shutil.rmtree(self.directory, ignore_errors=True)


def sweep_stale_directories(root: str | None = None) -> int:
    """Remove the private directories that workers of servers no longer running left behind.

    A pool removes its workers' directories itself; only a server that was killed (SIGKILL, a crash)
    leaves them. The server's pid is in each name; a directory whose server is alive is left alone.
    Returns how many were removed.
    """
    removed = 0
    base = Path(root or tempfile.gettempdir())
    for path in base.glob(f"{_DIRECTORY_PREFIX}*-*"):
        owner = path.name[len(_DIRECTORY_PREFIX) :].split("-", 1)[0]
        if not owner.isdigit() or process_alive(int(owner)) or not path.is_dir() or path.is_symlink():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += not path.exists()
    return removed


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive, and not ours to judge
    return True


def _private_directory(kind: str = "") -> str:
    """A new folder only the server's user can enter: ``<tmp>/attp-worker-<server pid>-<kind><random>``."""
    directory = tempfile.mkdtemp(prefix=f"{_DIRECTORY_PREFIX}{os.getpid()}-{kind}")
    os.chmod(directory, 0o700)
    return directory


def _worker_environment(directory: str) -> dict[str, str]:
    """The whole environment a worker gets: nothing of the server's (no tokens, no credentials)."""
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": directory,
        "TMPDIR": directory,
        **ONE_THREAD,
        "MPLCONFIGDIR": _matplotlib_cache(directory),
    }


def _matplotlib_cache(fallback: str) -> str:
    """Where a data-stack fork server keeps matplotlib's font list between server starts (building it takes
    seconds): a folder of the server's user's own in the temporary directory (its workers can write nowhere)."""
    path = Path(tempfile.gettempdir()) / f"attp-matplotlib-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    if path.is_symlink() or not path.is_dir() or path.stat().st_uid != os.getuid():
        return fallback  # someone else's: the process's own folder, rebuilt every time
    return str(path)


class WorkerPool:
    """Keeps `size` idle workers ready and runs at most `max_workers` programs at once."""

    def __init__(
        self,
        *,
        size: int,
        max_workers: int,
        memory_mb: int,
        startup_timeout_s: float = 20.0,
        containment: Containment = "required",
        probe: bool = False,
        without: tuple[str, ...] = (),
        fork_server: bool = True,
        fallen: bool = False,
        engine: str | None = None,
        packages: tuple[str, ...] = (),
    ) -> None:
        if size < 0 or max_workers < 1:
            raise ValueError("pool size must be >= 0 and max_workers >= 1")
        self.containment: Containment = containment
        """``required``: a worker missing a containment layer is killed and every run refused, saying why."""
        self.probing = probe
        """Workers run `probe` code as plain CPython (``attp doctor`` only; never a serving pool)."""
        self.without = without
        """Containment layers the workers leave out (``attp doctor`` shows each wall alone; the benchmark measures
        what they cost). Set only in code, never from a setting."""
        self.fallen = fallen
        """A test hook (`fallen`): every program runs as plain CPython in its locked-down worker. Set only in code:
        by `open_runtime` when the server's environment asks at start, and by ``attp doctor``'s probes."""
        self.fork_server = fork_server
        """Workers are forked from a fork server (`forkserver`) that has loaded what they load (``attp doctor``'s
        probes too: they must meet the workers as they serve). False (only in code: the benchmark's comparison)
        starts each as a new interpreter."""
        self.engine = engine
        """``cpython``: the workers are data-stack workers (their fork server loads `packages` first; the engine
        table says each serves one run). None: workers for the other engines."""
        self.packages = packages
        self._forks: ForkServer | None = None
        self.refused: str | None = None
        """Why runs are refused (a containment layer missing under ``required``), once a worker said so."""
        self._warned = False
        self._warm_up_failed = False
        self.size = size
        self.max_workers = max_workers
        self.memory_mb = memory_mb
        self.startup_timeout_s = startup_timeout_s
        self._idle: list[WorkerProcess] = []
        """Fresh workers: none has run a program yet, so any owner's run may have one."""
        self._kept: list[WorkerProcess] = []
        """Workers bound to an owner, between its runs; the most recently used last."""
        self._starting = 0
        self._running: set[WorkerProcess] = set()
        self._slots = anyio.Semaphore(max_workers)
        self._stack = AsyncExitStack()
        self._last = AsyncExitStack()
        self._tasks: anyio.abc.TaskGroup | None = None
        self._closing = False
        self.lockdown: dict[str, Any] = {}
        self.runs = 0
        self.kills = 0
        self.cancelled = 0

    async def __aenter__(self) -> WorkerPool:
        sweep_stale_directories()
        if self.fork_server:
            await self._start_fork_server()  # before the task group: its own closes after it
        self._tasks = await self._stack.enter_async_context(anyio.create_task_group())
        async with anyio.create_task_group() as warmup:
            for _ in range(self.size):
                warmup.start_soon(self._spawn_idle)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._tasks is not None
        self._closing = True  # a run still ending keeps no worker and makes none (nothing would reap them)
        self._tasks.cancel_scope.cancel()
        await self._stack.aclose()  # every refill task has finished (or killed its half-started worker)
        idle, self._idle, self._kept = [*self._idle, *self._kept], [], []
        for worker in idle:
            await worker.kill()
        await self._last.aclose()  # the fork server, last: it reports the exits the kills above waited for

    def kill_now(self) -> None:
        """Kill every worker, idle or running, and remove their directories, without waiting for the
        event loop: for a process that exits right after (a stop signal in stdio mode)."""
        workers = [*self._idle, *self._kept, *self._running]
        forked = self._forks.kill_now() if self._forks is not None else []  # (and the forks still starting)
        for worker in workers:
            worker.killed = True
            kill_worker(worker.pid)
            shutil.rmtree(worker.directory, ignore_errors=True)
        _reap([*(worker.pid for worker in workers), *forked], REAP_TIMEOUT_S)  # the pool's exit still closes them

    def stats(self) -> dict[str, Any]:
        return {
            "idle": len(self._idle) + len(self._kept),
            "busy": len(self._running),
            "starting": self._starting,
            "size": self.size,
            "max_workers": self.max_workers,
            "runs": self.runs,
            "killed": self.kills,
            "cancelled": self.cancelled,
        }

    @property
    def fork_server_pid(self) -> int | None:
        """The pid of the fork server the workers are forked from (None when each starts as a new process)."""
        return self._forks.process.pid if self._forks is not None and not self._forks.gone else None

    def worker_pids(self) -> list[int]:
        """Pids of the idle workers (fresh and kept)."""
        return [w.pid for w in [*self._idle, *self._kept]]

    def running_pids(self) -> list[int]:
        """Pids of the workers running a program right now."""
        return [w.pid for w in self._running]

    # ------------------------------------------------------------ running a job

    async def run(
        self,
        job: Job,
        on_call: CallHandler,
        started: Callable[[], None] | None = None,
        *,
        meanwhile: Callable[[], None] | None = None,
        owner: str = "",
        slot: Slot | None = None,
    ) -> DoneMessage:
        """Run `job` on a worker of its own and return its `DoneMessage` (each field checked: `inbound`), or one made
        here when the worker timed out, died or broke the protocol.

        `owner` is whose run it is (the runtime's key: a principal, or a principal's session): the worker is one
        that never served another owner, and is kept afterwards for this owner alone. `started` is told when a
        worker has the job (the wait for one is over; for the run's trace). `meanwhile` is told each time the
        worker has been sent its job or a reply, before waiting for its next message: work the worker need not
        wait for (the run's telemetry) is done while it runs. `slot` is the run's place among the runs the caller
        admitted, given back (with the pool's own) while the run waits for a person (`RunClock`)."""
        held = _PoolSlot(self._slots)
        await held.take_back()
        try:
            slots = [*([slot] if slot is not None else []), held]
            return await self._run(job, on_call, started=started, meanwhile=meanwhile, owner=owner, slots=slots)
        finally:
            held.release()

    async def _run(
        self,
        job: Job,
        on_call: CallHandler,
        *,
        started: Callable[[], None] | None,
        meanwhile: Callable[[], None] | None,
        owner: str,
        slots: list[Slot],
    ) -> DoneMessage:
        try:
            worker = await self._acquire(owner)
        except ContainmentMissing as exc:
            return _failed("INTERNAL_ERROR", str(exc), solution=NOT_CONTAINED)
        self._running.add(worker)
        worker.owner = owner
        worker.runs += 1
        reusable = finished = False
        demotion: asyncio.TimerHandle | None = None
        token: contextvars.Token[RunClock | None] | None = None
        single_use = job.engine in ENGINES and not ENGINES[job.engine].reuse
        try:  # from here on the worker is killed or kept, and its replacement made, whatever happens
            if started is not None:
                started()
            demotion = asyncio.get_running_loop().call_later(LONG_RUN_S, _demote, worker)
            pictures = job.engine == "cpython"  # the engine whose programs show pictures
            expected = {"call": MAX_CALL_BYTES, "done": done_bytes(job.message()["limits"], job.keep, pictures)}
            with anyio.move_on_after(job.timeout_s + KILL_GRACE_S) as scope:
                clock = RunClock(scope, slots)
                token = _CLOCK.set(clock)  # for the tool calls served below (approvals pause it)
                await worker.send(job.message())
                if meanwhile is not None:
                    meanwhile()
                while True:
                    message = await worker.receive(expected)
                    if message["op"] == "done":
                        done = inbound.done(message, keep=job.keep)
                        finished = True
                        # The worker may ask to retire sooner, never to serve longer; whether an engine's worker
                        # runs again at all is the engine table's word (asteval's programs can change shared objects).
                        engine = ENGINES.get(job.engine)
                        reusable = (
                            done.get("retire") is False
                            and worker.runs < MAX_RUNS_PER_WORKER
                            and engine is not None
                            and engine.reuse
                        )
                        return done
                    reply = await on_call(*inbound.call(message))
                    answer = cast(ReplyMessage, {"op": "reply", **reply})
                    if paused := clock.take_paused():
                        answer["paused_s"] = paused
                    await worker.send(answer)
                    if meanwhile is not None:
                        meanwhile()
            self.kills += 1
            return _timeout(job.timeout_s)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await worker.kill()
            return _died(worker.process.returncode, self.memory_mb, job.engine)
        except ProtocolError as exc:
            logger.warning("worker %d broke the protocol: it sent %s", worker.pid, exc)
            return _failed(
                "INTERNAL_ERROR",
                f"the sandbox process sent {exc}; the run was stopped and the process killed",
                solution="Retry the call; if it keeps failing, tell the server's operator (its log says more).",
            )
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1  # the client cancelled the call: the worker is killed below, at once
            raise
        finally:
            if demotion is not None:
                demotion.cancel()
            if token is not None:
                _CLOCK.reset(token)
            self._running.discard(worker)
            self.runs += 1
            if reusable and worker.alive and not worker.demoted and not self._closing:
                await self._keep(worker)
                self._refill()
            elif finished and single_use and self._tasks is not None and not self._closing:  # reaped after the reply
                worker.killed = True
                kill_worker(worker.pid)
                self._tasks.start_soon(worker.kill)
                self._refill()
            else:
                await worker.kill()
                self._refill()

    async def _acquire(self, owner: str) -> WorkerProcess:
        """A worker for a run of `owner`: one kept for it, else a fresh one, else a new one."""
        if self.refused is not None:
            raise ContainmentMissing(self.refused)
        for index in range(len(self._kept) - 1, -1, -1):
            if self._kept[index].owner == owner:
                worker = self._kept.pop(index)
                if worker.alive:
                    return worker
                await worker.kill()
                break
        while self._idle:
            worker = self._idle.pop()
            if worker.alive:
                if not self._idle:
                    self._refill()  # none left for the next run: its replacement is started now
                return worker  # else at the end of this run (`_run`), not to take the cores from it while it runs
            await worker.kill()
        self._refill()
        return await self._spawn()

    async def _keep(self, worker: WorkerProcess) -> None:
        """Keep `worker` for its owner's next run; past `max_workers` kept, the least recently used is killed."""
        self._kept.append(worker)
        while len(self._kept) > self.max_workers:
            await self._kept.pop(0).kill()

    def _refill(self) -> None:
        missing = self.size - len(self._idle) - self._starting
        if self._tasks is None or self._closing or self.refused is not None:
            return
        for _ in range(max(0, missing)):
            self._tasks.start_soon(self._spawn_idle, True)
            self._starting += 1

    async def _spawn_idle(self, counted: bool = False) -> None:
        if not counted:
            self._starting += 1
        try:
            worker = await self._spawn()
            if not await self._warmed(worker):
                return
        except ContainmentMissing:
            return  # said once: by `attp serve` at start-up, and to every run
        except WorkerStartError as exc:
            logger.error("could not start a sandbox worker: %s", exc)
            return
        finally:
            self._starting -= 1
        self._idle.append(worker)

    async def _warmed(self, worker: WorkerProcess) -> bool:
        """Run the server's own `WARM_UP` program, on the pool's engine, on a fresh worker before any owner's, so that
        what a first run touches (copy-on-write pages, lazily built tables) is paid here, not by a caller; False (the
        worker killed) when it did not answer as it should. Its one run counts among the worker's runs; it binds it
        to nobody, and a worker of an engine that serves one run still serves one after it (the engine table decides
        that here, whatever the worker says)."""
        if self.fallen or self.probing:
            return True  # (a fallen worker would run it as plain CPython; a probe's takes no runs)
        engine = self.engine or "python"
        job = Job(code=WARM_UP[engine], tools=[], namespaces={}, timeout_s=10.0, max_output_bytes=1024,
                  max_result_bytes=4096, max_tool_calls=4, engine=engine, warm_up=True)  # fmt: skip
        worker.runs += 1
        try:
            with anyio.fail_after(job.timeout_s):
                await worker.send(job.message())
                while (message := await worker.receive({"call": 4096, "done": 64 * 1024}))["op"] == "call":
                    await worker.send({"op": "reply", "ok": True, "value": ""})
            done = inbound.done(message, keep=False)
            if done["status"] != "ok" and not self._warm_up_failed:  # said once: the engine is broken somewhere
                self._warm_up_failed = True
                logger.warning("a new %s worker's warm-up program failed: %s", engine, done.get("error"))
            if done.get("retire") is False:
                return True  # it answered as a worker should: it serves, warm or not
        except (TimeoutError, ProtocolError, anyio.EndOfStream, anyio.BrokenResourceError):
            pass
        await worker.kill()
        return False

    async def _spawn(self) -> WorkerProcess:
        process, to_worker, from_worker, directory, stderr_fd = await self._start()
        os.set_blocking(to_worker, False)
        os.set_blocking(from_worker, False)
        worker = WorkerProcess(process, to_worker, from_worker, directory)
        if self._tasks is None:
            if stderr_fd is not None:
                os.close(stderr_fd)
        elif stderr_fd is not None:
            os.set_blocking(stderr_fd, False)
            self._tasks.start_soon(drain_fd, stderr_fd, f"worker {process.pid}")
        elif process.stderr is not None:
            self._tasks.start_soon(drain_stderr, process.stderr, f"worker {process.pid}")
        try:
            with anyio.fail_after(self.startup_timeout_s):
                lockdown = inbound.ready(await worker.receive({"ready": MAX_READY_BYTES}))
        except (TimeoutError, anyio.EndOfStream, anyio.IncompleteRead, ProtocolError) as exc:
            await worker.kill()
            raise WorkerStartError(f"worker did not start (exit code {process.returncode}): {exc!r}") from exc
        except BaseException:
            await worker.kill()  # cancelled while starting (the pool is closing): leave no process behind
            raise
        worker.lockdown = lockdown
        self.lockdown = worker.lockdown
        missing = {layer: why for layer, why in missing_layers(worker.lockdown).items() if layer not in self.without}
        if missing and self.containment == "required":
            await worker.kill()
            self.refused = refusal(missing)
            raise ContainmentMissing(self.refused)
        if missing and not self._warned:
            self._warned = True
            layers = "; ".join(f"{layer}: {why}" for layer, why in missing.items())
            logger.warning(
                'sandbox workers run without these containment layers (%s); containment = "best-effort" '
                "allows it. `attp doctor` shows what holds on this machine",
                layers,
            )
        return worker

    async def _start(self) -> tuple[anyio.abc.Process | ForkedProcess, int, int, str, int | None]:
        """A new worker process, forked (else a new interpreter): the process, the pool's ends of its two
        protocol pipes, its private folder, and the read end of its stderr pipe when it is a fork."""
        if self._forks is not None and not self._forks.gone:
            forked = await self._start_forked()
            if forked is not None:
                return forked
        return await self._start_interpreter()

    async def _start_forked(self) -> tuple[ForkedProcess, int, int, str, int] | None:
        directory = _private_directory()
        worker_reads, to_worker = os.pipe()
        from_worker, worker_writes = os.pipe()
        stderr_read, stderr_write = os.pipe()
        try:
            with anyio.CancelScope(shield=True):  # a cancellation landing after the fork would orphan it
                process = await self._fork((worker_reads, worker_writes, stderr_write), directory)
        finally:
            for fd in (worker_reads, worker_writes, stderr_write):
                os.close(fd)  # the fork has its own copies now (or there is no fork)
        if process is None:  # a fork made before the fork server failed may hold these: let go, never reused
            for fd in (to_worker, from_worker, stderr_read):
                os.close(fd)
            shutil.rmtree(directory, ignore_errors=True)
            return None
        return process, to_worker, from_worker, directory, stderr_read

    async def _start_interpreter(self) -> tuple[anyio.abc.Process, int, int, str, None]:
        directory = _private_directory()
        worker_reads, to_worker = os.pipe()
        from_worker, worker_writes = os.pipe()
        try:
            with anyio.CancelScope(shield=True):  # a cancellation landing after the child exists would orphan it
                process = await anyio.open_process(
                    [sys.executable, "-I", "-c", _BOOT, *self._arguments()],
                    stdin=worker_reads,
                    stdout=worker_writes,
                    stderr=subprocess.PIPE,
                    cwd=directory,
                    env=_worker_environment(directory),
                    start_new_session=True,
                )
        except OSError as exc:
            for fd in (to_worker, from_worker):
                os.close(fd)
            shutil.rmtree(directory, ignore_errors=True)
            raise WorkerStartError(str(exc)) from exc
        finally:
            os.close(worker_reads)  # the child has its own copies now (or there is no child)
            os.close(worker_writes)
        return process, to_worker, from_worker, directory, None

    def _arguments(self) -> list[str]:
        """A worker's arguments (and its fork server's): ``<memory_mb> [probe|fallen] [without=layer ...]``."""
        mode = ["probe"] if self.probing else ["fallen"] if self.fallen else []
        flags = [*mode, *(f"without={layer}" for layer in self.without)]
        if self.engine is not None:
            flags += [f"engine={self.engine}", f"packages={','.join(self.packages)}"]
        return [str(self.memory_mb), *flags]

    async def _start_fork_server(self) -> None:
        directory = _private_directory("forks-")
        try:
            forks = await ForkServer.start(self._arguments(), _worker_environment(directory), directory)
        except OSError as exc:
            shutil.rmtree(directory, ignore_errors=True)
            logger.warning("could not start the sandbox's fork server (%s): each worker starts as a new process", exc)
            return
        self._forks = await self._last.enter_async_context(forks)

    async def _fork(self, stdio: tuple[int, int, int], directory: str) -> ForkedProcess | None:
        """A worker from the fork server, or None when it cannot (said once; new interpreters from then on)."""
        assert self._forks is not None
        try:
            return await self._forks.fork(
                stdio, directory, _worker_environment(directory), timeout_s=self.startup_timeout_s
            )
        except ForkServerGone as exc:
            logger.warning("the sandbox's fork server stopped (%s): each worker starts as a new process", exc)
            return None

    def containment_report(self) -> dict[str, Any]:
        """What ``/healthz`` and the start-up log say of the workers' walls (never a secret)."""
        missing = missing_layers(self.lockdown) if self.lockdown else {}
        return {
            "setting": self.containment,
            "holds": bool(self.lockdown) and not missing,
            "layers": {layer: self.lockdown.get(layer, False) for layer in CONTAINMENT},
            "missing": missing,
            "runs_programs": self.refused is None,
            "fallen_workers": self.fallen,
        }

    async def probe(
        self, code: str, *, timeout_s: float, cpu_s: float, on_output: Callable[[str], None]
    ) -> dict[str, Any]:
        """Run `code` as plain CPython in a fresh locked-down worker (a pool made with ``probe=True``: ``attp
        doctor``), passing its stdout to `on_output`; return how it ended. The worker is never reused.

        ``{"ended": "finished" | "raised" | "signal" | "exited" | "timeout", "detail": str, ...}``.
        """
        if not self.probing:
            raise RuntimeError("probe() needs a pool started with probe=True")
        worker = await self._spawn()
        try:
            with anyio.move_on_after(timeout_s):
                await worker.send(ProbeMessage(op="probe", code=code, cpu_s=cpu_s))
                while True:
                    try:
                        message = await worker.receive(_PROBE_MESSAGES)
                    except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                        await worker.process.wait()
                        return _ending(worker.process.returncode)
                    except ProtocolError as exc:
                        return {"ended": "raised", "detail": f"the worker broke the protocol: it sent {exc}"}
                    if message.get("op") == "output":
                        on_output(str(message.get("text", "")))
                    elif message.get("op") == "done":
                        error = message.get("error")
                        error = error if isinstance(error, dict) else {}
                        if message.get("status") == "ok":
                            return {"ended": "finished", "detail": "the probe ran to its end"}
                        detail = f"{error.get('code', 'Exception')}: {error.get('message', '')}".rstrip(": ")
                        return {"ended": "raised", "detail": detail, "type": error.get("code")}
            return {"ended": "timeout", "detail": f"still running after {timeout_s:g} s: killed by the wall clock"}
        finally:
            await worker.kill()


_WARM_UP_PYTHON = """\
records = [{"key": k, "value": len(k), "tags": [k[0], "x"]} for k in ["alpha", "beta", "gamma"]]
best = max(records, key=lambda r: r["value"])
tags = sorted({t for r in records for t in r["tags"]})
text = json.dumps({"best": best["key"], "tags": tags}) + re.sub("a", "b", "banana") + str(math.sqrt(2.0))
help()
__result__ = {"n": len(records), "text": text[:10]}
"""

_WARM_UP_CPYTHON = """\
def step(value):
    return value + 1
print("ready")
__result__ = {"n": step(1), "text": f"{step(2):03d}"}
"""
"""Short: a cpython worker pays its first touches of what every run does (the module, the files layer, the alarm,
the answer), not those of a program's own work, which differ from run to run; a longer one (a dataclass, recursion,
closures) made no run faster at rest and made a new worker 4 ms slower to have ready."""

WARM_UP = {"python": _WARM_UP_PYTHON, "cpython": _WARM_UP_CPYTHON}
"""The program every fresh worker runs before it is handed out (`WorkerPool._warmed`), by the pool's engine: the
server's own. Before it ran on its own engine, a cpython worker's first run paid 1 ms more at rest."""

_PROBE_MESSAGES = {"output": MAX_OUTPUT_BYTES, "done": 1024 * 1024}
"""What a probe's worker may send: its output in pieces, then its ending."""

REAP_TIMEOUT_S = 1.0
"""How long `WorkerPool.kill_now` waits for killed workers to be gone (a SIGKILL takes effect in milliseconds)."""


def _reap(pids: list[int], timeout: float) -> None:
    """Wait until the killed children `pids` have exited, so that none outlives a server exiting right after:
    SIGKILL is asynchronous, and tearing down a worker's memory takes a few milliseconds."""
    waiting = set(pids)
    deadline = time.monotonic() + timeout
    while waiting and time.monotonic() < deadline:
        for pid in list(waiting):
            try:
                finished, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # already reaped by the event loop's child watcher, or a fork server's
                finished = 0 if process_alive(pid) else pid
            if finished:
                waiting.discard(pid)
        if waiting:
            time.sleep(0.002)


def _set_nice(pid: int, nice: int) -> None:
    """Set the CPU priority of a worker's process group (its own session); best effort."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PGRP, pid, min(nice, LONG_RUN_NICE))


def _demote(worker: WorkerProcess) -> None:
    if not worker.killed and worker.alive:
        worker.demoted = True
        _set_nice(worker.pid, LONG_RUN_NICE)


def _ending(returncode: int | None) -> dict[str, Any]:
    if returncode is not None and returncode < 0:
        number = -returncode
        name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else str(number)
        return {"ended": "signal", "detail": f"the worker was killed by {name}", "signal": name}
    return {"ended": "exited", "detail": f"the worker exited with code {returncode}", "code": returncode}


def _failed(code: str, message: str, solution: str | None = None) -> DoneMessage:
    error: ErrorReport = {"code": code, "message": message}
    if solution:
        error["solution"] = solution
    return {
        "op": "done",
        "status": "error",
        "result": None,
        "hint": None,
        "stdout": "",
        "truncated": False,
        "error": error,
        "retire": True,
    }


def _timeout(timeout_s: float) -> DoneMessage:
    return _failed(
        "TIMEOUT",
        f"the program did not finish within timeout_s = {timeout_s:g} s and was stopped. A single long "
        "operation (a huge regex, sum or sort) cannot be interrupted any other way: make the work smaller, "
        "or split it across calls.",
    )


def _died(returncode: int | None, memory_mb: int, engine: str = "python") -> DoneMessage:
    if returncode is not None and returncode < 0:
        number = -returncode
        name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else str(number)
        if number == signal.SIGXCPU:
            return _failed("TIMEOUT", "the program used up its CPU time and was stopped")
        if number in (signal.SIGSEGV, signal.SIGBUS) and engine == "starlark":
            # starlark-rust crashes this way both on deep nesting and when a dict outgrows the address space.
            return _failed(
                "RUNTIME_ERROR",
                f"the Starlark interpreter crashed ({name}): it does when the program's data outgrows the memory "
                f"limit of {memory_mb} MB (a dict or list of millions of items) or is nested too deeply (e.g. "
                "printing a list nested millions of levels). Work on smaller pieces of data, and keep it flat.",
            )
        if number in (signal.SIGSEGV, signal.SIGBUS):
            return _failed(
                "RUNTIME_ERROR",
                f"the program crashed the sandbox process ({name}), usually with a structure nested too deeply "
                "(e.g. hashing or printing a tuple nested millions of levels). Keep data structures flat.",
            )
        if number in (signal.SIGKILL, signal.SIGABRT):
            return _failed(
                "MEMORY_LIMIT",
                f"the sandbox process died ({name}) while running the program; this usually means it went past "
                f"the memory limit of {memory_mb} MB. Work on smaller pieces of data.",
            )
        return _failed("INTERNAL_ERROR", f"the sandbox process died ({name}) while running the program")
    return _failed("INTERNAL_ERROR", f"the sandbox process exited (code {returncode}) while running the program")
