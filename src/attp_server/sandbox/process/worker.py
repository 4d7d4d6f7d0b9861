"""The worker process: evaluates one program at a time and sends tool calls back to the server.

Started by `attp_server.sandbox.process.pool` as ``python -I -c ...``. It takes the protocol pipes off fds 0/1
(pointing those at /dev/null, so nothing a program does can write into the protocol), loads what
the namespaces need, sets its limits, says ``ready``, and then loops: read ``run``, evaluate, send
``done``. It holds no capability: tools exist here only as stubs that ask the server.

Imports nothing from the rest of ``server`` (only ``attp_server.sandbox``).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import gc
import io
import json
import os
import random
import re
import sys
import time
from collections.abc import Callable, Mapping
from typing import IO, Any, cast

from attp_server.sandbox.compiler.evaluator import Evaluator, OutputBuffer, ToolError
from attp_server.sandbox.compiler.scopes import analyze
from attp_server.sandbox.limits import Abort, Pauses, SizeLimitError, Timeout, ToolCallLimit
from attp_server.sandbox.policy import RESULT_NAME, scan
from attp_server.sandbox.process import alarm, keep, lockdown
from attp_server.sandbox.process.checked import Checked, CheckedPrograms, names_key
from attp_server.sandbox.process.jsonify import NotJSON, to_json
from attp_server.sandbox.process.protocol import (
    ENGINES,
    MAX_MESSAGE_BYTES,
    TOOL_ERROR_FIELDS,
    DoneMessage,
    ErrorReport,
    Message,
    OutputMessage,
    ProbeMessage,
    RunMessage,
    decode,
    encode,
    text_of,
)
from attp_server.sandbox.starlark.engine import EngineUnavailable, StarlarkEngine, missing_extra_message
from attp_server.sandbox.starlark.engine import available as starlark_available
from attp_server.sandbox.static_check import CHECK_BUDGET_S, META_TOOLS, KnownNames, check, known_names
from attp_server.sandbox.stdlib.modules import build_namespaces, run_namespaces
from attp_server.sandbox.stdlib.namespaces import MODULE_NAMES, SAFE_BUILTIN_FUNCTIONS, SAFE_EXCEPTIONS, Namespace
from attp_server.sandbox.stdlib.reprs import name_modules
from attp_server.sandbox.suggestions import closest

MAX_STEPS = 50_000_000
"""Evaluation steps (AST nodes) one run may take; the wall clock usually ends a runaway first."""

RECURSION_LIMIT = 6000
"""Python frames a run may nest: about 1,000 levels of a program's own recursion, as CPython allows (each
level of the program is a few frames of the evaluator). Measured safe for the C stack with recursion
through C callbacks (sorted keys, map, re.sub) up to 10,000; past about 14,000 the process would crash."""

MAX_RUNS_PER_WORKER = 1000
"""A worker retires after this many runs, so slow leaks in C extensions cannot accumulate."""


class Channel:
    """The protocol pipes, moved off fds 0 and 1 so that nothing else can write to them."""

    def __init__(self, reader: IO[bytes], writer: IO[bytes]) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    def claim_stdio(cls) -> Channel:
        reader = os.fdopen(os.dup(0), "rb")
        writer = os.fdopen(os.dup(1), "wb")
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
        return cls(reader, writer)

    def send(self, message: Message) -> None:
        self.writer.write(encode(message))
        self.writer.flush()

    def send_done(self, done: DoneMessage) -> None:
        """Send a run's report; if it cannot be encoded, send a plain error instead of dying."""
        try:
            data = encode(done)
        except (TypeError, ValueError, UnicodeError, RecursionError):
            failed: DoneMessage = {
                "op": "done",
                "status": "error",
                "error": {"code": "RUNTIME_ERROR", "message": "the run's report could not be encoded"},
                "stdout": "",
                "truncated": False,
                "retire": True,
            }
            data = encode(failed)
        self.writer.write(data)
        self.writer.flush()

    def receive(self) -> dict[str, Any] | None:
        line = self.reader.readline(MAX_MESSAGE_BYTES)
        return decode(line) if line else None


class ToolStub:
    """What a tool is inside the sandbox: a name that, when called, asks the server to run the tool."""

    __slots__ = ("_invoke", "name")

    def __init__(self, name: str, invoke: Callable[[str, tuple[Any, ...], dict[str, Any]], Any]) -> None:
        self.name = name
        self._invoke = invoke

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        return self._invoke(self.name, args, kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name}>"


class ServerGone(Abort):
    """The server closed the pipe mid-run; the worker exits."""


class ToolBridge:
    """Sends tool calls to the server, counts them, and turns replies into values or `ToolError`s."""

    def __init__(self, channel: Channel, max_calls: int) -> None:
        self.channel = channel
        self.max_calls = max_calls
        self.count = 0
        self.pauses = Pauses()

    def __call__(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.count += 1  # help() and tools() count too: every call crosses to the server
        if self.count > self.max_calls:
            raise ToolCallLimit(f"the program made more than {self.max_calls} tool calls; batch work into fewer calls")
        try:
            payload_args = [to_json(a, f"{name}() argument {i + 1}") for i, a in enumerate(args)]
            payload_kwargs = {k: to_json(v, f"{name}() argument {k!r}") for k, v in kwargs.items()}
        except NotJSON as exc:
            raise ToolError.from_reply(
                {"code": "INVALID_ARGUMENT", "message": f"{exc}. Tools take JSON data.", "tool_name": name}
            ) from None
        try:
            frame = encode({"op": "call", "tool": name, "args": payload_args, "kwargs": payload_kwargs})
        except (UnicodeError, ValueError, RecursionError):
            raise ToolError.from_reply(
                {
                    "code": "INVALID_ARGUMENT",
                    "message": f"{name}() got text that is not valid Unicode (a lone surrogate?)",
                    "tool_name": name,
                }
            ) from None
        alarm.hold()  # the deadline waits for the reply: the pipe is never left mid-message
        try:
            self.channel.writer.write(frame)
            self.channel.writer.flush()
            reply = self.channel.receive()
            paused = reply.get("paused_s") if reply is not None else None
            if isinstance(paused, int | float) and 0 < paused < float("inf"):
                self.pauses.paused(float(paused))  # the server waited for a person: that time is not the program's
        finally:
            alarm.release()  # after any pause moved the deadline: only a deadline still passed ends the run
        if reply is None:
            raise ServerGone("the server closed the connection")
        if reply.get("ok"):
            return reply.get("value")
        error = reply.get("error") or {}
        if error.get("code") == "TOOL_CALL_LIMIT":
            raise ToolCallLimit(str(error.get("message", "tool call limit reached")))
        raise ToolError.from_reply(error)


class Parallel:
    """``parallel(tool, items, return_errors=False)``: one tool over many keyword-argument dicts, run at once
    by the server. Results come back in the order of `items`; every item counts as one tool call."""

    __slots__ = ("_bridge",)

    def __init__(self, bridge: ToolBridge) -> None:
        self._bridge = bridge

    def __repr__(self) -> str:
        return "<built-in function parallel>"

    def __call__(self, tool: Any, items: Any, return_errors: bool = False) -> list[Any]:
        name = tool.name if isinstance(tool, ToolStub) else tool if isinstance(tool, str) else None
        if name is None or name in (*META_TOOLS, "parallel"):
            raise _usage(f"parallel() runs a tool such as read_file or pack.tool, not {_kind(tool)}", "tool")
        if not isinstance(items, list | tuple):
            raise _usage(f"parallel() takes a list of keyword-argument dicts as items, not {_kind(items)}", "items")
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise _usage(f"parallel() items[{index}] is {_kind(item)}; each item is a dict of keyword arguments, "
                             f'e.g. {{"path": "a.txt"}}', "items")  # fmt: skip
        if not items:
            return []
        bridge = self._bridge
        bridge.count += len(items) - 1  # the bridge counts the one crossing below as the last of them
        replies = bridge("parallel", (name, list(items)), {})
        results: list[Any] = []
        first: ToolError | None = None
        for reply in replies if isinstance(replies, list) else []:
            if isinstance(reply, dict) and reply.get("ok"):
                results.append(reply.get("value"))
                continue
            error = ToolError.from_reply(dict(reply.get("error") or {}) if isinstance(reply, dict) else {})
            if error.code == "TOOL_CALL_LIMIT":
                raise ToolCallLimit(error.message)
            first = first or error
            results.append(error)
        if first is not None and not return_errors:
            raise first
        return results


def _usage(message: str, parameter: str) -> ToolError:
    return ToolError.from_reply(
        {
            "code": "INVALID_ARGUMENT",
            "message": message,
            "tool_name": "parallel",
            "parameter_name": parameter,
            "solution": 'Call it as parallel(read_file, [{"path": "a.txt"}, {"path": "b.txt"}]).',
        }
    )


def _kind(value: object) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


class Runner:
    """Evaluates `run` messages. Built once per worker; every run gets fresh symbols and a fresh evaluator."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.namespaces = build_namespaces()  # before lockdown: some load pieces of the standard library
        name_modules(self.namespaces)  # `repr(json.loads)` is <function json.loads>
        self.base_symbols: dict[str, Any] = {**SAFE_BUILTIN_FUNCTIONS, **SAFE_EXCEPTIONS, "ToolError": ToolError}
        # Built before lockdown, while the extra can still be found on disk.
        self.starlark = StarlarkEngine() if starlark_available() else None
        self._known: tuple[Any, KnownNames] | None = None
        self.checked = CheckedPrograms()
        """Programs that passed the check with the current `_known` names (cleared when those change)."""

    def known_names(self, job: RunMessage) -> KnownNames:
        """The names the static check accepts: the same tools and packs in every run (built once), and the
        names the session kept from its earlier calls."""
        key = (
            tuple(job.get("tools", [])),
            tuple((p, tuple(n)) for p, n in job.get("namespaces", {}).items()),
            tuple((p, str(why)) for p, why in job.get("unavailable", {}).items()),
            tuple(job.get("modules", MODULE_NAMES)),
        )
        if self._known is None or self._known[0] != key:
            enabled = run_namespaces(self.namespaces, key[3], random.Random(0))
            modules = {name: frozenset(space.members) for name, space in enabled.items()}
            self._known = (key, known_names(*key[:3], modules=modules))
            self.checked.clear()
        state = job.get("state")
        if not isinstance(state, dict):
            return self._known[1]
        kept = [name for part in ("values", "functions") if isinstance(state.get(part), dict) for name in state[part]]
        return dataclasses.replace(self._known[1], kept=frozenset(map(str, kept)))

    def modules(self, job: RunMessage) -> dict[str, Namespace]:
        """The curated modules this run may use: the job's list (every module when it names none)."""
        return run_namespaces(self.namespaces, job.get("modules", MODULE_NAMES), random.Random(os.urandom(16)))

    def symbols(self, job: RunMessage, bridge: ToolBridge, modules: dict[str, Namespace]) -> dict[str, Any]:
        symbols = dict(self.base_symbols)
        symbols.update(modules)
        stubs = {name: ToolStub(name, bridge) for name in [*job.get("tools", []), *META_TOOLS]}
        # A tool never takes a builtin's, an exception class's or a module's name (the server reserves them;
        # this holds even if a job says otherwise): `len`, `ValueError`, `json` stay the sandbox's own.
        symbols.update({name: stub for name, stub in stubs.items() if name not in symbols})
        for pack, names in job.get("namespaces", {}).items():
            # Always the qualified name: a bare name may belong to another pack's tool.
            symbols[pack] = Namespace(pack, {name: ToolStub(f"{pack}.{name}", bridge) for name in names})
        symbols["parallel"] = Parallel(bridge)
        return symbols

    def run(self, job: RunMessage) -> DoneMessage:
        limits = job["limits"]
        code: str = job["code"]
        lockdown.set_cpu_budget(float(limits["timeout_s"]))
        output = OutputBuffer(int(limits["max_output_bytes"]), bool(limits.get("capture_print", True)))
        bridge = ToolBridge(self.channel, int(limits["max_tool_calls"]))
        received = time.monotonic()
        deadline = received + float(limits["timeout_s"])
        done: DoneMessage = {"op": "done", "status": "ok", "result": None, "hint": None, "error": None}
        retire = stopped = False
        evaluator: Evaluator | None = None
        base: dict[str, Any] = {}
        tree = ast.Module(body=[], type_ignores=[])
        restored: keep.Restored | None = None
        known: list[str] = []
        engine = job.get("engine", "python")
        try:
            if engine == "starlark":
                if self.starlark is None:
                    raise EngineUnavailable(missing_extra_message())
                known = self.starlark.known_names(job)
                found, last_value = self.starlark.run(code, job, bridge, output, deadline, pauses=bridge.pauses)
                self._result(done, found, last_value, int(limits["max_result_bytes"]), printed=output.size > 0)
            elif engine == "python":
                allow_imports = bool(job.get("allow_imports", True))
                modules = self.modules(job)
                symbols = self.symbols(job, bridge, modules)
                restored = keep.restore(job["state"], symbols) if isinstance(job.get("state"), dict) else None
                names = self.known_names(job)
                inputs = (allow_imports, names_key(names.kept))
                checked = self.checked.get(code, inputs)
                if checked is None:
                    budget = min(CHECK_BUDGET_S, max(0.0, deadline - time.monotonic()))
                    parsed, problem = check(code, names, budget_s=budget, allow_imports=allow_imports)
                else:
                    parsed, problem = checked.tree, None
                done["check_s"] = time.monotonic() - received  # the trace's static-check span
                if problem is None and restored is not None and restored.definitions:
                    # Kept functions are defined again ahead of the program: checked like it.
                    refused = scan(
                        ast.Module(body=restored.definitions, type_ignores=[]),
                        modules=modules,
                        allow_imports=allow_imports,
                    )
                    if refused:
                        problem = _error(refused[0].code, refused[0].message, code, (None, None))
                if problem is not None:
                    _fail(done, problem)
                else:
                    assert parsed is not None  # a program that does not parse is a problem
                    tree, scopes = parsed, checked.scopes if checked is not None else None
                    if restored is not None and restored.definitions:  # a new tree: `parsed` may be kept
                        tree, scopes = ast.Module(body=[*restored.definitions, *parsed.body], type_ignores=[]), None
                    if scopes is None:
                        scopes = analyze(tree)
                        if tree is parsed:
                            self.checked.put(code, inputs, Checked(parsed, scopes))
                    evaluator = Evaluator(
                        symbols,
                        deadline=deadline,
                        max_steps=MAX_STEPS,
                        output=output,
                        modules=modules,
                        allow_imports=allow_imports,
                    )
                    bridge.pauses.listen(functools.partial(_extend_deadline, evaluator))
                    base = dict(evaluator.symtable)
                    if restored is not None:
                        evaluator.symtable.update(restored.values)
                    last = _deep(functools.partial(evaluator.execute, scopes=scopes), tree)
                    self._result(
                        done, evaluator.symtable, last, int(limits["max_result_bytes"]), printed=output.size > 0
                    )
                    if done["status"] == "ok" and evaluator.imported:
                        done["hint"] = _joined(done.get("hint"), _import_hint(evaluator.imported))
            else:
                raise EngineUnavailable(f"unknown engine {engine!r}; the engines are {', '.join(ENGINES)}")
        except SyntaxError as exc:
            _fail(done, _error("SYNTAX_ERROR", str(exc.msg), code, (exc.lineno, exc.offset)))
        except ServerGone:
            raise
        except Abort as exc:
            stopped = True
            retire = isinstance(exc, Timeout | SizeLimitError) or bool(getattr(exc, "retire", False))
            _fail(done, _error(exc.code, text_of(exc), code, _where(exc)))
        except UnboundLocalError as exc:
            name = getattr(exc, "name", None) or "name"
            message = (
                f"UnboundLocalError: {text_of(exc)}. A name assigned anywhere in a function is local to it: "
                f"to update a module-level {name} write `global {name}` in the function first (`nonlocal {name}` "
                "for an enclosing function's)"
            )
            _fail(done, _error("RUNTIME_ERROR", message, code, _where(exc)))
        except NameError as exc:
            known = list(evaluator.symtable) if evaluator is not None else known
            _fail(done, _name_error(exc, known, code))
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
        except MemoryError:
            stopped = retire = True
            _fail(done, _error("MEMORY_LIMIT", "the program ran out of memory", code, (None, None)))
        except Exception as exc:
            message = f"{type(exc).__name__}: {_explained(exc)}"
            _fail(done, _error("RUNTIME_ERROR", message, code, _where(exc)))
        if job.get("keep"):
            # None: the state stays as it was (the program did not run, was stopped midway, or left it unchanged).
            kept = None
            if evaluator is not None and not stopped:
                kept = _kept(evaluator.symtable, base, tree, limits, restored, given=job.get("state"))
            done["state"] = kept
        done["stdout"] = output.text()
        done["truncated"] = output.truncated
        done["retire"] = retire
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


def _deep(run: Callable[[ast.Module], Any], tree: ast.Module) -> Any:
    """`run(tree)` with room for a program's recursion (`RECURSION_LIMIT`); the static check before it keeps
    CPython's default, so its compile refuses absurd nesting as it always did."""
    default = sys.getrecursionlimit()
    sys.setrecursionlimit(RECURSION_LIMIT)
    try:
        return run(tree)
    finally:
        sys.setrecursionlimit(default)


def _import_hint(modules: list[str]) -> str:
    names = ", ".join(modules)
    return f"imports are unnecessary here: {names} {'is' if len(modules) == 1 else 'are'} already available by name"


def _joined(first: str | None, second: str) -> str:
    return second if not first else f"{first}; {second}"


def _extend_deadline(evaluator: Evaluator, seconds: float) -> None:
    evaluator.deadline += seconds


def _kept(
    symbols: Mapping[str, Any],
    base: Mapping[str, Any],
    tree: ast.Module,
    limits: Mapping[str, Any],
    restored: keep.Restored | None,
    *,
    given: object,
) -> dict[str, Any] | None:
    """The session state the run leaves, as the server's ``done`` message carries it: None when it is exactly the
    state the run was `given` (the server then keeps what it has, with nothing to check or write)."""
    try:
        collected = keep.collect(symbols, base, tree, max_bytes=int(limits.get("max_state_bytes", 0)))
    except (MemoryError, RecursionError):
        return None
    if restored is not None:
        for name, reason in restored.dropped.items():
            collected.dropped.setdefault(name, reason)
    if keep.unchanged(collected, given):
        return None
    return collected.as_message()


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
            out["source_line"] = lines[line - 1].rstrip()
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
    after the same lockdown, instead of ``run`` messages through the evaluator. ``without=`` leaves a
    containment layer out: only a pool built in code asks for it (``attp doctor``, the benchmark), never a
    setting, and a pool under ``containment = "required"`` still refuses such workers unless it asked.
    """
    memory_mb, probing, without = _arguments(sys.argv)
    lockdown.preload()
    _serve(memory_mb, probing, without)


def _arguments(argv: list[str]) -> tuple[int, bool, list[str]]:
    memory_mb = int(argv[1]) if len(argv) > 1 else 256
    probing = argv[2:3] == ["probe"]
    without = [layer for arg in argv[2:] if arg.startswith("without=") for layer in arg[8:].split(",")]
    return memory_mb, probing, without


def _serve(memory_mb: int, probing: bool, without: list[str]) -> None:
    """One worker's life from its first message on: claim the pipes on fds 0/1, lock down, say ``ready``, run."""
    channel = Channel.claim_stdio()
    runner = Runner(channel)
    gc.freeze()  # what is loaded by now lives as long as the worker: the collector need not walk it in every run
    report = lockdown.apply(memory_mb, without)
    channel.send({"op": "ready", "pid": os.getpid(), "lockdown": report})
    if probing:
        _probe(channel)
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

    memory_mb, probing, without = _arguments(sys.argv)
    lockdown.preload()
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
                pid = _fork_one(data, fds, memory_mb, probing, without)
                control.send(json.dumps({"pid": pid}).encode())
            else:
                while True:
                    try:
                        if not os.read(wake_read, 4096):
                            break
                    except BlockingIOError:
                        break
                _reap_children(control)


def _fork_one(data: bytes, fds: list[int], memory_mb: int, probing: bool, without: list[str]) -> int:
    """Fork the worker one request asks for; returns its pid (or -1 when the request was malformed)."""
    try:
        request = json.loads(data)
        directory = str(request["directory"])
        environment = {str(k): str(v) for k, v in dict(request["environment"]).items()}
        if len(fds) != 3:
            raise ValueError(f"{len(fds)} file descriptors instead of 3")
        if len(os.listdir("/proc/self/task")) != 1:  # a fork of a threaded process may inherit a held lock
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
        _serve(memory_mb, probing, without)
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
        if room > 0 and text:
            self.channel.send(OutputMessage(op="output", text=text[:room]))
            self.sent += min(len(text), room)
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
