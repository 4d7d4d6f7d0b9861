"""The second wall, through the real entry points: `attp doctor` runs plain-CPython probes in real locked-down
workers, as root and as an unprivileged user, and every one is blocked; a machine where a layer is missing
(Landlock hidden by an outer seccomp policy, as some container runtimes do) makes `containment = "required"`
refuse every program, naming the layer and the setting, and `"best-effort"` run with a warning; a serving
worker never runs a probe; `/healthz` and the start-up log say which walls hold."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from harness import server_env, serving_http

from attp_server.faces.doctor import SERVER_PROBES
from attp_server.sandbox.process.pool import WorkerPool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock and seccomp are Linux's")

REPO = Path(__file__).resolve().parents[2]
USER = "attp-probe"
PROBES = {
    "read /etc/hostname", "read a workspace file", "write to /tmp", "list /", "TCP connect to 127.0.0.1",
    "Unix socket connect", "execve /bin/sh", "fork", "signal the parent", "read /proc/<parent>/environ",
    "ptrace the parent", "allocate past memory_mb (256 MB)", "spin past the CPU budget",
}  # fmt: skip


def attp(*args: str) -> list[str]:
    return [sys.executable, "-m", "attp_server", *args]


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder any user may use (pytest's own tmp folders are private to root)."""
    path = Path(tempfile.mkdtemp(prefix="attp-containment-"))
    os.chmod(path, 0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _unprivileged_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], check=True, timeout=30
        )
        return pwd.getpwnam(USER)


def _hidden_from_others() -> dict[Path, set[str]]:
    """Folders other users cannot pass through on the way to this Python and checkout (pyenv under /root), each
    with the entries below it that must stay reachable."""
    needed = [Path(os.path.realpath(sys.executable)), Path(sys.prefix), Path(sys.base_prefix).resolve(), REPO]
    hidden: dict[Path, set[str]] = {}
    for path in needed:
        for parent in reversed(path.parents):
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                hidden.setdefault(parent, set()).add(path.relative_to(parent).parts[0])
                break
    return hidden


def as_user(command: list[str], stage: Path) -> list[str]:
    """`command` run as an unprivileged user. Where this Python lives under a folder only root may enter
    (/root/.pyenv), a private mount namespace lays an open tmpfs over that folder and binds back only the
    entries the command needs; nothing changes outside the namespace."""
    if os.getuid() != 0:
        return command  # already unprivileged
    for tool in ("setpriv", "unshare", "mount"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is needed to run as another user")
    user = _unprivileged_user()
    switch = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--", *command]
    hidden = _hidden_from_others()
    if not hidden:
        return switch
    script = ["set -e"]
    for number, (folder, entries) in enumerate(sorted(hidden.items())):
        for entry in sorted(entries):
            if not os.stat(folder / entry).st_mode & stat.S_IXOTH:
                pytest.skip(f"{folder / entry} is closed to other users")
            keep = stage / f"keep-{number}-{entry}"
            keep.mkdir()
            script.append(f"mount --bind '{folder / entry}' '{keep}'")
        script.append(f"mount -t tmpfs -o mode=755 tmpfs '{folder}'")
        for entry in sorted(entries):
            script += [
                f"mkdir '{folder / entry}'",
                f"mount --move '{stage / f'keep-{number}-{entry}'}' '{folder / entry}'",
            ]
    script.append('exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", "\n".join(script), "sh", *switch]


def doctor_json(command: list[str], workspace: Path) -> dict[str, Any]:
    env = {**server_env(), "HOME": str(workspace)}
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=240, cwd=workspace, env=env)
    assert done.returncode == 0, (done.returncode, done.stdout[-3000:], done.stderr[-3000:])
    return dict(json.loads(done.stdout))


def assert_every_probe_blocked(diagnosis: dict[str, Any]) -> None:
    assert {row["probe"] for row in diagnosis["probes"]} == PROBES
    escaped = [(row["probe"], row["all"]["how"]) for row in diagnosis["probes"] if not row["all"]["blocked"]]
    assert escaped == []
    assert diagnosis["ok"] is True and diagnosis["missing"] == {}
    # The server's side: what a fallen worker sends is refused (each row through the real pool).
    server = {row["probe"]: row for row in diagnosis["server"]}
    assert set(server) == {"a worker asks to be kept, for another principal", *(p.name for p in SERVER_PROBES)}
    assert [name for name, row in server.items() if not row["blocked"]] == []
    layers = diagnosis["layers"]
    assert str(layers["landlock"]).startswith("ABI ") and "no file system access" in layers["landlock"]
    assert "EPERM" in str(layers["seccomp"])
    # Each wall alone: every file, process and signal probe is still blocked without the other.
    for run in ("without_seccomp", "without_landlock"):
        for row in diagnosis["probes"]:
            if row["probe"] != "Unix socket connect":  # Landlock (ABI <= 7) has no rule for Unix sockets
                assert row[run]["blocked"], (run, row)


@pytest.mark.slow
def test_doctor_as_root_every_probe_is_blocked(shared_dir: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("runs as root only where the tests do")
    workspace = shared_dir / "workspace"
    diagnosis = doctor_json(attp("doctor", "--json", "--workspace", str(workspace), "--engine", "cpython"), shared_dir)
    assert diagnosis["machine"]["uid"] == 0
    assert diagnosis["layers"]["dropped_privileges"] == "uid 65534"
    assert_every_probe_blocked(diagnosis)
    # engine = "cpython": each probe again in a data-stack worker (its packages loaded), every layer on.
    assert [row["probe"] for row in diagnosis["probes"] if not row["cpython"]["blocked"]] == []
    assert diagnosis["cpython"]["memory_mb"] == 2048 and "numpy" in diagnosis["cpython"]["packages"]
    assert list(workspace.iterdir()) == []  # the doctor's probe file is gone


@pytest.mark.slow
def test_doctor_as_an_unprivileged_user_every_probe_is_blocked(shared_dir: Path) -> None:
    stage = shared_dir / "stage"
    stage.mkdir()
    workspace = shared_dir / "workspace"
    command = as_user(attp("doctor", "--json", "--workspace", str(workspace)), stage)
    diagnosis = doctor_json(command, shared_dir)
    uid = diagnosis["machine"]["uid"]
    assert uid != 0
    assert diagnosis["layers"]["dropped_privileges"] == (
        f"uid {uid} (not root: the server's user; no capabilities, in a user namespace of its own)"
    )
    assert_every_probe_blocked(diagnosis)


def test_an_unprivileged_server_reports_the_privileges_its_workers_really_have(shared_dir: Path) -> None:
    """Issue 33, item 8: an unprivileged server's /healthz said ``uid 65534``, while its workers ran as the server's
    uid with every capability inside a user namespace of their own. Now they give up those capabilities, and
    what is reported is what /proc shows of them from outside."""
    from harness import descendants, free_port, wait_for_health

    stage = shared_dir / "stage"
    stage.mkdir()
    port = free_port()
    command = attp("serve", "--transport", "http", "--port", str(port), "--workspace", str(shared_dir / "ws"),
                   "--db-path", str(shared_dir / "data" / "m.sqlite3"), "--workers", "1")  # fmt: skip
    process = subprocess.Popen(
        as_user(command, stage), cwd=shared_dir, env={**server_env(), "HOME": str(shared_dir)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        health = wait_for_health(f"http://127.0.0.1:{port}", process)
        deadline = time.monotonic() + 30
        while not (workers := _locked_down(descendants(process.pid))) and time.monotonic() < deadline:
            time.sleep(0.1)
        reported = health["sandbox"]["dropped_privileges"]
        assert workers, "no locked-down worker found"
        for status in workers:
            uid = status["Uid"].split()[0]
            assert uid != "0" and reported.startswith(f"uid {uid} (not root: the server's user"), (reported, uid)
            assert status["CapEff"] == status["CapPrm"] == "0000000000000000", (reported, status)
    finally:
        os.killpg(process.pid, 15)
        process.wait(timeout=30)


def _locked_down(pids: dict[int, str]) -> list[dict[str, str]]:
    """The /proc status of each of `pids` under a seccomp filter (the workers, not the fork server)."""
    found = []
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            continue
        status = dict(line.split(":\t", 1) for line in lines if ":\t" in line)
        if status.get("Seccomp", "").strip() == "2":
            found.append({key: value.strip() for key, value in status.items()})
    return found


def test_doctor_probe_file_passes_stdout_through_and_says_how_the_worker_ended(shared_dir: Path) -> None:
    probe = shared_dir / "mine.py"
    probe.write_text('print("hello from the worker")\nprint(len(open("/etc/hostname").read()))\n')
    env = {**server_env(), "HOME": str(shared_dir)}
    done = subprocess.run(
        attp("doctor", "--probe", str(probe), "--workspace", str(shared_dir / "ws")),
        check=False, capture_output=True, text=True, timeout=120, cwd=shared_dir, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello from the worker\n"
    assert "in a locked-down worker: PermissionError: [Errno 1] Operation not permitted: '/etc/hostname'" in done.stderr
    probe.write_text("import os\nprint('forking', flush=True)\nos.abort()\n")
    done = subprocess.run(
        attp("doctor", "--probe", str(probe), "--json", "--workspace", str(shared_dir / "ws")),
        check=False, capture_output=True, text=True, timeout=120, cwd=shared_dir, env=env,
    )  # fmt: skip
    outcome = json.loads(done.stdout)
    assert outcome == {"ended": "signal", "detail": "the worker was killed by SIGABRT", "signal": "SIGABRT",
                       "stdout": "forking\n"}  # fmt: skip


HIDE_LANDLOCK = """
import ctypes, errno, os, sys
from attp_server.sandbox.process import seccomp
arch = seccomp.this_arch()
# What a container runtime's seccomp profile does to a kernel feature it does not know: ENOSYS.
program = [(seccomp.BPF_LD_W_ABS, 0, 0, seccomp.OFFSET_NR)]
for number in (444, 445, 446):
    program.append((seccomp.BPF_JEQ_K, 0, 1, number))
    program.append((seccomp.BPF_RET_K, 0, 0, seccomp.RET_ERRNO | errno.ENOSYS))
program.append((seccomp.BPF_RET_K, 0, 0, seccomp.RET_ALLOW))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0
seccomp.install(program, libc)
os.execv(sys.executable, [sys.executable, "-m", "attp_server", *sys.argv[1:]])
"""


def test_a_missing_layer_refuses_programs_when_required_and_warns_when_best_effort(shared_dir: Path) -> None:
    env = {**server_env(), "HOME": str(shared_dir)}
    command = [sys.executable, "-c", HIDE_LANDLOCK, "exec", "--json", "--code", "__result__ = 6 * 7"]
    command += ["--workspace", str(shared_dir / "ws")]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120, cwd=shared_dir, env=env)
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stdout)["error"]
    assert "landlock" in error["message"] and 'containment = "required"' in error["message"]
    assert "attp doctor" in error["message"] and "Landlock" in error["message"]  # the reason: hidden by seccomp
    assert error["solution"].startswith("Do not retry")
    done = subprocess.run(
        command, check=False, capture_output=True, text=True, timeout=120, cwd=shared_dir,
        env={**env, "ATTP_CONTAINMENT": "best-effort"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == 42
    assert "without these containment layers (landlock:" in done.stderr and "best-effort" in done.stderr
    # The other wall still holds there: the worker's seccomp filter was applied on top.


HIDE_BOTH_WALLS = """
import ctypes, errno, os, sys
from attp_server.sandbox.process import seccomp
B, LD, JEQ, RET = seccomp, seccomp.BPF_LD_W_ABS, seccomp.BPF_JEQ_K, seccomp.BPF_RET_K
prctl = {"x86_64": 157, "aarch64": 167}[seccomp.this_arch().name]
# A kernel without Landlock (ENOSYS) that refuses seccomp filters (prctl(PR_SET_SECCOMP) -> EINVAL).
program = [(LD, 0, 0, B.OFFSET_NR)]
for number in (444, 445, 446):
    program += [(JEQ, 0, 1, number), (RET, 0, 0, B.RET_ERRNO | errno.ENOSYS)]
program += [(JEQ, 0, 3, prctl), (LD, 0, 0, B.OFFSET_ARGS), (JEQ, 0, 1, 22), (RET, 0, 0, B.RET_ERRNO | errno.EINVAL)]
program.append((RET, 0, 0, B.RET_ALLOW))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0
seccomp.install(program, libc)
os.execv(sys.executable, [sys.executable, "-m", "attp_server", *sys.argv[1:]])
"""


@pytest.mark.slow
def test_doctor_on_a_machine_without_the_walls_names_them_and_exits_1(shared_dir: Path) -> None:
    env = {**server_env(), "HOME": str(shared_dir)}
    command = [sys.executable, "-c", HIDE_BOTH_WALLS, "doctor", "--workspace", str(shared_dir / "ws")]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=240, cwd=shared_dir, env=env)
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stdout.splitlines()
    assert any(line.split()[:2] == ["landlock", "MISSING"] and "no Landlock" in line for line in lines), done.stdout
    assert any(line.split()[:2] == ["seccomp", "MISSING"] and "EINVAL" in line for line in lines), done.stdout
    assert "NOT CONTAINED:" in done.stdout and 'With containment = "required"' in done.stdout
    assert "not probed: a fallen worker runs nothing without every wall" in done.stdout
    # What still stands there is shown too: e.g. the CPU budget and the memory limit.
    assert any(line.strip().startswith("spin past the CPU budget") and "blocked" in line for line in lines)


def test_a_serving_worker_never_runs_a_probe() -> None:
    async def main() -> None:
        async with WorkerPool(size=0, max_workers=1, memory_mb=256) as pool:
            with pytest.raises(RuntimeError, match="probe=True"):
                await pool.probe("print(1)", timeout_s=5, cpu_s=1, on_output=print)
            worker = await pool._spawn()
            try:
                await worker.send({"op": "probe", "code": "print('ran')"})
                with anyio.fail_after(10), pytest.raises(anyio.EndOfStream):
                    await worker.receive({"output": 1024, "done": 1024})  # it leaves without a word
            finally:
                await worker.kill()

    anyio.run(main)


def test_healthz_and_the_start_up_log_say_which_walls_hold(shared_dir: Path) -> None:
    log = shared_dir / "serve.log"
    with serving_http(shared_dir / "ws", "--workers", "1", stderr=log) as served:
        assert served.url is not None
        health: dict[str, Any] = {}
        for _ in range(200):
            health = httpx.get(served.url + "/healthz", timeout=5).json()
            if health["sandbox"].get("landlock"):
                break
            time.sleep(0.05)
        containment = health["sandbox"]["containment"]
        assert containment["setting"] == "required" and containment["holds"] is True
        assert containment["runs_programs"] is True and containment["missing"] == {}
        assert str(containment["layers"]["landlock"]).startswith("ABI ")
    text = log.read_text()
    assert text.count("sandbox containment holds: landlock: ABI") == 1


UPROBE_PROBE = """
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
if platform.machine() != "x86_64":
    print("not x86_64")
else:
    print("uprobe", libc.syscall(336), ctypes.get_errno(), flush=True)
    print("uretprobe", libc.syscall(335), ctypes.get_errno(), flush=True)
"""


def test_uprobe_and_uretprobe_reach_the_kernel_past_seccomp_and_do_nothing_there(shared_dir: Path) -> None:
    """What SECURITY.md says of the two system calls the kernel lets past every seccomp filter (Linux 6.11+ for
    uretprobe, 6.16+ for uprobe, x86_64): called from anywhere but a uprobe trampoline the kernel installed, uprobe
    fails (ENXIO) and uretprobe kills the caller (SIGILL). On older kernels both are unknown and the filter says
    EPERM."""
    probe = shared_dir / "uprobe.py"
    probe.write_text(UPROBE_PROBE)
    done = subprocess.run(
        attp("doctor", "--probe", str(probe), "--json", "--workspace", str(shared_dir / "ws")),
        check=False, capture_output=True, text=True, timeout=120, cwd=shared_dir,
        env={**server_env(), "HOME": str(shared_dir)},
    )  # fmt: skip
    outcome = json.loads(done.stdout)
    if outcome["stdout"] == "not x86_64\n":
        pytest.skip("the numbers are x86_64's")
    lines = outcome["stdout"].splitlines()
    assert lines[0] in ("uprobe -1 6", "uprobe -1 1"), outcome  # ENXIO: it reached the kernel; EPERM: the filter
    if lines[1:] == []:  # uretprobe reached the kernel, which killed the caller
        assert outcome["ended"] == "signal" and outcome["signal"] == "SIGILL", outcome
    else:
        assert lines[1:] == ["uretprobe -1 1"], outcome
