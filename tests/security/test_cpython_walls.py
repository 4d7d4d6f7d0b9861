"""The red-team corpus rewritten as raw CPython programs, on ``engine = "cpython"``: nothing in the worker stands in
their way but the walls (Landlock, seccomp, rlimits, no network, no privileges, a process per run) and a server that
trusts nothing the worker sends.

Each attack is a program that tries for real and says what it got: a case passes when the attempt failed with the
error the kernel or CPython gives (``Operation not permitted``, a ``MemoryError``, ...), or when the run ended with a
precise error, and the shared detectors saw nothing: no file changed outside the workspace, no connection to the
loopback canary, no planted secret in the reply, and the next call works.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness import make_settings

from attp_server.run.runtime import CallContext, ExecuteRequest, Runtime
from attp_server.run.startup import open_runtime
from attp_server.sessions.registry import Caller

pytest.importorskip("pandas")

pytestmark = pytest.mark.anyio

TIMEOUT_S = 3.0
FILE_SECRET = "cpython-file-secret-5c1e-DO-NOT-LEAK"
ENV_SECRET = "cpython-env-secret-77aa-DO-NOT-LEAK"

ATTEMPT = """
def attempt(action):
    try:
        got = action()
    except BaseException as exc:
        return f"blocked: {type(exc).__name__}: {exc}"
    return f"GOT: {got!r}"[:300]

import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)

def syscall(number, *args):
    result = libc.syscall(number, *args)
    if result == -1:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result

def channel():
    import gc
    gc.unfreeze()
    return next(o for o in gc.get_objects() if type(o).__name__ == "Channel")
"""
"""Defined before each attack: `attempt` runs one and says how it ended; `syscall` makes a raw system call; `channel`
finds the worker's end of the protocol pipes (nothing hides it from a program)."""

EPERM = "Operation not permitted"


@dataclass(frozen=True)
class Attack:
    id: str
    code: str
    """The program after `ATTEMPT`; it sets ``__result__ = attempt(...)`` or ends the run itself."""
    blocked: str | None = EPERM
    """What the attempt's failure must say (None: the run ends with an error in `codes`)."""
    codes: frozenset[str] = frozenset()
    says: str = ""
    """What the run's error message must say, when the run ends in an error."""


def a(id: str, code: str, blocked: str | None = EPERM, codes: tuple[str, ...] = (), says: str = "") -> Attack:
    return Attack(id, code, blocked, frozenset(codes), says)


def pipe(id: str, line: bytes, says: str) -> Attack:
    """A hand-made message written on the protocol pipe, then the program waits for the server's answer."""
    code = f"c = channel()\nc.writer.write({line!r})\nc.writer.flush()\n__result__ = c.receive()"
    return Attack(id, code, None, frozenset({"INTERNAL_ERROR"}), says)


FILES = [
    a("read-etc-hostname", "__result__ = attempt(lambda: os.read(os.open('/etc/hostname', os.O_RDONLY), 100))"),
    a("read-canary-secret", "__result__ = attempt(lambda: os.read(os.open('{CANARY}/secret.txt', os.O_RDONLY), 99))"),
    a("read-with-posix", "import posix\n__result__ = attempt(lambda: posix.open('{CANARY}/secret.txt', 0))"),
    a("read-with-fileio", "import _io\n__result__ = attempt(lambda: _io.FileIO('{CANARY}/secret.txt').read())"),
    a("read-with-ctypes-openat", "__result__ = attempt(lambda: syscall(257, -100, b'{CANARY}/secret.txt', 0))"),
    a("write-canary-dir", "__result__ = attempt(lambda: os.open('{CANARY}/pwned', os.O_WRONLY | os.O_CREAT))"),
    a("write-tmp", "__result__ = attempt(lambda: os.open('/tmp/attp-cpython-pwned', os.O_WRONLY | os.O_CREAT))"),
    a("tempfile", "import tempfile\n__result__ = attempt(lambda: tempfile.mkstemp())", "No usable temporary directory"),
    a("list-root", "import posix\n__result__ = attempt(lambda: posix.listdir('/'))"),
    a("stat-etc", "import posix\n__result__ = attempt(lambda: posix.stat('/etc/passwd'))"),
    a("proc-self-environ", "__result__ = attempt(lambda: os.open('/proc/self/environ', os.O_RDONLY))"),
    a("proc-parent-environ", "__result__ = attempt(lambda: os.open(f'/proc/{os.getppid()}/environ', os.O_RDONLY))"),
    a("proc-parent-mem", "__result__ = attempt(lambda: os.open(f'/proc/{os.getppid()}/mem', os.O_RDONLY))"),
    a("symlink-out", "__result__ = attempt(lambda: os.symlink('/etc/passwd', 'link'))"),
    a("chdir-root", "import posix\n__result__ = attempt(lambda: posix.chdir('/'))"),
    a("mount", "__result__ = attempt(lambda: syscall(165, b'none', b'/tmp', b'tmpfs', 0, None))"),
]

NETWORK = [
    a("tcp-canary", "import socket\n__result__ = attempt(lambda: socket.create_connection(('127.0.0.1', {PORT})))"),
    a("unix-socket", "import socket\n__result__ = attempt(lambda: socket.socket(socket.AF_UNIX))"),
    a("raw-socket-syscall", "__result__ = attempt(lambda: syscall(41, 2, 1, 0))"),
    a("socketpair", "import socket\n__result__ = attempt(lambda: socket.socketpair())"),
    a("subprocess-run", "import subprocess\n__result__ = attempt(lambda: subprocess.run(['id']))"),
    a("multiprocessing-import", "__result__ = attempt(lambda: __import__('multiprocessing.pool'))", "cpython_packages"),
]

PROCESSES = [
    a("fork", "__result__ = attempt(os.fork)"),
    a("fork-bomb", "def bomb():\n    while True:\n        os.fork()\n__result__ = attempt(bomb)"),
    a("clone-syscall", "__result__ = attempt(lambda: syscall(56, 17, 0, 0, 0, 0))"),
    a("execve", "__result__ = attempt(lambda: os.execv('/bin/sh', ['sh', '-c', 'id']))"),
    # glibc's system() says 127 ("the shell could not start") when it cannot spawn one: nothing ran.
    a("system", "__result__ = attempt(lambda: os.system('touch {CANARY}/pwned'))", "GOT: 32512"),
    a("posix-spawn", "__result__ = attempt(lambda: os.posix_spawn('/bin/sh', ['sh'], {}))"),
    a("thread", "import threading\n__result__ = attempt(lambda: threading.Thread(target=print).start())", "thread"),
    a("kill-parent", "import signal\n__result__ = attempt(lambda: os.kill(os.getppid(), signal.SIGKILL))"),
    a("kill-group", "import signal\n__result__ = attempt(lambda: os.kill(0, signal.SIGTERM))"),
    a("kill-init", "import signal\n__result__ = attempt(lambda: os.kill(1, signal.SIGTERM))"),
    a("ptrace-parent", "__result__ = attempt(lambda: syscall(101, 16, os.getppid(), 0, 0))"),
    a("unshare", "__result__ = attempt(lambda: syscall(272, 0x20000))"),
    a("setuid-root", "__result__ = attempt(lambda: os.setuid(0))"),
    a("io-uring", "__result__ = attempt(lambda: syscall(425, 8, None))"),
    a("bpf", "__result__ = attempt(lambda: syscall(321, 0, None, 0))"),
    a("kill-itself", "import signal\nos.kill(os.getpid(), signal.SIGKILL)", None, ("MEMORY_LIMIT", "INTERNAL_ERROR")),
]

LIMITS = [
    a("huge-bytearray", "x = bytearray(10**11)", None, ("MEMORY_LIMIT",)),
    a("huge-numpy", "import numpy as np\nx = np.zeros(10**11)", None, ("MEMORY_LIMIT",)),
    a("growing-list", "x = []\nwhile True:\n    x.append(bytearray(4 * 10**8))", None, ("MEMORY_LIMIT",)),
    a("spin", "while True:\n    pass", None, ("TIMEOUT",)),
    a(
        "spin-catching-the-timeout",
        "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass",
        None,
        ("TIMEOUT",),
    ),
    a("deep-recursion", "def f(n):\n    return f(n + 1)\nf(0)", None, ("RUNTIME_ERROR",)),
]

PIPE = [
    a(
        "pipe-oversized",
        'c = channel()\nc.writer.write(b\'{"op":"call","tool":"\' + b\'x\' * (70 * 1024 * 1024))\nc.writer.flush()',
        None,
        ("INTERNAL_ERROR",),
        "larger than the protocol allows",
    ),
    a(
        "pipe-deeply-nested",
        'c = channel()\nc.writer.write(b\'{"op":"call","tool":"add","args":\' + b\'[\' * 100000'
        " + b']' * 100000 + b',\"kwargs\":{}}\\n')\nc.writer.flush()\n__result__ = c.receive()",
        None,
        ("INTERNAL_ERROR",),
        "nested too deeply",
    ),
    pipe("pipe-wrong-types", b'{"op":"call","tool":7,"args":"ab","kwargs":5}\n', "'call' whose tool is not a name"),
    pipe("pipe-not-json", b"\xff\xfe not json\n", "does not start with its kind"),
    pipe("pipe-unknown-op", b'{"op":"ready","pid":1,"lockdown":{}}\n', "'ready' message where only"),
    pipe("pipe-forged-call-id", b'{"op":"call","id":7,"tool":"add","args":[1,2],"kwargs":{}}\n', "fields are not"),
    pipe("pipe-forged-reply", b'{"op":"reply","ok":true,"value":1}\n', "'reply' message where only"),
    pipe("pipe-two-ops", b'{"op":"call","op":"done","status":"ok"}\n', "another op"),
    pipe("pipe-bad-pictures", b'{"op":"done","status":"ok","result":1,"pictures":"x"}\n', "pictures is not a list"),
]


@dataclass
class Target:
    runtime: Runtime
    workspace: Path
    canary_dir: Path
    port: int
    connections: list[int]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def listener() -> Iterator[tuple[int, list[int]]]:
    """A loopback TCP listener counting every connection made to it (the canary)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.2)
    connections: list[int] = []
    stopped = threading.Event()

    def accept() -> None:
        while not stopped.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            connections.append(1)
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(sock.getsockname()[1]), connections
    stopped.set()
    thread.join(timeout=2)
    sock.close()


@pytest.fixture(scope="module")
async def target(tmp_path_factory: pytest.TempPathFactory, listener: tuple[int, list[int]]) -> AsyncIterator[Target]:
    root = tmp_path_factory.mktemp("cpython-walls")
    workspace, canary_dir = root / "ws", root / "canary"
    workspace.mkdir()
    canary_dir.mkdir()
    (canary_dir / "secret.txt").write_text(FILE_SECRET)
    os.environ["ATTP_CPYTHON_ENV_SECRET"] = ENV_SECRET
    # Half the default address space: the growing-list attack touches every page it gets (1.5 GB under the
    # default, 1.5 s alone, past TIMEOUT_S on a loaded machine); here it meets the limit after one 400 MB step.
    settings = make_settings(
        workspace, engine="cpython", timeout_s=TIMEOUT_S, workers=2, max_tool_calls=20, cpython_memory_mb=1024
    )
    try:
        async with open_runtime(settings) as runtime:
            yield Target(runtime, workspace, canary_dir, *listener)
    finally:
        del os.environ["ATTP_CPYTHON_ENV_SECRET"]


async def _run(target: Target, code: str, session: str | None = None) -> dict[str, Any]:
    program = code.replace("{CANARY}", str(target.canary_dir)).replace("{PORT}", str(target.port))
    with anyio.fail_after(TIMEOUT_S + 5.0):  # a run outliving its deadline by far is a hang
        result = await target.runtime.execute(
            ExecuteRequest(code=program, session=session), CallContext(caller=Caller())
        )
    return result.model_dump(mode="json")


def _outside(target: Target) -> list[str]:
    return sorted(str(path.relative_to(target.canary_dir)) for path in target.canary_dir.rglob("*"))


@pytest.mark.parametrize(
    "attack", [pytest.param(attack, id=attack.id) for attack in [*FILES, *NETWORK, *PROCESSES, *LIMITS, *PIPE]]
)
async def test_raw_cpython_attack_is_contained(target: Target, attack: Attack) -> None:
    before = _outside(target)
    data = await _run(target, ATTEMPT + attack.code)
    text = json.dumps(data)
    assert FILE_SECRET not in text and ENV_SECRET not in text, "a secret leaked"
    assert _outside(target) == before, "a file changed outside the workspace"
    assert not target.connections, "the program reached the loopback canary"
    assert not Path("/tmp/attp-cpython-pwned").exists()
    if attack.blocked is not None:
        assert data["status"] == "ok", data["error"]
        assert str(data["result"]).startswith(("blocked: ", "GOT: 32512")), data["result"]
        assert attack.blocked in str(data["result"]), data["result"]
    else:
        assert data["status"] == "error", data["result"]
        assert data["error"]["code"] in attack.codes, data["error"]
        assert attack.says in data["error"]["message"], data["error"]
    after = await _run(target, "__result__ = 'alive'")
    assert after["result"] == "alive", "the next call must work"


async def test_a_forged_final_result_is_the_program_own_and_its_worker_is_not_kept(target: Target) -> None:
    """The program writes a ``done`` of its own and keeps running: the server takes it as what it is (this run's
    answer, which the program could have set anyway), checks every field of it, and never reuses the worker."""
    forged = (
        "c = channel()\n"
        'c.writer.write(b\'{"op":"done","status":"ok","result":"forged","retire":false,\'\n'
        '    b\'"state":{"pickle":"!!","names":[1],"dropped":"x"},\'\n'
        '    b\'"pictures":[{"mime_type":"image/png","data":"AAAA"},{"mime_type":"text/html","data":""}]}\\n\')\n'
        "c.writer.flush()\n"
        "while True:\n    pass\n"
    )
    data = await _run(target, ATTEMPT + forged)
    assert data["status"] == "ok" and data["result"] == "forged"
    assert data["pictures"] == [], "a picture that is not PNG bytes must not reach the client"
    pid_code = "import os\n__result__ = os.getpid()"
    first, second = await _run(target, pid_code), await _run(target, pid_code)
    assert first["result"] != second["result"], "a cpython worker serves one run"


async def test_a_run_sees_nothing_an_earlier_run_of_another_handle_left(target: Target) -> None:
    planted = await _run(
        target,
        "import builtins, json, sys, os\n"
        "builtins.leaked = 'from-the-first-run'\njson.leaked = 'poisoned'\nsys.modules['leaked'] = json\n"
        "os.environ['LEAKED'] = 'yes'\nsecret_value = 'kept-for-my-handle-only'\n",
    )
    assert planted["status"] == "ok" and planted["session"]
    code = (
        "import builtins, json, sys, os\n"
        "__result__ = [hasattr(builtins, 'leaked'), hasattr(json, 'leaked'), 'leaked' in sys.modules,\n"
        "              'LEAKED' in os.environ, 'secret_value' in dir()]"
    )
    fresh = await _run(target, code)
    assert fresh["result"] == [False, False, False, False, False], fresh
    mine = await _run(target, code, planted["session"])
    assert mine["result"][-1] is True  # its own handle gets its names back (and only them)
    tmp = sorted(name for name in os.listdir("/tmp") if "leaked" in name or "pwned" in name)
    assert tmp == []


async def test_the_walls_hold_in_every_data_worker(target: Target) -> None:
    report = target.runtime.pool.containment_report()
    assert report["holds"] and report["runs_programs"], report
