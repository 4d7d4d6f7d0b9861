"""``attp doctor``: what the worker's containment holds on this machine, shown by real probes.

Each probe is a few lines of plain CPython, run inside a real worker after its whole lockdown, as if a
program had got past the evaluator: no evaluator, no policy, only the process's walls. Each tries one
thing a fallen program would want (read a file, reach the network, start a process, touch the server)
and must be stopped. The set runs three times: with every layer (the worker as it serves; this decides
the exit status), without seccomp and without Landlock, so each wall is seen to hold by itself.

Then the server's side: what the server does with what a worker sends it, when the worker is the program's
(`hostile_worker`): a worker that asks to be kept for another principal, a 30 MB report, a ``parallel`` of
3,000,000 items, a forged and an over-nested message, control characters in the fields the server logs. Each
runs through the real pool and its checks, in a fallen worker (`attp_server.sandbox.process.fallen`: plain CPython
after the whole lockdown, speaking the protocol itself), and must be refused.

``--probe FILE.py`` runs the operator's own file the same way (every layer), passes its standard output
through and says how the worker ended. This is a local operator command: the MCP server has no path
to it (a serving pool's workers refuse ``probe`` messages; only a pool made here starts them so).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import logging
import os
import platform
import secrets
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from attp_server.faces.logs import TextFormatter
from attp_server.sandbox.process.pool import Job, WorkerPool, missing_layers
from attp_server.sandbox.process.protocol import ToolReply
from attp_server.settings import Settings

PROBE_TIMEOUT_S = 30.0
"""The wall clock of one probe: the spin probe's CPU budget (2 s of CPU) must end it first, on a busy machine too."""

CPU_BUDGET_S = 0.5
"""The CPU budget a probe runs with, rounded up to whole seconds past what the worker has used."""

PARALLEL_PROBES = 4
"""Probes running at once, each in a worker of its own."""

RUNS = {"all": (), "without_seccomp": ("seccomp",), "without_landlock": ("landlock",)}
"""The worker as it serves (every layer), and with one wall left out."""

CPYTHON = "cpython"
"""One more run where engine = "cpython": every layer, in a data-stack worker (its packages loaded, then locked down)
as that engine serves, with its own memory limit."""


@dataclass(frozen=True)
class Probe:
    """One attempt: `code` runs to its end only if the attempt worked (the wall did not hold)."""

    name: str
    code: str
    wall: str
    """What stops it, for the reader."""
    blocked_if_exit: int | None = None
    """A worker that exits with this code did it (``execve`` replaced the worker: the new program's exit)."""
    rlimit: bool = False
    """Stopped by a resource limit, which neither Landlock nor seccomp changes: run with every layer only."""


@dataclass(frozen=True)
class Fixtures:
    """What the probes aim at, made by the doctor before it starts them."""

    parent: int
    workspace_file: Path
    tmp_target: Path
    tcp_port: int
    unix_path: Path


def probes(f: Fixtures, memory_mb: int) -> list[Probe]:
    return [
        Probe("read /etc/hostname", 'open("/etc/hostname").read()', "Landlock, seccomp (open)"),
        Probe("read a workspace file", f"open({str(f.workspace_file)!r}).read()", "Landlock, seccomp (open)"),
        Probe("write to /tmp", f"open({str(f.tmp_target)!r}, 'w').write('escaped')", "Landlock, seccomp (open)"),
        Probe("list /", 'import os\nos.listdir("/")', "Landlock, seccomp (open)"),
        Probe(
            "TCP connect to 127.0.0.1",
            _CONNECT + f"connect(2, struct.pack('=HH4s8x', 2, socket_port({f.tcp_port}), bytes([127, 0, 0, 1])))",
            "network namespace, Landlock (ABI 4+), seccomp (socket)",
        ),
        Probe(
            "Unix socket connect",
            _CONNECT + f"connect(1, struct.pack('=H108s', 1, {str(f.unix_path).encode()!r}))",
            "seccomp (socket)",
        ),
        Probe(
            "execve /bin/sh",
            'import os\nos.execv("/bin/sh", ["/bin/sh", "-c", "exit 42"])',
            "seccomp (execve), Landlock (execute)",
            blocked_if_exit=42,
        ),
        Probe("fork", "import os\nif os.fork() == 0:\n    os._exit(0)", "seccomp (clone), RLIMIT_NPROC"),
        Probe(
            "signal the parent",
            f"import os, signal\nos.kill({f.parent}, signal.SIGURG)",
            "seccomp (kill only itself), Landlock (ABI 6 signal scope), other uid",
        ),
        Probe(
            "read /proc/<parent>/environ", f"open('/proc/{f.parent}/environ', 'rb').read()", "Landlock, seccomp (open)"
        ),
        Probe(
            "ptrace the parent",
            "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            f"if libc.ptrace(16, {f.parent}, 0, 0) != 0:\n"
            "    raise PermissionError(ctypes.get_errno(), __import__('os').strerror(ctypes.get_errno()))\n"
            f"libc.ptrace(17, {f.parent}, 0, 0)",
            "seccomp (ptrace), Landlock (ptrace scope), no_new_privs, other uid",
        ),
        Probe(
            f"allocate past memory_mb ({memory_mb} MB)",
            f"data = bytearray({memory_mb * 2} * 1024 * 1024)",
            "RLIMIT_AS",
            rlimit=True,
        ),
        Probe("spin past the CPU budget", "while True:\n    pass", "RLIMIT_CPU (SIGXCPU)", rlimit=True),
    ]


_CONNECT = """import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)  # the socket module may not be loaded: a fallen program uses libc


def socket_port(port):
    return int.from_bytes(port.to_bytes(2, "big"), "little")


def connect(family, address):
    fd = libc.socket(family, 1, 0)
    if fd < 0:
        raise PermissionError(ctypes.get_errno(), "socket(): " + os.strerror(ctypes.get_errno()))
    if libc.connect(fd, address, len(address)) != 0:
        raise PermissionError(ctypes.get_errno(), "connect(): " + os.strerror(ctypes.get_errno()))


"""


# ---------------------------------------------------------------- the server's side: a hostile worker


FORGED = "2099-01-01 00:00:00,000 WARNING attp_server.forged: "


@dataclass(frozen=True)
class ServerProbe:
    """What a fallen worker sends the server (`code`, plain CPython with the protocol pipe in reach), and what the
    server must do."""

    name: str
    code: str
    guard: str
    """What stops it, for the reader."""
    refused: str = "sandbox process sent"
    """The run's error message holds this when the server refused the message."""


SERVER_PROBES = [
    ServerProbe(
        "a 30 MB report (done)",
        'channel.send_bytes(b\'{"op":"done","status":"ok","result":"\')\n'
        "for _ in range(30):\n    channel.send_bytes(b'x' * 1_000_000)\nchannel.send_bytes(b'\"}\\n')",
        "each kind of message has its longest line (a done: what the run's limits need)",
        refused="larger than",
    ),
    ServerProbe(
        "a parallel() of 3,000,000 items",
        'channel.send_bytes(b\'{"op":"call","tool":"parallel","args":["t",[\')\n'
        "for _ in range(30):\n    channel.send_bytes(b'{},' * 100_000)\n"
        "channel.send_bytes(b'{}]],\"kwargs\":{}}\\n')\nchannel.receive()",
        "a call's values are counted before it is decoded",
    ),
    ServerProbe(
        "a forged message (two ops in one line)",
        'channel.send_bytes(b\'{"op":"call","tool":"t","args":[],"kwargs":{},"op":"done"}\\n\')\nchannel.receive()',
        "one op per message, read before the line",
    ),
    ServerProbe(
        "a message nested 100,000 levels",
        'channel.send_bytes(b\'{"op":"call","tool":"t","args":[\' + b\'[\' * 100_000 + b\']\' * 100_000'
        " + b'],\"kwargs\":{}}\\n')\nchannel.receive()",
        "depth checked",
    ),
    ServerProbe(
        "control characters in logged fields",
        f"import os\nos.write(2, b'x\\n{FORGED}stderr\\n')\n"
        f"channel.send({{'op': 'done', 'status': 'error', 'error': {{'code': 'X\\n{FORGED}code', 'message': 'm'}}}})",
        "error codes are codes; every log line is escaped and bounded",
    ),
]


async def no_calls(name: str, args: list[Any], kwargs: dict[str, Any]) -> ToolReply:
    """A hostile worker's call that got through the server's checks: what a probe must never reach."""
    return {"ok": False, "error": {"code": "PROBE_REACHED_A_TOOL", "message": f"{name} was called"}}


def _job(code: str) -> Job:
    return Job(code=code, tools=[], namespaces={}, timeout_s=PROBE_TIMEOUT_S, max_output_bytes=65_536,
               max_result_bytes=1_048_576, max_tool_calls=200)  # fmt: skip


class _Lines(logging.Handler):
    """The server's log as its text lines (the formatter `attp serve` uses), kept in memory."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(TextFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.extend(self.format(record).splitlines())


async def hostile_worker(settings: Settings) -> list[dict[str, Any]]:
    """Each of `SERVER_PROBES`, and a worker that asks to be kept for the next owner, through a real pool of
    fallen workers: a row each, ``blocked`` when the server refused what the worker sent."""
    rows: list[dict[str, Any]] = []
    lines = _Lines()
    logger = logging.getLogger("attp_server")
    level, propagate = logger.level, logger.propagate
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # the doctor's own output stays its report
    try:
        async with WorkerPool(size=0, max_workers=2, memory_mb=settings.memory_mb, containment="best-effort",
                              fallen=True) as pool:  # fmt: skip
            mine = await pool.run(_job(_KEEP_ME), no_calls, owner="probe-a")
            theirs = await pool.run(_job("import os\n__result__ = os.getpid()"), no_calls, owner="probe-b")
            kept = mine.get("result") == theirs.get("result")
            rows.append({
                "probe": "a worker asks to be kept, for another principal",
                "guard": "the server decides reuse: one owner per worker",
                "blocked": isinstance(mine.get("result"), int) and not kept,
                "how": "another worker served the next principal" if not kept else "THE SAME WORKER served both",
            })  # fmt: skip
            for probe in SERVER_PROBES:
                done = await pool.run(_job(probe.code), no_calls, owner="probe-a")
                error = done.get("error")
                message = str(error.get("message", "")) if isinstance(error, dict) else ""
                blocked = done.get("status") == "error" and probe.refused in message
                if probe.name.startswith("control"):
                    await anyio.sleep(0.3)  # the worker's stderr is read as it comes
                    forged = [line for line in lines.lines if line.startswith(FORGED)]
                    blocked = blocked and not forged
                rows.append({"probe": probe.name, "guard": probe.guard, "blocked": blocked, "how": message[:300]})
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
        logger.propagate = propagate
    return rows


_KEEP_ME = """
import os
channel.send({"op": "done", "status": "ok", "result": os.getpid(), "retire": False})
"""


def _judge(probe: Probe, outcome: dict[str, Any]) -> bool:
    """Was the attempt stopped?"""
    ended = outcome["ended"]
    if probe.name.startswith("spin"):
        return outcome.get("signal") == "SIGXCPU"  # the CPU budget ended it (not the wall clock)
    if ended == "exited":
        return probe.blocked_if_exit is None or outcome.get("code") != probe.blocked_if_exit
    return ended in ("raised", "signal")


@contextlib.contextmanager
def fixtures(settings: Settings) -> Iterator[Fixtures]:
    """A TCP listener and a Unix socket anyone may connect to, a world-readable file in the workspace, a path in
    /tmp: each removed afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="attp-doctor-"))
    os.chmod(directory, 0o755)  # noqa: S103  (the worker may be another uid)
    workspace = settings.workspace.resolve()
    workspace.mkdir(parents=True, exist_ok=True)
    workspace_file = workspace / f".attp-doctor-{secrets.token_hex(4)}.txt"
    workspace_file.write_text("a file the sandbox must not read\n", encoding="utf-8")
    os.chmod(workspace_file, 0o644)
    tcp = socket.create_server(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX)
    unix_path = directory / "probe.sock"
    try:
        unix.bind(str(unix_path))
        os.chmod(unix_path, 0o777)  # noqa: S103  (anyone may connect: only a wall stops it)
        unix.listen(8)
        yield Fixtures(
            parent=os.getpid(),
            workspace_file=workspace_file,
            tmp_target=Path(tempfile.gettempdir()) / f"attp-doctor-escaped-{secrets.token_hex(4)}",
            tcp_port=tcp.getsockname()[1],
            unix_path=unix_path,
        )
    finally:
        tcp.close()
        unix.close()
        workspace_file.unlink(missing_ok=True)
        shutil.rmtree(directory, ignore_errors=True)


async def _layers(settings: Settings) -> dict[str, Any]:
    """A worker's lockdown report, as it serves."""
    async with WorkerPool(size=1, max_workers=1, memory_mb=settings.memory_mb, containment="best-effort") as pool:
        with anyio.fail_after(30):
            while not pool.lockdown:
                await anyio.sleep(0.02)
        return dict(pool.lockdown)


def _probe_pool(settings: Settings, without: tuple[str, ...], *, data: bool = False) -> WorkerPool:
    """A pool whose every `probe` runs in a fresh worker, forked from its fork server as a serving pool's are (`data`:
    a data-stack fork server, as engine = "cpython" serves)."""
    if data:
        return WorkerPool(
            size=0,
            max_workers=1,
            memory_mb=settings.cpython_memory_mb,
            containment="best-effort",
            probe=True,
            engine="cpython",
            packages=tuple(settings.cpython_packages),
            startup_timeout_s=120.0,
        )
    return WorkerPool(
        size=0, max_workers=1, memory_mb=settings.memory_mb, containment="best-effort", probe=True, without=without
    )


def _runs(settings: Settings) -> dict[str, tuple[str, ...]]:
    return {**RUNS, CPYTHON: ()} if settings.engine == "cpython" else dict(RUNS)


async def _run_probe(pool: WorkerPool, code: str, on_output: Callable[[str], None]) -> dict[str, Any]:
    return await pool.probe(code, timeout_s=PROBE_TIMEOUT_S, cpu_s=CPU_BUDGET_S, on_output=on_output)


async def diagnose(settings: Settings) -> dict[str, Any]:
    """Every layer as a worker reports it, and every probe under each of `RUNS`: `PARALLEL_PROBES` at a time, each
    in a worker of its own (none sees what another did)."""
    report: dict[str, Any] = {}
    outcomes: dict[tuple[int, str], dict[str, Any]] = {}
    limiter = anyio.CapacityLimiter(PARALLEL_PROBES)

    async def layers() -> None:
        async with limiter:
            report.update(await _layers(settings))

    async def attempt(number: int, code: str, run: str) -> None:
        async with limiter:
            outcomes[number, run] = await _run_probe(pools[run], code, lambda text: None)

    rows: list[dict[str, Any]] = []
    runs = _runs(settings)
    pools = {run: _probe_pool(settings, without, data=run == CPYTHON) for run, without in runs.items()}
    with fixtures(settings) as f:
        chosen = probes(f, settings.memory_mb)
        data_probes = probes(f, settings.cpython_memory_mb)  # the same probes, sized for a data-stack worker
        async with contextlib.AsyncExitStack() as stack:
            for pool in pools.values():
                await stack.enter_async_context(pool)
            async with anyio.create_task_group() as group:
                group.start_soon(layers)
                for number, probe in enumerate(chosen):
                    for run, without in runs.items():
                        if not (probe.rlimit and without):
                            code = data_probes[number].code if run == CPYTHON else probe.code
                            group.start_soon(attempt, number, code, run)
        for number, probe in enumerate(chosen):
            row: dict[str, Any] = {"probe": probe.name, "wall": probe.wall}
            for run, without in runs.items():
                if probe.rlimit and without:
                    row[run] = {"blocked": row["all"]["blocked"], "how": "a resource limit: the same in every run"}
                    continue
                outcome = outcomes[number, run]
                row[run] = {"blocked": _judge(probe, outcome), "how": outcome["detail"]}
            rows.append(row)
        with contextlib.suppress(OSError):
            f.tmp_target.unlink(missing_ok=True)
    missing = missing_layers(report)
    # A fallen worker runs nothing without every wall: where one is missing, the server's side is not probed.
    server = await hostile_worker(settings) if not missing else []
    return {
        "machine": {
            "system": f"{platform.system()} {platform.release()}",
            "arch": platform.machine(),
            "uid": os.getuid(),
            "python": platform.python_version(),
        },
        "containment": settings.containment,
        "layers": {name: value for name, value in report.items() if name != "missing"},
        "missing": missing,
        "probes": rows,
        "server": server,
        "ok": all(row["all"]["blocked"] and row.get(CPYTHON, row["all"])["blocked"] for row in rows)
        and all(row["blocked"] for row in server),
        **({"cpython": _data_stack(settings)} if CPYTHON in runs else {}),
    }


def _data_stack(settings: Settings) -> dict[str, Any]:
    """What engine = "cpython" loads into its workers before their walls close, and their memory limit."""
    versions = {}
    for name in settings.cpython_packages:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {"packages": versions, "memory_mb": settings.cpython_memory_mb}


def render(diagnosis: dict[str, Any]) -> str:
    machine = diagnosis["machine"]
    lines = [
        f"attp doctor: {machine['system']} {machine['arch']}, server uid {machine['uid']}, "
        f'containment = "{diagnosis["containment"]}"',
        "",
        "layers (as a worker reports them after its lockdown):",
    ]
    for name, value in diagnosis["layers"].items():
        state = "holds" if value else "MISSING"
        why = diagnosis["missing"].get(name, "") if not value else ("" if value is True else str(value))
        lines.append(f"  {name:<20} {state:<8} {why}".rstrip())
    lines += ["", "probes (plain CPython inside a locked-down worker, as if the evaluator had fallen):"]
    width = max(len(row["probe"]) for row in diagnosis["probes"])
    data = "cpython" in diagnosis
    runs = [*RUNS, *([CPYTHON] if data else [])]
    titles = ["every layer", "no seccomp", "no Landlock", *(["cpython"] if data else [])]
    lines.append(f"  {'':<{width}}  " + " ".join(f"{title:<12}" for title in titles))
    for row in diagnosis["probes"]:
        cells = ["blocked" if row[run]["blocked"] else "NOT BLOCKED" for run in runs]
        lines.append(f"  {row['probe']:<{width}}  " + " ".join(f"{cell:<12}" for cell in cells))
        lines.append(f"  {'':<{width}}    {row['all']['how']}")
    if data:
        packages = ", ".join(f"{name} {version}" for name, version in diagnosis["cpython"]["packages"].items())
        lines += [
            "",
            f'engine = "cpython": column cpython ran each probe in a data-stack worker ({packages or "no packages"} '
            f"loaded before its walls closed; memory limit {diagnosis['cpython']['memory_mb']} MB).",
        ]
    lines += ["", "the server's side (a fallen worker speaking the protocol itself; each must be refused):"]
    if not diagnosis["server"]:
        lines.append("  not probed: a fallen worker runs nothing without every wall, and one is missing here")
    width = max((len(row["probe"]) for row in diagnosis["server"]), default=0)
    for row in diagnosis["server"]:
        lines.append(f"  {row['probe']:<{width}}  {'refused' if row['blocked'] else 'NOT REFUSED'}  ({row['guard']})")
    escaped = [
        row["probe"]
        for row in diagnosis["probes"]
        if not row["all"]["blocked"] or not row.get(CPYTHON, row["all"])["blocked"]
    ]
    escaped += [row["probe"] for row in diagnosis["server"] if not row["blocked"]]
    lines.append("")
    if escaped:
        lines.append(f"NOT CONTAINED: {', '.join(escaped)} got through a worker with every layer on this machine.")
    else:
        lines.append("Every probe was blocked by the worker as it serves.")
    if diagnosis["missing"]:
        missing = ", ".join(f"{name} ({why})" for name, why in diagnosis["missing"].items())
        lines.append(
            f'Missing: {missing}. With containment = "required" the server refuses to run programs here; '
            '"best-effort" runs them with a warning.'
        )
    return "\n".join(lines)


def run(settings: Settings, *, as_json: bool, probe_file: Path | None) -> int:
    """The command. Exit 0: every probe blocked (or, with a probe file: it ran); 1: something got through."""
    if probe_file is not None:
        code = probe_file.read_text(encoding="utf-8")
        outcome = anyio.run(_own_probe, settings, code, as_json)
        if as_json:
            print(json.dumps(outcome, indent=2))
        else:
            print(f"attp doctor: {probe_file} in a locked-down worker: {outcome['detail']}", file=sys.stderr)
        return 0
    diagnosis = anyio.run(diagnose, settings)
    print(json.dumps(diagnosis, indent=2) if as_json else render(diagnosis))
    return 0 if diagnosis["ok"] else 1


async def _own_probe(settings: Settings, code: str, as_json: bool) -> dict[str, Any]:
    printed: list[str] = []

    def output(text: str) -> None:
        if as_json:
            printed.append(text)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()

    async with _probe_pool(settings, ()) as pool:
        outcome = await _run_probe(pool, code, output)
    if as_json:
        outcome["stdout"] = "".join(printed)
    return outcome
