"""The worker process: evaluates one program at a time and sends tool calls back to the server.

Started by `attp_server.sandbox.process.pool` as ``python -I -c ...``. It takes the protocol pipes off fds 0/1
(pointing those at /dev/null, so nothing a program does can write into the protocol), loads what
the namespaces need, sets its limits, says ``ready``, and then loops: read ``run``, evaluate, send
``done``. It holds no capability: tools exist here only as stubs that ask the server.

Imports nothing from the rest of ``server`` (only ``attp_server.sandbox``).
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import re
import resource
import sys
import time
from collections.abc import Mapping
from typing import Any, cast

from attp_server.sandbox.engines import ENGINE_NAMES, ENGINES, EngineRun, EngineRunner
from attp_server.sandbox.engines.python.engine import CheckRefused
from attp_server.sandbox.engines.starlark.source import EngineUnavailable
from attp_server.sandbox.limits import Abort, SizeLimitError, Timeout
from attp_server.sandbox.policy import RESULT_NAME
from attp_server.sandbox.process import fallen, keep, lockdown
from attp_server.sandbox.process.channel import Channel
from attp_server.sandbox.process.jsonify import NotJSON, to_json
from attp_server.sandbox.process.protocol import (
    MAX_RUNS_PER_WORKER,
    OUTPUT_PIECE,
    TOOL_ERROR_FIELDS,
    DoneMessage,
    ErrorReport,
    OutputMessage,
    ProbeMessage,
    RunMessage,
    text_of,
)
from attp_server.sandbox.process.tools import OutputBuffer, ServerGone, ToolBridge, ToolError
from attp_server.sandbox.suggestions import closest


def _build_engines(only: str | None = None) -> dict[str, EngineRunner]:
    """Each installed engine's worker side but those with workers of their own (only `only`'s, when given)."""
    return {
        name: engine.load()()
        for name, engine in ENGINES.items()
        if engine.missing() is None and (name == only if only is not None else not engine.own_workers)
    }


_PREBUILT: dict[str, EngineRunner] | None = None
"""The engines a fork server built before forking (its forks share them and start sooner: building them in each
worker took about 3 ms, and 10 ms more while the ``cpython`` engine was among them)."""


class Runner:
    """Runs `run` messages on their engines. Built once per worker, before its lockdown (each installed engine is
    built before then, while what it loads can still be found on disk: in the fork server, `_preload_engine`);
    every run gets fresh symbols."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.engines = _PREBUILT if _PREBUILT is not None else _build_engines()

    def run(self, job: RunMessage) -> DoneMessage:
        limits = job["limits"]
        code: str = job["code"]
        lockdown.set_cpu_budget(float(limits["timeout_s"]))
        output = OutputBuffer(int(limits["max_output_bytes"]), bool(limits.get("capture_print", True)))
        bridge = ToolBridge(self.channel, int(limits["max_tool_calls"]))
        deadline = time.monotonic() + float(limits["timeout_s"])
        done: DoneMessage = {"op": "done", "status": "ok", "result": None, "hint": None, "error": None}
        retire = stopped = False
        name = job.get("engine", "python")
        runner = self.engines.get(name)
        run: EngineRun | None = None
        try:
            if runner is None:
                engine = ENGINES.get(name)
                why = engine.missing() if engine is not None else None
                raise EngineUnavailable(why or f"unknown engine {name!r}; the engines are {', '.join(ENGINE_NAMES)}")
            run = runner.start(job, bridge, output, deadline)
            try:
                answer = run.execute()
            finally:
                if run.check_s is not None:
                    done["check_s"] = run.check_s
            if answer.error is not None:
                _fail(done, cast(ErrorReport, dict(answer.error)))
            else:
                self._result(
                    done, answer.symbols, answer.last, int(limits["max_result_bytes"]), printed=output.size > 0
                )
            if done["status"] == "ok" and answer.hint:
                done["hint"] = _joined(done.get("hint"), answer.hint)
            if answer.pictures:
                done["pictures"] = answer.pictures
        except CheckRefused as refused:
            _fail(done, cast(ErrorReport, refused.error))
        except SyntaxError as exc:
            _fail(done, _error("SYNTAX_ERROR", str(exc.msg), code, (exc.lineno, exc.offset)))
        except ServerGone:
            raise
        except Abort as exc:
            stopped = True
            retire = isinstance(exc, Timeout | SizeLimitError) or bool(getattr(exc, "retire", False))
            _fail(done, _error(exc.code, text_of(exc), code, _where(exc)))
        except UnboundLocalError as exc:
            local = getattr(exc, "name", None) or "name"
            message = (
                f"UnboundLocalError: {text_of(exc)}. A name assigned anywhere in a function is local to it: "
                f"to update a module-level {local} write `global {local}` in the function first (`nonlocal {local}` "
                "for an enclosing function's)"
            )
            _fail(done, _error("RUNTIME_ERROR", message, code, _where(exc)))
        except NameError as exc:
            _fail(done, _name_error(exc, run.names() if run is not None else [], code))
        except ToolError as exc:
            line, column = _where(exc)
            if exc.from_server:
                info = {k: text_of(v) for k, v in exc.info.items() if v is not None and k in TOOL_ERROR_FIELDS}
                info.setdefault("code", "TOOL_ERROR")
                info.setdefault("message", "")
                _fail(done, cast(ErrorReport, {**info, **_location(code, line, column)}))
            else:  # raised by the program itself: its own error, not a tool's
                message = f"ToolError: {text_of(exc)}"
                _fail(done, _error("RUNTIME_ERROR", message, code, (line, column)))
        except RecursionError:
            message = "RecursionError: too many nested calls; rewrite the recursion as a loop"
            _fail(done, _error("RUNTIME_ERROR", message, code, (None, None)))
        except MemoryError as exc:
            stopped = retire = True
            _fail(done, _error("MEMORY_LIMIT", _out_of_memory(name), code, _where(exc)))
        except Exception as exc:
            message = f"{type(exc).__name__}: {_explained(exc)}"
            _fail(done, _error("RUNTIME_ERROR", message, code, _where(exc)))
        if job.get("keep"):
            # None: the state stays as it was (the program did not run, was stopped midway, or left it unchanged).
            done["state"] = run.kept() if run is not None and not stopped else None
        done["stdout"] = output.text()
        done["truncated"] = output.truncated
        engine = ENGINES.get(name)
        one_run = engine is not None and not engine.reuse and not job.get("warm_up")  # the engine's word
        done["retire"] = retire or one_run
        return done

    def _result(
        self,
        done: DoneMessage,
        symbols: Mapping[str, Any],
        last: tuple[Any, int | None] | None,
        max_bytes: int,
        *,
        printed: bool,
    ) -> None:
        """Put the run's answer in `done`: ``__result__``, else the last expression's value; a program that printed
        and set neither answered on stdout, which needs no hint."""
        hint = None
        if RESULT_NAME in symbols:
            value = symbols[RESULT_NAME]
        elif last is not None:
            value = last[0]
            where = f" (line {last[1]})" if last[1] is not None else ""
            hint = (
                f"__result__ was not set, so the value of the last expression{where} was returned; "
                "assign __result__ = ... to choose the result explicitly"
            )
        else:
            value = None
            hint = None if printed else "__result__ was never set; assign __result__ = <value> to return data"
        try:
            result = to_json(value)
        except NotJSON as exc:
            _fail(done, {"code": "RESULT_NOT_SERIALIZABLE", "message": str(exc)})
            return
        size = len(json.dumps(result, ensure_ascii=False).encode("utf-8"))
        if size > max_bytes:
            message = (
                f"__result__ is {size:,} bytes of JSON; the limit is {max_bytes:,}. "
                "Return a summary or a slice (e.g. the first 100 items, or counts) instead of everything"
            )
            _fail(done, {"code": "RESULT_TOO_LARGE", "message": message})
            return
        done["result"], done["hint"] = result, hint


def _fail(done: DoneMessage, error: ErrorReport) -> None:
    done["status"] = "error"
    done["error"] = error


def _joined(first: str | None, second: str) -> str:
    return second if not first else f"{first}; {second}"


def _out_of_memory(engine: str) -> str:
    """What a program that ran out of memory is told: the limit it met (the worker's address space)."""
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY:
        return "the program ran out of memory"
    setting = "cpython_memory_mb" if engine == "cpython" else "memory_mb"
    return f"the program ran out of memory: its process may use {limit >> 20} MB (the server's {setting} setting)"


def _where(exc: BaseException) -> tuple[int | None, int | None]:
    where = getattr(exc, "attp_line", None)
    if not where:
        return (None, None)
    return (where[0], None if where[1] is None else where[1] + 1)  # columns are 1-based, like SyntaxError's


def _location(code: str, line: int | None, column: int | None) -> dict[str, Any]:
    """The location fields (`LOCATION_FIELDS`) of an error at `line`, `column` of the program `code`."""
    out: dict[str, Any] = {}
    if line is not None and line >= keep.FIRST_LINE:
        return out  # inside a function kept from an earlier call: no line of this program to show
    if line is not None:
        out["line"] = line
        lines = code.splitlines()
        if 0 < line <= len(lines):
            out["source_line"] = text_of(lines[line - 1].rstrip())  # within what a report may hold
    if column is not None:
        out["column"] = column
    return out


def _error(code: str, message: str, source: str, where: tuple[int | None, int | None]) -> ErrorReport:
    error: ErrorReport = {"code": code, "message": message}
    error.update(_location(source, *where))  # type: ignore[typeddict-item]  # keys from LOCATION_FIELDS
    return error


def _name_error(exc: NameError, known: list[str], code: str) -> ErrorReport:
    name = getattr(exc, "name", None) or ""
    error = _error("NAME_NOT_FOUND", f"name {name!r} is not defined", code, _where(exc))
    if name:
        error["received"] = name
    advice = getattr(exc, "attp_advice", None)  # a name the language lacks, and what to write instead
    if isinstance(advice, str):
        error["message"] += f": {advice}"
        error["solution"] = advice
        return error
    close = closest(name, [k for k in known if not k.startswith("_")])
    if close:
        error["suggested_value"] = close
        error["message"] += f"; did you mean {close!r}?"
    error["solution"] = "Use a tool or name that exists; help() lists the tools, tools('word') searches them."
    return error


def main() -> None:
    """Entry point: ``python -I -c "...; main()" <memory_mb> [probe] [without=layer ...]``.

    ``probe`` (only ``attp doctor`` starts a worker so) makes it run ``probe`` messages as plain CPython
    after the same lockdown, instead of ``run`` messages through the evaluator. ``fallen`` (a test hook: `fallen`)
    runs each ``run`` message's program as plain CPython after the same lockdown. ``without=`` leaves a
    containment layer out: only a pool built in code asks for it (``attp doctor``, the benchmark), never a
    setting, and a pool under ``containment = "required"`` still refuses such workers unless it asked.
    """
    memory_mb, mode, without = _arguments(sys.argv)
    lockdown.preload()
    _preload_engine(sys.argv)
    _serve(memory_mb, mode, without)


def _arguments(argv: list[str]) -> tuple[int, str, list[str]]:
    """``<memory_mb>``, the mode (``probe``, ``fallen``, else ``""``: serving) and the layers left out."""
    memory_mb = int(argv[1]) if len(argv) > 1 else 256
    mode = argv[2] if argv[2:3] in (["probe"], ["fallen"]) else ""
    without = [layer for arg in argv[2:] if arg.startswith("without=") for layer in arg[8:].split(",")]
    return memory_mb, mode, without


def _preload_engine(argv: list[str]) -> None:
    """Build the engines a worker runs (in the fork server, once): with ``engine=cpython packages=numpy,pandas``, a
    data-stack worker's, after loading its packages; else every other installed engine."""
    global _PREBUILT
    options = dict(arg.partition("=")[::2] for arg in argv[2:] if arg.startswith(("engine=", "packages=")))
    if options.get("engine") == "cpython":
        from attp_server.sandbox.engines.cpython.preload import preload

        preload([name for name in options.get("packages", "").split(",") if name])
        _PREBUILT = _build_engines("cpython")  # such a worker runs nothing else
    else:
        _PREBUILT = _build_engines()


def _serve(memory_mb: int, mode: str, without: list[str]) -> None:
    """One worker's life from its first message on: claim the pipes on fds 0/1, lock down, say ``ready``, run."""
    channel = Channel.claim_stdio()
    runner = Runner(channel)
    gc.freeze()  # what is loaded by now lives as long as the worker: the collector need not walk it in every run
    report = lockdown.apply(memory_mb, without)
    channel.send({"op": "ready", "pid": os.getpid(), "lockdown": report})
    if mode == "probe":
        _probe(channel)
        return
    if mode == "fallen":
        fallen.serve(channel, runner.run, report)
        return
    for runs in range(1, MAX_RUNS_PER_WORKER + 1):
        message = channel.receive()
        if message is None or message.get("op") != "run":
            return
        try:
            done = runner.run(cast(RunMessage, message))  # the server is trusted; the program is not
        except ServerGone:
            return
        finally:
            re.purge()  # compiled patterns must not carry data (or memory) into the next run
        if runs == MAX_RUNS_PER_WORKER:
            done["retire"] = True  # say so: a worker that just exits would be handed the next program and die
        channel.send_done(done)
        if done["retire"]:
            return


# ---------------------------------------------------------------- the fork server


_FORK_REQUEST_BYTES = 64 * 1024
"""Most bytes of one request (a directory and an environment) the fork server reads."""


def forks() -> None:
    """Entry point of a pool's fork server: ``python -I -c "...; forks()" <memory_mb> [without=layer ...]``,
    with fd 0 a Unix socket (SOCK_SEQPACKET) to the server.

    It loads what every worker loads (the imports and `lockdown.preload`, most of a worker's start-up), then
    forks one worker per request and never runs a program itself. A request is a JSON object (``directory``,
    ``environment``) carrying three file descriptors (the worker's stdin, stdout and stderr); the child becomes
    its own session, takes those as fds 0, 1 and 2, closes everything else it inherited (this socket included),
    moves into its directory with its environment, and from there is the same worker `main` starts: it
    applies the same lockdown before it reads a program. The answer is ``{"pid": n}``; ``{"exit": n,
    "code": c}`` follows when that worker has exited (the fork server is its parent and reaps it).
    """
    import selectors
    import signal
    import socket

    memory_mb, mode, without = _arguments(sys.argv)
    lockdown.preload()
    _preload_engine(sys.argv)
    gc.freeze()  # shared with every fork, and never walked by their collectors
    control = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.close(null)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    os.set_blocking(wake_read, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wake-up fd hears of exits
    signal.set_wakeup_fd(wake_write)
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            if key.fileobj is control:
                try:
                    data, fds, _flags, _address = socket.recv_fds(control, _FORK_REQUEST_BYTES, 3)
                except OSError:
                    return
                if not data:
                    return  # the server is gone: its workers see their own pipes close and end
                pid = _fork_one(data, fds, memory_mb, mode, without)
                control.send(json.dumps({"pid": pid}).encode())
            else:
                while True:
                    try:
                        if not os.read(wake_read, 4096):
                            break
                    except BlockingIOError:
                        break
                _reap_children(control)


def _fork_one(data: bytes, fds: list[int], memory_mb: int, mode: str, without: list[str]) -> int:
    """Fork the worker one request asks for; returns its pid (or -1 when the request was malformed)."""
    try:
        request = json.loads(data)
        directory = str(request["directory"])
        environment = {str(k): str(v) for k, v in dict(request["environment"]).items()}
        if len(fds) != 3:
            raise ValueError(f"{len(fds)} file descriptors instead of 3")
        if lockdown.other_threads():  # a fork of a threaded process may inherit a held lock
            raise ValueError("the fork server runs more than one thread")
    except (ValueError, KeyError, TypeError, OSError):
        for fd in fds:
            os.close(fd)
        return -1
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        return pid
    status = 1
    try:
        _become_worker(fds, directory, environment)
        _serve(memory_mb, mode, without)
        status = 0
    except BaseException:
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()  # to its own stderr, which the pool logs
    finally:
        os._exit(status)  # never back into the fork server's loop, whatever happened


def _become_worker(fds: list[int], directory: str, environment: dict[str, str]) -> None:
    """In a fresh fork: what a new process started by the pool would have been from its first instruction."""
    import signal
    import tempfile

    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    for target, fd in enumerate(fds):  # its own stdin, stdout and stderr: nothing shared with another worker
        os.dup2(fd, target)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the fork server's socket and wake-up pipe, the passed fds
    os.chdir(directory)
    os.environ.clear()
    os.environ.update(environment)
    tempfile.tempdir = None  # found again from TMPDIR, the worker's own directory


def _reap_children(control: Any) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        with contextlib.suppress(OSError):
            control.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


def _explained(exc: Exception) -> str:
    """The exception's text, with CPython's advice replaced where the program cannot follow it."""
    text = text_of(exc)
    if isinstance(exc, ValueError) and "set_int_max_str_digits" in text:
        return (
            "this integer has more than 4300 digits, too many to turn into text or JSON; "
            "keep numbers smaller (math.log10(n) tells how many digits n has)"
        )
    return text


class _ProbeOutput(io.TextIOBase):
    """A probe's ``sys.stdout``: each write goes to the server at once (kept if the probe then kills the worker)."""

    LIMIT = 1_000_000

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.sent = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = self.LIMIT - self.sent
        for start in range(0, min(len(text), room), OUTPUT_PIECE):  # each line within what the server reads
            piece = text[start : min(start + OUTPUT_PIECE, room)]
            self.channel.send(OutputMessage(op="output", text=piece))
            self.sent += len(piece)
        return len(text)


def _probe(channel: Channel) -> None:
    """Run one ``probe`` message's code as plain CPython (the evaluator fallen), then exit: ``attp doctor``."""
    message = channel.receive()
    if message is None or message.get("op") != "probe":
        return
    probe = cast(ProbeMessage, message)  # the server (attp doctor) is trusted
    lockdown.set_cpu_budget(float(probe["cpu_s"]))
    done: DoneMessage = {"op": "done", "status": "ok", "error": None}
    sys.stdout = _ProbeOutput(channel)
    try:
        exec(compile(probe["code"], "probe.py", "exec"), {"__name__": "__probe__"})  # noqa: S102
    except BaseException as exc:  # (SystemExit and KeyboardInterrupt included: reported, not obeyed)
        done["status"] = "error"
        done["error"] = {"code": type(exc).__name__, "message": text_of(exc, 2000)}
    finally:
        sys.stdout = sys.__stdout__
    channel.send(done)
